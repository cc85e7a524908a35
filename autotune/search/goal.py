"""Which of two fitting configs is "larger": the spec's goal, as an explicit order.

Criteria (in the spec's order): `features` (the required features are on), `context_length`
(the context the server was launched with), `kv_tokens` (the KV pool it got),
`max_running_requests` (the requests it serves at once, as the server resolved it; a user
who would rather serve 16 requests at 131072 tokens than 8 at 262144 puts it before
`context_length`; `goal.min_concurrency` stays the floor). Results that did not fit never rank. Optuna gets a scalar that respects the first two criteria.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from autotune.records import TrialResult
from autotune.settings import GOAL_ORDER


def stored(spec: Mapping[str, Any]) -> tuple[Sequence[str], Sequence[str]]:
    """(order, required features) of the goal a study ran for, from the spec summary stored with it
    (`search.loop.spec_summary`); the default order where it names none."""
    goal = spec.get("goal", {})
    return goal.get("order", GOAL_ORDER), goal.get("required_features", [])


def context_of(result: TrialResult) -> int:
    value = result.config.context_length or result.resolved.get("context_length") or result.figures.get("context_len")
    return int(value or 0)


def concurrency_of(result: TrialResult) -> int:
    """The requests the server runs at once: the flag, else what it resolved (0: unknown)."""
    value = result.config.max_running_requests or result.resolved.get("max_running_requests")
    return int(value or 0)


def satisfies(result: TrialResult, required: Sequence[str]) -> bool:
    return all(bool(getattr(result.config, feat)) for feat in required)


def key(result: TrialResult, order: Sequence[str], required: Sequence[str]) -> tuple[int, ...]:
    parts = {"features": int(satisfies(result, required)), "context_length": context_of(result),
             "kv_tokens": int(result.kv_tokens or 0), "max_running_requests": concurrency_of(result)}
    return tuple(parts[name] for name in order)


def objective(result: TrialResult, order: Sequence[str], required: Sequence[str]) -> float:
    """A scalar for Optuna: the first numeric criterion plus the next one scaled below 1."""
    numeric = [v for name, v in zip(order, key(result, order, required), strict=True) if name != "features"]
    if not numeric:
        return 0.0
    return float(numeric[0]) + (min(numeric[1], 99_999_999) / 1e8 if len(numeric) > 1 else 0.0)


def best(results: Sequence[TrialResult], order: Sequence[str], required: Sequence[str]) -> TrialResult | None:
    fitting = [r for r in results if r.outcome.fits and satisfies(r, required)]
    return max(fitting, key=lambda r: key(r, order, required), default=None)
