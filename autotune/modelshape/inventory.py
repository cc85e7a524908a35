"""What every family rule shares: reading required fields, collecting weight groups, and
assembling the `ModelShape`."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from autotune.errors import ModelConfigError
from autotune.modelshape.shape import LinearState, ModelShape, WeightGroup


class UnsizedModelError(ModelConfigError):
    """config.json is readable but the estimator cannot size the model (unknown architecture or
    a field it needs is missing). A real engine may still serve it: the search runs without
    predictions; only the estimator and the simulator refuse it."""


def req(cfg: Mapping[str, Any], key: str, *aliases: str) -> Any:
    """cfg[key], or the first alias the checkpoint spells instead (e.g. Nemotron-H's
    `attention_head_dim` for `head_dim`)."""
    for name in (key, *aliases):
        if cfg.get(name) is not None:
            return cfg[name]
    spelled = " / ".join(f"'{k}'" for k in (key, *aliases))
    raise UnsizedModelError(
        f"config.json lacks {spelled}, needed to size {cfg.get('model_type', 'this model')}",
        hint="use the checkpoint's original config.json",
    )


def dtype_of(config: Mapping[str, Any], text: Mapping[str, Any]) -> str:
    return str(text.get("dtype") or text.get("torch_dtype") or config.get("dtype") or config.get("torch_dtype")
               or "bfloat16")


def quant_of(config: Mapping[str, Any], text: Mapping[str, Any]) -> Mapping[str, Any]:
    return config.get("quantization_config") or text.get("quantization_config") or {}


class Inventory:
    """Collects weight groups (and notes on assumed facts) while a family rule walks the layers."""

    def __init__(self) -> None:
        self.groups: list[WeightGroup] = []
        self.notes: list[str] = []

    def add(self, name: str, params: int, split: str = "tp", kind: str = "linear", draft: bool = False) -> None:
        if params > 0:
            self.groups.append(WeightGroup(name, int(params), split, kind, draft))

    def attention(self, p: str, h: int, heads: int, kv: int, hd: int, *, gate: bool, bias: bool,
                  draft: bool = False, v_hd: int | None = None) -> None:
        v_hd = hd if v_hd is None else v_hd
        self.add(f"{p}.self_attn.q_proj", h * heads * hd * (2 if gate else 1) + (heads * hd if bias else 0), draft=draft)
        self.add(f"{p}.self_attn.k_proj", h * kv * hd + (kv * hd if bias else 0), "kv", draft=draft)
        self.add(f"{p}.self_attn.v_proj", h * kv * v_hd + (kv * v_hd if bias else 0), "kv", draft=draft)
        self.add(f"{p}.self_attn.o_proj", heads * v_hd * h, draft=draft)
        self.add(f"{p}.norms", 2 * h + 2 * hd, "replicated", "norm", draft)

    def mlp(self, p: str, h: int, inter: int, draft: bool = False) -> None:
        for proj in ("gate_proj", "up_proj"):
            self.add(f"{p}.mlp.{proj}", h * inter, draft=draft)
        self.add(f"{p}.mlp.down_proj", inter * h, draft=draft)

    def moe(self, p: str, h: int, experts: int, inter: int, shared: int, draft: bool = False, bias: bool = False) -> None:
        self.add(f"{p}.mlp.gate", h * experts, "replicated", "other", draft)
        self.add(f"{p}.mlp.experts", experts * (3 * h * inter + (3 * inter if bias else 0)), kind="expert", draft=draft)
        if shared:
            self.mlp(f"{p}.shared_expert", h, shared, draft)

    def embeddings(self, h: int, vocab: int, tied: bool, draft: bool = False, prefix: str = "model") -> None:
        self.add(f"{prefix}.embed_tokens", vocab * h, kind="embed", draft=draft)
        if not tied or draft:
            self.add("lm_head" if not draft else f"{prefix}.lm_head", vocab * h, kind="lm_head", draft=draft)
        self.add(f"{prefix}.norm", h, "replicated", "norm", draft)


def make_shape(config: Mapping[str, Any], t: Mapping[str, Any], arch: str, inv: Inventory, kinds: Sequence[str], *,
               heads: int, kv: int, hd: int, v_hd: int, mla: int | None = None, state: LinearState | None = None,
               mtp: int = 0, experts: int = 0, **extra: Any) -> ModelShape:
    """The ModelShape of a walked model; `extra` sets the optional fields (sliding_kv_heads...)."""
    return ModelShape(
        architecture=arch,
        model_type=str(config.get("model_type") or t.get("model_type")),
        dtype=dtype_of(config, t),
        hidden_size=int(t["hidden_size"]),
        intermediate_size=int(t.get("intermediate_size") or t.get("moe_intermediate_size") or 0),
        vocab_size=int(t["vocab_size"]),
        max_context=int(req(t, "max_position_embeddings")),
        layer_kinds=tuple(kinds),
        num_attention_heads=int(heads),
        num_kv_heads=int(kv),
        head_dim=int(hd),
        v_head_dim=int(v_hd),
        sliding_window=t.get("sliding_window") if "sliding" in kinds else None,
        mla_kv_dim=mla,
        linear_state=state,
        mtp_layers=mtp,
        num_experts=int(experts),
        groups=tuple(inv.groups),
        quantization=quant_of(config, t),
        notes=tuple(inv.notes),
        **extra,
    )
