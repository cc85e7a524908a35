"""vLLM as a plug-in: today its log rules only (the tool classifies vLLM logs but does not
launch vLLM yet). Its memory rules live in `autotune.estimate.vllm_pool` until the vLLM
plug-in's `rules.py` takes them; its adapter (`adapter.py`) and traits (`traits.py`) plug
in here by setting `adapter=` and `trait_versions=` on `PACKAGE`."""

from __future__ import annotations

from autotune.engines.base import EnginePackage
from autotune.engines.vllm.log import VLLM

PACKAGE = EnginePackage(name="vllm", log=VLLM, adapter=None, flag_family="vllm",
                        default_version="0.33.0", trait_versions=())

__all__ = ["PACKAGE"]
