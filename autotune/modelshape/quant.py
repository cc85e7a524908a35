"""Bytes per parameter of a weight group under the checkpoint's quantisation config."""

from __future__ import annotations

import fnmatch
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from autotune.errors import ModelConfigError

if TYPE_CHECKING:
    from autotune.modelshape.shape import WeightGroup

DTYPE_BYTES = {"float32": 4, "float16": 2, "bfloat16": 2, "fp8": 1, "float8_e4m3fn": 1}


def _normalise(name: str) -> str:
    return name.replace("model.language_model.", "model.").replace("language_model.", "")


def quant_bytes(q: Mapping[str, Any], g: WeightGroup, base: int) -> float:
    """Bytes per parameter of a quantised weight group (scales included)."""
    method = str(q.get("quant_method", "")).lower()
    name = _normalise(g.name)
    ignore = [_normalise(p) for p in q.get("ignore", []) + q.get("modules_to_not_convert", [])]
    if any(fnmatch.fnmatch(name, pat) or fnmatch.fnmatch(name, pat + ".*") for pat in ignore):
        return float(base)
    if g.draft and method == "modelopt":
        return float(base)  # modelopt lists quantised layers by name; the draft's are not
    if method == "fp8":
        block = q.get("weight_block_size") or [128, 128]
        return 1.0 + 4.0 / (block[0] * block[1])
    if method == "mxfp4":
        return 4.25 / 8 if g.kind == "expert" else float(base)
    if method in ("awq", "gptq", "awq_marlin", "gptq_marlin"):
        group_size = int(q.get("group_size", 128))
        return 0.5 + 2.5 / group_size
    if method == "modelopt":
        layers = {_normalise(k): v for k, v in (q.get("quantized_layers") or {}).items()}
        algo = _match_layer(layers, name)
        if algo is None:
            return float(base)
        return _algo_bytes(str(algo.get("quant_algo", "")), int(algo.get("group_size", 16)), base)
    if method == "compressed-tensors":
        for grp in (q.get("config_groups") or {}).values():
            targets = [_normalise(t) for t in grp.get("targets", [])]
            if any(name == t or name.startswith(t + ".") or t == "Linear" for t in targets):
                return _compressed_tensors_bytes(grp.get("weights") or {})
        return float(base)
    raise ModelConfigError(
        f"unsupported quantization method {method!r} in config.json",
        hint="supported: fp8, mxfp4, awq, gptq, modelopt (FP8/NVFP4), compressed-tensors",
    )


def _compressed_tensors_bytes(weights: Mapping[str, Any]) -> float:
    """Bytes per parameter of a compressed-tensors weight scheme, group scales included."""
    bits = int(weights.get("num_bits", 8))
    if bits >= 8:
        return bits / 8  # per-channel / per-tensor scales are negligible
    group = int(weights.get("group_size") or 16)
    # 4-bit float (NVFP4) carries one fp8 scale per group; integer schemes a bf16 scale
    scale_bytes = 1.0 if str(weights.get("type", "int")) == "float" else 2.0
    return bits / 8 + scale_bytes / group


def _match_layer(layers: Mapping[str, Any], name: str) -> Mapping[str, Any] | None:
    if name in layers:
        return layers[name]
    prefix = name + "."
    for key, val in layers.items():  # a group may stand for several checkpoint tensors
        if key.startswith(prefix):
            return val
    return None


def _algo_bytes(algo: str, group_size: int, base: int) -> float:
    algo = algo.upper()
    if "NVFP4" in algo or algo == "FP4":
        return 0.5 + 1.0 / group_size  # e2m1 values + one fp8 scale per group
    if "FP8" in algo:
        return 1.0
    if "INT4" in algo or "W4A" in algo:
        return 0.5 + 2.0 / group_size
    return float(base)


