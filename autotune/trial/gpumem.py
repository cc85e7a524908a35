"""GPU memory around a trial: refuse busy GPUs, sample during, wait for release after.

All through the GpuBackend protocol, so the same code runs on NVML and the simulated node.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field

from autotune.gpu.base import GpuBackend, GpuState
from autotune.records import GIB, MIB, GpuMemory


def pick(states: Sequence[GpuState], indices: Sequence[int]) -> list[GpuState]:
    by_index = {s.index: s for s in states}
    missing = [i for i in indices if i not in by_index]
    if missing:
        from autotune.errors import GpuError

        raise GpuError(f"GPU(s) {missing} not found (the machine has {sorted(by_index)})",
                       hint="fix the spec's gpus list")
    return [by_index[i] for i in indices]


def busy_reasons(backend: GpuBackend, indices: Sequence[int]) -> list[str]:
    """Why the GPUs are not free to use: processes on them, or memory above the backend's idle
    threshold (`busy_threshold_bytes`; None: memory alone says nothing)."""
    threshold = backend.busy_threshold_bytes
    reasons = []
    for gpu in pick(backend.snapshot(), indices):
        if gpu.processes:
            who = ", ".join(f"pid {p.pid} ({p.used_bytes / GIB:.2f} GiB)" for p in gpu.processes)
            reasons.append(f"GPU {gpu.index}: {gpu.used_bytes / GIB:.2f} GiB used by {who}")
        elif threshold is not None and gpu.used_bytes > threshold:
            reasons.append(f"GPU {gpu.index}: {gpu.used_bytes / GIB:.2f} GiB used by an unknown process")
    return reasons


def start_trace(backend: GpuBackend, indices: Sequence[int]) -> MemoryTrace:
    """A trial's memory trace, from what the GPUs hold now; a backend that records true peaks
    starts a new high-water mark on them (see GpuState.peak_bytes)."""
    backend.reset_peaks(list(indices))
    states = pick(backend.snapshot(), indices)  # the latest is no older than the last release wait's
    return MemoryTrace({g.index: g.used_bytes for g in states}, {g.index: g.total_bytes for g in states})


def wait_released(backend: GpuBackend, base: dict[int, int], timeout_s: float,
                  tolerance_bytes: int | None = None) -> tuple[bool, dict[int, int]]:
    """Wait (bounded) until every GPU in `base` is back to its baseline, within `tolerance_bytes`
    (the backend's `release_tolerance_bytes` unless given). Returns (ok, last used).

    Where used memory alone says nothing (`busy_threshold_bytes` None: host memory, which every process on
    the host moves), a device no engine process holds any more is released whatever it reads: seen on
    a shared build box, node 0 read 1.0 GiB above its baseline after a vLLM-CPU server had gone, its
    memory taken meanwhile by other work, and the run stopped as if the server had leaked it."""
    tolerance = backend.release_tolerance_bytes if tolerance_bytes is None else tolerance_bytes
    by_holders = backend.busy_threshold_bytes is None
    deadline = time.monotonic() + timeout_s
    while True:
        states = pick(backend.fresh_snapshot(), list(base))
        used = {g.index: g.used_bytes for g in states}
        if all(used[i] <= base[i] + tolerance for i in base) or by_holders and not any(g.processes for g in states):
            return True, used
        if time.monotonic() >= deadline:
            return False, used
        time.sleep(0.05)


def wait_gone(backend: GpuBackend, pids: set[int], timeout_s: float) -> bool:
    """Wait (bounded) until none of `pids` holds GPU memory any more."""
    deadline = time.monotonic() + timeout_s
    while True:
        holders = {p.pid for g in backend.fresh_snapshot() for p in g.processes}
        if not holders & pids:
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.05)


@dataclass
class MemoryTrace:
    """Per-GPU peak, last value and a bounded timeline of used bytes.

    The peak is the backend's own high-water mark where every sample carried one (exact), else
    the largest sample (a lower bound: the watcher samples ~10 times a second).
    """

    base: dict[int, int]
    totals: dict[int, int]
    max_points: int = 2000
    peak: dict[int, int] = field(default_factory=dict)
    last: dict[int, int] = field(default_factory=dict)
    timeline: list[tuple[float, tuple[int, ...]]] = field(default_factory=list)
    exact: dict[int, bool] = field(default_factory=dict)
    _stride: int = 1
    _count: int = 0

    def add(self, t_s: float, states: Sequence[GpuState]) -> bool:
        """Record a sample; True when any GPU moved by more than 32 MiB (progress)."""
        moved = False
        values = []
        for gpu in pick(states, list(self.base)):
            prev = self.last.get(gpu.index)
            moved |= prev is not None and abs(gpu.used_bytes - prev) > 32 * MIB
            self.last[gpu.index] = gpu.used_bytes
            self.peak[gpu.index] = max(self.peak.get(gpu.index, 0), gpu.used_bytes, gpu.peak_bytes or 0)
            self.exact[gpu.index] = self.exact.get(gpu.index, True) and gpu.peak_bytes is not None
            values.append(gpu.used_bytes)
        self._count += 1
        if self._count % self._stride == 0:
            self.timeline.append((round(t_s, 3), tuple(values)))
            if len(self.timeline) >= self.max_points:  # keep it bounded: halve the resolution
                self.timeline = self.timeline[::2]
                self._stride *= 2
        return moved

    def summary(self) -> tuple[GpuMemory, ...]:
        return tuple(GpuMemory(i, self.totals[i], self.base[i], self.peak.get(i, self.base[i]),
                               self.last.get(i, self.base[i]), self.exact.get(i, False)) for i in self.base)
