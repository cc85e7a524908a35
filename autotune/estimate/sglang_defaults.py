"""SGLang's argument defaults that move memory: mem_fraction_static, chunked prefill,
CUDA-graph batch sizes, speculative knobs, max running requests (engines.md §3.3–3.4).

`resolve(shape, launch)` turns a `Launch` with `None`s into the values SGLang would run
with. 0.5.23 and 0.5.9 differ in the reserve behind the default fraction: 0.5.23 adds the
prefill-graph buckets (breakable prefill graphs are on by default on CUDA) and counts the
draft before the pool; 0.5.9 has no prefill graphs and adds 2 GiB for EAGLE/NEXTN
because its draft later comes out of the slack.
"""

from __future__ import annotations

from dataclasses import dataclass

from autotune.estimate.launch import Launch
from autotune.modelshape import ModelShape

SPEC_DEFAULT_MRR = 48  # "Max running requests is reset to 48 for speculative decoding"
SPEC_DEFAULTS = (3, 1, 4)  # (steps, topk, draft tokens) SGLang picks for an MTP/EAGLE draft


@dataclass(frozen=True)
class SglangArgs:
    """Resolved server args that size memory (SGLang's own resolution, as we model it)."""

    mem_fraction: float
    default_mem_fraction: float
    context_len: int
    chunked_prefill_size: int
    decode_bs: tuple[int, ...]
    prefill_buckets: tuple[int, ...]
    max_running_requests: int | None
    draft_tokens: int
    draft_steps: int
    draft_topk: int
    notes: tuple[str, ...]


def chunk_and_decode_max_bs(gpu_mem_gib: float, tp: int, version: str = "0.5.23") -> tuple[int, int]:
    """(chunked_prefill_size, decode max_bs) defaults by GPU capacity (§3.4 table; 0.5.9's
    20-35 GiB row is 2048 / 24 or 80, per its server_args.py)."""
    if gpu_mem_gib < 20:
        return 2048, 8
    if gpu_mem_gib < 35:
        if version == "0.5.9":
            return 2048, 24 if tp < 4 else 80
        return 4096, 48 if tp < 4 else 160
    if gpu_mem_gib < 60:
        return 4096, 32 if tp < 4 else 160
    if gpu_mem_gib < 160:
        return 8192, 256 if tp < 4 else 512
    return 16384, 512


def decode_batch_sizes(max_bs: int, speculative: bool, version: str = "0.5.23") -> tuple[int, ...]:
    """Decode (or verify) CUDA-graph batch sizes captured up to `max_bs` (0.5.23 adds `max_bs`)."""
    if speculative:
        sizes = [*range(1, 9), *range(10, 33, 2), *range(40, 65, 4), *range(72, 257, 8),
                 *range(272, max_bs + 1, 16)]
    else:
        sizes = [1, 2, 4, 8, 12, *range(16, 257, 8), *range(272, 512, 16), *range(512, max_bs + 1, 32)]
    kept = [bs for bs in sizes if bs <= max_bs]
    return tuple(kept + [max_bs] if version != "0.5.9" and max_bs not in kept else kept)


def prefill_buckets(max_tokens: int) -> tuple[int, ...]:
    """Prefill CUDA-graph token buckets up to `max_tokens` (0.5.23 breakable prefill graph)."""
    sizes = [*range(4, 33, 4), *range(48, 257, 16), *range(288, 513, 32), *range(576, 1025, 64),
             *range(1280, 4097, 256), *range(4608, max_tokens + 1, 512)]
    return tuple(t for t in sizes if t <= max_tokens)


def default_mem_fraction(version: str, gpu_mem_mib: int, tp: int, chunked: int, decode_max_bs: int,
                         n_buckets: int, mla: bool, speculative: bool, graphs: bool) -> float:
    """SGLang's automatic mem_fraction_static, rounded to 3 decimals as SGLang does.

    Reserve in MiB: 512 + 1.5 per activation token + tp/8 GiB + graph reserve, at least
    10 GiB on cards over 60 GiB; 0.5.9 adds 2 GiB when EAGLE/NEXTN is on (the only draft
    a `Launch` describes; SGLang adds 6 GiB for STANDALONE and nothing for NGRAM).
    `decode_max_bs` is the graph max_bs before the speculative hook caps requests at 48.
    """
    reserved = 512 + max(chunked, 2048) * 1.5 + tp / 8 * 1024
    if graphs or version == "0.5.9":  # 0.5.9 reserves it even with --disable-cuda-graph
        reserved += decode_max_bs * 2
        if graphs and version != "0.5.9":
            reserved += 1536 if mla else n_buckets * 8
    if gpu_mem_mib > 60 * 1024:
        reserved = max(reserved, 10 * 1024)
    if version == "0.5.9" and speculative:
        reserved += 2048
    return round((gpu_mem_mib - reserved) / gpu_mem_mib, 3)


def resolve(shape: ModelShape, launch: Launch) -> SglangArgs:
    """The memory-relevant args SGLang would run `launch` with."""
    notes: list[str] = []
    spec = launch.speculative
    steps, topk, draft = SPEC_DEFAULTS
    steps, topk, draft = launch.draft_steps or steps, launch.draft_topk or topk, launch.draft_tokens or draft
    mrr = launch.max_running_requests
    if spec and mrr is None:
        mrr = SPEC_DEFAULT_MRR
        notes.append("speculative decoding: max_running_requests defaults to 48")
    version = launch.engine_version
    chunk_default, bs_default = chunk_and_decode_max_bs(launch.gpu_mem_mib / 1024, launch.tp, version)
    chunked = launch.chunked_prefill_size if launch.chunked_prefill_size is not None else chunk_default
    max_bs = launch.cuda_graph_max_bs or bs_default
    # SGLang sizes the default fraction before its speculative hook: only a user's request
    # cap lowers a default max_bs there, and only on 0.5.23.
    if version != "0.5.9" and launch.cuda_graph_max_bs is None and launch.max_running_requests is not None:
        max_bs = min(max_bs, launch.max_running_requests)
    reserve_bs = max_bs
    if mrr is not None:  # the graph runner captures no size above the request pool
        max_bs = min(max_bs, mrr)
    graphs = launch.cuda_graphs
    decode_bs = decode_batch_sizes(max_bs, spec, version) if graphs else ()
    buckets: tuple[int, ...] = ()
    if graphs and launch.engine_version != "0.5.9":
        largest = chunked if chunked > 0 else 8192  # prefill graph max_bs follows the chunk size
        buckets = prefill_buckets(min(largest, 8192) if shape.is_mla else largest)
    default = default_mem_fraction(launch.engine_version, launch.gpu_mem_mib, launch.tp, chunked,
                                   reserve_bs, len(buckets), shape.is_mla, spec, graphs)
    if launch.mem_fraction is None:
        notes.append(f"mem_fraction_static: SGLang {launch.engine_version}'s default for "
                     f"{launch.gpu_mem_mib} MiB GPUs = {default}")
    context = launch.context_length or shape.max_context
    return SglangArgs(
        mem_fraction=launch.mem_fraction if launch.mem_fraction is not None else default,
        default_mem_fraction=default, context_len=context, chunked_prefill_size=chunked,
        decode_bs=decode_bs, prefill_buckets=buckets, max_running_requests=mrr,
        draft_tokens=draft if spec else 0, draft_steps=steps, draft_topk=topk, notes=tuple(notes),
    )
