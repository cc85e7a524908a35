"""The GPU backend protocol: who holds how much memory on which GPU.

Two implementations: `NvmlBackend` (real GPUs, through nvidia-ml-py) and `SimulatedBackend`
(`autotune.sim.backend`: the simulated node implements this protocol; `gpu` never imports `sim`). The trial supervisor and watcher only ever see this protocol.
Quantities are bytes; `used_bytes` is device-wide, as `nvidia-smi --query-gpu=memory.used`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, runtime_checkable


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
    """Reads GPU memory. Implementations must be cheap enough to sample at ~10 Hz."""

    kind: str  # "nvml" | "simulated"

    def snapshot(self) -> tuple[GpuState, ...]:
        """Every GPU of the machine, in index order."""
        ...

    def fingerprint(self) -> dict[str, str]:
        """What identifies the hardware and driver (names, memory, driver version)."""
        ...

    def close(self) -> None:
        ...

    # Optional: a backend whose states carry `peak_bytes` also has `reset_peaks(indices: list[int])`,
    # which starts a new high-water mark (the watcher calls it when a trial starts).
