"""How the tool reaches a target: `ssh [options] user@host` and/or an exec prefix (`pct exec 101 --`).

`Target` is the spec's `target:` block. `Transport` turns an argv meant for inside the target into
the local argv that runs it there, runs the fixed helper program (`autotune.target.helper`) in it,
and opens tunnels. Quoting: ssh hands the remote side one string that the remote login shell
splits; that string is always `shlex.join` of argv items (the prefix, `python3 -c <fixed text>`,
and values), so no user value is ever interpreted by a shell. One control master per transport
(`ControlMaster=auto`) keeps the per-command cost to a few milliseconds after the first contact.
"""

from __future__ import annotations

import atexit
import json
import os
import shlex
import socket
import subprocess
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any

from autotune.errors import TransportError
from autotune.settings import Target
from autotune.target import helper

if TYPE_CHECKING:
    from autotune.target.relay import Relay

HELPER_TEXT = (Path(__file__).parent / "helper.py").read_text()
SSH_UNREACHABLE = 255  # ssh's own exit status for connection and authentication failures
CONNECT_TIMEOUT_S = 10
PREFLIGHT_FRESH_S = 30.0
LAUNCHER_WAIT_S = helper.PROBE_TIMEOUT_S + 30  # the `launcher` op: its import check is bounded inside, first
RUN_ROOT = "/tmp/autotune-trials"  # in the target: each server's run directory (and check_lasting's) lives below it


def _classify_ssh(stderr: str) -> tuple[str, str]:
    low = stderr.lower()
    if "permission denied" in low or "authentication" in low or "host key verification failed" in low:
        return "authentication refused", "check target.ssh's user and target.ssh_options (-i key, known_hosts)"
    return "host unreachable", "check target.ssh's host and port, and that sshd runs there"


