"""A model's shape, read from its `config.json`: what it weighs and what it keeps per token.

This module only reads the checkpoint's description; it knows nothing of any engine.
Both the estimator (our prediction) and the simulated server (the stand-in engine)
build on it, each with its own engine rules and, for the simulator, its own hidden costs.

Parameters are listed as `WeightGroup`s named like the checkpoint's tensors
(`model.layers.3.self_attn.q_proj`), so quantisation configs that name modules apply
per group. Each group says how tensor parallelism splits it:
- `tp`: split across ranks;
- `kv`: K/V projections, split by KV head but at least one head per rank (replicated
  when TP > KV heads);
- `replicated`: every rank holds a full copy (norms, routers, vision tower).

Supported families: dense GQA (Llama, Qwen3, Mistral), MoE (Qwen3-MoE, Mixtral, gpt-oss),
MLA (DeepSeek-V3), hybrid linear attention (Qwen3-Next, Qwen3.5/3.6 incl. vision), and
hybrid Mamba2 (Nemotron-H). Anything else raises ModelConfigError naming what is missing.
"""

from __future__ import annotations

import fnmatch
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from autotune.errors import ModelConfigError

DTYPE_BYTES = {"float32": 4, "float16": 2, "bfloat16": 2, "fp8": 1, "float8_e4m3fn": 1}


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

    def kv_heads_per_rank(self, tp: int) -> int:
        return max(1, self.num_kv_heads // tp)

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
        return _quant_bytes(self.quantization, group, base)


def _group_params_per_rank(g: WeightGroup, tp: int, kv_heads: int) -> float:
    if g.split == "replicated":
        return g.params
    if g.split == "kv":
        return g.params / kv_heads * max(1, kv_heads // tp)
    return g.params / tp


def _normalise(name: str) -> str:
    return name.replace("model.language_model.", "model.").replace("language_model.", "")


def _quant_bytes(q: Mapping[str, Any], g: WeightGroup, base: int) -> float:
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


# ---------------------------------------------------------------------------------------
# Reading config.json


def load(model_path: str | Path) -> ModelShape:
    """Shape of the model in directory `model_path` (or a config.json path itself)."""
    path = Path(model_path)
    cfg_path = path if path.is_file() else path / "config.json"
    if not path.exists():
        raise ModelConfigError(
            f"model path {str(path)!r} does not exist",
            hint="point model_path at a directory holding the checkpoint's config.json",
        )
    if not cfg_path.is_file():
        raise ModelConfigError(
            f"no config.json in {str(path)!r}",
            hint="a model directory needs the checkpoint's config.json (download it with the weights)",
        )
    try:
        config = json.loads(cfg_path.read_text())
    except (OSError, ValueError) as exc:
        raise ModelConfigError(f"cannot read {cfg_path}: {exc}", hint="is it valid JSON?") from exc
    shape = from_config(config)
    total = _checkpoint_bytes(cfg_path.parent / "model.safetensors.index.json")
    return replace(shape, checkpoint_bytes=total) if total else shape


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


def from_config(config: Mapping[str, Any]) -> ModelShape:
    arch = (config.get("architectures") or ["?"])[0]
    text = dict(config.get("text_config") or config)
    builder = _BUILDERS.get(str(text.get("model_type") or config.get("model_type")))
    if builder is None:
        raise ModelConfigError(
            f"unsupported architecture {arch} (model_type {config.get('model_type')!r})",
            hint="supported model types: " + ", ".join(sorted(_BUILDERS)),
        )
    return builder(config, text, arch)


def _req(cfg: Mapping[str, Any], key: str) -> Any:
    if key not in cfg or cfg[key] is None:
        raise ModelConfigError(
            f"config.json lacks '{key}', needed to size {cfg.get('model_type', 'this model')}",
            hint="use the checkpoint's original config.json",
        )
    return cfg[key]


def _dtype(config: Mapping[str, Any], text: Mapping[str, Any]) -> str:
    return str(text.get("dtype") or text.get("torch_dtype") or config.get("torch_dtype") or "bfloat16")


def _quant(config: Mapping[str, Any], text: Mapping[str, Any]) -> Mapping[str, Any]:
    return config.get("quantization_config") or text.get("quantization_config") or {}


class _Inventory:
    """Collects weight groups while a builder walks the layers."""

    def __init__(self) -> None:
        self.groups: list[WeightGroup] = []

    def add(self, name: str, params: int, split: str = "tp", kind: str = "linear", draft: bool = False) -> None:
        if params > 0:
            self.groups.append(WeightGroup(name, int(params), split, kind, draft))

    def attention(self, p: str, h: int, heads: int, kv: int, hd: int, *, gate: bool, bias: bool, draft: bool = False) -> None:
        self.add(f"{p}.self_attn.q_proj", h * heads * hd * (2 if gate else 1) + (heads * hd if bias else 0), draft=draft)
        self.add(f"{p}.self_attn.k_proj", h * kv * hd + (kv * hd if bias else 0), "kv", draft=draft)
        self.add(f"{p}.self_attn.v_proj", h * kv * hd + (kv * hd if bias else 0), "kv", draft=draft)
        self.add(f"{p}.self_attn.o_proj", heads * hd * h, draft=draft)
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


def _gdn_params(inv: _Inventory, p: str, h: int, t: Mapping[str, Any]) -> LinearState:
    hk, hv = _req(t, "linear_num_key_heads"), _req(t, "linear_num_value_heads")
    dk, dv = _req(t, "linear_key_head_dim"), _req(t, "linear_value_head_dim")
    kernel = _req(t, "linear_conv_kernel_dim")
    conv_dim = 2 * hk * dk + hv * dv
    inv.add(f"{p}.linear_attn.in_proj_qkv", h * conv_dim)
    inv.add(f"{p}.linear_attn.in_proj_z", h * hv * dv)
    inv.add(f"{p}.linear_attn.in_proj_ba", h * 2 * hv)
    inv.add(f"{p}.linear_attn.conv1d", conv_dim * kernel, kind="other")
    inv.add(f"{p}.linear_attn.out_proj", hv * dv * h)
    inv.add(f"{p}.linear_attn.small", 2 * hv + dv, "replicated", "norm")
    return LinearState(conv_dim, kernel - 1, hv, dv, dk, str(t.get("mamba_ssm_dtype") or "float32"))


def _vision_params(inv: _Inventory, vc: Mapping[str, Any] | None) -> None:
    if not vc:
        return
    vh, vi, depth = vc.get("hidden_size", 0), vc.get("intermediate_size", 0), vc.get("depth", 0)
    merge = vc.get("spatial_merge_size", 2) ** 2
    out = vc.get("out_hidden_size", vh)
    patch = vc.get("in_channels", 3) * vc.get("temporal_patch_size", 2) * vc.get("patch_size", 14) ** 2
    blocks = depth * (4 * vh * vh + 4 * vh + 2 * vh * vi + vi + vh + 4 * vh)
    merger = (vh * merge) ** 2 + vh * merge * out
    pos = vc.get("num_position_embeddings", 0) * vh
    inv.add("visual", blocks + merger + patch * vh + pos, "replicated", "other")


def _build_standard(config: Mapping[str, Any], t: Mapping[str, Any], arch: str) -> ModelShape:
    """Dense and MoE transformers with GQA attention, optional sliding layers."""
    h, layers = _req(t, "hidden_size"), _req(t, "num_hidden_layers")
    heads = _req(t, "num_attention_heads")
    kv = t.get("num_key_value_heads") or heads
    hd = t.get("head_dim") or h // heads
    inter = t.get("intermediate_size", 0)
    experts = t.get("num_experts") or t.get("num_local_experts") or 0
    moe_inter = t.get("moe_intermediate_size") or inter
    sparse_step = t.get("decoder_sparse_step", 1) or 1
    mlp_only = set(t.get("mlp_only_layers") or [])
    kinds = _attention_kinds(t, layers)
    inv = _Inventory()
    for i in range(layers):
        p = f"model.layers.{i}"
        inv.attention(p, h, heads, kv, hd, gate=False, bias=bool(t.get("attention_bias")))
        if experts and i not in mlp_only and (i + 1) % sparse_step == 0:
            inv.moe(p, h, experts, moe_inter, t.get("shared_expert_intermediate_size") or 0,
                    bias=t.get("model_type") == "gpt_oss")
        else:
            inv.mlp(p, h, inter)
    inv.embeddings(h, _req(t, "vocab_size"), bool(t.get("tie_word_embeddings")))
    return _shape(config, t, arch, inv, kinds, heads, kv, hd, hd, None, None, 0, experts)


def _attention_kinds(t: Mapping[str, Any], layers: int) -> tuple[str, ...]:
    types = t.get("layer_types")
    if types:
        return tuple("sliding" if "sliding" in k else "full" for k in types)
    window, use = t.get("sliding_window"), t.get("use_sliding_window")
    if window and use is not False and t.get("model_type") in ("mistral", "mixtral"):
        return ("sliding",) * layers
    return ("full",) * layers


def _build_mla(config: Mapping[str, Any], t: Mapping[str, Any], arch: str) -> ModelShape:
    """DeepSeek-V2/V3 style: multi-head latent attention, MoE after `first_k_dense_replace`."""
    h, layers, heads = _req(t, "hidden_size"), _req(t, "num_hidden_layers"), _req(t, "num_attention_heads")
    rank, rope, nope = _req(t, "kv_lora_rank"), _req(t, "qk_rope_head_dim"), _req(t, "qk_nope_head_dim")
    v_hd, q_rank = _req(t, "v_head_dim"), t.get("q_lora_rank")
    experts, dense_k = t.get("n_routed_experts") or 0, t.get("first_k_dense_replace", 0)
    shared = (t.get("n_shared_experts") or 0) * _req(t, "moe_intermediate_size")
    mtp = int(t.get("num_nextn_predict_layers") or 0)
    inv = _Inventory()

    def layer(p: str, i: int, draft: bool) -> None:
        if q_rank:
            inv.add(f"{p}.self_attn.q_a_proj", h * q_rank, "replicated", draft=draft)
            inv.add(f"{p}.self_attn.q_b_proj", q_rank * heads * (nope + rope), draft=draft)
        else:
            inv.add(f"{p}.self_attn.q_proj", h * heads * (nope + rope), draft=draft)
        inv.add(f"{p}.self_attn.kv_a_proj_with_mqa", h * (rank + rope), "replicated", draft=draft)
        inv.add(f"{p}.self_attn.kv_b_proj", rank * heads * (nope + v_hd), draft=draft)
        inv.add(f"{p}.self_attn.o_proj", heads * v_hd * h, draft=draft)
        inv.add(f"{p}.norms", 2 * h + rank + (q_rank or 0), "replicated", "norm", draft)
        if experts and i >= dense_k:
            inv.moe(p, h, experts, _req(t, "moe_intermediate_size"), shared, draft)
        else:
            inv.mlp(p, h, _req(t, "intermediate_size"), draft)

    for i in range(layers):
        layer(f"model.layers.{i}", i, False)
    vocab = _req(t, "vocab_size")
    inv.embeddings(h, vocab, bool(t.get("tie_word_embeddings")))
    for j in range(mtp):
        p = f"model.layers.{layers + j}"
        layer(p, layers + j, True)
        inv.add(f"{p}.eh_proj", 2 * h * h, "replicated", draft=True)
    if mtp:
        inv.embeddings(h, vocab, False, draft=True, prefix=f"model.layers.{layers}")
    kinds = ("full",) * layers
    return _shape(config, t, arch, inv, kinds, heads, 1, rank + rope, 0, rank + rope, None, mtp, experts)


def _build_gdn(config: Mapping[str, Any], t: Mapping[str, Any], arch: str) -> ModelShape:
    """Qwen3-Next / Qwen3.5 / Qwen3.6: gated DeltaNet layers with every n-th full attention."""
    h, layers, heads = _req(t, "hidden_size"), _req(t, "num_hidden_layers"), _req(t, "num_attention_heads")
    kv, hd = _req(t, "num_key_value_heads"), _req(t, "head_dim")
    types = t.get("layer_types")
    if not types:
        interval = _req(t, "full_attention_interval")
        types = ["full_attention" if (i + 1) % interval == 0 else "linear_attention" for i in range(layers)]
    kinds = tuple("full" if k == "full_attention" else "linear" for k in types)
    experts = t.get("num_experts") or 0
    gate = bool(t.get("attn_output_gate", True))
    inv = _Inventory()
    state: LinearState | None = None

    def mlp(p: str, draft: bool = False) -> None:
        if experts:
            inv.moe(p, h, experts, _req(t, "moe_intermediate_size"), t.get("shared_expert_intermediate_size") or 0, draft)
        else:
            inv.mlp(p, h, _req(t, "intermediate_size"), draft)

    for i, kind in enumerate(kinds):
        p = f"model.layers.{i}"
        if kind == "full":
            inv.attention(p, h, heads, kv, hd, gate=gate, bias=False)
        else:
            state = _gdn_params(inv, p, h, t)
        mlp(p)
    vocab = _req(t, "vocab_size")
    inv.embeddings(h, vocab, bool(config.get("tie_word_embeddings", t.get("tie_word_embeddings"))))
    _vision_params(inv, config.get("vision_config"))
    mtp = int(t.get("mtp_num_hidden_layers") or t.get("num_nextn_predict_layers") or 0)
    for j in range(mtp):
        p = f"mtp.layers.{j}"
        inv.attention(p, h, heads, kv, hd, gate=gate, bias=False, draft=True)
        mlp(p, draft=True)
        inv.add(f"mtp.fc.{j}", 2 * h * h, draft=True)
    if mtp:  # the draft loads its own embedding and lm_head copies (measured: 5.53 GB for 27B)
        inv.embeddings(h, vocab, False, draft=True, prefix="mtp")
    return _shape(config, t, arch, inv, kinds, heads, kv, hd, hd, None, state, mtp, experts)


def _build_nemotron_h(config: Mapping[str, Any], t: Mapping[str, Any], arch: str) -> ModelShape:
    """Nemotron-H: a pattern of Mamba2 (M), attention (*), MLP (-) and MoE (E) layers."""
    h, pattern = _req(t, "hidden_size"), _req(t, "hybrid_override_pattern")
    heads, kv, hd = _req(t, "num_attention_heads"), _req(t, "num_key_value_heads"), _req(t, "head_dim")
    m_heads, m_hd, n_state = _req(t, "mamba_num_heads"), _req(t, "mamba_head_dim"), _req(t, "ssm_state_size")
    groups, kernel = _req(t, "n_groups"), _req(t, "conv_kernel")
    d_inner = m_heads * m_hd
    conv_dim = d_inner + 2 * groups * n_state
    inv = _Inventory()
    kinds: list[str] = []
    for i, c in enumerate(pattern):
        p = f"model.layers.{i}"
        if c == "M":
            inv.add(f"{p}.mixer.in_proj", h * (2 * d_inner + 2 * groups * n_state + m_heads))
            inv.add(f"{p}.mixer.conv1d", conv_dim * kernel, kind="other")
            inv.add(f"{p}.mixer.out_proj", d_inner * h)
            inv.add(f"{p}.mixer.small", 3 * m_heads + d_inner + h, "replicated", "norm")
            kinds.append("mamba")
        elif c == "*":
            inv.attention(p, h, heads, kv, hd, gate=False, bias=False)
            kinds.append("full")
        elif c == "E":
            inv.add(f"{p}.mixer.gate", h * _req(t, "n_routed_experts"), "replicated", "other")
            inv.add(f"{p}.mixer.experts", _req(t, "n_routed_experts") * 2 * h * _req(t, "moe_intermediate_size"), kind="expert")
            inv.add(f"{p}.mixer.shared_experts", 2 * h * (t.get("moe_shared_expert_intermediate_size") or 0))
            kinds.append("mlp_only")
        else:
            inv.add(f"{p}.mixer.mlp", 2 * h * _req(t, "intermediate_size"))
            kinds.append("mlp_only")
    inv.embeddings(h, _req(t, "vocab_size"), bool(t.get("tie_word_embeddings")))
    state = LinearState(conv_dim, kernel - 1, m_heads, m_hd, n_state, str(t.get("mamba_ssm_cache_dtype") or "float32"))
    experts = t.get("n_routed_experts") or 0
    return _shape(config, t, arch, inv, tuple(kinds), heads, kv, hd, hd, None, state, 0, experts)


def _shape(
    config: Mapping[str, Any], t: Mapping[str, Any], arch: str, inv: _Inventory, kinds: tuple[str, ...],
    heads: int, kv: int, hd: int, v_hd: int, mla: int | None, state: LinearState | None, mtp: int, experts: int,
) -> ModelShape:
    return ModelShape(
        architecture=arch,
        model_type=str(config.get("model_type") or t.get("model_type")),
        dtype=_dtype(config, t),
        hidden_size=int(t["hidden_size"]),
        intermediate_size=int(t.get("intermediate_size") or t.get("moe_intermediate_size") or 0),
        vocab_size=int(t["vocab_size"]),
        max_context=int(_req(t, "max_position_embeddings")),
        layer_kinds=kinds,
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
        quantization=_quant(config, t),
    )


_BUILDERS = {
    "llama": _build_standard,
    "mistral": _build_standard,
    "qwen2": _build_standard,
    "qwen3": _build_standard,
    "qwen3_moe": _build_standard,
    "mixtral": _build_standard,
    "gpt_oss": _build_standard,
    "deepseek_v3": _build_mla,
    "deepseek_v2": _build_mla,
    "qwen3_next": _build_gdn,
    "qwen3_5": _build_gdn,
    "qwen3_5_text": _build_gdn,
    "qwen3_5_moe": _build_gdn,
    "qwen3_5_moe_text": _build_gdn,
    "nemotron_h": _build_nemotron_h,
}


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
