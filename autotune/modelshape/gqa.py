"""Family rules for grouped-query attention transformers, dense or MoE.

One walker serves Llama, Mistral/Mixtral, Qwen2/3(-MoE), gpt-oss, MiMo, MiniMax-M2 and
GLM-4.5/4.6 (their differences are config fields: expert counts under three spellings,
`first_k_dense_replace`, shared experts, NextN/MTP layers); Gemma 3 adds tied embeddings,
a sliding-window layer pattern and a SigLIP tower; MiMo-V2-Flash has sliding layers with
their own KV head count.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from autotune.modelshape.inventory import Inventory, make_shape, req
from autotune.modelshape.shape import ModelShape


def experts_of(t: Mapping[str, Any]) -> int:
    return int(t.get("num_experts") or t.get("num_local_experts") or t.get("n_routed_experts") or 0)


def attention_kinds(t: Mapping[str, Any], layers: int) -> tuple[str, ...]:
    """Per layer `full` or `sliding`: `layer_types`, else a Gemma-style period, else the family default."""
    types = t.get("layer_types")
    if types:
        return tuple("sliding" if "sliding" in k else "full" for k in types)
    period = t.get("sliding_window_pattern") or t.get("_sliding_window_pattern")
    if t.get("sliding_window") and isinstance(period, int) and period > 1:
        return tuple("full" if (i + 1) % period == 0 else "sliding" for i in range(layers))
    window, use = t.get("sliding_window"), t.get("use_sliding_window")
    if window and use is not False and t.get("model_type") in ("mistral", "mixtral"):
        return ("sliding",) * layers
    return ("full",) * layers


def _walk(inv: Inventory, t: Mapping[str, Any], layers: int, *, draft: bool = False, first: int = 0) -> None:
    """Attention + MLP/MoE for layers `first .. first+layers-1` (the NextN draft continues the numbering)."""
    h, heads = req(t, "hidden_size"), req(t, "num_attention_heads")
    kv = t.get("num_key_value_heads") or heads
    hd = t.get("head_dim") or h // heads
    inter = t.get("intermediate_size", 0)
    experts = experts_of(t)
    moe_inter = t.get("moe_intermediate_size") or inter
    shared = t.get("shared_expert_intermediate_size") or (t.get("n_shared_experts") or 0) * moe_inter
    sparse_step = t.get("decoder_sparse_step", 1) or 1
    dense_k = int(t.get("first_k_dense_replace") or 0)
    mlp_only = set(t.get("mlp_only_layers") or [])
    for i in range(first, first + layers):
        p = f"model.layers.{i}"
        inv.attention(p, h, heads, kv, hd, gate=False, bias=bool(t.get("attention_bias")), draft=draft)
        if experts and i not in mlp_only and (i + 1) % sparse_step == 0 and i >= dense_k:
            inv.moe(p, h, experts, moe_inter, shared, draft, bias=t.get("model_type") == "gpt_oss")
        else:
            inv.mlp(p, h, inter, draft)
        if draft:
            inv.add(f"{p}.eh_proj", 2 * h * h, "replicated", draft=True)


def build_gqa(config: Mapping[str, Any], t: Mapping[str, Any], arch: str, *, tied_default: bool = False,
              inv: Inventory | None = None) -> ModelShape:
    """Dense and MoE transformers with GQA attention, optional sliding layers and NextN/MTP layers."""
    inv = inv or Inventory()
    h, layers, heads = req(t, "hidden_size"), req(t, "num_hidden_layers"), req(t, "num_attention_heads")
    kv = t.get("num_key_value_heads") or heads
    hd = t.get("head_dim") or h // heads
    _walk(inv, t, layers)
    vocab = req(t, "vocab_size")
    inv.embeddings(h, vocab, bool(t.get("tie_word_embeddings", config.get("tie_word_embeddings", tied_default))))
    mtp = int(t.get("num_nextn_predict_layers") or 0)
    if mtp:
        _walk(inv, t, mtp, draft=True, first=layers)
        inv.embeddings(h, vocab, False, draft=True, prefix=f"model.layers.{layers}")
    if t.get("use_mtp") and not mtp:
        inv.notes.append(f"{arch}: the checkpoint's MTP modules (use_mtp) are not counted: assumed the engine "
                         "serves the target without them")
    return make_shape(config, t, arch, inv, attention_kinds(t, layers), heads=heads, kv=kv, hd=hd, v_hd=hd,
                      mtp=mtp, experts=experts_of(t))


def build_gemma3(config: Mapping[str, Any], t: Mapping[str, Any], arch: str) -> ModelShape:
    """Gemma 3: GQA with 5 sliding-window layers per global one, tied embeddings, SigLIP tower."""
    inv = Inventory()
    vc = config.get("vision_config")
    if vc and "text_config" in config:
        vh, vi, depth = vc.get("hidden_size", 0), vc.get("intermediate_size", 0), vc.get("num_hidden_layers", 0)
        patches = (vc.get("image_size", 896) // vc.get("patch_size", 14)) ** 2
        blocks = depth * (4 * vh * vh + 4 * vh + 2 * vh * vi + vi + vh + 4 * vh)
        embed = vc.get("num_channels", 3) * vc.get("patch_size", 14) ** 2 * vh + patches * vh
        inv.add("vision_tower", blocks + embed, "replicated", "other")
        inv.add("multi_modal_projector", vh * req(t, "hidden_size") + vh, "replicated", "other")
        inv.notes.append("Gemma 3: SigLIP tower and projector sized from vision_config, replicated on every GPU")
    if not t.get("layer_types") and not (t.get("sliding_window_pattern") or t.get("_sliding_window_pattern")):
        inv.notes.append("Gemma 3: no layer_types nor sliding_window_pattern; assumed 5 sliding layers per full one")
        t = {**t, "sliding_window_pattern": 6}
    return build_gqa(config, t, arch, tied_default=True, inv=inv)


def build_mimo_v2(config: Mapping[str, Any], t: Mapping[str, Any], arch: str) -> ModelShape:
    """MiMo-V2-Flash: full and sliding-window layers (`hybrid_layer_pattern`, 1 = sliding) with
    their own head counts, MoE where `moe_layer_freq` is 1, V head dim apart from QK's."""
    h, layers = req(t, "hidden_size"), req(t, "num_hidden_layers")
    pattern, moe = req(t, "hybrid_layer_pattern"), req(t, "moe_layer_freq")
    heads, kv, hd, v_hd = (req(t, k) for k in ("num_attention_heads", "num_key_value_heads", "head_dim", "v_head_dim"))
    s_heads = t.get("swa_num_attention_heads") or heads
    s_kv, s_hd, s_vhd = (t.get(k) or d for k, d in (("swa_num_key_value_heads", kv), ("swa_head_dim", hd),
                                                    ("swa_v_head_dim", v_hd)))
    experts = experts_of(t)
    inv = Inventory()
    kinds = []
    for i in range(layers):
        p, sliding = f"model.layers.{i}", bool(pattern[i])
        kinds.append("sliding" if sliding else "full")
        if sliding:
            inv.attention(p, h, s_heads, s_kv, s_hd, gate=False, bias=False, v_hd=s_vhd)
        else:
            inv.attention(p, h, heads, kv, hd, gate=False, bias=False, v_hd=v_hd)
        if experts and moe[i]:
            inv.moe(p, h, experts, req(t, "moe_intermediate_size"), 0)
        else:
            inv.mlp(p, h, req(t, "intermediate_size"))
    inv.embeddings(h, req(t, "vocab_size"), bool(t.get("tie_word_embeddings")))
    if (s_hd, s_vhd) != (hd, v_hd):
        inv.notes.append("MiMo-V2-Flash: sliding layers' head dims differ from the full layers'; KV counted "
                         "with the full layers' dims")
    inv.notes.append("MiMo-V2-Flash: K/V weights of the sliding layers split as if they had the full layers' "
                     f"{kv} KV heads (they have {s_kv}): slightly high past TP {kv}")
    return make_shape(config, t, arch, inv, kinds, heads=heads, kv=kv, hd=hd, v_hd=v_hd, experts=experts,
                      sliding_kv_heads=int(s_kv) if s_kv != kv else None)
