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
import time
from pathlib import Path
from typing import Any

from autotune.errors import TransportError
from autotune.settings import Target

HELPER_TEXT = (Path(__file__).parent / "helper.py").read_text()
SSH_UNREACHABLE = 255  # ssh's own exit status for connection and authentication failures
CONNECT_TIMEOUT_S = 10
PREFLIGHT_FRESH_S = 30.0


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

    def helper_argv(self, op: str, *args: str) -> list[str]:
        return self.command([self.target.python, "-c", HELPER_TEXT, op, *args])

    # -- running -------------------------------------------------------------------------------

    def helper(self, op: str, *args: str, stdin: str = "", timeout_s: float = 60.0) -> Any:
        """Run one helper op inside the target; its JSON answer. TransportError when it cannot."""
        try:
            done = subprocess.run(self.helper_argv(op, *args), input=stdin.encode(), capture_output=True,
                                  timeout=timeout_s)
        except FileNotFoundError as exc:
            raise self._missing(exc) from exc
        except subprocess.TimeoutExpired as exc:
            raise TransportError("target", f"no answer from {self.target.describe()} within {timeout_s:.0f} s",
                                 "check the connection to the target") from exc
        out, err = done.stdout.decode(errors="replace"), done.stderr.decode(errors="replace").strip()
        if done.returncode != 0:
            raise self.failure(done.returncode, err)
        self._answered_at = time.monotonic()
        try:
            return json.loads(out)
        except ValueError as exc:
            raise TransportError("target", f"unreadable answer from the target: {out[:200]!r} {err[:200]}",
                                 "is target.python a Python 3?") from exc

    def failure(self, code: int, stderr: str) -> TransportError:
        """Which field is to blame for a failed contact, from ssh's and the prefix's exit status."""
        if self.target.ssh and code == SSH_UNREACHABLE:
            what, hint = _classify_ssh(stderr)
            return TransportError("target.ssh", f"{self.target.ssh}: {what}: {stderr[-300:]}", hint)
        if self.target.exec_prefix and code in (126, 127) or "not found" in stderr and self.target.exec_prefix:
            return TransportError("target.exec_prefix", f"{' '.join(self.target.exec_prefix)!r} cannot run "
                                  f"(exit {code}): {stderr[-300:]}", "is the command installed on the host?")
        if self.target.exec_prefix:
            return TransportError("target.exec_prefix", f"{' '.join(self.target.exec_prefix)!r} failed "
                                  f"(exit {code}): {stderr[-300:]}",
                                  "is the container running? (e.g. pct status 101, docker ps)")
        return TransportError("target", f"the helper failed (exit {code}): {stderr[-300:]}",
                              "does the target have python3 (target.python)?")

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

    def popen(self, argv: list[str], **kwargs: Any) -> subprocess.Popen[bytes]:
        try:
            return subprocess.Popen(argv, **kwargs)
        except FileNotFoundError as exc:
            raise self._missing(exc) from exc

    def tunnel(self, remote_port: int) -> tuple[subprocess.Popen[bytes], int]:
        """`ssh -N -L local:127.0.0.1:remote`: the server keeps binding 127.0.0.1 on its side."""
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            local_port = int(sock.getsockname()[1])
        argv = [*self.ssh_base(), "-N", "-o", "ExitOnForwardFailure=yes",
                "-L", f"127.0.0.1:{local_port}:127.0.0.1:{remote_port}"]
        proc = self.popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                          start_new_session=True)
        deadline = time.monotonic() + CONNECT_TIMEOUT_S
        while time.monotonic() < deadline and proc.poll() is None:
            with socket.socket() as sock:
                if sock.connect_ex(("127.0.0.1", local_port)) == 0:
                    return proc, local_port
            time.sleep(0.02)
        err = proc.stderr.read().decode(errors="replace") if proc.poll() is not None and proc.stderr else ""
        proc.kill()
        proc.wait()
        raise TransportError("target.ssh", f"cannot forward 127.0.0.1:{local_port} to the target's port "
                             f"{remote_port}: {err[-300:]}", "does the target's sshd allow TCP forwarding?")

    def close(self) -> None:
        if self.target.ssh and self._dir is not None:
            if (self._dir / "cm").exists():
                subprocess.run([*self.ssh_base(), "-O", "exit"], capture_output=True, timeout=10, check=False)
            for leftover in self._dir.iterdir():
                leftover.unlink(missing_ok=True)
            os.rmdir(self._dir)
            self._dir = None


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
