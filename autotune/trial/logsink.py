"""The server's output, drained from a pipe: written to the log file within bounds, secrets
scrubbed, and handed line by line to the watcher.

A server may print nothing for ten minutes or a gigabyte in one: the sink keeps the first
`head_bytes` of the log and the last `tail_bytes` (a marker says how much of the middle was
dropped), so an overnight run's disk stays bounded while the start-up figures and the final
traceback are always kept. Every line still reaches the classifier. Memory is bounded too:
the tail ring, one partial line, and a queue the watcher empties every few milliseconds
(`max_pending` lines at most — beyond that lines are counted, not kept).
"""

from __future__ import annotations

import collections
import os
import select
import threading
from collections.abc import Iterable
from pathlib import Path

MAX_LINE_BYTES = 64 * 1024


class LogSink(threading.Thread):
    def __init__(self, fd: int, path: Path, secrets: Iterable[str] = (), *, head_bytes: int = 32 << 20,
                 tail_bytes: int = 16 << 20, max_pending: int = 500_000) -> None:
        super().__init__(daemon=True, name=f"logsink-{path.parent.name}")
        self.fd, self.path = fd, path
        self.secrets = [s.encode() for s in secrets if s]
        self.head_bytes, self.tail_bytes, self.max_pending = head_bytes, tail_bytes, max_pending
        self.file = open(path, "wb")
        self.written = 0
        self.tail: collections.deque[bytes] = collections.deque()
        self.tail_size = 0
        self.dropped_bytes = 0
        self.unclassified_lines = 0
        self.partial = b""
        self.write_error: str = ""  # the first failed write (disk full...): the log stops, reading goes on
        self.pending: collections.deque[bytes] = collections.deque()
        self.lock = threading.Lock()
        self.stopping = threading.Event()
        self.eof = threading.Event()
        self.closed = False  # close() ran: the file is finished and the pipe closed (a second close does nothing)

    def run(self) -> None:
        try:
            while True:
                ready, _, _ = select.select([self.fd], [], [], 0.05)
                if not ready:
                    if self.stopping.is_set():
                        break
                    continue
                data = os.read(self.fd, 1 << 20)
                if not data:
                    break
                self._take(data)
        finally:
            if self.partial:
                self._line(self.partial)
                self.partial = b""
            self.eof.set()

    def _take(self, data: bytes) -> None:
        chunks = (self.partial + data).split(b"\n")
        self.partial = chunks.pop()[-MAX_LINE_BYTES:]
        for chunk in chunks:
            self._line(chunk[:MAX_LINE_BYTES])

    def _line(self, line: bytes) -> None:
        for secret in self.secrets:
            line = line.replace(secret, b"***")
        with self.lock:
            if len(self.pending) < self.max_pending:
                self.pending.append(line)
            else:
                self.unclassified_lines += 1
        self._write(line + b"\n")

    def _write(self, data: bytes) -> None:
        if self.write_error:
            return
        if self.written < self.head_bytes:
            try:
                self.file.write(data)
                self.file.flush()
            except OSError as exc:
                self.write_error = f"{self.path}: {exc.strerror or exc}"
                return
            self.written += len(data)
            return
        self.tail.append(data)
        self.tail_size += len(data)
        while self.tail_size > self.tail_bytes:
            old = self.tail.popleft()
            self.tail_size -= len(old)
            self.dropped_bytes += len(old)

    def drain(self) -> list[str]:
        """Whole lines received since the last call, decoded (invalid UTF-8 replaced)."""
        with self.lock:
            lines, self.pending = self.pending, collections.deque()
        return [raw.decode("utf-8", errors="replace").rstrip("\r") for raw in lines]

    def close(self, timeout_s: float = 5.0) -> None:
        """Stop reading (after the process tree is gone), then write the kept tail to the file; once."""
        if self.closed:
            return
        self.closed = True
        if self.ident is not None:  # never started (the thread could not): nothing to join
            self.eof.wait(timeout_s)  # normally immediate: every writer is dead, the pipe is at EOF
            self.stopping.set()
            self.join(timeout_s)
        try:
            if self.dropped_bytes and not self.write_error:
                self.file.write(f"[autotune: {self.dropped_bytes} bytes of this log were dropped here to bound "
                                "its size; the classifier read every line]\n".encode())
            for data in self.tail if not self.write_error else ():
                self.file.write(data)
            self.file.close()
        except OSError as exc:
            self.write_error = self.write_error or f"{self.path}: {exc.strerror or exc}"
        os.close(self.fd)
