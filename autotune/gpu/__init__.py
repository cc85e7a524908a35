"""GPU memory backends behind one protocol: NVML (real GPUs) and the simulated node."""

from autotune.gpu.base import GpuBackend, GpuProcess, GpuState

__all__ = ["GpuBackend", "GpuProcess", "GpuState"]


def backend_from_env() -> GpuBackend:
    """The simulated node when AUTOTUNE_SIM_NODE is set, else NVML."""
    import os

    from autotune.sim.node import ENV_NODE

    root = os.environ.get(ENV_NODE)
    if root:
        from autotune.gpu.simulated import SimulatedBackend

        return SimulatedBackend(root)
    from autotune.gpu.nvml import NvmlBackend

    return NvmlBackend()
