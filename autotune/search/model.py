"""The search's model of the KV side of the boundary: the estimator, taught by every launch.

Before any launch the estimator uses priors (CUDA context, NCCL, weight overheads); each
finished trial's logged figures refine them (`autotune.estimate.learn`), after which the
KV tokens at any other fraction or context of the same model and machine are arithmetic.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from functools import lru_cache
from typing import Any

from autotune.config import LaunchConfig
from autotune.engines import get_engine
from autotune.errors import AutotuneError
from autotune.estimate import Launch, Machine, estimate_launch, learn
from autotune.estimate.host_pool import PoolAnchor, anchor_of
from autotune.modelshape import ModelShape
from autotune.records import GIB, Outcome, TrialResult
from autotune.search.knowledge import readings


class EstimatorPredictor:
    """KvPredictor over the estimator. `config_of` turns a search point into a LaunchConfig."""

    def __init__(self, shape: ModelShape, *, engine: str, engine_version: str, gpu_mem_gib: float, gpus: int,
                 concurrency: int, config_of: Callable[[Mapping[str, Any]], LaunchConfig],
                 results: Sequence[TrialResult] = ()) -> None:
        self.shape, self.engine, self.version = shape, engine, engine_version
        self.gpu_mem_gib, self.gpus, self.concurrency = gpu_mem_gib, gpus, concurrency
        self.config_of = config_of
        # On a host device (vLLM's CPU build) the fraction budgets the worker's whole use: weights, the
        # profiled activations and the KV cache are all inside it, and there are no CUDA graphs. Nothing
        # fails for want of slack above it (only vLLM's start check, which the trial's preflight answers
        # as GPU_BUSY without launching), so the slack side's boundary is the top of the space.
        self.slack_free = get_engine(engine).device == "host"
        self.machine = Machine()
        self.figures = FiguresPredictor(gpu_mem_gib, results)
        self.taught: set[int] = set()
        for result in results:
            if result.launched and result.figures:
                try:
                    self.machine = learn(self.machine, result.figures, shape, self.launch(result.config),
                                         served=_served(result), serving_peak_gib=_serving_peak(result))
                except AutotuneError:
                    continue  # a config the estimator cannot describe teaches it nothing
                self.taught.add(result.config.tp)
        self._tokens = lru_cache(maxsize=4096)(self._kv_tokens)
        self._limit = lru_cache(maxsize=1024)(self._max_fraction)

    def launch(self, config: LaunchConfig) -> Launch:
        return Launch.from_config(config, gpu_mem_gib=self.gpu_mem_gib, gpus=self.gpus, engine=self.engine,
                                  engine_version=self.version, concurrency=self.concurrency)

    def _kv_tokens(self, config: LaunchConfig) -> float | None:
        try:
            return float(estimate_launch(self.shape, self.launch(config), self.machine).kv_tokens)
        except AutotuneError:  # a model the estimator cannot size: what the launches logged, if any
            return self.figures.kv_tokens(config)

    def kv_tokens(self, point: Mapping[str, Any]) -> float | None:
        return self._tokens(self.config_of(point))

    def _max_fraction(self, config: LaunchConfig) -> float | None:
        if self.slack_free:
            return 1.0
        try:
            return estimate_launch(self.shape, self.launch(config), self.machine).max_mem_fraction
        except AutotuneError:  # a model the estimator cannot size: no prediction of the slack side
            return None

    def max_fraction(self, point: Mapping[str, Any]) -> float | None:
        """The largest fraction whose slack the estimator says still covers graphs and activations
        at `point`'s group and context (whatever fraction `point` has); None when it cannot tell."""
        return self._limit(replace(self.config_of(point), mem_fraction_static=None))

    def confident(self, point: Mapping[str, Any]) -> bool:
        """Learned once any launch of this model at this TP logged its figures: the estimator then
        knows the free memory and weights; the rest (cells, state, drafts) is the engine's arithmetic."""
        config = self.config_of(point)
        return config.tp in self.taught or self.figures.knows(config)


def _served(result: TrialResult) -> bool | None:
    """Whether the launch served its probe (READY), ran out of memory serving it, or neither."""
    if len(readings(result)) > 1:
        return None  # an ambiguous log (an OOM it cannot place, say) teaches the estimator no figure
    if result.outcome is Outcome.READY:
        return True
    return False if result.outcome is Outcome.OOM_RUNTIME else None


def _serving_peak(result: TrialResult) -> float | None:
    """GiB per GPU a served launch's memory rose above what its start-up left in use: the GPUs'
    peak (exact on the simulated node, the largest ~10 Hz sample on real ones: a lower bound
    either way) against the engine's own free figure after start-up."""
    free = result.figures.get("available_gpu_mem_gib")
    if result.outcome is not Outcome.READY or free is None or not result.gpus:
        return None
    return max((g.peak_bytes - (g.total_bytes - free * GIB)) / GIB for g in result.gpus)


class FiguresPredictor:
    """KV tokens from logged figures alone, for a model the estimator cannot size.

    A launch that logged its KV pool (tokens and bytes per token) at fraction m anchors the
    same launch at any other fraction m': both engines take the KV pool out of
    `fraction x GPU memory` after a use that does not depend on the fraction, so
    `tokens(m') = tokens(m) + (m' - m) x GPU bytes / bytes per token`. Launches that differ
    in anything but fraction and context (TP, features, KV dtype...) do not anchor each other.
    """

    def __init__(self, gpu_mem_gib: float, results: Sequence[TrialResult] = ()) -> None:
        self.gpu_bytes = gpu_mem_gib * float(1 << 30)
        self.anchors: dict[LaunchConfig, tuple[float, float, float]] = {}  # key -> (fraction, tokens, cell bytes)
        self.host_anchors: dict[LaunchConfig, PoolAnchor] = {}
        self.avail_gib: float | None = None
        for result in results:
            figs, frac = result.figures, result.config.mem_fraction_static
            tokens, frac = figs.get("kv_tokens"), figs.get("mem_fraction_static") or figs.get("gpu_memory_utilization") or frac
            pool_gib = figs.get("kv_gib") or figs.get("kv_avail_gib")  # SGLang's K+V pool, vLLM's KV memory
            cell = figs.get("kv_cell_bytes") or (pool_gib * (1 << 30) / tokens if pool_gib and tokens else None)
            if result.launched and tokens and cell and frac:
                self.anchors[_key(result.config)] = (float(frac), float(tokens), float(cell))
            host = anchor_of(figs, result.config.mem_fraction_static) if result.launched else None
            if host is not None:  # SGLang on host memory: the fraction multiplies what was available then
                self.host_anchors[_key(result.config)] = host
                self.avail_gib = host.avail_gib  # the box as the latest launch found it

    def knows(self, config: LaunchConfig) -> bool:
        return _key(config) in self.anchors

    def kv_tokens(self, config: LaunchConfig) -> float | None:
        anchor = self.anchors.get(_key(config))
        if anchor is None or config.mem_fraction_static is None:
            return None
        host = self.host_anchors.get(_key(config))
        if host is not None:  # estimate.host_pool: the box's available memory as last seen, the anchor's load
            return host.tokens_at(config.mem_fraction_static, self.avail_gib)
        frac, tokens, cell = anchor
        return max(0.0, tokens + (config.mem_fraction_static - frac) * self.gpu_bytes / cell)


def _key(config: LaunchConfig) -> LaunchConfig:
    return replace(config, mem_fraction_static=None, context_length=None)


def same_group(a: LaunchConfig, b: LaunchConfig) -> bool:
    """Launches that differ in nothing but fraction and context anchor each other's pool."""
    return _key(a) == _key(b)
