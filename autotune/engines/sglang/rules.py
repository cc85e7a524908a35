"""SGLang's public memory rules, written once: what its `server_args.py` and model runner
compute from the flags and the GPU (engines.md §3.2-§3.4; checked against the real source by
`make fidelity`). Both the estimator (`estimate/sglang_defaults.py`, `sglang_pool.py`) and the
simulated server (`sim/sglang_args.py`, `sglang_engine.py`) use these; what SGLang never logs
(CUDA context, NCCL, activations, workspace) is the simulator's alone (`sim/costs.py`).

Pure functions of the traits of a release (`traits.py`); imports only the base layer.
"""

from __future__ import annotations

from autotune.engines.kvdtype import ELEMENT_BYTES
from autotune.engines.sglang.traits import SglangTraits

SPEC_DEFAULT_MRR = 48  # "Max running requests is reset to 48 for speculative decoding"
SPEC_DEFAULTS = (3, 1, 4)  # (steps, topk, draft tokens) SGLang picks for an MTP/EAGLE draft
PREFILL_GRAPH_MLA_MAX_TOKENS = 8192  # MLA models cap the breakable prefill graph's largest bucket
SPEC_RESERVE_MIB = {"STANDALONE": 6144, "NGRAM": 0}  # 0.5.9's default-fraction reserve per draft; others 2048
SPEC_RESERVE_OTHER_MIB = 2048
WEIGHTS_OVERHEAD_PRIOR_GIB = 0.1  # "mem usage" over the parameter bytes (memory-model §3): the estimator's prior

# --kv-cache-dtype -> (torch dtype SGLang logs, bytes per element from the one table, scales included)
_TORCH_DTYPES = {
    "bf16": "torch.bfloat16", "bfloat16": "torch.bfloat16", "fp8_e4m3": "torch.float8_e4m3fn",
    "fp8_e5m2": "torch.float8_e5m2", "mxfp8": "torch.float8_e4m3fn", "nvfp4": "torch.float4_e2m1fn_x2",
    "fp4_e2m1": "torch.float4_e2m1fn_x2", "fp4_mx_block16": "torch.float4_e2m1fn_x2",
}
KV_DTYPES: dict[str, tuple[str, float]] = {name: (torch, ELEMENT_BYTES[name]) for name, torch in _TORCH_DTYPES.items()}


def speculative_settings(steps: int | None, topk: int | None, draft_tokens: int | None,
                         max_running_requests: int | None, speculative: bool) -> tuple[int, int, int, int | None, bool]:
    """(steps, topk, draft tokens, max_running_requests, reset): the draft knobs default to
    `SPEC_DEFAULTS` where not given; with speculative decoding on and no request cap asked, the cap
    is reset to 48, which SGLang logs (`reset` True)."""
    d_steps, d_topk, d_draft = SPEC_DEFAULTS
    reset = speculative and max_running_requests is None
    mrr = SPEC_DEFAULT_MRR if reset else max_running_requests
    return steps or d_steps, topk or d_topk, draft_tokens or d_draft, mrr, reset


def chunk_and_decode_max_bs(gpu_mem_mib: int, tp: int, traits: SglangTraits) -> tuple[int, int]:
    """(chunked_prefill_size, decode graph max_bs) defaults by GPU capacity (engines.md §3.4)."""
    gib = gpu_mem_mib / 1024
    if gib < 20:
        return 2048, 8
    if gib < 35:
        chunk, small_tp, large_tp = traits.mid_gpu_chunk_and_bs
        return chunk, small_tp if tp < 4 else large_tp
    if gib < 60:
        return 4096, 32 if tp < 4 else 160
    if gib < 160:
        return 8192, 256 if tp < 4 else 512
    return 16384, 512


def default_graph_max_bs(default_bs: int, asked_max_bs: int | None, max_running_requests: int | None,
                         traits: SglangTraits) -> int:
    """The decode graph max_bs before the speculative hook: the asked one, else the GPU default,
    which a user's request cap lowers on releases that do so."""
    if asked_max_bs is not None:
        return asked_max_bs
    if traits.request_cap_lowers_default_graph_bs and max_running_requests is not None:
        return min(default_bs, max_running_requests)
    return default_bs


