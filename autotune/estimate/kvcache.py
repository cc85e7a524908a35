"""What one token (and one request's recurrent state) costs on one GPU, per engine.

Rules (reference/engines.md §3.2, memory-model.md §3–4):
- MHA/GQA: `kv_heads_per_rank · (head_dim + v_head_dim) · layers · elem` with
  `kv_heads_per_rank = max(1, kv_heads // attn_tp)`: past TP = KV heads each GPU holds one
  replicated head, so the per-GPU cost stops shrinking. Sliding layers with their own KV head
  count (MiMo-V2-Flash) use theirs.
- MLA: one latent of `kv_lora_rank + qk_rope_head_dim` per layer, replicated on every GPU.
- DSA (DeepSeek-V3.2): plus the indexer's FP8 key and its scale per token per layer, replicated.
- Hybrid linear attention: only full-attention layers keep KV; the recurrent state is a
  per-request pool (`state_bytes`).
- SGLang hybrid SWA (full and sliding layers): `cell = full_per_layer · n_full + r · swa_per_layer · n_swa`,
  r = --swa-full-tokens-ratio (0.8); the pool then holds `tokens` full-layer and
  `r · tokens` sliding-layer tokens.
- Speculative MTP/NextN draft: SGLang 0.5.23 folds the draft layers into the target cell
  (`cell += int(cell · draft_layers / layers)`); 0.5.9 gives the draft its own pool later,
  out of the slack; vLLM counts the draft's layers as extra KV layers (assumed).
"""

from __future__ import annotations

from dataclasses import dataclass

from autotune.engines import kvdtype
from autotune.engines.base import Budget
from autotune.engines.sglang.traits import traits_for
from autotune.estimate.launch import Launch
from autotune.modelshape import ModelShape, state_bytes_per_request

SWA_FULL_TOKENS_RATIO = 0.8  # SGLang's --swa-full-tokens-ratio fallback


@dataclass(frozen=True)
class KvGeometry:
    """Per-GPU bytes per KV token of one launch.

    `pool_cell_bytes` is what the engine divides the KV budget by (target + folded draft on
    SGLang 0.5.23); `draft_late_cell_bytes` is the draft pool SGLang 0.5.9 allocates after
    start-up from the slack (same #tokens). `swa_ratio` is set for SGLang hybrid-SWA pools,
    whose first "KV Cache is allocated" line (the Full pool) shows `logged_cell_bytes`
    per token; otherwise that is `target_cell_bytes`.
    """

    dtype_name: str
    elem_bytes: float
    per_layer_bytes: float
    target_cell_bytes: int
    logged_cell_bytes: int
    pool_cell_bytes: int
    draft_late_cell_bytes: int
    swa_ratio: float | None
    notes: tuple[str, ...]


def kv_dtype(shape: ModelShape, launch: Launch) -> tuple[str, float, str | None]:
    """(dtype name, bytes per element, note) of the KV cache this launch gets."""
    if launch.kv_cache_dtype != kvdtype.AUTO:
        return launch.kv_cache_dtype, kvdtype.ELEMENT_BYTES[launch.kv_cache_dtype], None
    q = shape.quantization or {}
    scheme = q.get("kv_cache_scheme") or {}
    ckpt_fp8 = str(q.get("kv_cache_quant_algo", "")).upper() == "FP8" or (
        scheme.get("num_bits") == 8 and scheme.get("type") == "float")
    model = kvdtype.auto_dtype(shape.dtype)
    if ckpt_fp8 and launch.rules.auto_kv_follows_checkpoint:
        return "fp8_e4m3", kvdtype.ELEMENT_BYTES["fp8_e4m3"], ("kv dtype auto -> fp8_e4m3 (the checkpoint's quant "
                                                               "config asks for an FP8 KV cache)")
    if ckpt_fp8:
        return model, kvdtype.ELEMENT_BYTES[model], (f"kv dtype auto -> model dtype: assumed {launch.engine} ignores "
                                                     "the checkpoint's FP8 KV scheme unless --kv-cache-dtype fp8 "
                                                     "is given")
    return model, kvdtype.ELEMENT_BYTES[model], None


