"""`LaunchConfig`: one candidate launch, engine-neutral, and `diff` between two of them.

A config says what to run, not how an engine spells it: the engine adapter turns it into
argv for a given engine version. `None` means "the engine's default" (e.g. SGLang picks
`mem_fraction_static` itself); the resolved value is read back from the running server.

Its fields are the one declaration of the launch parameters: every field but `model_path` is
one a spec's `space` sets (`PARAMS`), declared with `param`: its default, the kind of values
the spec takes for it (`spec/space.py` reads each kind) and the space's default where that
differs from the config's.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

# The kinds of value a spec's space takes for a parameter, each read by one parser (spec/space.py):
# true/false; integers >= 1 (or null); a fraction of GPU memory (also {min, max, step}); a context
# length (also {min, max}: powers of two); a KV-cache dtype name; a name; a list of argv items.
Kind = Literal["bool", "int", "fraction", "context", "kv_dtype", "name", "argv"]


def param(default: Any, kind: Kind, space: Any = None) -> Any:
    """A launch parameter's field: `default` in a config, `kind` of value the spec's space takes, and
    `space`, the space's default where not the config's (mem_fraction_static: a range to search)."""
    return field(default=default, metadata={"kind": kind, "space": default if space is None else space})


@dataclass(frozen=True)
class LaunchConfig:
    model_path: str
    tp: int = param(1, "int")
    mem_fraction_static: float | None = param(None, "fraction", space={"min": 0.60, "max": 0.95, "step": 0.01})
    context_length: int | None = param(None, "context")
    speculative: bool = param(False, "bool")
    speculative_algorithm: str = param("NEXTN", "name")
    speculative_num_steps: int | None = param(None, "int")
    speculative_eagle_topk: int | None = param(None, "int")
    speculative_num_draft_tokens: int | None = param(None, "int")
    torch_compile: bool = param(False, "bool")
    cuda_graph_max_bs: int | None = param(None, "int")
    disable_cuda_graph: bool = param(False, "bool")
    max_running_requests: int | None = param(None, "int")
    chunked_prefill_size: int | None = param(None, "int")
    kv_cache_dtype: str = param("auto", "kv_dtype")
    extra_args: tuple[str, ...] = param((), "argv")

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


# The launch parameters, in declaration order: what a spec's space and start, `--set` and `--config` name.
PARAMS: dict[str, Kind] = {f.name: f.metadata["kind"] for f in dataclasses.fields(LaunchConfig) if f.metadata}


def diff(a: LaunchConfig, b: LaunchConfig) -> dict[str, tuple[Any, Any]]:
    """Fields that differ, as {name: (a's value, b's value)}."""
    return {
        f.name: (getattr(a, f.name), getattr(b, f.name))
        for f in dataclasses.fields(LaunchConfig)
        if getattr(a, f.name) != getattr(b, f.name)
    }
