"""A real OpenSSH server for the tests, on 127.0.0.1 and a free port, and a container stand-in.

`sshd` (session-scoped): Debian's /usr/sbin/sshd with a private sshd_config in a temporary
directory — a generated host key, a generated client key in its own authorized_keys, its own
PidFile, `UsePAM no`, `StrictModes no` — run in the foreground as a child of the test process and
stopped after the session. No system configuration is read or touched. Skipped, with the reason,
only where the package is not installed (`.ci/run` installs it).

`container` (session-scoped): a long-lived PID + mount namespace (`unshare --pid --fork
--mount-proc`), entered with `nsenter --target PID --pid --mount --` — the stand-in for
`pct exec 101 --` or `docker exec`: PIDs inside differ from the host's, and a process started
through one entry is seen by the next. It shares the host's network.

`netns_container` (session-scoped): the same plus its own network namespace (`unshare --net`, its
loopback brought up inside, entered with `--net` too) — what an LXC or Docker container really is:
a server binding 127.0.0.1 in it cannot be reached at the host's 127.0.0.1.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import psutil
import pytest

from autotune.trial.ports import kernel_port

SSHD = "/usr/sbin/sshd"


def _wait_port(port: int, proc: subprocess.Popen[bytes], log: Path, timeout_s: float = 15.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"sshd exited {proc.returncode}: {log.read_text()[-2000:]}")
        with socket.socket() as sock:
            if sock.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.05)
    raise AssertionError(f"sshd not listening on 127.0.0.1:{port} after {timeout_s}s")


@dataclass
class Sshd:
    """One running sshd. `address` is the spec's `target.ssh`; `options` its `target.ssh_options`."""

    root: Path
    port: int
    proc: subprocess.Popen[bytes] | None = None
    options: list[str] = field(default_factory=list)

    @property
    def address(self) -> str:
        return f"root@127.0.0.1:{self.port}"

    def start(self) -> None:
        """(Re)start the daemon on the same port and keys (a fault test stops it mid-run)."""
        Path("/run/sshd").mkdir(exist_ok=True)  # its privilege-separation directory (a runtime dir, not config)
        with open(self.root / "sshd.log", "ab") as log:
            self.proc = subprocess.Popen([SSHD, "-D", "-e", "-f", str(self.root / "sshd_config")],
                                         stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=log,
                                         start_new_session=True)
        _wait_port(self.port, self.proc, self.root / "sshd.log")

    def stop(self) -> None:
        """Stop the daemon and every session it serves (its whole process group)."""
        if self.proc is None:
            return
        # Each connection's sshd runs in its own session: kill the listener's descendants by parentage
        # (not by name), then its group. A server started detached through a session is not among them.
        sessions = psutil.Process(self.proc.pid).children(recursive=True)
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        for child in sessions:
            try:
                child.kill()
            except psutil.Error:
                pass
        self.proc.wait(timeout=10)
        self.proc = None


def make_sshd(root: Path) -> Sshd:
    root.mkdir(parents=True, exist_ok=True)
    for name in ("host_key", "client_key"):
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(root / name)], check=True)
    shutil.copy(root / "client_key.pub", root / "authorized_keys")
    port = kernel_port("127.0.0.1")
    (root / "sshd_config").write_text("\n".join([
        f"Port {port}", "ListenAddress 127.0.0.1", f"HostKey {root / 'host_key'}", f"PidFile {root / 'sshd.pid'}",
        f"AuthorizedKeysFile {root / 'authorized_keys'}", "UsePAM no", "StrictModes no",
        "PasswordAuthentication no", "KbdInteractiveAuthentication no", "PubkeyAuthentication yes",
        "PermitRootLogin prohibit-password", "AllowTcpForwarding local", "X11Forwarding no",
        "PrintMotd no", "MaxSessions 64", "MaxStartups 64", "LogLevel ERROR",
        # sshd's bash sources the user's ~/.bashrc; on a pyenv machine that runs `pyenv init -`, whose rehash
        # waits 60 s on a lock that any ssh session killed mid-rehash (our fault tests kill some) leaves
        # behind: every later contact then timed out. Sessions here never wait on it.
        "SetEnv PYENV_REHASH_TIMEOUT=0", "",
    ]))
    host_pub = (root / "host_key.pub").read_text().split()[:2]
    (root / "known_hosts").write_text(f"[127.0.0.1]:{port} {' '.join(host_pub)}\n")
    options = ["-F", "/dev/null", "-i", str(root / "client_key"), "-o", "IdentitiesOnly=yes",
               "-o", f"UserKnownHostsFile={root / 'known_hosts'}", "-o", "StrictHostKeyChecking=yes"]
    return Sshd(root=root, port=port, options=options)


