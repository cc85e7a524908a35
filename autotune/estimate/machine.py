"""The unknowns: what an estimate needs that config.json cannot say, with priors until
launches teach them.

Per GPU, in GiB:
- memory gone before weights load (CUDA context + torch, NCCL buffers at TP > 1), so the
  free memory `F = capacity − context − nccl` that SGLang's fraction multiplies;
- the weights' resident size over the analytical count (allocator overhead, padding);
- CUDA-graph memory, the prefill activation peak, vLLM's non-torch and activation use.

Priors (documented in `PRIORS_DOC`) come from reference/memory-model.md. `learn()` adds an
`Observation` per launch; every lookup here prefers observations of the same model, engine
and TP, then fits across TPs, then falls back to the prior — and says which it used, so an
estimate can list its assumptions. A `Machine` is immutable: learning returns a new one.

The slack side (what SGLang's fraction leaves for everything after the pool) is learned from
the same launches: CUDA graphs per graph configuration from the capture lines (`graphs`:
torch.compile's extra is measured, never assumed), what start-up took beyond the rules from the
logged free memory after it (`unmodelled`), and serving's need from that free memory against
what happened under the probe (`serving_need`: a served probe's measured peak, an OOM's failed
allocation). A launch's largest fraction is where start-up leaves serving's need free.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TypeVar

from autotune.modelshape import ModelShape

T = TypeVar("T")

PRIORS_DOC = (
    "CUDA context + torch init 0.5 GiB per GPU (SGLang baseline 'mem usage' 0.5-1.3 GB); "
    "NCCL 0.5 GiB per GPU at TP > 1; weights overhead over params 0.1 GiB SGLang / 0.03 GiB vLLM; "
    "CUDA graphs 0.1 GiB + 2.5 MiB per captured decode max bs (+0.3 GiB breakable prefill graphs); "
    "prefill activation peak 0.25 GiB per 1k chunked tokens; vLLM activation 2.2 GiB per 8k batched "
    "tokens (x1.5 MoE), non-torch 0.15 GiB at TP 1 / 2.1 GiB at TP > 1"
)


def model_id(shape: ModelShape) -> str:
    """A key that tells checkpoints apart: architecture, parameter count, dtype, quantisation."""
    method = str((shape.quantization or {}).get("quant_method", "none"))
    return f"{shape.architecture}:{shape.params() + shape.params(draft=True)}:{shape.dtype}:{method}"


@dataclass(frozen=True)
class GraphKey:
    """What sets a launch's CUDA-graph memory, apart from the model and TP: the batch sizes
    captured, the breakable prefill graphs, speculative decoding (verify + draft graphs, by its
    draft shape) and torch.compile (which the priors have no term for)."""

    decode_bs: tuple[int, ...]
    prefill_buckets: tuple[int, ...]
    speculative: tuple[int, int, int] | None  # (draft tokens, steps, topk)
    torch_compile: bool


@dataclass(frozen=True)
class Observation:
    """What one launch's logged figures taught, per GPU, in GiB (None: not logged).

    `target_weights_gib` is effective: with `target_precise` it is everything allocated
    before the KV pool was sized minus the draft, derived from the pool itself (exact up
    to one KV token); otherwise it is the logged 'mem usage'. The analytical counts of the
    launch are kept so other TPs can be fitted. Scales are measured/prior ratios.
    """

    model_id: str
    engine: str
    engine_version: str
    tp: int
    pre_weights_overhead_gib: float | None = None
    target_weights_gib: float | None = None
    target_precise: bool = False
    target_analytic_gib: float = 0.0
    draft_weights_gib: float | None = None
    draft_analytic_gib: float = 0.0
    graph_key: GraphKey | None = None
    graph_gib: float | None = None  # all captures' 'mem usage', as logged
    graph_prior_gib: float = 0.0  # the prior for `graph_key` at that launch (no torch.compile term)
    serving_key: int | None = None  # the chunked prefill size the serving need was seen at
    served_gib: float | None = None  # READY: free GiB after start-up; the probe's need fitted in it
    overrun_gib: float | None = None  # OOM while serving: what the need reached (held + the failed allocation)
    served_peak_gib: float | None = None  # READY: the measured peak above start-up's use (the need, as seen)
    unmodelled_gib: float | None = None  # free after start-up: predicted (all else learned) minus logged
    kv_cell_scale: float | None = None
    vllm_other_gib: float | None = None
    vllm_other_prior_gib: float = 0.0  # the prior for that launch's settings, to shift by


@dataclass(frozen=True)
class Learned:
    """A value and where it came from ('learned ...' or 'prior ...'), for the assumptions."""

    value: float
    source: str

    @property
    def is_prior(self) -> bool:
        return self.source.startswith("prior")


@dataclass(frozen=True)
class Machine:
    """Priors for one machine (and, through its observations, one model on it).

    The scalar fields are the priors, per GPU, units in their names; `observations` are
    what launches taught. Lookups return `Learned` values saying which they used.
    Observations are keyed by engine and TP (free memory) and also by model (weights,
    graphs, KV bytes, vLLM's other use); engine versions share them.
    """

    cuda_context_gib: float = 0.5
    nccl_gib: float = 0.5
    weights_overhead_gib: float | None = None  # None: the engine's prior (its MemoryRules.weights_overhead_gib)
    graph_base_gib: float = 0.1
    graph_gib_per_bs: float = 0.0025
    prefill_graph_gib: float = 0.3
    activation_gib_per_1k_tokens: float = 0.25
    vllm_activation_gib_per_8k_tokens: float = 2.2
    vllm_non_torch_gib_tp1: float = 0.15
    vllm_non_torch_gib_tp_multi: float = 2.1
    observations: tuple[Observation, ...] = ()

    # -- memory before weights -----------------------------------------------------------

    def pre_weights_overhead(self, engine: str, tp: int) -> Learned:
        """GiB per GPU taken before weights load: capacity − F."""
        same = [o.pre_weights_overhead_gib for o in self._obs(engine=engine, tp=tp)]
        if _present(same):
            return Learned(_mean(same), f"learned from {len(_present(same))} launch(es) at TP {tp}")
        context = self._context(engine)
        if tp == 1:
            return context
        multi = [(o.pre_weights_overhead_gib or 0.0) - context.value for o in self._obs(engine=engine)
                 if o.tp > 1 and o.pre_weights_overhead_gib is not None]
        if multi:
            source = "learned NCCL at other TPs" + (f"; {context.source}" if not context.is_prior else "")
            return Learned(context.value + _mean(multi),
                           ("prior (partly): " if context.is_prior else "") + source
                           + (f"; CUDA context {context.value:.2f} GiB prior" if context.is_prior else ""))
        return Learned(context.value + self.nccl_gib,
                       f"prior: CUDA context {context.value:.2f} GiB + NCCL {self.nccl_gib:.2f} GiB per GPU")

    def _context(self, engine: str) -> Learned:
        tp1 = [o.pre_weights_overhead_gib for o in self._obs(engine=engine, tp=1)]
        if _present(tp1):
            return Learned(_mean(tp1), "learned at TP 1")
        return Learned(self.cuda_context_gib, f"prior: CUDA context {self.cuda_context_gib:.2f} GiB per GPU")

    # -- weights ---------------------------------------------------------------------------

    def target_weights(self, mid: str, engine: str, tp: int, analytic_gib: float,
                       engine_overhead_gib: float) -> Learned:
        """Resident target weights per GPU (GiB): observed at this TP, fitted across TPs, or prior
        (`engine_overhead_gib`, the engine's prior over the parameter bytes, unless the machine sets one).

        Pool-anchored observations (`target_precise`) win over 'mem usage' figures.
        """
        return self._weights(mid, engine, tp, analytic_gib, engine_overhead_gib, lambda o: o.target_weights_gib,
                             lambda o: o.target_analytic_gib, lambda o: o.target_precise, "target weights")

    def draft_weights(self, mid: str, engine: str, tp: int, analytic_gib: float,
                      engine_overhead_gib: float) -> Learned:
        """Resident draft (MTP/NextN) weights per GPU (GiB)."""
        if analytic_gib <= 0:
            return Learned(0.0, "learned: no draft")
        return self._weights(mid, engine, tp, analytic_gib, engine_overhead_gib, lambda o: o.draft_weights_gib,
                             lambda o: o.draft_analytic_gib, lambda o: False, "draft weights")

    def _weights(self, mid: str, engine: str, tp: int, analytic: float, engine_overhead: float,
                 value: Callable[[Observation], float | None], base: Callable[[Observation], float],
                 better: Callable[[Observation], bool], what: str) -> Learned:
        obs = [o for o in self._obs(engine=engine, model=mid) if value(o) is not None]
        here = [o for o in obs if o.tp == tp]
        if here:
            chosen = [o for o in here if better(o)] or here
            return Learned(_mean([value(o) for o in chosen]), f"learned ({what} at TP {tp})")
        overhead = self.weights_overhead_gib
        if overhead is None:
            overhead = engine_overhead
        if obs:
            scale, offset = _fit(obs, value, base, overhead)
            return Learned(scale * analytic + offset, f"learned ({what} fitted across TPs)")
        return Learned(analytic + overhead, f"prior: {what} = analytical + {overhead:.2f} GiB overhead")

    # -- what comes out of the slack ---------------------------------------------------------

    def graph_prior_gib(self, decode_max_bs: int, prefill_graphs: bool) -> float:
        """CUDA-graph memory prior for one runner (target or draft), GiB."""
        if decode_max_bs <= 0 and not prefill_graphs:
            return 0.0
        decode = self.graph_base_gib + self.graph_gib_per_bs * decode_max_bs if decode_max_bs > 0 else 0.0
        return decode + (self.prefill_graph_gib if prefill_graphs else 0.0)

    def graphs(self, mid: str, engine: str, tp: int, key: GraphKey, prior_gib: float) -> Learned:
        """CUDA-graph GiB per GPU (every capture, draft included) for a launch whose graphs are
        `key` and whose prior (no torch.compile term) is `prior_gib`.

        A configuration seen at this TP: its logged figure. Otherwise the priors, corrected by what
        launches logged: scaled by the measured/prior ratio of the uncompiled launches, plus
        torch.compile's extra (what compiled launches logged above that) when `key` compiles. The
        prior has no compile term: none is measured in our calibration data, and a first compiled
        launch that guesses too little fails one step above its boundary and teaches the figure,
        where a guess too large would start below it and walk up.
        """
        seen = [o for o in self._obs(engine=engine, model=mid) if o.graph_gib is not None and o.graph_key]
        here = [o for o in seen if o.tp == tp] or seen
        same = [o.graph_gib for o in here if o.graph_key == key and o.tp == tp]
        if same:
            return Learned(_mean(same), "learned (CUDA graphs of this configuration)")
        plain = [o for o in here if o.graph_key is not None and not o.graph_key.torch_compile and o.graph_prior_gib > 0]
        compiled = [o for o in here if o.graph_key is not None and o.graph_key.torch_compile]
        scale = _mean([float(o.graph_gib or 0.0) / o.graph_prior_gib for o in plain]) if plain else 1.0
        extra = _mean([float(o.graph_gib or 0.0) - scale * o.graph_prior_gib for o in compiled]) if compiled else 0.0
        value = scale * prior_gib + (max(0.0, extra) if key.torch_compile else 0.0)
        if plain or (compiled and key.torch_compile):
            return Learned(value, "learned (CUDA graphs of other configurations, by the priors' ratio"
                           + (" and torch.compile's measured extra)" if key.torch_compile and compiled else ")"))
        return Learned(prior_gib, "prior (CUDA graphs by captured batch sizes"
                       + ("; torch.compile's extra unmeasured)" if key.torch_compile else ")"))

    def unmodelled(self, mid: str, engine: str, tp: int, key: GraphKey) -> Learned:
        """GiB of the slack start-up took beyond what the rules and the learned figures account for
        (graphs, req_to_token, a late draft): the logged free memory after start-up against the
        prediction, from launches of the same graph configuration, else of the same speculative
        setting (a draft's start-up differs most); 0 unseen."""
        mine = [o for o in self._obs(engine=engine, tp=tp, model=mid) if o.unmodelled_gib is not None]
        for pool in ([o for o in mine if o.graph_key == key],
                     [o for o in mine if o.graph_key is not None and (o.graph_key.speculative is None)
                      == (key.speculative is None)]):
            if pool:
                return Learned(_mean([o.unmodelled_gib for o in pool]), "learned (start-up's unmodelled use)")
        return Learned(0.0, "prior (start-up's unmodelled use: none)")

    def serving_need(self, mid: str, engine: str, tp: int, chunk: int, prior_gib: float) -> Learned:
        """GiB per GPU that serving takes on top of start-up (the prefill activation peak and the
        running requests' memory), which must fit in the memory left free after start-up.

        From launches at this TP and chunked prefill size: a served probe's measured peak above
        start-up's use is the need as seen (the largest such figure; else the prior); a launch
        that ran out of memory serving shows the need reached its held memory plus the allocation
        that failed (at least that); one that served had at least the need free (at most that).
        The lower bound wins when the bounds cross (boot-to-boot noise).
        """
        mine = [o for o in self._obs(engine=engine, tp=tp, model=mid) if o.serving_key == chunk]
        seen = _present([o.served_peak_gib for o in mine])
        highs = _present([o.served_gib for o in mine])
        lows = _present([o.overrun_gib for o in mine])
        if not seen and not highs and not lows:
            return Learned(prior_gib, "prior (serving need)")
        value = max(seen) if seen else prior_gib
        if lows:
            value = max(value, max(lows))
        if highs and (not lows or min(highs) >= max(lows)):
            value = min(value, min(highs))
        what = (f"measured {max(seen):.2f} GiB" if seen else f"prior {prior_gib:.2f} GiB") \
            + (f", >= {max(lows):.2f}" if lows else "") + (f", <= {min(highs):.2f}" if highs else "")
        return Learned(value, f"learned (serving need: {what})")

    def kv_cell_scale(self, mid: str, engine: str, tp: int) -> Learned:
        """Measured/predicted KV bytes per token (1 unless a launch disagreed with the rules)."""
        return self._scale(mid, engine, tp, lambda o: o.kv_cell_scale, "KV bytes per token")

    def vllm_other(self, mid: str, engine: str, tp: int, prior_now_gib: float) -> Learned | None:
        """vLLM non-KV use beyond weights (activation + non-torch + graph estimate), if seen.

        Launches with other settings (batched tokens, graph sizes) are shifted by the
        difference of the priors for their settings and for `prior_now_gib`'s.
        """
        seen = [o for o in self._obs(engine=engine, tp=tp, model=mid) if o.vllm_other_gib is not None]
        if not seen:
            return None
        shifted = [float(o.vllm_other_gib or 0.0) + prior_now_gib - o.vllm_other_prior_gib for o in seen]
        return Learned(_mean(shifted), "learned (vLLM activation + non-torch + graphs)")

    def _scale(self, mid: str, engine: str, tp: int, value: Callable[[Observation], float | None],
               what: str) -> Learned:
        mine = self._obs(engine=engine, model=mid)
        for pool in ([o for o in mine if o.tp == tp], mine):
            found = _present([value(o) for o in pool])
            if found:
                return Learned(_mean(found), f"learned ({what})")
        return Learned(1.0, f"prior ({what})")

    def _obs(self, *, engine: str, tp: int | None = None, model: str | None = None) -> list[Observation]:
        return [o for o in self.observations
                if o.engine == engine and (tp is None or o.tp == tp) and (model is None or o.model_id == model)]


def _present(values: Sequence[T | None]) -> list[T]:
    return [v for v in values if v is not None]


def _mean(values: Sequence[float | None]) -> float:
    return statistics.fmean(_present(values))


def _fit(obs: Sequence[Observation], value: Callable[[Observation], float | None],
         base: Callable[[Observation], float], overhead: float) -> tuple[float, float]:
    """(scale, offset) with resident = scale · analytical + offset over the observations.

    Two or more distinct TPs give a least-squares line; one pins the scale with the prior
    offset, so TP changes scale the measured excess with the analytical count.
    """
    xs = [base(o) for o in obs]
    ys = [float(value(o) or 0.0) for o in obs]
    if len({round(x, 6) for x in xs}) >= 2:
        slope, intercept = statistics.linear_regression(xs, ys)
        return slope, intercept
    x, y = statistics.fmean(xs), statistics.fmean(ys)
    return ((y - overhead) / x if x > 0 else 1.0), overhead
