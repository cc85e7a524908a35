"""From (model, launch, machine) to the per-GPU numbers the engine rules size pools with.

Both `estimate` and `learn` go through here, so a launch's figures are interpreted with
exactly the rules (and priors) that predicted it. Every prior that ends up in an input is
recorded in `Context.assumptions`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from autotune.engines.sglang.traits import traits_for
from autotune.errors import ModelConfigError, SpecError
from autotune.estimate import kvcache, sglang_defaults, vllm_pool
from autotune.estimate.kvcache import KvGeometry
from autotune.estimate.launch import Launch, rules_version
from autotune.estimate.machine import GraphKey, Learned, Machine, model_id
from autotune.estimate.sglang_defaults import SglangArgs
from autotune.estimate.sglang_pool import SglangInputs
from autotune.estimate.vllm_pool import VllmInputs
from autotune.estimate.weights import analytic_weights
from autotune.modelshape import ModelShape
from autotune.modelshape import load as load_shape

SPEC_GRAPH_FACTOR = 1.5  # draft decode + extend graphs on top of the target's verify graphs (prior)


@dataclass
class Context:
    """The model and launch an estimate is about, plus what it had to assume."""

    shape: ModelShape
    launch: Launch
    machine: Machine
    mid: str
    assumptions: list[str] = field(default_factory=list)

    def use(self, learned: Learned) -> float:
        if learned.is_prior:
            self.assumptions.append(learned.source)
        return learned.value


def model_shape(model: str | Path | ModelShape) -> ModelShape:
    """The model's shape: a ModelShape as is, else read from a directory or config.json path."""
    return model if isinstance(model, ModelShape) else load_shape(model)


def context(model: str | Path | ModelShape, launch: Launch, machine: Machine | None) -> Context:
    """Checks the model against the launch and starts the assumption list."""
    shape = model_shape(model)
    if shape.unsized_reason:
        raise ModelConfigError(shape.unsized_reason, hint="the search still runs this model on a real engine, "
                               "without predictions")
    problem = shape.tp_split_problem(launch.tp)
    if problem:  # the engine asserts this while building the model: it never starts
        raise SpecError("tp", problem, hint=f"a TP the model splits over: {', '.join(map(str, shape.splittable_tps()))}")
    if launch.context_length and launch.context_length > shape.max_context:
        raise SpecError("context_length", f"{launch.context_length} exceeds the model's maximum {shape.max_context}",
                        hint="the engines refuse longer contexts unless overridden (SGLang: "
                             "SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1)")
    if launch.speculative and not shape.mtp_layers:
        raise ModelConfigError(f"{shape.architecture} has no MTP/NextN layers to draft with",
                               hint="speculative estimates use the model's own MTP layers; external "
                                    "EAGLE drafts are not modelled")
    ctx = Context(shape, launch, machine or Machine(), model_id(shape))
    picked = rules_version(launch)
    if picked.warning:
        ctx.assumptions.append(picked.warning)
    ctx.assumptions.append("machine: " + _prior_summary(ctx.machine))
    ctx.assumptions.extend(shape.notes)
    return ctx


def _prior_summary(machine: Machine) -> str:
    n = len(machine.observations)
    return f"{n} launch observation(s) on record" if n else "no launch observed yet; priors only"


def weights(ctx: Context) -> tuple[float, float, float, float]:
    """(target, draft) resident GiB per GPU and their analytical counts."""
    aw = analytic_weights(ctx.shape, ctx.launch.tp)
    ctx.assumptions.extend(aw.notes)
    engine, tp, overhead = ctx.launch.engine, ctx.launch.tp, ctx.launch.rules.weights_overhead_gib
    target = ctx.use(ctx.machine.target_weights(ctx.mid, engine, tp, aw.target_gib, overhead))
    draft = 0.0
    if ctx.launch.speculative:
        draft = ctx.use(ctx.machine.draft_weights(ctx.mid, engine, tp, aw.draft_gib, overhead))
        ctx.assumptions.append("draft = the model's MTP layers plus their own embedding and lm_head copies")
    return target, draft, aw.target_gib, aw.draft_gib


def kv(ctx: Context) -> tuple[KvGeometry, float]:
    """KV geometry of the launch and the learned bytes-per-token correction (1 normally)."""
    geo = kvcache.geometry(ctx.shape, ctx.launch)
    ctx.assumptions.extend(geo.notes)
    scale = ctx.machine.kv_cell_scale(ctx.mid, ctx.launch.engine, ctx.launch.tp)
    return geo, (scale.value if not scale.is_prior else 1.0)


def free_before_weights(ctx: Context) -> float:
    overhead = ctx.use(ctx.machine.pre_weights_overhead(ctx.launch.engine, ctx.launch.tp))
    return ctx.launch.gpu_mem_gib - overhead


def sglang_graph_prior(machine: Machine, args: SglangArgs, speculative: bool) -> float:
    """CUDA-graph GiB before learning's correction: target graphs, plus the draft's."""
    base = machine.graph_prior_gib(max(args.decode_bs, default=0), bool(args.prefill_buckets))
    return base * (SPEC_GRAPH_FACTOR if speculative else 1.0)


