"""`LaunchConfig`: one candidate launch, engine-neutral, and `diff` between two of them.

A config says what to run, not how an engine spells it: the engine adapter turns it into
argv for a given engine version. `None` means "the engine's default" (e.g. SGLang picks
`mem_fraction_static` itself); the resolved value is read back from the running server.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

# Parameters whose larger value needs more GPU memory (the search's monotonicity).
# mem_fraction_static is two-sided and listed separately; kv_cache_dtype is ordered by bytes
# (`engines/kvdtype.py`, the one table of KV bytes per element).
MEMORY_UP = ("context_length", "speculative", "speculative_num_draft_tokens", "speculative_num_steps",
             "speculative_eagle_topk", "torch_compile", "cuda_graph_max_bs", "max_running_requests",
             "chunked_prefill_size")


@dataclass(frozen=True)
class LaunchConfig:
    model_path: str
    tp: int = 1
    mem_fraction_static: float | None = None
    context_length: int | None = None
    speculative: bool = False
    speculative_algorithm: str = "NEXTN"
    speculative_num_steps: int | None = None
    speculative_eagle_topk: int | None = None
    speculative_num_draft_tokens: int | None = None
    torch_compile: bool = False
    cuda_graph_max_bs: int | None = None
    disable_cuda_graph: bool = False
    max_running_requests: int | None = None
    chunked_prefill_size: int | None = None
    kv_cache_dtype: str = "auto"
    extra_args: tuple[str, ...] = field(default=())

    def replace(self, **changes: Any) -> LaunchConfig:
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        out = dataclasses.asdict(self)
        out["extra_args"] = list(self.extra_args)
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> LaunchConfig:
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = set(data) - known
        if unknown:
            raise ValueError(f"unknown LaunchConfig field(s): {', '.join(sorted(unknown))}")
        values = dict(data)
        if "extra_args" in values:
            values["extra_args"] = tuple(values["extra_args"])
        return cls(**values)

    def key(self) -> str:
        """A short stable identity: equal configs have equal keys across runs and hosts."""
        blob = json.dumps(self.to_dict(), sort_keys=True)
        return hashlib.sha256(blob.encode()).hexdigest()[:12]

    def features(self) -> tuple[str, ...]:
        """The feature combination this config belongs to (one frontier per combination)."""
        feats = []
        if self.speculative:
            feats.append("speculative")
        if self.torch_compile:
            feats.append("torch_compile")
        if self.kv_cache_dtype not in ("auto", "bf16", "bfloat16"):
            feats.append(f"kv:{self.kv_cache_dtype}")
        if self.disable_cuda_graph:
            feats.append("no_cuda_graph")
        return tuple(feats)


def diff(a: LaunchConfig, b: LaunchConfig) -> dict[str, tuple[Any, Any]]:
    """Fields that differ, as {name: (a's value, b's value)}."""
    return {
        f.name: (getattr(a, f.name), getattr(b, f.name))
        for f in dataclasses.fields(LaunchConfig)
        if getattr(a, f.name) != getattr(b, f.name)
    }
