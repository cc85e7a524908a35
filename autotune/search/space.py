"""The searched space: a point is a dict of parameter values; each parameter's candidate
values are ordered by memory need (spec.space sorts them), which gives the dominance order
the search relies on: more context, more features, larger batches never need less memory.

`mem_fraction_static` is two-sided and `context_length` is the goal's main axis; every other
searched parameter forms the point's *group*. Within a group the boundary is searched in
(context, fraction); across groups, results transfer along the dominance order.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import optuna

MFS = "mem_fraction_static"
CTX = "context_length"
FEATURES = ("speculative", "torch_compile", "kv_cache_dtype", "disable_cuda_graph")


@dataclass(frozen=True)
class Space:
    """Candidate values per searched parameter (memory order) and the fixed ones."""

    searched: Mapping[str, tuple[Any, ...]]
    fixed: Mapping[str, Any]

    @property
    def group_params(self) -> tuple[str, ...]:
        return tuple(k for k in self.searched if k not in (MFS, CTX))

    def values(self, name: str) -> tuple[Any, ...]:
        if name in self.searched:
            return tuple(self.searched[name])
        return (self.fixed.get(name),)

    def groups(self) -> list[dict[str, Any]]:
        """Every combination of the group parameters, lightest first."""
        names = self.group_params
        combos = itertools.product(*(self.values(n) for n in names))
        groups = [dict(zip(names, combo, strict=True)) for combo in combos]
        return sorted(groups, key=lambda g: sum(self.rank(n, g[n]) for n in names))

    def rank(self, name: str, value: Any) -> int:
        """Position of `value` in the parameter's memory order (unknown values rank last)."""
        vals = self.values(name)
        return vals.index(value) if value in vals else len(vals)

    def group_of(self, point: Mapping[str, Any]) -> dict[str, Any]:
        return {n: point.get(n, self.fixed.get(n)) for n in self.group_params}

    def group_leq(self, a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
        """Group `a` needs no more memory than group `b` in every parameter."""
        return all(self.rank(n, a[n]) <= self.rank(n, b[n]) for n in self.group_params)

    def distributions(self) -> dict[str, optuna.distributions.BaseDistribution]:
        """Optuna distributions: ordered numbers as stepped floats/ints, the rest categorical."""
        out: dict[str, optuna.distributions.BaseDistribution] = {}
        for name, vals in self.searched.items():
            out[name] = _distribution(name, vals)
        return out

    def params_of(self, trial_params: Mapping[str, Any]) -> dict[str, Any]:
        """A point from Optuna's params (snapping floats onto the candidate grid)."""
        point = {}
        for name, vals in self.searched.items():
            value = trial_params[name]
            if isinstance(value, float) and all(isinstance(v, float) for v in vals):
                value = min(vals, key=lambda v: abs(v - value))
            point[name] = value
        return point

    def size(self) -> int:
        n = 1
        for vals in self.searched.values():
            n *= len(vals)
        return n


def _distribution(name: str, vals: Sequence[Any]) -> optuna.distributions.BaseDistribution:
    numeric = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in vals)
    if name == MFS and numeric and len(vals) > 2:
        steps = {round(b - a, 6) for a, b in zip(vals, vals[1:], strict=False)}
        if len(steps) == 1:
            return optuna.distributions.FloatDistribution(float(vals[0]), float(vals[-1]), step=steps.pop())
    return optuna.distributions.CategoricalDistribution(tuple(vals))


def space_of(searched: Mapping[str, tuple[Any, ...]], fixed: Mapping[str, Any]) -> Space:
    return Space({k: tuple(v) for k, v in searched.items()}, dict(fixed))
