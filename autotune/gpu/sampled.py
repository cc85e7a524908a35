"""A backend whose every reading is a round trip (a command run through a target): read in the
background, so the watcher's ~10 Hz `snapshot()` never waits on one.

`SampledBackend.read()` is the subclass's one fresh reading (`NvidiaSmiBackend`: nvidia-smi's query mode;
`TargetHostMemBackend`: the helper's host-memory reading). A background sampler keeps the latest;
`fresh_snapshot()` takes one now for the moments a stale one would mislead (the baseline before a
launch, the release after a stop). Sampled only: `peak_bytes` is None.
"""

from __future__ import annotations

import threading
import time

from autotune.errors import GpuError
from autotune.gpu.base import GpuBackend, GpuState

MAX_STALE_S = 30.0  # how long failed readings are ridden out on the last good one (as a log stream's reconnect)


class SampledBackend(GpuBackend):
    """The sampling half of a round-trip backend; subclasses define `read()` and `kind`."""

    kind = "sampled"

    def __init__(self, *, min_interval_s: float = 0.25, max_stale_s: float = MAX_STALE_S) -> None:
        self.min_interval_s, self.max_stale_s = min_interval_s, max_stale_s
        self._latest: tuple[GpuState, ...] | None = None
        self._taken = float("-inf")  # when the kept reading's round trip began
        self._error: GpuError | None = None
        self._fresh = threading.Condition()
        self._closed = False
        self._sampler: threading.Thread | None = None

    def read(self) -> tuple[GpuState, ...]:
        """One fresh reading (a round trip); GpuError when it fails."""
        raise NotImplementedError

    def snapshot(self) -> tuple[GpuState, ...]:
        """The latest reading of a background sampler (a round trip costs up to a second over ssh;
        the watcher must not wait on it). The first call reads synchronously. A failed reading
        (a dropped connection: the next one reconnects) is raised only once no reading has
        succeeded for `max_stale_s`; until then the last good one stands."""
        if self._sampler is None:
            self.fresh_snapshot()
            self._sampler = threading.Thread(target=self._sample, daemon=True)
            self._sampler.start()
        with self._fresh:
            if self._error is not None and time.monotonic() - self._taken > self.max_stale_s:
                raise self._error
            assert self._latest is not None
            return self._latest

    def fresh_snapshot(self) -> tuple[GpuState, ...]:
        """A reading taken now (a round trip), which also becomes the latest for `snapshot()`: for
        the moments a stale one would mislead (the baseline before a launch, the release after a stop)."""
        taken = time.monotonic()
        try:
            states = self.read()
        except GpuError:  # one retry: a dropped connection's next contact opens a new one
            taken = time.monotonic()
            states = self.read()
        self._keep(taken, states, None)
        return states

    def _keep(self, taken: float, states: tuple[GpuState, ...] | None, error: GpuError | None) -> None:
        """Keep a reading unless a newer one (begun later) is already kept: the sampler's and a
        fresh read's round trips overlap."""
        with self._fresh:
            if error is not None:
                self._error = error  # the last good reading and its time stand
            elif taken >= self._taken:
                self._taken, self._latest, self._error = taken, states, None

    def _sample(self) -> None:
        while not self._closed:
            taken = time.monotonic()
            try:
                self._keep(taken, self.read(), None)
            except GpuError as exc:
                self._keep(taken, None, exc)
            time.sleep(self.min_interval_s)

    def close(self) -> None:
        self._closed = True
