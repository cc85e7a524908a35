"""Which family rule sizes a checkpoint, and reading config.json.

The rule is chosen by the config's `architectures` entry, as SGLang and vLLM pick their
model class; `model_type` is only a fallback for configs without a known architecture.
Kimi-K2, for one, is `DeepseekV3ForCausalLM` under `model_type` kimi_k2: the engines serve it
with the DeepSeek-V3 class, and so do we.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from autotune.errors import ModelConfigError
from autotune.modelshape.gqa import build_gemma3, build_gqa, build_mimo_v2
from autotune.modelshape.hybrid import build_gdn, build_nemotron_h
from autotune.modelshape.inventory import UnsizedModelError, dtype_of
from autotune.modelshape.mla import build_mla
from autotune.modelshape.shape import ModelShape

Rule = Callable[[Mapping[str, Any], Mapping[str, Any], str], ModelShape]

ARCHITECTURES: dict[str, Rule] = {
    "LlamaForCausalLM": build_gqa,
    "MistralForCausalLM": build_gqa,
    "MixtralForCausalLM": build_gqa,
    "Qwen2ForCausalLM": build_gqa,
    "Qwen3ForCausalLM": build_gqa,
    "Qwen3MoeForCausalLM": build_gqa,
    "GptOssForCausalLM": build_gqa,
    "MiMoForCausalLM": build_gqa,
    "MiniMaxM2ForCausalLM": build_gqa,
    "Glm4MoeForCausalLM": build_gqa,
    "MiMoV2FlashForCausalLM": build_mimo_v2,
    "Gemma3ForCausalLM": build_gemma3,
    "Gemma3ForConditionalGeneration": build_gemma3,
    "DeepseekV2ForCausalLM": build_mla,
    "DeepseekV3ForCausalLM": build_mla,
    "DeepseekV32ForCausalLM": build_mla,
    "Qwen3NextForCausalLM": build_gdn,
    "Qwen3_5ForConditionalGeneration": build_gdn,
    "Qwen3_5MoeForConditionalGeneration": build_gdn,
    "NemotronHForCausalLM": build_nemotron_h,
}

# Fallback for configs whose `architectures` is missing or names a wrapper we do not know.
MODEL_TYPES: dict[str, Rule] = {
    "llama": build_gqa, "mistral": build_gqa, "mixtral": build_gqa, "qwen2": build_gqa, "qwen3": build_gqa,
    "qwen3_moe": build_gqa, "gpt_oss": build_gqa, "mimo": build_gqa, "minimax_m2": build_gqa,
    "glm4_moe": build_gqa, "mimo_v2_flash": build_mimo_v2, "gemma3": build_gemma3, "gemma3_text": build_gemma3,
    "deepseek_v2": build_mla, "deepseek_v3": build_mla, "deepseek_v32": build_mla, "kimi_k2": build_mla,
    "qwen3_next": build_gdn, "qwen3_5": build_gdn, "qwen3_5_text": build_gdn, "qwen3_5_moe": build_gdn,
    "qwen3_5_moe_text": build_gdn, "nemotron_h": build_nemotron_h,
}

# Where configs keep their maximum context, for a model the estimator cannot size
_CONTEXT_KEYS = ("max_position_embeddings", "max_sequence_length", "seq_length", "max_seq_len", "n_positions")


def rule_for(config: Mapping[str, Any]) -> Rule:
    """The family rule of a config: by architecture first, then by model_type."""
    text = config.get("text_config") or {}
    for arch in config.get("architectures") or []:
        if arch in ARCHITECTURES:
            return ARCHITECTURES[arch]
    for mt in (text.get("model_type"), config.get("model_type")):
        if mt in MODEL_TYPES:
            return MODEL_TYPES[str(mt)]
    arch = (config.get("architectures") or ["?"])[0]
    raise UnsizedModelError(
        f"the estimator cannot size architecture {arch} (model_type {config.get('model_type')!r})",
        hint="known architectures: " + ", ".join(sorted(ARCHITECTURES)),
    )


def from_config(config: Mapping[str, Any]) -> ModelShape:
    """The shape of a parsed config.json; UnsizedModelError when no rule can size it."""
    arch = (config.get("architectures") or ["?"])[0]
    text = dict(config.get("text_config") or config)
    return rule_for(config)(config, text, arch)


def read_config(model_path: str | Path) -> tuple[Path, dict[str, Any]]:
    """(config.json path, parsed content); ModelConfigError when absent or not JSON."""
    path = Path(model_path)
    cfg_path = path if path.is_file() else path / "config.json"
    if not path.exists():
        raise ModelConfigError(f"model path {str(path)!r} does not exist",
                               hint="point model_path at a directory holding the checkpoint's config.json")
    if not cfg_path.is_file():
        raise ModelConfigError(f"no config.json in {str(path)!r}",
                               hint="a model directory needs the checkpoint's config.json (download it with the weights)")
    try:
        config = json.loads(cfg_path.read_text())
    except (OSError, ValueError) as exc:
        raise ModelConfigError(f"cannot read {cfg_path}: {exc}", hint="is it valid JSON?") from exc
    if not isinstance(config, dict):
        raise ModelConfigError(f"{cfg_path} is not a JSON object", hint="use the checkpoint's original config.json")
    return cfg_path, config


def load(model_path: str | Path) -> ModelShape:
    """Shape of the model in directory `model_path` (or a config.json path itself).

    Raises ModelConfigError for a missing or unreadable config.json, and its subclass
    UnsizedModelError when the config is readable but no family rule can size it.
    """
    cfg_path, config = read_config(model_path)
    shape = from_config(config)
    total = _checkpoint_bytes(cfg_path.parent / "model.safetensors.index.json")
    return replace(shape, checkpoint_bytes=total) if total else shape


def load_for_search(model_path: str | Path) -> ModelShape:
    """`load`, except that a model the estimator cannot size comes back unsized
    (`shape.unsized_reason` set, only name, dtype and context known) instead of raising:
    a real engine may serve it, so the search runs without predictions."""
    try:
        return load(model_path)
    except UnsizedModelError as exc:
        _, config = read_config(model_path)
        return unsized(config, exc.message)


def unsized(config: Mapping[str, Any], reason: str) -> ModelShape:
    """A placeholder shape for a model the estimator cannot size: its context bound only."""
    text = config.get("text_config") or config
    context = next((text.get(k) or config.get(k) for k in _CONTEXT_KEYS if text.get(k) or config.get(k)), None)
    if not isinstance(context, int) or context < 1:
        raise UnsizedModelError(reason + "; nor does config.json state its maximum context",
                                hint="add max_position_embeddings to config.json, or use a known architecture")
    return ModelShape(
        architecture=str((config.get("architectures") or ["?"])[0]), model_type=str(config.get("model_type")),
        dtype=dtype_of(config, text), hidden_size=0, intermediate_size=0, vocab_size=0, max_context=context,
        layer_kinds=(), num_attention_heads=0, num_kv_heads=0, head_dim=0, v_head_dim=0, sliding_window=None,
        mla_kv_dim=None, linear_state=None, mtp_layers=0, num_experts=0, groups=(), unsized_reason=reason,
    )


def _checkpoint_bytes(index_path: Path) -> int | None:
    """`metadata.total_size` of a safetensors index, or None when absent or unreadable.

    An unreadable index is not an error: config.json alone sizes the model.
    """
    try:
        index = json.loads(index_path.read_text())
        total = int(index["metadata"]["total_size"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return total if total > 0 else None
