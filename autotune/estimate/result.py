"""The answer of an estimate: a frozen value with a JSON form (the `--json` contract)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from enum import Enum
from typing import Any


class Verdict(str, Enum):
    """Whether a launch fits, and if not, which lever can help.

    FITS: the KV pool holds `concurrency` requests of the full context.
    NO_KV_ROOM: the weights fit but the pool does not (or cannot be built) at this fraction:
      raise the fraction (see `min_mem_fraction`), shorten the context, or use less state.
    WEIGHTS_DO_NOT_FIT: target + draft weights exceed the free memory: no fraction helps;
      raise TP, quantise, or drop the draft.
    """

    FITS = "fits"
    NO_KV_ROOM = "no_kv_room"
    WEIGHTS_DO_NOT_FIT = "weights_do_not_fit"


@dataclass(frozen=True)
class Estimate:
    """What a launch needs per GPU and whether it fits, predicted before any launch.

    Memory is per GPU. `kv_bytes_per_token` is what the engine divides its KV budget by
    (SGLang 0.5.23 folds the draft's layers in). `kv_tokens` is the pool capacity the
    engine would log; for vLLM hybrids it is vLLM's derived concurrency × max_model_len.
    `min_mem_fraction` is the smallest fraction meeting the goal; `max_mem_fraction` the
    largest whose slack still covers CUDA graphs, activations and the other slack users
    (SGLang; for vLLM, the largest utilisation its start-up check accepts) — it rests on
    priors until a launch logged them. `assumptions` lists every prior or guess used.
    """

    engine: str
    engine_version: str
    tp: int
    gpu_mem_gib: float
    context_length: int
    concurrency: int
    mem_fraction: float
    default_mem_fraction: float
    free_before_weights_gib: float
    weights_gib_per_gpu: float
    draft_weights_gib_per_gpu: float
    kv_dtype: str
    kv_bytes_per_token: int
    state_bytes_per_request: int
    kv_tokens: int
    kv_gib: float
    mamba_slots: int
    max_running_requests: int
    max_context_length: int
    min_mem_fraction: float | None
    max_mem_fraction: float | None
    slack_gib: float
    slack_needed_gib: float
    verdict: Verdict
    reason: str
    risks: tuple[str, ...]
    assumptions: tuple[str, ...]

    @property
    def fits(self) -> bool:
        return self.verdict is Verdict.FITS

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON fields: GiB rounded to 3 decimals, the verdict by value, lists for tuples."""
        out: dict[str, Any] = {}
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if isinstance(value, Enum):
                value = value.value
            elif isinstance(value, tuple):
                value = list(value)
            elif isinstance(value, float) and f.name.endswith(("_gib", "_gib_per_gpu")):
                value = round(value, 3)
            out[f.name] = value
        return out