def sglang_graph_key(launch: Launch, args: SglangArgs) -> GraphKey:
    """What sets the launch's CUDA-graph memory (see `GraphKey`)."""
    draft = (args.draft_tokens, args.draft_steps, args.draft_topk) if launch.speculative else None
    return GraphKey(args.decode_bs, args.prefill_buckets, draft, bool(launch.torch_compile))


def sglang_activation_prior(machine: Machine, args: SglangArgs) -> float:
    """The prefill activation peak prior, GiB per GPU, by the chunked prefill size."""
    chunk = args.chunked_prefill_size if args.chunked_prefill_size > 0 else args.context_len
    return machine.activation_gib_per_1k_tokens * max(chunk, 2048) / 1000


def sglang(ctx: Context) -> tuple[SglangInputs, KvGeometry, tuple[float, float]]:
    """Pool-sizing inputs of an SGLang launch, its KV geometry and (target, draft) weights GiB."""
    launch, machine = ctx.launch, ctx.machine
    args = sglang_defaults.resolve(ctx.shape, launch)
    ctx.assumptions.extend(args.notes)
    target, draft, _, _ = weights(ctx)
    geo, cell_scale = kv(ctx)
    late = not traits_for(launch.engine_version).draft_weights_before_pool
    graphs = machine.graphs(ctx.mid, launch.engine, launch.tp, sglang_graph_key(launch, args),
                            sglang_graph_prior(machine, args, launch.speculative))
    if graphs.is_prior:
        ctx.assumptions.append(f"CUDA graphs ~{graphs.value:.2f} GiB per GPU ({graphs.source})")
    serving = machine.serving_need(ctx.mid, launch.engine, launch.tp, args.chunked_prefill_size,
                                   sglang_activation_prior(machine, args))
    if serving.is_prior:
        ctx.assumptions.append(f"prefill activation peak {serving.value:.2f} GiB (prior; never logged by SGLang, "
                               "learned from what launches had free while serving)")
    key = sglang_graph_key(launch, args)
    inp = SglangInputs(
        launch=launch, args=args, free_gib=free_before_weights(ctx),
        pre_pool_gib=target + (0.0 if late else draft), late_draft_gib=draft if late else 0.0,
        cell_bytes=int(round(geo.pool_cell_bytes * cell_scale)),
        late_cell_bytes=int(round(geo.draft_late_cell_bytes * cell_scale)),
        state_bytes=kvcache.state_bytes(ctx.shape, launch.tp), graph_gib=graphs.value, activation_gib=serving.value,
        unmodelled_gib=machine.unmodelled(ctx.mid, launch.engine, launch.tp, key).value,
    )
    return inp, geo, (target, draft)


def vllm_other_prior(ctx: Context, batched: int, max_num_seqs: int) -> float:
    """vLLM activation peak + non-torch + CUDA-graph estimate, GiB per GPU (priors)."""
    m = ctx.machine
    activation = m.vllm_activation_gib_per_8k_tokens * batched / 8192 * (1.5 if ctx.shape.is_moe else 1.0)
    non_torch = m.vllm_non_torch_gib_tp1 if ctx.launch.tp == 1 else m.vllm_non_torch_gib_tp_multi
    graphs = m.graph_prior_gib(min(2 * max_num_seqs, 512), False) if not ctx.launch.disable_cuda_graph else 0.0
    return activation + non_torch + graphs


def vllm(ctx: Context) -> tuple[VllmInputs, KvGeometry, tuple[float, float], float]:
    """Budget inputs of a vLLM launch, its KV geometry, (target, draft) weights GiB, and the
    prior for its activation + non-torch + graph use (GiB)."""
    launch = ctx.launch
    target, draft, _, _ = weights(ctx)
    geo, cell_scale = kv(ctx)
    batched = launch.max_num_batched_tokens or vllm_pool.default_batched_tokens(launch.gpu_mem_gib)
    seqs = launch.max_running_requests or vllm_pool.default_max_num_seqs(launch.gpu_mem_gib)
    prior = vllm_other_prior(ctx, batched, seqs)
    learned = ctx.machine.vllm_other(ctx.mid, launch.engine, launch.tp, prior)
    other = prior if learned is None else learned.value
    if learned is None:
        ctx.assumptions.append(f"vLLM activation + non-torch + CUDA-graph estimate {other:.2f} GiB (prior, "
                               f"{batched} batched tokens)")
    if launch.mem_fraction_static is None:
        ctx.assumptions.append(f"gpu_memory_utilization: vLLM default {vllm_pool.DEFAULT_UTIL}")
    attn_layers = ctx.shape.attention_layers + (ctx.shape.mtp_layers if launch.speculative else 0)
    inp = VllmInputs(
        launch=launch, context_len=launch.context_length or ctx.shape.max_context,
        capacity_gib=launch.gpu_mem_gib, free_gib=free_before_weights(ctx), weights_gib=target + draft,
        other_gib=other, attn_per_layer_bytes=geo.per_layer_bytes * cell_scale, attn_layers=attn_layers,
        cell_bytes=int(round(geo.pool_cell_bytes * cell_scale)), state_layers=ctx.shape.state_layers,
        state_bytes=kvcache.state_bytes(ctx.shape, launch.tp), max_num_seqs=seqs,
    )
    return inp, geo, (target, draft), prior
