"""SGLang's KV/state pool sizing at a given mem_fraction_static (engines.md §3.1–3.3, addendum).

    rest = avail_after_weights − F · (1 − mfs)           F: free before weights (min over ranks)

0.5.23 loads the draft before this, so `avail_after_weights` already lacks it; 0.5.9 loads
the draft (weights, its own KV pool, its graphs) afterwards, out of the slack F·(1−mfs).
Hybrid models carve the recurrent-state pool out of `rest` first:
- 0.5.9 with speculative decoding reserves `per_req × max_running_requests × draft_tokens`
  for verification states *before* the split;
- the split gives the state pool `rest · r/(1+r)` (r = --mamba-full-memory-ratio, 0.9):
  `slots = (budget − per_req) // per_req` (+1 slot allocated), or with speculative decoding
  on 0.5.23 `slots = (budget − per_req(1+D)) // (per_req(1 + D/ratio))`, whose intermediate
  states `(slots // ratio) · D · per_req` are subtracted with the pool;
- running requests are capped at `slots // ratio` (ratio 3 with the radix cache on 0.5.23,
  1 without it and on 0.5.9).
What is left, floored to whole cells and pages, is the KV pool. The req_to_token pool
(int32, `(mrr+1) × (context + 4 + D)`), CUDA graphs and activations come out of the slack.
"""

from __future__ import annotations

from dataclasses import dataclass

from autotune.engines.sglang.rules import SPEC_DEFAULT_MRR, running_requests
from autotune.engines.sglang.traits import SglangTraits, traits_for
from autotune.estimate.launch import Launch, smallest_fraction
from autotune.estimate.sglang_defaults import SglangArgs
from autotune.records import GIB


@dataclass(frozen=True)
class SglangInputs:
    """Everything pool sizing needs, per GPU. Bytes are ints, GiB are floats."""

    launch: Launch
    args: SglangArgs
    free_gib: float  # F
    pre_pool_gib: float  # used before the pool: target (+ draft on 0.5.23) weights and the rest
    late_draft_gib: float  # 0.5.9: draft weights loaded after the pool, from the slack
    cell_bytes: int  # per token, as the pool divides (draft folded in on 0.5.23)
    late_cell_bytes: int  # 0.5.9: draft pool bytes per token, from the slack
    state_bytes: int  # recurrent state per request (0 for non-hybrids)
    graph_gib: float  # CUDA graphs (target + draft), from the slack
    activation_gib: float  # serving need: prefill activation peak and running requests, from the slack
    unmodelled_gib: float = 0.0  # start-up's other use of the slack, as launches showed it (may be < 0)

    @property
    def traits(self) -> SglangTraits:
        return traits_for(self.launch.engine_version)

    @property
    def ratio(self) -> int:
        """State slots per running request."""
        return 1 if self.launch.disable_radix_cache else self.traits.radix_cache_ratio


@dataclass(frozen=True)
class SglangPool:
    """The pools SGLang would allocate at one fraction; `failure` names why it would not start."""

    mem_fraction: float
    kv_gib: float
    kv_tokens: int
    mamba_slots: int
    state_pool_gib: float
    max_running_requests: int
    req_to_token_gib: float
    slack_gib: float
    slack_needed_gib: float
    failure: str | None


