"""SGLang as one plug-in: its adapter (argv, intents, URLs), log rules, public memory rules
and per-release traits. The registry (`engines.registry`) holds `PACKAGE`."""

from __future__ import annotations

from autotune.engines.base import EnginePackage
from autotune.engines.sglang.adapter import SglangEngine, flag_table_version
from autotune.engines.sglang.log import SGLANG
from autotune.engines.sglang.traits import TRAITS, SglangTraits, traits_for

PACKAGE = EnginePackage(name="sglang", log=SGLANG, adapter=SglangEngine(), flag_family="sglang",
                        default_version="0.5.23", trait_versions=tuple(TRAITS))

__all__ = ["PACKAGE", "SglangEngine", "SglangTraits", "flag_table_version", "traits_for"]
