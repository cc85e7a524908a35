"""Family rules for hybrid models whose recurrent layers keep a per-request state instead of
KV: Qwen3-Next / Qwen3.5 / Qwen3.6 (gated DeltaNet + full attention, optional vision tower and
MTP) and Nemotron-H (Mamba2 + attention + MLP/MoE by a layer pattern)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from autotune.modelshape.inventory import Inventory, make_shape, req
from autotune.modelshape.shape import LinearState, ModelShape

# Nemotron-H's `layers_block_type` (newer configs) spelled as `hybrid_override_pattern` characters
_BLOCK_CHARS = {"mamba": "M", "attention": "*", "moe": "E", "mlp": "-"}


def gdn_params(inv: Inventory, p: str, h: int, t: Mapping[str, Any]) -> LinearState:
    hk, hv = req(t, "linear_num_key_heads"), req(t, "linear_num_value_heads")
    dk, dv = req(t, "linear_key_head_dim"), req(t, "linear_value_head_dim")
    kernel = req(t, "linear_conv_kernel_dim")
    conv_dim = 2 * hk * dk + hv * dv
    inv.add(f"{p}.linear_attn.in_proj_qkv", h * conv_dim)
    inv.add(f"{p}.linear_attn.in_proj_z", h * hv * dv)
    inv.add(f"{p}.linear_attn.in_proj_ba", h * 2 * hv)
    inv.add(f"{p}.linear_attn.conv1d", conv_dim * kernel, kind="other")
    inv.add(f"{p}.linear_attn.out_proj", hv * dv * h)
    inv.add(f"{p}.linear_attn.small", 2 * hv + dv, "replicated", "norm")
    return LinearState(conv_dim, kernel - 1, hv, dv, dk, str(t.get("mamba_ssm_dtype") or "float32"))


def vision_params(inv: Inventory, vc: Mapping[str, Any] | None) -> None:
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


def build_gdn(config: Mapping[str, Any], t: Mapping[str, Any], arch: str) -> ModelShape:
    """Qwen3-Next / Qwen3.5 / Qwen3.6: gated DeltaNet layers with every n-th full attention."""
    h, layers, heads = req(t, "hidden_size"), req(t, "num_hidden_layers"), req(t, "num_attention_heads")
    kv, hd = req(t, "num_key_value_heads"), req(t, "head_dim")
    types = t.get("layer_types")
    if not types:
        interval = req(t, "full_attention_interval")
        types = ["full_attention" if (i + 1) % interval == 0 else "linear_attention" for i in range(layers)]
    kinds = tuple("full" if k == "full_attention" else "linear" for k in types)
    experts = t.get("num_experts") or 0
    gate = bool(t.get("attn_output_gate", True))
    inv = Inventory()
    state: LinearState | None = None

    def mlp(p: str, draft: bool = False) -> None:
        if experts:
            inv.moe(p, h, experts, req(t, "moe_intermediate_size"), t.get("shared_expert_intermediate_size") or 0, draft)
        else:
            inv.mlp(p, h, req(t, "intermediate_size"), draft)

    for i, kind in enumerate(kinds):
        p = f"model.layers.{i}"
        if kind == "full":
            inv.attention(p, h, heads, kv, hd, gate=gate, bias=False)
        else:
            state = gdn_params(inv, p, h, t)
        mlp(p)
    vocab = req(t, "vocab_size")
    inv.embeddings(h, vocab, bool(config.get("tie_word_embeddings", t.get("tie_word_embeddings"))))
    vision_params(inv, config.get("vision_config"))
    mtp = int(t.get("mtp_num_hidden_layers") or t.get("num_nextn_predict_layers") or 0)
    for j in range(mtp):
        p = f"mtp.layers.{j}"
        inv.attention(p, h, heads, kv, hd, gate=gate, bias=False, draft=True)
        mlp(p, draft=True)
        inv.add(f"mtp.fc.{j}", 2 * h * h, draft=True)
    if mtp:  # the draft loads its own embedding and lm_head copies (measured: 5.53 GB for 27B)
        inv.embeddings(h, vocab, False, draft=True, prefix="mtp")
    return make_shape(config, t, arch, inv, kinds, heads=heads, kv=kv, hd=hd, v_hd=hd, state=state, mtp=mtp,
                      experts=experts)


def build_nemotron_h(config: Mapping[str, Any], t: Mapping[str, Any], arch: str) -> ModelShape:
    """Nemotron-H: a pattern of Mamba2 (M), attention (*), MLP (-) and MoE (E) layers."""
    h, pattern = req(t, "hidden_size"), _pattern(t)
    heads, kv = req(t, "num_attention_heads"), req(t, "num_key_value_heads")
    hd = req(t, "head_dim", "attention_head_dim")  # Nemotron-H 8B/47B/56B spell it attention_head_dim
    m_heads, m_hd, n_state = req(t, "mamba_num_heads"), req(t, "mamba_head_dim"), req(t, "ssm_state_size")
    groups, kernel = req(t, "n_groups"), req(t, "conv_kernel")
    d_inner = m_heads * m_hd
    conv_dim = d_inner + 2 * groups * n_state
    inv = Inventory()
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
            inv.add(f"{p}.mixer.gate", h * req(t, "n_routed_experts"), "replicated", "other")
            inv.add(f"{p}.mixer.experts", req(t, "n_routed_experts") * 2 * h * req(t, "moe_intermediate_size"), kind="expert")
            inv.add(f"{p}.mixer.shared_experts", 2 * h * (t.get("moe_shared_expert_intermediate_size") or 0))
            kinds.append("mlp_only")
        else:
            inv.add(f"{p}.mixer.mlp", 2 * h * req(t, "intermediate_size"))
            kinds.append("mlp_only")
    inv.embeddings(h, req(t, "vocab_size"), bool(t.get("tie_word_embeddings")))
    state = LinearState(conv_dim, kernel - 1, m_heads, m_hd, n_state, str(t.get("mamba_ssm_cache_dtype") or "float32"))
    experts = t.get("n_routed_experts") or 0
    return make_shape(config, t, arch, inv, kinds, heads=heads, kv=kv, hd=hd, v_hd=hd, state=state, experts=experts)


def _pattern(t: Mapping[str, Any]) -> str:
    """The layer pattern: `hybrid_override_pattern`, or `layers_block_type` of newer configs."""
    if t.get("hybrid_override_pattern"):
        return str(t["hybrid_override_pattern"])
    blocks = req(t, "hybrid_override_pattern", "layers_block_type")
    return "".join(_BLOCK_CHARS.get(str(b), "-") for b in blocks)
