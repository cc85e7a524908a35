"""Ctrl-C and SIGTERM: one way to stop, the same for every command that launches servers.

While `signals_interrupt()` is active, SIGINT and SIGTERM raise `Interrupted("SIGINT")` /
`Interrupted("SIGTERM")` in the main thread, so the `finally` blocks on the way out stop the
running server. `Interrupted` is a KeyboardInterrupt: no `except Exception` on the way (a
storage wrapper, a probe) can swallow it and carry on.

Only the first signal raises. A second Ctrl-C while the first one unwinds would otherwise
land inside the cleanup (stopping the server, telling the study) and leave a server or a
RUNNING trial behind; it is counted and ignored, because the cleanup is bounded anyway.
"""

from __future__ import annotations

import signal
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType

EXIT_INTERRUPTED = 130  # 128 + SIGINT, what shells expect of an interrupted command
SIGNALS = (signal.SIGINT, signal.SIGTERM)


class Interrupted(KeyboardInterrupt):
    """The tool was asked to stop by a signal; `str()` is the signal's name."""

    def __init__(self, signal_name: str = "SIGINT") -> None:
        super().__init__(signal_name)
        self.signal_name = signal_name

    def __str__(self) -> str:
        return self.signal_name


def interrupted_by(exc: BaseException) -> str:
    """The signal's name for a message: `Interrupted` knows it; a bare KeyboardInterrupt is Ctrl-C."""
    return exc.signal_name if isinstance(exc, Interrupted) else "SIGINT"


class _Handler:
    def __init__(self) -> None:
        self.fired = ""
        self.ignored = 0

    def __call__(self, signum: int, frame: FrameType | None) -> None:
        if self.fired:  # already unwinding: let the cleanup finish
            self.ignored += 1
            return
        self.fired = signal.Signals(signum).name
        raise Interrupted(self.fired)


def install_once() -> None:
    """For a whole process (the CLI's `main`): the first SIGINT/SIGTERM raises `Interrupted`, every
    later one is ignored, in every command, in start-up and in shutdown alike. A second Ctrl-C
    that lands while the interpreter exits (in a `__del__`) would otherwise print a traceback.
    `signals_interrupt()` blocks inside it share this once-only state."""
    handler = _Handler()
    for sig in SIGNALS:
        signal.signal(sig, handler)


def ignore_signals() -> None:
    """The process is on its way out: nothing a late signal could still stop."""
    for sig in SIGNALS:
        signal.signal(sig, signal.SIG_IGN)


@contextmanager
def signals_interrupt() -> Iterator[None]:
    """SIGINT and SIGTERM raise `Interrupted` (first one only) inside the block; handlers restored after.

    Nesting is fine: an inner block keeps the outer's once-only state by installing nothing.
    """
    if isinstance(signal.getsignal(signal.SIGINT), _Handler):
        yield
        return
    handler = _Handler()
    previous = {sig: signal.signal(sig, handler) for sig in SIGNALS}
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)