class Transport:
    """Runs commands inside a target. One owner; `close()` stops the control master."""

    def __init__(self, target: Target) -> None:
        self.target = target
        self._dir = Path(tempfile.mkdtemp(prefix="autotune-ssh-")) if target.ssh else None
        self._answered_at = float("-inf")
        self._network: str | None = None
        self._lasting = False  # a process started through the target was seen to outlive its command
        self._drivers: dict[str, dict[str, Any]] = {}  # the helper's driver facts, per launcher argv0

    # -- argv ----------------------------------------------------------------------------------

    def ssh_base(self, *, master: bool = True) -> list[str]:
        assert self.target.ssh is not None and self._dir is not None
        user_host, port = self.target.destination()
        argv = ["ssh", "-o", "BatchMode=yes", "-o", f"ConnectTimeout={CONNECT_TIMEOUT_S}",
                "-o", "ServerAliveInterval=5", "-o", "ServerAliveCountMax=3"]
        if master:
            argv += ["-o", "ControlMaster=auto", "-o", f"ControlPath={self._dir / 'cm'}", "-o", "ControlPersist=60"]
        argv += [*(["-p", str(port)] if port else []), *self.target.ssh_options]
        return [*argv, user_host]

    def command(self, argv: list[str], *, master: bool = True) -> list[str]:
        """The local argv that runs `argv` inside the target."""
        inner = [*self.target.exec_prefix, *argv]
        if self.target.ssh is None:
            return inner
        return [*self.ssh_base(master=master), "--", shlex.join(inner)]  # the one remote shell: quoted

    def helper_argv(self, op: str, *args: str, tag: str | None = None) -> list[str]:
        """The helper op's argv; with `tag`, the helper carries the trial's tag (a stop sweeps it)."""
        tagged = ["env", f"{helper.TAG_ENV}={tag}"] if tag else []
        return self.command([*tagged, self.target.python, "-c", HELPER_TEXT, op, *args])

    # -- running -------------------------------------------------------------------------------

    def helper(self, op: str, *args: str, stdin: str = "", timeout_s: float = 60.0) -> Any:
        """Run one helper op inside the target; its JSON answer. TransportError when it cannot."""
        raw, err = self.helper_output(op, *args, stdin=stdin, timeout_s=timeout_s)
        out = raw.decode(errors="replace")
        try:
            return json.loads(out)
        except ValueError as exc:
            raise TransportError("target", f"unreadable answer from the target: {out[:200]!r} "
                                 f"{_without_mark(err)[:200]}", "is target.python a Python 3?") from exc

    def helper_output(self, op: str, *args: str, stdin: str = "", timeout_s: float = 60.0) -> tuple[bytes, str]:
        """Run one helper op inside the target: (its raw stdout, its stderr). TransportError when it fails."""
        try:
            done = subprocess.run(self.helper_argv(op, *args), input=stdin.encode(), capture_output=True,
                                  timeout=timeout_s)
        except FileNotFoundError as exc:
            raise self._missing(exc) from exc
        except subprocess.TimeoutExpired as exc:
            raise TransportError("target", f"no answer from {self.target.describe()} within {timeout_s:.0f} s",
                                 "check the connection to the target") from exc
        err = done.stderr.decode(errors="replace").strip()
        if done.returncode != 0:
            raise self.failure(done.returncode, err, op=op)
        self._answered_at = time.monotonic()
        return done.stdout, err

    def failure(self, code: int, stderr: str, *, op: str = "") -> TransportError:
        """Which field is to blame for a failed contact, from ssh's and the prefix's exit status.
        The helper's own failure (it started: its mark is on stderr) is reported as what it is,
        with its error, whatever the exit status (ssh passes a remote 255 or a signal on)."""
        if helper.STARTED_MARK in stderr:
            said = _without_mark(stderr)
            how = f"was killed by signal {code - 128}" if 128 < code < 160 and not said else f"failed (exit {code})"
            return TransportError("target", f"the tool's helper{f' ({op})' if op else ''} {how} in "
                                  f"{self.target.describe()}: {said[-600:] or 'it said nothing'}",
                                  "the target was reached and the helper ran: its error above says why it "
                                  "stopped (out of memory or disk there? an unusual Python?)")
        if self.target.ssh and code == SSH_UNREACHABLE:
            what, hint = _classify_ssh(stderr)
            return TransportError("target.ssh", f"{self.target.ssh}: {what}: {stderr[-300:]}", hint)
        if code in (126, 127) and self._python_missing(stderr):
            return TransportError("target.python", f"{self.target.python!r} cannot run in the target (exit {code}): "
                                  f"{stderr[-300:]}", "set target.python to the target's Python 3 (a full path)")
        if self.target.exec_prefix and code in (126, 127) or "not found" in stderr and self.target.exec_prefix:
            return TransportError("target.exec_prefix", f"{' '.join(self.target.exec_prefix)!r} cannot run "
                                  f"(exit {code}): {stderr[-300:]}", "is the command installed on the host?")
        if self.target.exec_prefix:
            return TransportError("target.exec_prefix", f"{' '.join(self.target.exec_prefix)!r} failed "
                                  f"(exit {code}): {stderr[-300:]}",
                                  "is the container running? (e.g. pct status 101, docker ps)")
        return TransportError("target", f"the helper failed (exit {code}): {stderr[-300:]}",
                              "does the target have python3 (target.python)?")

    def _python_missing(self, stderr: str) -> bool:
        """The shell's, nsenter's or docker's word that the helper's Python is missing, not the prefix."""
        prefix = self.target.exec_prefix[0] if self.target.exec_prefix else None
        if prefix and any(f"{prefix}: {w}" in stderr for w in ("command not found", "No such file", "not found")):
            return False  # the prefix itself is missing (its own error names it first)
        return self.target.python in stderr

    def _missing(self, exc: FileNotFoundError) -> TransportError:
        field = "target.ssh" if self.target.ssh else "target.exec_prefix"
        return TransportError(field, f"cannot run {exc.filename!r}: not found",
                              "install the OpenSSH client" if self.target.ssh else "fix target.exec_prefix")

    def preflight(self) -> None:
        """One contact before any launch: reachable, authenticated, prefix runs, helper answers.
        Skipped when the target answered within PREFLIGHT_FRESH_S (each contact costs a round trip
        and a Python start there; a target lost since then fails the launch's own contact, as clearly)."""
        if time.monotonic() - self._answered_at > PREFLIGHT_FRESH_S:
            self.helper("port", "127.0.0.1", "1")
        if not self._lasting:
            self.check_lasting()

    def launcher(self, argv0: str, module: str = "", *, driver: bool = False) -> dict[str, Any]:
        """The helper's `launcher` answer: can `argv0` run in the target, does it import `module`, and
        with `driver` the target's driver facts (kept for `driver_facts`). One round trip; the import
        check is bounded inside the target, so a slow one is the launcher's answer, not a lost connection."""
        answer: dict[str, Any] = self.helper("launcher", argv0, module, "1" if driver else "0",
                                             timeout_s=LAUNCHER_WAIT_S)
        if driver and isinstance(answer.get("driver"), dict):
            self._drivers[argv0] = answer["driver"]
        return answer

    def driver_facts(self, argv0: str) -> dict[str, Any]:
        """Whether a real GPU driver loads in the target and where the no-driver stand-in is beside
        `argv0` (helper `launcher ... 1`): asked once per transport, at the launcher check or here."""
        if argv0 not in self._drivers:
            self.launcher(argv0, driver=True)
        return self._drivers[argv0]

    def check_lasting(self) -> None:
        """Start a tagged sleeper through the target, as a trial starts its server, and look for it
        with the next command: a server must outlive the command that started it and be found by its
        tag afterwards. A prefix that makes a PID namespace of its own per command (`unshare --pid
        --fork`, `docker run --rm`) fails this: the kernel kills everything in that namespace when the
        command ends, so every server would die as soon as it started (seen: 8 of 8 trials a CRASH at
        spawn, no error in the log) and no later command could find or stop one. Once per transport,
        before any launch; four round trips. TransportError naming the field when it does not hold."""
        tag = f"autotune-lasting-{uuid.uuid4().hex[:12]}"
        run_dir = f"{RUN_ROOT}/{tag}"
        sleeper = {"argv": [self.target.python, "-c", "import time; time.sleep(120)"], "env": {}, "tag": tag}
        started = self.helper("start", run_dir, stdin=json.dumps(sleeper))
        if "error" in started:
            raise TransportError("target", f"cannot start a process in {self.target.describe()}: {started['error']}",
                                 "is /tmp writable there, and target.python a Python 3?")
        try:
            seen = self.helper("list", tag)
        finally:
            self.helper("stop", tag, "5", "1")
            self.helper("clean", run_dir, tag)
        if not seen:
            field = "target.exec_prefix" if self.target.exec_prefix else "target"
            raise TransportError(field, f"a process started through {self.target.describe()} (pid "
                                 f"{started.get('pid')} there) is gone when the next command looks: each command "
                                 "runs in a PID namespace of its own that ends with it (the kernel then kills "
                                 "everything inside), so every server would die at once and none could be "
                                 "found or stopped afterwards",
                                 "use a prefix that enters a running container: nsenter --target PID --pid "
                                 "--mount [--net] --, pct exec ID --, docker exec NAME (not unshare or docker run)")
        self._lasting = True

    def network(self) -> str:
        """"shared" (the server's 127.0.0.1 is the ssh host's, or ours) or "container" (the prefix
        enters a network namespace of its own). The spec's `target.network`, or, for "auto", told
        once: the namespace inside the prefix against the host's (ssh) or ours. Where either cannot
        be read, "container": the relay reaches a shared network as well, only slower."""
        if self.target.network != "auto":
            return self.target.network
        if self._network is None:
            if not self.target.exec_prefix:
                self._network = "shared"
            else:
                inside = self.helper("netns").get("net")
                outside = self._host_netns()
                self._network = "shared" if inside and inside == outside else "container"
        return self._network

    def _host_netns(self) -> str | None:
        """The network namespace of the ssh host's login shell, or of this process when local."""
        try:
            if not self.target.ssh:
                return os.readlink("/proc/self/ns/net")
            done = subprocess.run([*self.ssh_base(), "--", "readlink /proc/self/ns/net"], capture_output=True,
                                  timeout=CONNECT_TIMEOUT_S + 20)
        except (OSError, subprocess.TimeoutExpired):
            return None
        if done.returncode != 0:
            return None
        return done.stdout.decode(errors="replace").strip() or None

    def reach(self, remote_port: int, *, tag: str) -> Tunnel | Relay | None:
        """How this side reaches 127.0.0.1:`remote_port` as the server sees it: None when it is ours
        (no ssh, shared network), an ssh tunnel to the ssh host's, or a relay through the prefix
        into the container's own network (carrying the trial's `tag`, so its stop sweeps it)."""
        if self.network() == "container":
            from autotune.target.relay import Relay

            return Relay(self, remote_port, tag=tag)
        return self.tunnel(remote_port) if self.target.ssh else None

    def popen(self, argv: list[str], **kwargs: Any) -> subprocess.Popen[bytes]:
        try:
            return subprocess.Popen(argv, **kwargs)
        except FileNotFoundError as exc:
            raise self._missing(exc) from exc

    def tunnel(self, remote_port: int) -> Tunnel:
        """`ssh -N -L local:127.0.0.1:remote`: the server keeps binding 127.0.0.1 on its side.
        Kept open on the same local port for the tunnel's life (see `Tunnel`)."""
        return Tunnel(self, remote_port)

    def forward(self, local_port: int, remote_port: int) -> None:
        """Forward 127.0.0.1:`local_port` here to 127.0.0.1:`remote_port` in the target, in the control
        master (`ssh -O forward`: a plain `ssh -N -L` riding on a master hands the forward to it and
        exits), opening a master first when there is none. Returns once the local end listens."""
        spec = f"127.0.0.1:{local_port}:127.0.0.1:{remote_port}"
        if self.control("check").returncode != 0:  # no master (never, or it died with the connection)
            try:
                opened = subprocess.run([*self.ssh_base(), "--", "true"], capture_output=True, timeout=CONNECT_TIMEOUT_S + 20)
            except subprocess.TimeoutExpired as exc:
                raise TransportError("target.ssh", f"no answer from {self.target.ssh}", "check the connection") from exc
            if opened.returncode != 0:
                raise self.failure(opened.returncode, opened.stderr.decode(errors="replace").strip())
        done = self.control("forward", "-L", spec)
        deadline = time.monotonic() + CONNECT_TIMEOUT_S
        while done.returncode == 0 and time.monotonic() < deadline:
            if listening(local_port):
                return
            time.sleep(0.02)
        raise TransportError("target.ssh", f"cannot forward 127.0.0.1:{local_port} to the target's port "
                             f"{remote_port}: {done.stderr.decode(errors='replace')[-300:]}",
                             "does the target's sshd allow TCP forwarding?")

    def control(self, command: str, *args: str) -> subprocess.CompletedProcess[bytes]:
        """`ssh -O command` to this transport's master: a local operation, no round trip."""
        try:
            return subprocess.run([*self.ssh_base(), "-O", command, *args], capture_output=True, timeout=10)
        except FileNotFoundError as exc:
            raise self._missing(exc) from exc
        except subprocess.TimeoutExpired:
            return subprocess.CompletedProcess([], 255, b"", b"the control master did not answer")

    def close(self) -> None:
        if self.target.ssh and self._dir is not None:
            if (self._dir / "cm").exists():
                subprocess.run([*self.ssh_base(), "-O", "exit"], capture_output=True, timeout=10, check=False)
            for leftover in self._dir.iterdir():
                leftover.unlink(missing_ok=True)
            os.rmdir(self._dir)
            self._dir = None


