"""Family rule for multi-head latent attention: DeepSeek-V2/V3, Kimi-K2 (a DeepSeek-V3 body
under `model_type` kimi_k2), and DeepSeek-V3.2 (adds the DSA sparse-attention indexer)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from autotune.modelshape.inventory import Inventory, make_shape, req
from autotune.modelshape.shape import ModelShape

# The DSA indexer keeps one key of `index_head_dim` per token per layer, stored as FP8 with
# one fp32 scale per 128 values (SGLang's NSA index-K buffer, vLLM's indexer cache).
INDEX_QUANT_BLOCK = 128


def build_mla(config: Mapping[str, Any], t: Mapping[str, Any], arch: str) -> ModelShape:
    """Latent attention; MoE after `first_k_dense_replace`; NextN draft layers after the last."""
    h, layers, heads = req(t, "hidden_size"), req(t, "num_hidden_layers"), req(t, "num_attention_heads")
    rank, rope, nope = req(t, "kv_lora_rank"), req(t, "qk_rope_head_dim"), req(t, "qk_nope_head_dim")
    v_hd, q_rank = req(t, "v_head_dim"), t.get("q_lora_rank")
    experts, dense_k = t.get("n_routed_experts") or 0, t.get("first_k_dense_replace", 0)
    shared = (t.get("n_shared_experts") or 0) * req(t, "moe_intermediate_size")
    mtp = int(t.get("num_nextn_predict_layers") or 0)
    index_hd, index_heads = t.get("index_head_dim"), t.get("index_n_heads")
    inv = Inventory()

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
        if index_hd and index_heads:
            indexer = (q_rank or h) * index_heads * index_hd + h * index_hd + 2 * index_hd + h * index_heads
            inv.add(f"{p}.self_attn.indexer", indexer, "replicated", draft=draft)
        if experts and i >= dense_k:
            inv.moe(p, h, experts, req(t, "moe_intermediate_size"), shared, draft)
        else:
            inv.mlp(p, h, req(t, "intermediate_size"), draft)

    for i in range(layers):
        layer(f"model.layers.{i}", i, False)
    vocab = req(t, "vocab_size")
    inv.embeddings(h, vocab, bool(t.get("tie_word_embeddings")))
    for j in range(mtp):
        p = f"model.layers.{layers + j}"
        layer(p, layers + j, True)
        inv.add(f"{p}.eh_proj", 2 * h * h, "replicated", draft=True)
    if mtp:
        inv.embeddings(h, vocab, False, draft=True, prefix=f"model.layers.{layers}")
    indexer_bytes = 0
    if index_hd:
        indexer_bytes = int(index_hd) + int(index_hd) // INDEX_QUANT_BLOCK * 4
        inv.notes.append(f"DSA indexer: {indexer_bytes} B per token per layer (FP8 key + fp32 scale per "
                         f"{INDEX_QUANT_BLOCK}), replicated on every GPU; indexer weights replicated (assumed)")
        inv.notes.append("DSA: the MLA latent is counted at the KV dtype; SGLang's NSA FP8 latent layout "
                         "(values + scales + bf16 rope) is not modelled")
    kinds = ("full",) * layers
    return make_shape(config, t, arch, inv, kinds, heads=heads, kv=1, hd=rank + rope, v_hd=0, mla=rank + rope,
                      mtp=mtp, experts=experts, indexer_bytes_per_layer=indexer_bytes)
