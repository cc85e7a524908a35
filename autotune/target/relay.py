"""HTTP to a server inside a container with its own network: a relay through the exec prefix.

A container (LXC, Docker) has its own network namespace; the server binds 127.0.0.1 *there*,
which neither a local URL nor `ssh -L` (the ssh host's 127.0.0.1) reaches. `Relay` listens on
127.0.0.1:`local_port` here and carries every connection, as numbered channels, over the stdin and
stdout of one process run through the transport: the helper's `relay` op inside the target
(`ssh … <prefix> env AUTOTUNE_TRIAL_ID=<trial> python3 -c <helper> relay 127.0.0.1 PORT`), which
opens a TCP connection per channel to the server's port on its side. Frames: helper.FRAME.

Lifetime: one relay process per trial, started before the first request. It ends when its stdin
closes (`close()`, this process dying, or the connection dropping) and it carries the trial's tag,
so the trial's stop (and recovery) sweeps it as well. A relay process that died (a dropped
connection) is started again at the next connection, at most once per RESTART_S; connections open
at that moment are closed, like a server that does not answer yet. `reopened` counts the restarts.
One owner; `close()` ends it. Same interface as `transport.Tunnel`.
"""

from __future__ import annotations

import functools
import os
import socket
import subprocess
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from autotune.errors import TransportError
from autotune.target import helper

if TYPE_CHECKING:
    from autotune.target.transport import Transport

HELLO_TIMEOUT_S = 40.0  # ssh's connect timeout, a Python start in the target, on a loaded host
RESTART_S = 0.5


class _Channel:
    def __init__(self, sock: socket.socket, proc: subprocess.Popen[bytes]) -> None:
        self.sock, self.proc = sock, proc
        self.eofs = 0  # 2: both directions ended; the socket is closed