def _without_mark(stderr: str) -> str:
    return "\n".join(line for line in stderr.splitlines() if line.strip() != helper.STARTED_MARK).strip()


def listening(port: int) -> bool:
    """Whether something listens on 127.0.0.1:`port` here, read from /proc/net/tcp (no connection
    made: a connection through a forward would open a channel to a server not yet listening).
    True where that file cannot be read (nothing can be told there)."""
    needle = f"0100007F:{port:04X}"
    try:
        with open("/proc/net/tcp") as fh:
            rows = [line.split() for line in fh.readlines()[1:]]
    except OSError:
        return True
    return any(len(r) > 3 and r[1] == needle and r[3] == "0A" for r in rows)  # 0A: LISTEN


class Tunnel:
    """A local port forwarded to 127.0.0.1:`remote_port` in the target, for one trial.

    The forward lives in the transport's control master. When the connection drops, the master
    dies and the local port stops listening; a guard thread sees that and forwards the same local
    port again (a new master), so the trial's URL stays valid; requests in between fail like a
    server that does not answer yet, which the watcher and the probe already wait out or report.
    `reopened` counts how often. One owner; `close()` ends it (and cancels the forward).
    """

    def __init__(self, transport: Transport, remote_port: int) -> None:
        self.transport, self.remote_port = transport, remote_port
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            self.local_port = int(sock.getsockname()[1])
        self.reopened = 0
        self.error: TransportError | None = None  # the last failed re-open, while the guard still tries
        transport.forward(self.local_port, remote_port)  # the first one must work
        self._closed = threading.Event()
        self._guard = threading.Thread(target=self._keep_open, name=f"tunnel-{self.local_port}", daemon=True)
        self._guard.start()

    def _keep_open(self) -> None:
        while not self._closed.wait(0.2):
            if listening(self.local_port):
                continue
            try:
                self.transport.forward(self.local_port, self.remote_port)
            except TransportError as exc:
                self.error = exc  # the target may come back; the trial's own contacts decide when to give up
                continue
            self.error = None
            self.reopened += 1

    def close(self) -> None:
        """Stop guarding and cancel the forward in the master (a local operation)."""
        self._closed.set()
        self._guard.join(timeout=CONNECT_TIMEOUT_S + 30)
        self.transport.control("cancel", "-L", f"127.0.0.1:{self.local_port}:127.0.0.1:{self.remote_port}")


_OPEN: dict[Target, Transport] = {}


def transport_for(target: Target) -> Transport:
    """One transport (one ssh control master) per target for the life of the process."""
    if target not in _OPEN:
        _OPEN[target] = Transport(target)
        if len(_OPEN) == 1:
            atexit.register(close_all)
    return _OPEN[target]


def close_all() -> None:
    while _OPEN:
        _OPEN.popitem()[1].close()