@pytest.fixture(scope="session", name="sshd")
def sshd_fixture(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sshd]:
    if not os.path.exists(SSHD) or not shutil.which("ssh") or not shutil.which("ssh-keygen"):
        pytest.skip("OpenSSH server not installed: apt-get install -y openssh-server openssh-client "
                    "(.ci/run does it)")
    server = make_sshd(tmp_path_factory.mktemp("sshd"))
    server.start()
    yield server
    server.stop()


@dataclass
class Container:
    """A PID namespace that stays up; `prefix` enters it (the spec's `target.exec_prefix`).
    With `net`, a network namespace of its own too."""

    proc: subprocess.Popen[bytes]
    net: bool = False

    @property
    def prefix(self) -> list[str]:
        return ["nsenter", f"--target={self.inner_init_pid()}", "--pid", "--mount", *(["--net"] if self.net else []),
                "--"]

    def close(self) -> None:
        """The namespace's init dies with its group: the kernel kills everything inside."""
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.wait(timeout=10)

    def inner_init_pid(self) -> int:
        """The host PID of the namespace's init (unshare's forked child)."""
        children = Path(f"/proc/{self.proc.pid}/task/{self.proc.pid}/children").read_text().split()
        return int(children[0])


def open_container(net: bool) -> Container:
    """Start a container stand-in (with its own network when `net`); RuntimeError where it cannot run.
    The caller ends it with `close()`."""
    proc = subprocess.Popen(["unshare", "--pid", "--fork", "--mount-proc", *(["--net"] if net else []),
                             "sleep", "infinity"], stdin=subprocess.DEVNULL, start_new_session=True)
    box = Container(proc, net=net)
    deadline = time.monotonic() + 10
    while True:
        try:
            box.inner_init_pid()
            break
        except (OSError, IndexError):
            if proc.poll() is not None or time.monotonic() > deadline:
                box.close()
                raise RuntimeError(f"unshare --pid --fork --mount-proc does not work here (exit {proc.poll()}); "
                                   "it needs CAP_SYS_ADMIN") from None
            time.sleep(0.02)
    if net:  # a new network namespace has only a loopback, and it is down
        up = subprocess.run(["nsenter", f"--target={box.inner_init_pid()}", "--net", "--", "ip", "link", "set",
                             "lo", "up"], capture_output=True, text=True)
        if up.returncode != 0:
            box.close()
            raise RuntimeError(f"cannot bring up the loopback in a new network namespace: {up.stderr.strip()}")
    return box


def _container(net: bool) -> Iterator[Container]:
    if not shutil.which("unshare") or not shutil.which("nsenter"):
        pytest.skip("util-linux unshare/nsenter not installed")
    if net and not shutil.which("ip"):
        pytest.skip("iproute2's ip not installed (apt-get install -y iproute2)")
    try:
        box = open_container(net)
    except RuntimeError as exc:
        pytest.skip(str(exc))
    try:
        yield box
    finally:
        box.close()


@pytest.fixture(scope="session", name="container")
def container_fixture() -> Iterator[Container]:
    yield from _container(net=False)


@pytest.fixture(scope="session", name="netns_container")
def netns_container_fixture() -> Iterator[Container]:
    yield from _container(net=True)