class Relay:
    """127.0.0.1:`local_port` here, relayed to 127.0.0.1:`remote_port` inside the target (module doc).
    Raises TransportError, naming the field to blame, when the first relay process cannot start."""

    def __init__(self, transport: Transport, remote_port: int, *, tag: str) -> None:
        self.transport, self.remote_port, self.tag = transport, remote_port, tag
        self.reopened = 0
        self.error: TransportError | None = None  # why the last relay process ended, if it failed
        self._lock = threading.Lock()  # the process and the channels
        # writes to the process's stdin, apart: a write blocked on a full pipe must never keep the
        # frame reader (which needs `_lock` to end a channel) from draining the other direction
        self._write_lock = threading.Lock()
        self._channels: dict[int, _Channel] = {}
        self._next_channel = 1
        self._proc: subprocess.Popen[bytes] | None = None
        self._started_at = float("-inf")
        self._closed = threading.Event()
        self._threads: list[threading.Thread] = []
        self._listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._listener.bind(("127.0.0.1", 0))
        self._listener.listen(64)
        self._listener.settimeout(0.2)
        self.local_port = int(self._listener.getsockname()[1])
        try:
            self._start(wait_hello=True)  # the first one must work: a clear error now, not a TIMEOUT later
        except BaseException:
            self._listener.close()
            raise
        self._spawn(self._accept_loop, f"relay-accept-{self.local_port}")

    # -- the relay process ------------------------------------------------------------------------

    def _argv(self) -> list[str]:
        return self.transport.helper_argv("relay", "127.0.0.1", str(self.remote_port), tag=self.tag)

    def _start(self, *, wait_hello: bool = False) -> subprocess.Popen[bytes]:
        """Start a relay process (the lock held, or before any thread runs)."""
        proc = self.transport.popen(self._argv(), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE)
        self._proc, self._started_at = proc, time.monotonic()
        hello = threading.Event()
        self._spawn(functools.partial(self._read_loop, proc, hello), f"relay-read-{self.local_port}")
        if wait_hello and not hello.wait(HELLO_TIMEOUT_S):
            proc.kill()
            raise TransportError("target", f"the relay to port {self.remote_port} in {self.transport.target.describe()} "
                                 f"did not start within {HELLO_TIMEOUT_S:.0f} s", "check the connection to the target")
        if wait_hello and proc.poll() is not None and self.error is not None:
            raise self.error
        return proc

    def _spawn(self, run: Callable[[], None], name: str) -> None:
        thread = threading.Thread(target=run, name=name, daemon=True)
        thread.start()
        self._threads = [t for t in self._threads if t.is_alive()] + [thread]

    def _read_loop(self, proc: subprocess.Popen[bytes], hello: threading.Event) -> None:
        """Frames from the relay process to the clients, until it ends; then its channels end too."""
        assert proc.stdout is not None
        fd = proc.stdout.fileno()
        while (header := _read_exact(fd, helper.FRAME.size)) is not None:
            chan, kind, size = helper.FRAME.unpack(header)
            payload = _read_exact(fd, size) if size else b""
            if payload is None:
                break
            if kind == helper.HELLO:
                hello.set()
            else:
                self._deliver(chan, kind, payload)
        code = proc.wait()
        assert proc.stderr is not None
        said = proc.stderr.read().decode(errors="replace").strip()
        if code != 0 and not self._closed.is_set():
            self.error = self.transport.failure(code, said, op="relay")
        with self._lock:
            orphans = [c for c, ch in self._channels.items() if ch.proc is proc]
            for chan in orphans:
                _shut(self._channels.pop(chan).sock)
        with self._write_lock:
            for stream in (proc.stdin, proc.stdout, proc.stderr):
                if stream is not None:
                    try:
                        stream.close()
                    except OSError:
                        pass
        hello.set()

    def _deliver(self, chan: int, kind: int, payload: bytes) -> None:
        channel = self._channels.get(chan)
        if channel is None:
            return
        try:
            if kind == helper.DATA:
                channel.sock.sendall(payload)
                return
            channel.sock.shutdown(socket.SHUT_WR)  # the server's side ended: so does the client's reading
        except OSError:
            pass
        self._ended(chan)

    def _ended(self, chan: int) -> None:
        with self._lock:
            channel = self._channels.get(chan)
            if channel is None:
                return
            channel.eofs += 1
            if channel.eofs >= 2:
                del self._channels[chan]
                _shut(channel.sock)

    def _send(self, proc: subprocess.Popen[bytes], chan: int, kind: int, payload: bytes = b"") -> bool:
        assert proc.stdin is not None
        try:
            with self._write_lock:
                proc.stdin.write(helper.FRAME.pack(chan, kind, len(payload)) + payload)
                proc.stdin.flush()
            return True
        except (OSError, ValueError):  # the relay process is gone; its reader ends the channels
            return False

    # -- the clients ------------------------------------------------------------------------------

    def _accept_loop(self) -> None:
        while not self._closed.is_set():
            try:
                sock, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            sock.settimeout(None)
            with self._lock:
                proc = self._live_proc()
                if proc is None:
                    sock.close()  # restarted too recently: refused, like a server not up yet
                    continue
                chan, self._next_channel = self._next_channel, self._next_channel + 1
                self._channels[chan] = _Channel(sock, proc)
            if self._send(proc, chan, helper.OPEN):
                self._spawn(functools.partial(self._pump, chan, sock, proc), f"relay-{self.local_port}-{chan}")

    def _live_proc(self) -> subprocess.Popen[bytes] | None:
        """The running relay process, started again if it died (the lock held)."""
        if self._proc is not None and self._proc.poll() is None:
            return self._proc
        if time.monotonic() - self._started_at < RESTART_S:
            return None
        try:
            proc = self._start()
        except TransportError as exc:
            self.error = exc
            return None
        self.reopened += 1
        return proc

    def _pump(self, chan: int, sock: socket.socket, proc: subprocess.Popen[bytes]) -> None:
        """A client's bytes to the relay, then its EOF."""
        while True:
            try:
                data = sock.recv(1 << 16)
            except OSError:
                data = b""
            if not data or not self._send(proc, chan, helper.DATA, data):
                break
        self._send(proc, chan, helper.EOF)
        self._ended(chan)

    def close(self) -> None:
        """End every connection and the relay process (its stdin closes: it exits there)."""
        self._closed.set()
        self._listener.close()
        with self._lock:
            proc, channels = self._proc, list(self._channels.values())
            self._channels.clear()
        for channel in channels:
            _shut(channel.sock)
        if proc is not None:
            if proc.stdin is not None:
                try:
                    proc.stdin.close()
                except OSError:
                    pass
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()  # the ssh client; the relay inside ends with its session, or by the trial's tag
                proc.wait()
        for thread in self._threads:
            thread.join(timeout=5)


def _shut(sock: socket.socket) -> None:
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    sock.close()


def _read_exact(fd: int, size: int) -> bytes | None:
    chunks, left = [], size
    while left:
        chunk = os.read(fd, left)
        if not chunk:
            return None
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)
