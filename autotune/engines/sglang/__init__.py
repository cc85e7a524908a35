"""SGLang as one plug-in: its adapter (argv, intents, URLs), log rules, public memory rules
and per-release traits. The registry (`engines.registry`) holds `PACKAGE`."""

from __future__ import annotations

from autotune.engines.base import Budget, EnginePackage, MemoryRules
from autotune.engines.sglang import rules
from autotune.engines.sglang.adapter import SglangCpuEngine, SglangEngine, flag_table_version
from autotune.engines.sglang.log import SGLANG
from autotune.engines.sglang.traits import TRAITS, SglangTraits, traits_for


def _kv_dtype_choices(version: str) -> tuple[str, ...]:
    return traits_for(version).kv_dtype_choices


MEMORY = MemoryRules(budget=Budget.STATIC_FRACTION, versions=tuple(TRAITS), kv_dtype_choices=_kv_dtype_choices,
                     auto_kv_follows_checkpoint=True, weights_overhead_gib=rules.WEIGHTS_OVERHEAD_PRIOR_GIB)
PACKAGE = EnginePackage(name="sglang", log=SGLANG, adapter=SglangEngine(), flag_family="sglang",
                        default_version="0.5.23", trait_versions=tuple(TRAITS), memory=MEMORY)

# SGLang's CPU path: host memory, no CUDA graphs; the GPU memory rules (CUDA context, graphs) do not
# apply, so the estimator does not size it and a search learns the pool from what each launch logged.
CPU_PACKAGE = EnginePackage(name="sglang-cpu", log=SGLANG, adapter=SglangCpuEngine(), flag_family="sglang",
                            default_version="0.5.9", trait_versions=tuple(TRAITS))

__all__ = ["CPU_PACKAGE", "PACKAGE", "SglangCpuEngine", "SglangEngine", "SglangTraits", "flag_table_version", "traits_for"]
