"""GPU memory backends behind one protocol: NVML (real GPUs) and the simulated node."""

from autotune.gpu.base import GpuBackend, GpuProcess, GpuState

__all__ = ["GpuBackend", "GpuProcess", "GpuState"]

