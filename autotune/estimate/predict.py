"""`estimate()`: what a launch config needs per GPU, and whether it fits — before launching.

Pure arithmetic over config.json, the engine's rules and the machine's unknowns (priors
until `learn()` has seen a launch). Nothing here touches a GPU, and nothing imports the
simulated server: the estimator must learn the simulator's hidden costs from logs, as it
must learn a real machine's.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from autotune.engines.base import Budget
from autotune.engines.registry import DEFAULT_ENGINE
from autotune.estimate import inputs, sglang_pool, vllm_pool
from autotune.estimate.launch import Launch
from autotune.estimate.machine import PRIORS_DOC, Machine
from autotune.estimate.result import Estimate, Verdict
from autotune.modelshape import ModelShape


@dataclass(frozen=True)
class _Sized:
    """The pools one engine would build, in the fields an Estimate reports."""

    kv_tokens: int
    kv_gib: float
    mamba_slots: int
    max_running_requests: int
    slack_gib: float
    slack_needed_gib: float


def estimate(
    model: str | Path | ModelShape, *, gpu_mem_gib: float, gpus: int = 1, engine: str = DEFAULT_ENGINE,
    engine_version: str = "", concurrency: int = 1, machine: Machine | None = None, tp: int = 1,
    mem_fraction_static: float | None = None, context_length: int | None = None, speculative: bool = False,
    speculative_num_steps: int | None = None, speculative_eagle_topk: int | None = None,
    speculative_num_draft_tokens: int | None = None, max_running_requests: int | None = None,
    kv_cache_dtype: str = "auto",
) -> Estimate:
    """Estimate one launch of `model` (a model directory, a config.json, or a ModelShape).

    The launch arguments are `LaunchConfig`'s, under its names: `mem_fraction_static` is SGLang's
    --mem-fraction-static or vLLM's --gpu-memory-utilization (None: the engine's default);
    `context_length` None is the model's maximum. `gpu_mem_gib` is each GPU's capacity;
    `concurrency` is how many full-context requests must fit at once; `engine_version` '' is
    the engine's current release (SGLang 0.5.23, vLLM 0.33).

    Raises ModelConfigError for an unusable config.json, SpecError for arguments the
    engine would reject (unknown KV dtype, TP not dividing the heads, context too long).
    """
    launch = Launch(
        gpu_mem_gib=gpu_mem_gib, gpus=gpus, engine=engine, engine_version=engine_version, concurrency=concurrency,
        tp=tp, mem_fraction_static=mem_fraction_static, context_length=context_length, speculative=speculative,
        speculative_num_steps=speculative_num_steps, speculative_eagle_topk=speculative_eagle_topk,
        speculative_num_draft_tokens=speculative_num_draft_tokens, max_running_requests=max_running_requests,
        kv_cache_dtype=kv_cache_dtype,
    )
    return estimate_launch(model, launch, machine)


def estimate_launch(model: str | Path | ModelShape, launch: Launch, machine: Machine | None = None) -> Estimate:
    """`estimate()` for a ready-made `Launch` (the search's candidates carry every knob), sized by
    the model of the budget kind the engine's rules name."""
    ctx = inputs.context(model, launch, machine)
    return _SIZERS[launch.rules.budget](ctx)


def _sglang(ctx: inputs.Context) -> Estimate:
    inp, geo, (target, draft) = inputs.sglang(ctx)
    f = inp.args.mem_fraction
    pool = sglang_pool.size_pool(inp, f)
    risks: list[str] = []
    if pool.failure is None and pool.slack_gib < pool.slack_needed_gib:
        risks.append(
            f"slack {pool.slack_gib:.2f} GiB < {pool.slack_needed_gib:.2f} GiB needed after the pool "
            f"(CUDA graphs ~{inp.graph_gib:.2f}, activations ~{inp.activation_gib:.2f}, req_to_token "
            f"{pool.req_to_token_gib:.2f}" + (f", late draft {inp.late_draft_gib:.2f} + its KV" if inp.late_draft_gib
                                             else "") + "): expect OOM in graph capture or under load")
    verdict, reason = _sglang_verdict(ctx, inp, pool, target + draft)
    max_ctx = 0
    if pool.failure is None and pool.max_running_requests >= ctx.launch.concurrency:
        max_ctx = min(ctx.shape.max_context, pool.kv_tokens // ctx.launch.concurrency)
    sized = _Sized(pool.kv_tokens, pool.kv_gib, pool.mamba_slots, pool.max_running_requests, pool.slack_gib,
                   pool.slack_needed_gib)
    return _result(ctx, verdict, reason, risks, geo.dtype_name, inp.cell_bytes, inp.state_bytes,
                   mem_fraction=f, default=inp.args.default_mem_fraction, free=inp.free_gib,
                   weights=(target, draft), sized=sized, max_ctx=max_ctx,
                   bounds=(sglang_pool.min_mem_fraction(inp), sglang_pool.max_mem_fraction(inp)),
                   context_len=inp.args.context_len)


def _sglang_verdict(ctx: inputs.Context, inp: sglang_pool.SglangInputs, pool: sglang_pool.SglangPool,
                    all_weights: float) -> tuple[Verdict, str]:
    if all_weights >= inp.free_gib:
        return Verdict.WEIGHTS_DO_NOT_FIT, (f"weights {all_weights:.2f} GiB per GPU exceed the "
                                            f"{inp.free_gib:.2f} GiB free before loading")
    if pool.failure is not None:
        return Verdict.NO_KV_ROOM, pool.failure
    if not sglang_pool.fits_goal(inp, pool):
        need = inp.args.context_len * ctx.launch.concurrency
        return Verdict.NO_KV_ROOM, (f"KV pool {pool.kv_tokens} tokens / {pool.max_running_requests} running "
                                    f"requests < {ctx.launch.concurrency} x {inp.args.context_len} = {need} tokens")
    return Verdict.FITS, f"KV pool {pool.kv_tokens} tokens"


def _vllm(ctx: inputs.Context) -> Estimate:
    inp, geo, (target, draft), _ = inputs.vllm(ctx)
    frac = ctx.launch.mem_fraction_static
    util = frac if frac is not None else vllm_pool.DEFAULT_UTIL
    pool = vllm_pool.size_pool(inp, util)
    risks: list[str] = []
    top = vllm_pool.max_util(inp)
    if util > top:
        risks.append(f"free memory at start-up (~{inp.free_gib:.2f} GiB) is below capacity x {util}: vLLM "
                     "refuses to start ('Free memory on device ... less than desired')")
    if target + draft >= inp.free_gib:
        verdict, reason = Verdict.WEIGHTS_DO_NOT_FIT, (f"weights {target + draft:.2f} GiB per GPU exceed the "
                                                       f"{inp.free_gib:.2f} GiB free")
    elif not vllm_pool.fits_goal(inp, pool):
        verdict, reason = Verdict.NO_KV_ROOM, pool.failure or (
            f"max concurrency {pool.max_concurrency:.2f} < {ctx.launch.concurrency} at {inp.context_len} tokens")
    else:
        verdict, reason = Verdict.FITS, f"{pool.num_blocks} blocks of {pool.block_tokens} tokens"
    # vLLM profiles graphs and activations before sizing the pool: no slack is left to overrun
    sized = _Sized(pool.kv_tokens, max(0.0, pool.kv_avail_gib), 0, inp.max_num_seqs, 0.0, 0.0)
    cell = inp.cell_bytes if not inp.state_bytes else int(round(inp.attn_per_layer_bytes * inp.attn_layers))
    return _result(ctx, verdict, reason, risks, geo.dtype_name, cell, inp.state_bytes, mem_fraction=util,
                   default=vllm_pool.DEFAULT_UTIL, free=inp.free_gib, weights=(target, draft), sized=sized,
                   max_ctx=min(ctx.shape.max_context, vllm_pool.max_context(inp, pool)),
                   bounds=(vllm_pool.min_util(inp), top), context_len=inp.context_len)


_SIZERS = {Budget.STATIC_FRACTION: _sglang, Budget.PROFILED: _vllm}


def _result(ctx: inputs.Context, verdict: Verdict, reason: str, risks: list[str], kv_dtype: str, cell: int,
            state: int, *, mem_fraction: float, default: float, free: float, weights: tuple[float, float],
            sized: _Sized, max_ctx: int, bounds: tuple[float | None, float | None],
            context_len: int) -> Estimate:
    launch = ctx.launch
    assumptions = list(dict.fromkeys(ctx.assumptions))  # keep order, drop repeats
    if any(a.startswith("prior") for a in assumptions):
        assumptions.append("priors: " + PRIORS_DOC)
    return Estimate(
        engine=launch.engine, engine_version=launch.engine_version, tp=launch.tp, gpu_mem_gib=launch.gpu_mem_gib,
        context_length=context_len, concurrency=launch.concurrency, mem_fraction=mem_fraction,
        default_mem_fraction=default, free_before_weights_gib=free, weights_gib_per_gpu=weights[0],
        draft_weights_gib_per_gpu=weights[1], kv_dtype=kv_dtype, kv_bytes_per_token=cell,
        state_bytes_per_request=state, kv_tokens=sized.kv_tokens, kv_gib=sized.kv_gib,
        mamba_slots=sized.mamba_slots, max_running_requests=sized.max_running_requests,
        max_context_length=max(0, max_ctx), min_mem_fraction=bounds[0], max_mem_fraction=bounds[1],
        slack_gib=sized.slack_gib, slack_needed_gib=sized.slack_needed_gib, verdict=verdict, reason=reason, risks=tuple(risks),
        assumptions=tuple(assumptions),
    )
