"""KV-cache bytes per element for every `--kv-cache-dtype` name the engines accept: the one
table. SGLang's rules (`sglang/rules.py`), vLLM's, the estimator, both simulators and the
spec's ordering of KV dtypes all read it, so no two of them can disagree again (three copies
once did: mxfp8 was 1.03 in one and 1 + 1/32 in another).

Scales are included (engines.md §3.2): mxfp8 carries one e8m0 scale per 32 values, the 4-bit
formats one fp8 scale per 16. Names are the engines' own spellings; some are aliases of one
format (bf16 / bfloat16, fp8 / fp8_inc, the fp4 names). `auto` is not a format: it means the
model's dtype (`auto_dtype`), or what the engine's rules make of the checkpoint.

Pure data: imports nothing from the project.
"""

from __future__ import annotations

ELEMENT_BYTES: dict[str, float] = {
    "float32": 4, "fp32": 4,
    "float16": 2, "fp16": 2, "half": 2, "bfloat16": 2, "bf16": 2,
    "fp8": 1, "fp8_inc": 1, "fp8_e4m3": 1, "fp8_e5m2": 1,
    "mxfp8": 1 + 1 / 32,
    "nvfp4": 0.5 + 1 / 16, "fp4_e2m1": 0.5 + 1 / 16, "fp4_mx_block16": 0.5 + 1 / 16,
}
AUTO = "auto"
# The spellings a LaunchConfig (and so a spec's space) uses; each engine's adapter turns them into
# its own flag values (vLLM: bf16 -> bfloat16, fp4_e2m1 -> nvfp4).
CONFIG_NAMES = (AUTO, "bf16", "bfloat16", "fp8_e4m3", "fp8_e5m2", "mxfp8", "nvfp4", "fp4_e2m1")


def auto_dtype(model_dtype: str) -> str:
    """The KV dtype `auto` gives a model stored in `model_dtype` (both engines: the model's own
    dtype, and bfloat16 for anything but float32 checkpoints)."""
    return "float32" if model_dtype == "float32" else "bfloat16"


def order_bytes(name: str) -> float:
    """Bytes per element for ordering KV dtypes by memory; `auto` counts as bfloat16, the dtype
    of nearly every checkpoint (KeyError for an unknown name)."""
    return ELEMENT_BYTES[auto_dtype("bfloat16") if name == AUTO else name]
