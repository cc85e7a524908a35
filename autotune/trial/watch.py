"""Watch a launching server: its log as it is written, its GPUs' memory, its HTTP port.

The watcher decides as soon as the evidence is decisive — an OOM line does not wait for
a timeout — and tells the caller, who kills at once. It never holds the whole log: lines
come from the supervisor's LogSink, go to the incremental classifier, and only a bounded
tail is kept.
Deadlines are about progress, not wall time alone: a weight load that takes twenty
minutes but keeps printing or keeps growing GPU memory is not a hang.
"""

from __future__ import annotations

import collections
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Protocol

import requests

from autotune.gpu.base import GpuBackend
from autotune.records import Classification, Phase
from autotune.settings import Deadlines
from autotune.trial.gpumem import MemoryTrace
from autotune.trial.logsink import LogSink

# How long a server that logged a stop asked of it before it was ready (a signal from outside the tool: an operator, a
# scheduler's preemption or time limit, a container's stop) has to exit by itself. vLLM 0.32's API server, its engine
# core SIGTERMed while it loads, logs its whole way out and then stays up, unready, for good (tests/data/launch-census,
# term-load): without this the trial waited out its no-progress deadline and called a stopped launch a hang.
STOPPED_EXIT_S = 20.0


class LogClassifierLike(Protocol):
    """An incremental log classifier (`classifier.classify.LogClassifier`), as the trial's watcher uses it."""

    def feed(self, line: str | bytes) -> None: ...

    @property
    def decisive(self) -> bool: ...

    @property
    def ready_seen(self) -> bool: ...

    @property
    def stop_requested(self) -> bool: ...

    @property
    def phase(self) -> Phase: ...

    def classification(self, exit_code: int | None = None, *, log_complete: bool = False) -> Classification: ...


class ServerTree(Protocol):
    """What the watcher needs of a server: here (`Supervisor`) or in a target (`RemoteSupervisor`)."""

    sink: LogSink | None

    def poll(self) -> int | None:
        """Its exit status (Popen style), or None while it runs."""
        ...

    def log_stream_down(self, now: float) -> bool:
        """True while its log stream is being reconnected (a target's): the watcher's no-progress
        clock must not run on the transport's gap. Never for a server here (a pipe)."""
        ...


PhaseCallback = Callable[[str, tuple[int, ...], tuple[int, ...]], None]
TAIL_LINES = 200
GPU_SAMPLE_S = 0.1
_STAMP = re.compile(r"^\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)|\b(?:INFO|WARNING|ERROR|DEBUG) (\d\d-\d\d \d\d:\d\d:\d\d)")


def log_time(line: str) -> float | None:
    """The engine's own timestamp of a log line (SGLang `[Y-m-d H:M:S...]`, vLLM `LEVEL m-d H:M:S`)."""
    match = _STAMP.search(line[:96])
    if not match:
        return None
    if match.group(1):
        return datetime.strptime(match.group(1), "%Y-%m-%d %H:%M:%S").timestamp()
    stamp = f"{datetime.now().year}-{match.group(2)}"
    return datetime.strptime(stamp, "%Y-%m-%d %H:%M:%S").timestamp()


@dataclass
class WatchState:
    outcome_decided_at: float | None = None
    decisive_line_read_at: float | None = None
    ready_at: float | None = None
    health_ok: bool = False
    timed_out: str = ""
    exit_code: int | None = None
    last_progress: float = field(default_factory=time.monotonic)
    tail: collections.deque[str] = field(default_factory=lambda: collections.deque(maxlen=TAIL_LINES))
    lines: int = 0
    first_log_time: float | None = None
    last_log_time: float | None = None
    stop_logged_at: float | None = None  # when the server logged a stop asked of it (not by the tool) before ready

    @property
    def engine_s(self) -> float | None:
        """Seconds between the first and last timestamped log line (the engine's clock)."""
        if self.first_log_time is None or self.last_log_time is None:
            return None
        return self.last_log_time - self.first_log_time


