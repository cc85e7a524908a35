"""The simulated node seen through the GpuBackend protocol."""

from __future__ import annotations

from pathlib import Path

from autotune.gpu.base import GpuBackend, GpuState
from autotune.sim.node import SimNode


class SimulatedBackend(GpuBackend):
    """GPU memory of a simulated node directory (see `autotune sim init`)."""

    kind = "simulated"

    def __init__(self, root: str | Path) -> None:
        self.node = SimNode(root)

    def snapshot(self) -> tuple[GpuState, ...]:
        return self.node.snapshot()

    def reset_peaks(self, indices: list[int]) -> None:
        """The node records true peaks: start a new one on `indices` (see GpuState.peak_bytes)."""
        self.node.reset_peaks(indices)

    def fingerprint(self) -> dict[str, str]:
        gpus = self.node.gpus
        return {
            "backend": self.kind,
            "gpu_count": str(len(gpus)),
            "gpu_names": ",".join(sorted({g.name for g in gpus})),
            "gpu_total_bytes": ",".join(str(g.total_bytes) for g in gpus),
            "driver_version": "simulated",
        }

    def close(self) -> None:
        pass
