"""The machine a spec runs on: the GPU backend, and the simulated node when the spec asks for one."""

from __future__ import annotations

from autotune.gpu.base import GpuBackend
from autotune.spec import Spec


def prepare_backend(spec: Spec) -> GpuBackend:
    """NVML for real launches; for `launcher: simulated`, the spec's node (created if missing)."""
    if spec.simulated is None:
        from autotune.gpu.nvml import NvmlBackend

        backend = NvmlBackend()
        backend.snapshot()  # fail now, with the driver hint, rather than mid-run
        return backend
    from autotune.gpu.simulated import SimulatedBackend
    from autotune.sim.node import SimNode

    sim = spec.simulated
    node_dir = spec.node_dir()
    if not (node_dir / "node.json").is_file():
        SimNode.create(node_dir, gpus=sim.gpus, gpu_mem_gib=sim.gpu_mem_gib, gpu_name=sim.gpu_name,
                       release_delay_s=sim.release_delay_s)
    return SimulatedBackend(node_dir)