def decode_batch_sizes(max_bs: int, speculative: bool, traits: SglangTraits) -> list[int]:
    """The decode (or verify) CUDA-graph batch sizes SGLang generates up to `max_bs`."""
    if speculative:
        sizes = [*range(1, 9), *range(10, 33, 2), *range(40, 65, 4), *range(72, 257, 8), *range(272, max_bs + 1, 16)]
    else:
        sizes = [1, 2, 4, 8, 12, *range(16, 257, 8), *range(272, 512, 16), *range(512, max_bs + 1, 32)]
    sizes = [bs for bs in sizes if bs <= max_bs]
    return sizes + [max_bs] if traits.decode_bs_includes_max and max_bs not in sizes else sizes


def prefill_graph_max_tokens(chunked: int, mla: bool) -> int:
    """The largest prefill-graph bucket: the chunk size (8192 when chunking is off), capped for MLA."""
    largest = chunked if chunked > 0 else 8192
    return min(largest, PREFILL_GRAPH_MLA_MAX_TOKENS) if mla else largest


def prefill_buckets(max_tokens: int) -> list[int]:
    """Prefill CUDA-graph token buckets up to `max_tokens` (the breakable prefill graph)."""
    sizes = [*range(4, 33, 4), *range(48, 257, 16), *range(288, 513, 32), *range(576, 1025, 64),
             *range(1280, 4097, 256), *range(4608, max_tokens + 1, 512)]
    return [t for t in sizes if t <= max_tokens]


def default_mem_fraction(traits: SglangTraits, gpu_mem_mib: int, tp: int, chunked: int, decode_max_bs: int,
                         n_buckets: int, mla: bool, spec_algorithm: str | None, graphs: bool) -> float:
    """SGLang's automatic mem_fraction_static, rounded to 3 decimals as SGLang does.

    Reserve in MiB: 512 + 1.5 per activation token + tp/8 GiB + the graph reserve, at least
    10 GiB on cards over 60 GiB, plus (on releases that do so) a draft reserve. `decode_max_bs`
    is the graph max_bs before the speculative hook caps requests at 48 (SGLang sizes this first).
    """
    reserved = 512 + max(chunked, 2048) * 1.5 + tp / 8 * 1024
    if graphs or traits.graph_reserve_without_graphs:
        reserved += decode_max_bs * 2
    if graphs and traits.default_prefill_graphs:
        reserved += 1536 if mla else n_buckets * 8
    if gpu_mem_mib > 60 * 1024:
        reserved = max(reserved, 10 * 1024)
    if traits.spec_reserve_in_default_fraction and spec_algorithm:
        reserved += SPEC_RESERVE_MIB.get(spec_algorithm, SPEC_RESERVE_OTHER_MIB)
    return round((gpu_mem_mib - reserved) / gpu_mem_mib, 3)


def running_requests(tokens: int, context_len: int, asked: int | None, traits: SglangTraits) -> int:
    """max_running_requests once the KV pool holds `tokens` (before a hybrid's state-pool cap):
    the asked cap (kept as asked where the request pool is sized by it, else at most tokens // 2),
    or clamp(tokens / context * 512, 2048, 4096), at most tokens // 2."""
    if asked and traits.keeps_asked_request_cap:
        return max(1, asked)
    if asked:
        return min(max(1, asked), tokens // 2)
    return min(max(min(int(tokens / context_len * 512), 4096), 2048), tokens // 2)


def captured_bs(sizes: list[int], max_running_requests: int) -> list[int]:
    """What the graph runner captures: sizes up to the request pool, plus the pool size itself."""
    kept = {bs for bs in sizes if bs <= max_running_requests}
    if sizes and max(sizes) > max_running_requests:
        kept.add(max_running_requests)
    return sorted(kept)
