"""What one launch's logged figures teach about the next launch on the same machine.

`learn(prior, figures, model, launch)` reduces the figures (names from
`autotune.records.FIGURES`, units in the names; any may be missing) to an `Observation`
and returns a new `Machine` holding it. The key move is the SGLang pool anchor: with the
fraction the launch ran at, its logged free memory F and its KV pool, everything used
before the pool follows to within one KV token,

    used_before_pool = F · mfs − (kv_tokens · cell + state pool)          (GiB)

so the next prediction at another fraction, context or feature set is exact arithmetic
on the same anchor instead of on 2-decimal "mem usage" figures and priors. The anchor
wins over the weight figures when both exist: it also holds whatever the rules do not
model between weights and pool (a VLM's multimodal reservation, say). A logged K/V size
that disagrees with the rules' bytes per token beyond its rounding replaces them.
vLLM's anchor is its own budget identity: non-KV use = ceil(capacity · util) − available
KV memory. A launch that died early still teaches what it logged (F, weights, the
engine's "raise above" bound). Several launches combine as means per (model, engine,
TP); see `Machine`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path

from autotune.engines.base import Budget
from autotune.engines.sglang.traits import traits_for
from autotune.estimate import inputs, sglang_pool, vllm_pool
from autotune.estimate.kvcache import KvGeometry
from autotune.estimate.launch import Launch
from autotune.estimate.machine import Machine, Observation
from autotune.estimate.sglang_pool import SglangInputs
from autotune.estimate.weights import analytic_weights
from autotune.modelshape import ModelShape
from autotune.records import GIB

# A derived quantity that disagrees with the logged weights by more than this is not the
# pre-pool memory the rules assume (e.g. 0.5.9's "last weight load" is the late draft).
CONSISTENCY_GIB = 0.25


def learn(prior: Machine, figures: Mapping[str, float], model: str | Path | ModelShape,
          launch: Launch, served: bool | None = None, serving_peak_gib: float | None = None) -> Machine:
    """A machine that also knows what `launch` of `model` logged (`figures`, per GPU).

    `launch` must describe the launch as it ran (fraction, context, speculative, TP...);
    a `mem_fraction_static` / `gpu_memory_utilization` figure overrides its fraction.
    `served`: True when the launch served its probe (READY), False when it ran out of memory
    serving it (OOM_RUNTIME), None otherwise: what was free after start-up then bounds the
    serving need from above or below. `serving_peak_gib`: a served launch's measured peak above
    its memory after start-up (per GPU; a lower bound of the need). Never raises for missing
    figures: what is absent teaches nothing.
    """
    ctx = inputs.context(model, launch, prior)
    figs = {k: float(v) for k, v in figures.items() if v is not None and math.isfinite(float(v))}
    obs = _OBSERVERS[launch.rules.budget](ctx, figs, served)
    if served and serving_peak_gib is not None and obs.serving_key is not None:
        obs = replace(obs, served_peak_gib=max(0.0, serving_peak_gib))
    taught = replace(prior, observations=(*prior.observations, obs))
    if launch.rules.budget is Budget.STATIC_FRACTION and "available_gpu_mem_gib" in figs:
        # what start-up left free against the prediction from everything else this launch taught
        inp, _, _ = inputs.sglang(inputs.context(model, launch, taught))
        frac = figs.get("mem_fraction_static", inp.args.mem_fraction)
        pool = sglang_pool.size_pool(replace(inp, unmodelled_gib=0.0), frac)
        predicted = pool.slack_gib - (pool.slack_needed_gib - inp.activation_gib)
        obs = replace(obs, unmodelled_gib=predicted - figs["available_gpu_mem_gib"])
        taught = replace(prior, observations=(*prior.observations, obs))
    return taught


def _observe_sglang(ctx: inputs.Context, figs: dict[str, float], served: bool | None) -> Observation:
    launch = ctx.launch
    inp, geo, (_, draft_prior) = inputs.sglang(ctx)
    aw = analytic_weights(ctx.shape, launch.tp)
    total = launch.gpu_mem_gib
    free = figs.get("avail_before_weights_gib")
    if free is None and "init_mem_usage_gib" in figs:
        free = total - figs["init_mem_usage_gib"]
    frac = figs.get("mem_fraction_static", inp.args.mem_fraction)
    preload = launch.speculative and traits_for(launch.engine_version).draft_weights_before_pool
    draft = figs.get("draft_weights_gib", draft_prior if launch.speculative else 0.0)
    used = _used_before_pool(figs, free, draft if preload else 0.0)
    cell_scale = _cell_scale(figs.get("kv_gib"), figs.get("kv_tokens"), geo, 0.0)
    cell = int(round(geo.pool_cell_bytes * cell_scale)) if cell_scale else inp.cell_bytes
    anchor = _pool_anchor(inp, figs, free, frac, cell)
    precise = anchor is not None
    if anchor is not None:
        used = anchor
    target = used - (draft if preload else 0.0) if used is not None else figs.get("weights_gib")
    free_after = figs.get("available_gpu_mem_gib")
    served_gib = overrun_gib = None
    if served is True and free_after is not None:
        served_gib = free_after
    elif served is False and free_after is not None and "oom_tried_gib" in figs:
        held = max(0.0, free_after - figs.get("oom_free_gib", free_after))  # taken by running requests by then
        overrun_gib = held + figs["oom_tried_gib"]
    return Observation(
        model_id=ctx.mid, engine=launch.engine, engine_version=launch.engine_version, tp=launch.tp,
        pre_weights_overhead_gib=total - free if free is not None else None,
        target_weights_gib=target, target_precise=precise, target_analytic_gib=aw.target_gib,
        draft_weights_gib=figs.get("draft_weights_gib"), draft_analytic_gib=aw.draft_gib,
        graph_key=inputs.sglang_graph_key(launch, inp.args), graph_gib=figs.get("graph_gib"),
        graph_prior_gib=inputs.sglang_graph_prior(ctx.machine, inp.args, launch.speculative),
        serving_key=inp.args.chunked_prefill_size, served_gib=served_gib, overrun_gib=overrun_gib,
        kv_cell_scale=cell_scale,
    )


def _used_before_pool(figs: dict[str, float], free: float | None, preloaded_draft: float) -> float | None:
    """GiB used between F and the pool sizing, from the weight figures (2-decimal precision)."""
    weights = figs.get("weights_gib")
    expected = weights + preloaded_draft if weights is not None else None
    after = figs.get("avail_after_weights_gib")
    if after is None and free is not None and "min_mem_fraction_static" in figs:
        after = free * (1 - figs["min_mem_fraction_static"])  # 0.5.23: min viable = 1 − available/F
    if free is not None and after is not None:
        used = free - after
        if expected is None or abs(used - expected) <= CONSISTENCY_GIB:
            return used
    return expected


def _pool_anchor(inp: SglangInputs, figs: dict[str, float], free: float | None, frac: float,
                 cell: int) -> float | None:
    """Pre-pool GiB implied by the pool the launch built, or None without the figures."""
    tokens = figs.get("kv_tokens")
    if free is None or not tokens:
        return None
    page = inp.launch.page_size
    rest = (tokens + page / 2) * cell  # the pool floors rest to whole pages: take the middle
    if inp.state_bytes:
        slots = figs.get("mamba_slots")
        if slots is None:
            return None
        rest += _state_pool_bytes(inp, int(slots))
    return free * frac - rest / GIB


def _state_pool_bytes(inp: SglangInputs, slots: int) -> float:
    """Bytes the hybrid state pool took from the KV budget at `slots` (slot pool + speculative
    intermediates; 0.5.9 takes its padding slot from the slack instead)."""
    per_req, d = inp.state_bytes, inp.args.draft_tokens
    pool = (slots if inp.traits.padding_slot_from_slack else slots + 1) * per_req
    if not inp.launch.speculative:
        return float(pool)
    if inp.traits.spec_state_reserved_before_split:
        return float(pool + per_req * (inp.args.max_running_requests or 48) * d)
    return float(pool + (slots // inp.ratio) * d * per_req)


def _cell_scale(kv_gib: float | None, tokens: float | None, geo: KvGeometry, slack_tokens: float) -> float | None:
    """Measured/predicted bytes per token when the pool line disagrees with the rules.

    The measured cell carries the rounding of two 2-decimal GiB figures (and, for vLLM, the
    block floor); it is snapped to a whole number of per-layer units when that is within
    the rounding, since a cell is always made of whole layers.
    """
    if not kv_gib or not tokens or geo.target_cell_bytes <= 0:
        return None
    measured = kv_gib * GIB / tokens
    tol = max(0.011 / kv_gib + slack_tokens / tokens, 1e-3)
    if any(abs(measured / c - 1) <= tol for c in (geo.target_cell_bytes, geo.logged_cell_bytes) if c > 0):
        return None
    units = measured / geo.per_layer_bytes if geo.per_layer_bytes > 0 else 0.0
    if units and abs(units - round(units)) <= tol * units:
        measured = round(units) * geo.per_layer_bytes
    return measured / geo.target_cell_bytes


def _observe_vllm(ctx: inputs.Context, figs: dict[str, float], served: bool | None) -> Observation:
    launch = ctx.launch
    inp, geo, (target_prior, draft_prior), other_prior = inputs.vllm(ctx)
    aw = analytic_weights(ctx.shape, launch.tp)
    total = launch.gpu_mem_gib
    util = figs.get("gpu_memory_utilization", launch.mem_fraction_static or vllm_pool.DEFAULT_UTIL)
    avail, tokens = figs.get("kv_avail_gib"), figs.get("kv_tokens")
    cell_scale = None
    if not inp.state_bytes:
        cell_scale = _cell_scale(avail, tokens, geo, vllm_pool.BLOCK)
        if avail is None and tokens:
            avail = (tokens + vllm_pool.BLOCK / 2) * inp.cell_bytes / GIB
    draft = figs.get("draft_weights_gib", draft_prior if launch.speculative else 0.0)
    loaded = figs.get("weights_gib")  # "Model loading took": assumed to include the drafter
    target = loaded - draft if loaded is not None else None
    other = None
    if avail is not None:
        non_kv = math.ceil(total * GIB * util) / GIB - avail
        other = non_kv - (loaded if loaded is not None else target_prior + draft)
    return Observation(
        model_id=ctx.mid, engine=launch.engine, engine_version=launch.engine_version, tp=launch.tp,
        target_weights_gib=target, target_analytic_gib=aw.target_gib,
        draft_weights_gib=figs.get("draft_weights_gib"), draft_analytic_gib=aw.draft_gib,
        kv_cell_scale=cell_scale, vllm_other_gib=other, vllm_other_prior_gib=other_prior,
    )


_OBSERVERS = {Budget.STATIC_FRACTION: _observe_sglang, Budget.PROFILED: _observe_vllm}