class Watcher:
    def __init__(self, sup: ServerTree, classifier: LogClassifierLike, backend: GpuBackend, trace: MemoryTrace,
                 base_url: str, health_path: str, deadlines: Deadlines, headers: dict[str, str] | None = None,
                 on_phase: PhaseCallback | None = None) -> None:
        self.sup, self.classifier, self.backend, self.trace = sup, classifier, backend, trace
        self.base_url, self.health_path, self.deadlines = base_url, health_path, deadlines
        self.state = WatchState()
        self.session = requests.Session()
        self.session.headers.update(headers or {})
        self.t0 = time.monotonic()
        self._next_health = 0.0
        self._last_sample = float("-inf")
        self.on_phase = on_phase
        self._shown: tuple[str, float] = ("", 0.0)

    # -- one step ------------------------------------------------------------------------

    def step(self) -> None:
        now = time.monotonic()
        assert self.sup.sink is not None, "the server was not started"
        lines = self.sup.sink.drain()
        for line in lines:
            self.classifier.feed(line)
            self.state.tail.append(line)
            stamp = log_time(line)
            if stamp is not None:
                if self.state.first_log_time is None:
                    self.state.first_log_time = stamp
                self.state.last_log_time = stamp
        if lines or self.sup.log_stream_down(now):  # a target's log stream being reconnected
            self.state.last_progress = now  # no lines while the stream is down says nothing of the server
        if lines:
            self.state.lines += len(lines)
            if self.classifier.decisive and self.state.decisive_line_read_at is None:
                self.state.decisive_line_read_at = now
        if now - self._last_sample >= GPU_SAMPLE_S:  # the log is read every step; memory ten times a second
            self._last_sample = now
            if self.trace.add(now - self.t0, self.backend.snapshot()):
                self.state.last_progress = now
        self._report(now)
        if self.classifier.ready_seen and not self.state.health_ok and now >= self._next_health:
            self._next_health = now + 0.1
            self.state.health_ok = self.health()
            if self.state.health_ok:
                self.state.ready_at = now

    def _report(self, now: float) -> None:
        """Tell the watcher's person about a new phase, or refresh every second."""
        if self.on_phase is None:
            return
        phase = "ready" if self.state.health_ok else self.classifier.phase.value
        if phase != self._shown[0] or now - self._shown[1] > 1.0:
            self._shown = (phase, now)
            idx = list(self.trace.base)
            self.on_phase(phase, tuple(self.trace.last.get(i, 0) for i in idx),
                          tuple(self.trace.totals[i] for i in idx))

    def health(self) -> bool:
        try:
            return self.session.get(self.base_url + self.health_path, timeout=2.0).status_code == 200
        except requests.RequestException:
            return False

    # -- start-up ----------------------------------------------------------------------------

    def until_started(self) -> str:
        """Step until the start-up is decided: 'ready', 'failed', 'exited', 'stopped' (asked to stop by someone else,
        and still there `STOPPED_EXIT_S` later) or 'timeout'."""
        d = self.deadlines
        while True:
            self.step()
            now = time.monotonic()
            if self.classifier.decisive:
                self.state.outcome_decided_at = now
                return "failed"
            code = self.sup.poll()
            if code is not None:
                self.step()  # the last lines a dying process wrote
                self.state.exit_code = code
                self.state.outcome_decided_at = now
                return "failed" if self.classifier.decisive else "exited"
            if self.state.health_ok:
                return "ready"
            if self.classifier.stop_requested:  # the tool stops only after this returns: someone else asked
                if self.state.stop_logged_at is None:
                    self.state.stop_logged_at = now
                if now - self.state.stop_logged_at > STOPPED_EXIT_S:
                    self.state.outcome_decided_at = now
                    return "stopped"
            phase = self.classifier.phase
            budget = d.compile_no_progress_s if phase is Phase.CUDA_GRAPH else d.no_progress_s
            if self.classifier.ready_seen and self.state.ready_at is None:
                budget = min(budget, d.ready_health_s)
            if now - self.state.last_progress > budget:
                self.state.timed_out = f"no progress for {budget:.0f} s in phase {phase.value}"
                return "timeout"
            if now - self.t0 > d.startup_s:
                self.state.timed_out = f"start-up took longer than {d.startup_s:.0f} s"
                return "timeout"
            time.sleep(d.poll_s)

    def alive_and_clean(self) -> bool:
        """Step once; True while the server runs and nothing decisive was logged."""
        self.step()
        return self.sup.poll() is None and not self.classifier.decisive
