"""A model's shape, read from its `config.json`: what it weighs and what it keeps per token.

This package only reads the checkpoint's description; it knows nothing of any engine.
Both the estimator (our prediction) and the simulated server (the stand-in engine)
build on it, each with its own engine rules and, for the simulator, its own hidden costs.

Modules: `shape` (the record), `quant` (bytes per parameter), `inventory` (shared walking
helpers), one module per family of rules (`gqa`, `mla`, `hybrid`), and `registry`, which
picks the rule by the config's `architectures` entry (model_type as fallback), as the
engines pick their model class. Supported: dense/MoE GQA (Llama, Mistral, Mixtral, Qwen2/3,
gpt-oss, MiMo, MiniMax-M2, GLM-4.5/4.6), Gemma 3, MiMo-V2-Flash, MLA (DeepSeek-V2/V3/V3.2,
Kimi-K2), hybrid linear attention (Qwen3-Next, Qwen3.5/3.6) and hybrid Mamba2 (Nemotron-H).
Anything else raises UnsizedModelError; `load_for_search` returns an unsized placeholder
instead, so the search can still run the model on a real engine.
"""

from autotune.modelshape.inventory import UnsizedModelError
from autotune.modelshape.quant import DTYPE_BYTES
from autotune.modelshape.registry import ARCHITECTURES, from_config, load, load_for_search, unsized
from autotune.modelshape.shape import LinearState, ModelShape, WeightGroup, state_bytes_per_request

__all__ = [
    "ARCHITECTURES", "DTYPE_BYTES", "LinearState", "ModelShape", "UnsizedModelError", "WeightGroup", "from_config",
    "load", "load_for_search", "state_bytes_per_request", "unsized",
]
