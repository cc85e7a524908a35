"""SGLang's argument defaults that move memory: mem_fraction_static, chunked prefill,
CUDA-graph batch sizes, speculative knobs, max running requests (engines.md §3.3–3.4).

`resolve(shape, launch)` turns a `Launch` with `None`s into the values SGLang would run
with, by SGLang's public rules (`engines/sglang/rules.py`, shared with the simulator).
0.5.23 and 0.5.9 differ in the reserve behind the default fraction: 0.5.23 adds the
prefill-graph buckets (breakable prefill graphs are on by default on CUDA) and counts the
draft before the pool; 0.5.9 has no prefill graphs and adds 2 GiB for EAGLE/NEXTN
because its draft later comes out of the slack.
"""

from __future__ import annotations

from dataclasses import dataclass

from autotune.engines.sglang import rules
from autotune.engines.sglang.traits import traits_for
from autotune.estimate.launch import Launch
from autotune.modelshape import ModelShape


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


def resolve(shape: ModelShape, launch: Launch) -> SglangArgs:
    """The memory-relevant args SGLang would run `launch` with."""
    notes: list[str] = []
    spec = launch.speculative
    t = traits_for(launch.engine_version)
    steps, topk, draft, mrr, reset = rules.speculative_settings(
        launch.speculative_num_steps, launch.speculative_eagle_topk, launch.speculative_num_draft_tokens,
        launch.max_running_requests, spec)
    if reset:
        notes.append("speculative decoding: max_running_requests defaults to 48")
    chunk_default, bs_default = rules.chunk_and_decode_max_bs(launch.gpu_mem_mib, launch.tp, t)
    chunked = launch.chunked_prefill_size if launch.chunked_prefill_size is not None else chunk_default
    # SGLang sizes the default fraction before its speculative hook
    max_bs = rules.default_graph_max_bs(bs_default, launch.cuda_graph_max_bs, launch.max_running_requests, t)
    reserve_bs = max_bs
    if mrr is not None:  # the graph runner captures no size above the request pool
        max_bs = min(max_bs, mrr)
    graphs = not launch.disable_cuda_graph
    decode_bs = tuple(rules.decode_batch_sizes(max_bs, spec, t)) if graphs else ()
    buckets: tuple[int, ...] = ()
    if graphs and t.default_prefill_graphs:
        buckets = tuple(rules.prefill_buckets(rules.prefill_graph_max_tokens(chunked, shape.is_mla)))
    # the draft is the model's own MTP/NextN layers, whichever name the algorithm goes by
    default = rules.default_mem_fraction(t, launch.gpu_mem_mib, launch.tp, chunked, reserve_bs, len(buckets),
                                         shape.is_mla, launch.speculative_algorithm if spec else None, graphs)
    if launch.mem_fraction_static is None:
        notes.append(f"mem_fraction_static: SGLang {launch.engine_version}'s default for "
                     f"{launch.gpu_mem_mib} MiB GPUs = {default}")
    context = launch.context_length or shape.max_context
    return SglangArgs(
        mem_fraction=launch.mem_fraction_static if launch.mem_fraction_static is not None else default,
        default_mem_fraction=default, context_len=context, chunked_prefill_size=chunked,
        decode_bs=decode_bs, prefill_buckets=buckets, max_running_requests=mrr,
        draft_tokens=draft if spec else 0, draft_steps=steps, draft_topk=topk, notes=tuple(notes),
    )
