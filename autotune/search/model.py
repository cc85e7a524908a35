"""The search's model of the KV side of the boundary: the estimator, taught by every launch.

Before any launch the estimator uses priors (CUDA context, NCCL, weight overheads); each
finished trial's logged figures refine them (`autotune.estimate.learn`), after which the
KV tokens at any other fraction or context of the same model and machine are arithmetic.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from functools import lru_cache
from typing import Any

from autotune.config import LaunchConfig
from autotune.errors import AutotuneError
from autotune.estimate import Launch, Machine, estimate_launch, learn
from autotune.modelshape import ModelShape
from autotune.records import TrialResult


class EstimatorPredictor:
    """KvPredictor over the estimator. `config_of` turns a search point into a LaunchConfig."""

    def __init__(self, shape: ModelShape, *, engine: str, engine_version: str, gpu_mem_gib: float, gpus: int,
                 concurrency: int, config_of: Callable[[Mapping[str, Any]], LaunchConfig],
                 results: Sequence[TrialResult] = ()) -> None:
        self.shape, self.engine, self.version = shape, engine, engine_version
        self.gpu_mem_gib, self.gpus, self.concurrency = gpu_mem_gib, gpus, concurrency
        self.config_of = config_of
        self.machine = Machine()
        self.taught: set[int] = set()
        for result in results:
            if result.launched and result.figures:
                try:
                    self.machine = learn(self.machine, result.figures, shape, self.launch(result.config))
                except AutotuneError:
                    continue  # a config the estimator cannot describe teaches it nothing
                self.taught.add(result.config.tp)
        self._tokens = lru_cache(maxsize=4096)(self._kv_tokens)

    def launch(self, config: LaunchConfig) -> Launch:
        return Launch(
            gpu_mem_gib=self.gpu_mem_gib, gpus=self.gpus, tp=config.tp, engine=self.engine,
            engine_version=self.version, mem_fraction=config.mem_fraction_static,
            context_length=config.context_length, speculative=config.speculative,
            draft_tokens=config.speculative_num_draft_tokens, draft_steps=config.speculative_num_steps,
            draft_topk=config.speculative_eagle_topk, max_running_requests=config.max_running_requests,
            kv_dtype=config.kv_cache_dtype, concurrency=self.concurrency,
            chunked_prefill_size=config.chunked_prefill_size, cuda_graph_max_bs=config.cuda_graph_max_bs,
            cuda_graphs=not config.disable_cuda_graph,
        )

    def _kv_tokens(self, config: LaunchConfig) -> float | None:
        try:
            return float(estimate_launch(self.shape, self.launch(config), self.machine).kv_tokens)
        except AutotuneError:
            return None

    def kv_tokens(self, point: Mapping[str, Any]) -> float | None:
        return self._tokens(self.config_of(point))

    def confident(self, point: Mapping[str, Any]) -> bool:
        """Learned once any launch of this model at this TP logged its figures: the estimator then
        knows the free memory and weights; the rest (cells, state, drafts) is the engine's arithmetic."""
        return self.config_of(point).tp in self.taught
