"""The shape record: what a model weighs (per weight group) and what it keeps per token.

Parameters are listed as `WeightGroup`s named like the checkpoint's tensors
(`model.layers.3.self_attn.q_proj`), so quantisation configs that name modules apply
per group. Each group says how tensor parallelism splits it:
- `tp`: split across ranks;
- `kv`: K/V projections, split by KV head but at least one head per rank (replicated
  when TP > KV heads);
- `replicated`: every rank holds a full copy (norms, routers, vision tower).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from autotune.modelshape.quant import DTYPE_BYTES, quant_bytes


@dataclass(frozen=True)
class WeightGroup:
    name: str
    params: int
    split: str  # "tp" | "kv" | "replicated"
    kind: str  # "linear" | "expert" | "embed" | "lm_head" | "norm" | "other"
    draft: bool = False  # belongs to the MTP/NextN draft, not the target


@dataclass(frozen=True)
class LinearState:
    """Per-layer recurrent state of a linear-attention (GDN) or Mamba2 layer, full model."""

    conv_dim: int  # channels of the causal conv
    conv_width: int  # kernel - 1 cached columns
    ssm_heads: int
    ssm_head_dim: int  # v head dim (GDN) / mamba head dim
    ssm_state_dim: int  # k head dim (GDN) / ssm_state_size (Mamba2)
    ssm_dtype: str


@dataclass(frozen=True)
class ModelShape:
    architecture: str
    model_type: str
    dtype: str
    hidden_size: int
    intermediate_size: int
    vocab_size: int
    max_context: int
    layer_kinds: tuple[str, ...]  # per layer: full | sliding | linear | mamba | mlp_only
    num_attention_heads: int
    num_kv_heads: int
    head_dim: int
    v_head_dim: int
    sliding_window: int | None
    mla_kv_dim: int | None  # kv_lora_rank + qk_rope_head_dim for MLA, else None
    linear_state: LinearState | None
    mtp_layers: int
    num_experts: int
    groups: tuple[WeightGroup, ...] = field(repr=False)
    quantization: Mapping[str, Any] = field(default_factory=dict, repr=False)
    # bytes of all tensors in the checkpoint (`model.safetensors.index.json` metadata.total_size),
    # draft and vision tower included; None when the directory has no index
    checkpoint_bytes: int | None = None
    # KV heads of the sliding-window layers when they differ from the full layers' (MiMo-V2-Flash)
    sliding_kv_heads: int | None = None
    # bytes per token per attention layer kept beside K/V, not split by TP (DeepSeek-V3.2's
    # sparse-attention indexer keys)
    indexer_bytes_per_layer: int = 0
    # facts the shape rests on that the config does not state: the estimator lists them
    notes: tuple[str, ...] = ()
    # set when the estimator cannot size this model (unknown architecture, missing fields):
    # only the name and the context are known; the search runs without predictions
    unsized_reason: str | None = None

    @property
    def is_moe(self) -> bool:
        return self.num_experts > 0

    @property
    def is_mla(self) -> bool:
        return self.mla_kv_dim is not None

    @property
    def is_hybrid(self) -> bool:
        return self.linear_state is not None

    def count(self, kind: str) -> int:
        """Number of layers of a kind (`full`, `sliding`, `linear`, `mamba`)."""
        return sum(1 for k in self.layer_kinds if k == kind)

    @property
    def attention_layers(self) -> int:
        return self.count("full") + self.count("sliding")

    @property
    def state_layers(self) -> int:
        return self.count("linear") + self.count("mamba")

    def params(self, *, draft: bool = False) -> int:
        return sum(g.params for g in self.groups if g.draft == draft)

    @property
    def sized(self) -> bool:
        return self.unsized_reason is None

    def tp_split_problem(self, tp: int) -> str:
        """Why the engines cannot split the attention over `tp` ranks; '' when they can.

        SGLang's and vLLM's attention layers share the rule (asserted as the model is built):
        the query heads divide over the ranks; the KV heads divide over them too or, when
        there are fewer KV heads than ranks, each is replicated and tp is a multiple of them."""
        heads, kv = self.num_attention_heads, self.num_kv_heads
        if tp < 1 or heads % tp:
            return f"{heads} attention heads do not divide over tp={tp}"
        if kv >= tp and kv % tp:
            return f"{kv} KV heads do not divide over tp={tp}"
        if kv < tp and tp % kv:
            return f"tp={tp} is not a multiple of the {kv} KV heads (fewer KV heads than ranks are replicated)"
        return ""

    def splittable_tps(self, up_to: int = 16) -> tuple[int, ...]:
        """The TP sizes from 1 to `up_to` that `tp_split_problem` accepts."""
        return tuple(tp for tp in range(1, up_to + 1) if not self.tp_split_problem(tp))

    def kv_heads_per_rank(self, tp: int, kind: str = "full") -> int:
        heads = self.sliding_kv_heads if kind == "sliding" and self.sliding_kv_heads else self.num_kv_heads
        return max(1, heads // tp)

    def weight_bytes_per_rank(self, tp: int, *, draft: bool = False) -> int:
        """Bytes of weights one TP rank holds, quantisation applied."""
        total = 0.0
        for g in self.groups:
            if g.draft != draft:
                continue
            total += self.group_bytes_per_rank(g, tp)
        return int(total)

    def group_bytes_per_rank(self, group: WeightGroup, tp: int) -> float:
        """Bytes of one weight group on one TP rank, quantisation (and its scales) applied."""
        return _group_params_per_rank(group, tp, self.num_kv_heads) * self.bytes_per_param(group)

    def bytes_per_param(self, group: WeightGroup) -> float:
        base = DTYPE_BYTES.get(self.dtype, 2)
        if group.kind not in ("linear", "expert", "lm_head") or not self.quantization:
            return float(base)
        return quant_bytes(self.quantization, group, base)


def _group_params_per_rank(g: WeightGroup, tp: int, kv_heads: int) -> float:
    if g.split == "replicated":
        return g.params
    if g.split == "kv":
        return g.params / kv_heads * max(1, kv_heads // tp)
    return g.params / tp



def state_bytes_per_request(shape: ModelShape, tp: int) -> tuple[int, int]:
    """(conv bytes, ssm bytes) of one request's recurrent state on one rank, all state layers.

    conv is bf16, ssm in the model's ssm dtype (fp32 by default). Zero for non-hybrids.
    """
    s = shape.linear_state
    if s is None:
        return 0, 0
    n = shape.state_layers
    conv = math.ceil(s.conv_dim / tp) * s.conv_width * 2 * n
    ssm = math.ceil(s.ssm_heads / tp) * s.ssm_head_dim * s.ssm_state_dim * DTYPE_BYTES.get(s.ssm_dtype, 4) * n
    return conv, ssm
