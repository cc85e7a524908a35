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
    graph_scale: float | None = None
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

    def graph_scale(self, mid: str, engine: str, tp: int) -> Learned:
        """Measured/prior ratio of CUDA-graph memory (1 with a 'prior' source when unseen)."""
        return self._scale(mid, engine, tp, lambda o: o.graph_scale, "CUDA graph memory")

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