def per_layer_bytes(shape: ModelShape, tp: int, elem_bytes: float, kind: str = "full") -> float:
    """KV bytes per token per attention layer of `kind` on one GPU (K and V, or the MLA latent,
    plus a sparse-attention indexer key where the model has one)."""
    extra = shape.indexer_bytes_per_layer
    if shape.mla_kv_dim is not None:
        return shape.mla_kv_dim * elem_bytes + extra
    return shape.kv_heads_per_rank(tp, kind) * (shape.head_dim + shape.v_head_dim) * elem_bytes + extra


def geometry(shape: ModelShape, launch: Launch) -> KvGeometry:
    """Bytes per KV token for `launch` (engine, version, TP, KV dtype, speculative)."""
    name, elem, note = kv_dtype(shape, launch)
    notes = [note] if note else []
    if launch.rules.budget is Budget.PROFILED:
        return _profiled_geometry(shape, launch, name, elem, notes)
    return _static_fraction_geometry(shape, launch, name, elem, notes)


def _profiled_geometry(shape: ModelShape, launch: Launch, name: str, elem: float, notes: list[str]) -> KvGeometry:
    """vLLM: one pool of whole attention layers; sliding and draft layers are layers like any other."""
    per_layer = per_layer_bytes(shape, launch.tp, elem)
    per_swa = per_layer_bytes(shape, launch.tp, elem, "sliding")
    n_full, n_swa = shape.count("full"), shape.count("sliding")
    draft_layers = shape.mtp_layers if launch.speculative else 0
    cell = int(round(per_layer * n_full + per_swa * n_swa))
    draft = int(round(per_layer * draft_layers))
    if n_swa:
        notes.append(f"{launch.engine} sliding-window layers counted as full layers (conservative; not checked)")
    if draft_layers:
        notes.append(f"{launch.engine} MTP draft layers assumed to add their own KV layers to the pool")
    return KvGeometry(name, elem, per_layer, cell, cell, cell + draft, 0, None, tuple(notes))


def _static_fraction_geometry(shape: ModelShape, launch: Launch, name: str, elem: float,
                              notes: list[str]) -> KvGeometry:
    """SGLang: hybrid-SWA pools hold sliding layers at a ratio; the draft is folded into the cell
    or given its own pool later, by release."""
    per_layer = per_layer_bytes(shape, launch.tp, elem)
    per_swa = per_layer_bytes(shape, launch.tp, elem, "sliding")  # differs where sliding layers have own heads
    n_full, n_swa = shape.count("full"), shape.count("sliding")
    draft_layers = shape.mtp_layers if launch.speculative else 0
    swa_ratio: float | None = None
    if n_full and n_swa:
        swa_ratio = SWA_FULL_TOKENS_RATIO
        cell = int(round(per_layer * n_full + swa_ratio * per_swa * n_swa))
        notes.append("SGLang hybrid SWA pool: cell = full + 0.8 x sliding layers (--swa-full-tokens-ratio "
                     "fallback); SWA pools were not formula-checked against logs")
    else:
        cell = int(round(per_layer * n_full + per_swa * n_swa))
    logged = int(round(per_layer * n_full)) if swa_ratio else cell
    layers = n_full + n_swa
    if draft_layers and traits_for(launch.engine_version).draft_weights_before_pool:
        folded = cell + int(cell * draft_layers / layers)
        return KvGeometry(name, elem, per_layer, cell, logged, folded, 0, swa_ratio, tuple(notes))
    late = int(round(per_layer * draft_layers))
    return KvGeometry(name, elem, per_layer, cell, logged, cell, late, swa_ratio, tuple(notes))


def state_bytes(shape: ModelShape, tp: int) -> int:
    """Recurrent state of one request on one GPU (conv bf16 + ssm, all state layers); 0 if none."""
    conv, ssm = state_bytes_per_request(shape, tp)
    return conv + ssm