def size_pool(inp: SglangInputs, mem_fraction: float) -> SglangPool:
    """The pools at `mem_fraction` (SGLang's arithmetic; no memory is touched)."""
    slack = inp.free_gib * (1 - mem_fraction)
    rest = (inp.free_gib - inp.pre_pool_gib - slack) * GIB
    slots, state, failure = 0, 0.0, None
    if inp.state_bytes:
        rest, slots, state, failure = _state_pool(inp, rest)
    tokens = 0
    if failure is None and rest <= 0:
        failure = "loaded weights leave no GPU memory for the KV cache"
    if failure is None:
        page = inp.launch.page_size
        tokens = int(rest // inp.cell_bytes) // page * page
        if tokens <= 1:
            failure = "not enough memory for one KV page"
    mrr = _running_requests(inp, tokens, slots) if failure is None else 0
    if failure is None and mrr <= 0:
        failure = "no room for a single running request"
    r2t = (mrr + 1) * (inp.args.context_len + 4 + inp.args.draft_tokens) * 4 / GIB
    needed = (inp.graph_gib + inp.activation_gib + r2t + inp.late_draft_gib + tokens * inp.late_cell_bytes / GIB
              + inp.unmodelled_gib)
    return SglangPool(mem_fraction, tokens * inp.cell_bytes / GIB, tokens, slots, state / GIB, mrr, r2t,
                      slack, needed, failure)


def _state_pool(inp: SglangInputs, rest: float) -> tuple[float, int, float, str | None]:
    """(rest left for KV, slots, state pool bytes incl. intermediate, failure) of a hybrid."""
    launch, per_req, d = inp.launch, inp.state_bytes, inp.args.draft_tokens
    spec = launch.speculative
    interm = 0.0
    if inp.traits.spec_state_reserved_before_split and spec:  # verification states are reserved before the split
        interm = per_req * (inp.args.max_running_requests or SPEC_DEFAULT_MRR) * d
        rest -= interm
    r = launch.mamba_full_memory_ratio
    budget = rest * r / (1 + r)
    if launch.max_mamba_cache_size:
        slots = launch.max_mamba_cache_size
    elif launch.disable_radix_cache and inp.args.max_running_requests:  # the speculative 48 counts too
        slots = inp.args.max_running_requests
    elif spec and not inp.traits.padding_slot_from_slack:
        slots = int((budget - per_req * (1 + d)) // (per_req * (1 + d / inp.ratio)))
    elif inp.traits.padding_slot_from_slack:  # 0.5.9: int(budget // per_req); its padding slot comes out of the slack
        slots = int(budget // per_req)
    else:
        slots = int((budget - per_req) // per_req)
    if slots <= 0:
        if not inp.traits.fails_early_without_slots and rest <= 0:
            return rest, 0, interm, "loaded weights leave no GPU memory for the KV cache"
        return rest, 0, interm, "not enough GPU memory for the hybrid state cache"
    if slots // inp.ratio <= 0:
        return rest, slots, interm, "hybrid state cache too small to serve any request"
    pool = (slots + 1) * per_req
    if spec and not inp.traits.padding_slot_from_slack:
        interm = (slots // inp.ratio) * d * per_req
    left = rest - slots * per_req if inp.traits.padding_slot_from_slack else rest - pool - interm  # 0.5.9: padding slot from the slack
    return left, slots, pool + interm, None


def _running_requests(inp: SglangInputs, tokens: int, slots: int) -> int:
    """max_running_requests SGLang resolves once the pool is sized (§3.3)."""
    n = running_requests(tokens, inp.args.context_len, inp.args.max_running_requests, inp.traits)
    if inp.state_bytes:
        n = min(n, slots // inp.ratio)
    return n


def fits_goal(inp: SglangInputs, pool: SglangPool) -> bool:
    """True when the pool holds `concurrency` requests of the full context at once."""
    need = inp.args.context_len * inp.launch.concurrency
    return pool.failure is None and pool.kv_tokens >= need and pool.max_running_requests >= inp.launch.concurrency


def min_mem_fraction(inp: SglangInputs) -> float | None:
    """Smallest fraction (3 decimals) whose pool meets the goal; None if none below 0.999 does."""
    return smallest_fraction(lambda frac: fits_goal(inp, size_pool(inp, frac)))


def max_mem_fraction(inp: SglangInputs) -> float | None:
    """Largest fraction (3 decimals) whose slack still covers graphs, activations and the rest.

    Rests on the graph and activation priors until a launch has logged them.
    """
    def ok(f: float) -> bool:
        pool = size_pool(inp, f)
        return pool.slack_gib >= pool.slack_needed_gib

    if not ok(0.0):
        return None
    lo, hi = 0.0, 0.999
    if ok(hi):
        return hi
    while hi - lo > 1e-5:
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if ok(mid) else (lo, mid)
    return int(lo * 1000) / 1000

