"""The GPU backend protocol: who holds how much memory on which GPU.

Two implementations: `NvmlBackend` (real GPUs, through nvidia-ml-py) and `SimulatedBackend`
(`autotune.sim.backend`: the simulated node implements this protocol; `gpu` never imports `sim`). The trial supervisor and watcher only ever see this protocol.
Quantities are bytes; `used_bytes` is device-wide, as `nvidia-smi --query-gpu=memory.used`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from autotune.records import GIB, MIB


@dataclass(frozen=True)
class GpuProcess:
    """A process holding memory on a GPU (`nvidia-smi --query-compute-apps=pid,used_memory`)."""

    pid: int
    used_bytes: int
    name: str = ""


@dataclass(frozen=True)
class GpuState:
    """One GPU at one instant.

    `peak_bytes`: the device-wide high-water mark of `used_bytes` since the backend's last
    `reset_peaks`, where the backend knows it exactly (the simulated node); None where memory can
    only be sampled (NVML), so that a sampled maximum is a lower bound of the true peak.
    """

    index: int
    name: str
    total_bytes: int
    used_bytes: int
    processes: tuple[GpuProcess, ...] = ()
    peak_bytes: int | None = None

    @property
    def free_bytes(self) -> int:
        return max(0, self.total_bytes - self.used_bytes)


@runtime_checkable
class GpuBackend(Protocol):
    """Reads GPU memory. Implementations must be cheap enough to sample at ~10 Hz.

    Implementations subclass it: the optional members below have their defaults here (a GPU read
    through NVML), and a backend that knows better overrides them."""

    kind: str  # "nvml" | "simulated" | "nvidia-smi" | "hostmem"
    # Used bytes above which a device with no listed holder counts as busy: NVML shows a few hundred
    # MiB used on an idle GPU. None where used memory alone says nothing (host memory: every process
    # holds some, only engines make it busy).
    busy_threshold_bytes: int | None = GIB
    # How far above its baseline a device may read and still count as released: a GPU is quiet,
    # a shared host's memory drifts on its own by more.
    release_tolerance_bytes: int = 64 * MIB

    def snapshot(self) -> tuple[GpuState, ...]:
        """Every GPU of the machine, in index order."""
        ...

    def fingerprint(self) -> dict[str, str]:
        """What identifies the hardware and driver (names, memory, driver version)."""
        ...

    def close(self) -> None:
        ...

    def fresh_snapshot(self) -> tuple[GpuState, ...]:
        """A reading taken now. A sampling backend's `snapshot()` may be a round trip old (nvidia-smi
        through a target: a second or more), too old to say the memory came back after a stop."""
        return self.snapshot()

    def reset_peaks(self, indices: list[int]) -> None:
        """Start a new high-water mark on `indices` (the watcher calls it when a trial starts), where
        the backend's states carry `peak_bytes`; nothing where memory is only sampled."""
        return None

    def start_refusal(self, state: GpuState, fraction: float) -> str | None:
        """The engine's own start-up refusal for `fraction` of the device `state`, in its words, where
        the backend knows it (vLLM-CPU on host memory); checked before a launch. None: no refusal."""
        return None
