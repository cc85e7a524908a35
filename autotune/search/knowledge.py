"""What the finished trials say, and what follows from them without launching.

Each result becomes an Observation with a *side*: which way the memory fraction would have
to move for it to fit. Monotonicity then answers for points never launched:
- a fit at (group g, context c, fraction m) means a fit at any lighter group, smaller
  context, same fraction;
- a "needs more fraction" failure (KV budget) at (g, c, m) means failure at any heavier
  group, larger context and smaller-or-equal fraction;
- a "needs less fraction" failure (graphs, activations, the slack) at (g, c, m) means
  failure at any heavier group whose slack is no smaller (`slack_grows`), larger context and
  larger-or-equal fraction;
- weights that do not fit fail the group (and every heavier one) whatever the fraction.
An outcome whose side is UNKNOWN (records.OUTCOMES: CRASH, TIMEOUT, MISMATCH and GPU_BUSY) says nothing
about memory and teaches nothing.

A log may support more than one class (`Classification.alternatives`, carried as the figures
`alt_<OUTCOME>`): the launch is then read by the most conservative of its readings, the one that
concludes least. Each side rules out a set of configs; one reading is more conservative than another
when everything it rules out the other rules out too (`_WITHIN`); the side of an ambiguous launch is
the largest side within every reading's (the meet). So OOM_WEIGHTS-or-OOM_KV_POOL reads as the KV
pool's LOW, KV pool-or-graphs (LOW / HIGH) and OOM-or-GPU_BUSY as UNKNOWN: an OOM that does not say
which side of the boundary it is on teaches nothing.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from autotune.records import Need, Outcome, Side, TrialResult
from autotune.search.space import CTX, MFS, Space

# What each side rules out, as the sides whose ruled-out configs it contains (itself included):
# LOW and HIGH rule out part of what CONTEXT does (same group and context, some fractions), CONTEXT
# part of what ANY does (any context); FITS rules configs in, UNKNOWN nothing.
_WITHIN: dict[Side, frozenset[Side]] = {
    Side.UNKNOWN: frozenset({Side.UNKNOWN}),
    Side.FITS: frozenset({Side.UNKNOWN, Side.FITS}),
    Side.LOW: frozenset({Side.UNKNOWN, Side.LOW}),
    Side.HIGH: frozenset({Side.UNKNOWN, Side.HIGH}),
    Side.CONTEXT: frozenset({Side.UNKNOWN, Side.LOW, Side.HIGH, Side.CONTEXT}),
    Side.ANY: frozenset({Side.UNKNOWN, Side.LOW, Side.HIGH, Side.CONTEXT, Side.ANY}),
}


def conservative(sides: Iterable[Side]) -> Side:
    """The reading that concludes least: the largest side whose ruled-out configs every one of
    `sides` rules out too (UNKNOWN when they disagree in direction)."""
    common = frozenset(Side)
    for side in sides:
        common &= _WITHIN[side]
    return max(common, key=lambda s: len(_WITHIN[s]))


def readings(result: TrialResult) -> list[tuple[Outcome, Need | None]]:
    """The classes the launch's log supports, the classifier's choice first, each with its need."""
    found = [(result.outcome, result.needs)]
    for o in Outcome:
        direction = result.figures.get(f"alt_{o.value}")
        if direction is not None and o is not result.outcome:
            found.append((o, Need.MORE_FRACTION if direction > 0 else Need.LESS_FRACTION if direction < 0 else None))
    return found


def side_of(result: TrialResult) -> Side:
    """Which way the fraction would have to move, read conservatively when the log is ambiguous."""
    return conservative(_side(o, needs) for o, needs in readings(result))


def _side(o: Outcome, needs: Need | None) -> Side:
    """The outcome's side (records.OUTCOMES), or the one its need points to where that differs."""
    return o.facts.side_by_need.get(needs, o.facts.side)


@dataclass(frozen=True)
class Observation:
    point: Mapping[str, Any]
    group: Mapping[str, Any]
    ctx: int
    mfs: float | None
    side: Side
    result: TrialResult


class Knowledge:
    def __init__(self, space: Space, results: Iterable[TrialResult], default_context: int) -> None:
        self.space = space
        self.default_context = default_context
        self.observations = [self._observe(r) for r in results]

    def _observe(self, result: TrialResult) -> Observation:
        point = {name: getattr(result.config, name) for name in self.space.searched}
        ctx = result.config.context_length or self.default_context
        return Observation(point, self.space.group_of(point), int(ctx), result.config.mem_fraction_static,
                           side_of(result), result)

    def ctx_of(self, point: Mapping[str, Any]) -> int:
        return int(point.get(CTX) or self.space.fixed.get(CTX) or self.default_context)

    def mfs_of(self, point: Mapping[str, Any]) -> float | None:
        value = point.get(MFS, self.space.fixed.get(MFS))
        return None if value is None else float(value)

    def status(self, point: Mapping[str, Any]) -> Side | None:
        """FITS or a failure side when observed or implied; None when unknown."""
        group, ctx, mfs = self.space.group_of(point), self.ctx_of(point), self.mfs_of(point)
        for obs in self.observations:
            if obs.side is Side.FITS:
                if self.space.group_leq(group, obs.group) and ctx <= obs.ctx and mfs == obs.mfs:
                    return Side.FITS
                continue
            if not self.space.group_leq(obs.group, group) or obs.side is Side.UNKNOWN:
                continue
            if obs.side is Side.ANY:
                return Side.ANY
            if ctx < obs.ctx:
                continue
            if obs.side is Side.CONTEXT:
                return Side.CONTEXT
            if mfs is None or obs.mfs is None:
                if mfs == obs.mfs:
                    return obs.side
                continue
            if obs.side is Side.HIGH and not self.slack_grows(obs.group, group):
                continue
            if obs.side is Side.LOW and mfs <= obs.mfs or obs.side is Side.HIGH and mfs >= obs.mfs:
                return obs.side
        return None

    def slack_grows(self, lighter: Mapping[str, Any], heavier: Mapping[str, Any]) -> bool:
        """Whether `heavier` needs at least `lighter`'s slack (graphs, activations), so a slack failure
        of `lighter` fails it too. Not when it turns speculative decoding on with the running batch
        left to the engine: SGLang then caps the batch (48) and captures graphs only that far, so
        its slack can be the smaller one. DeepSeek-V3 at 163840 on 8 x 141 GiB, SGLang 0.5.23: the
        base fails its probe at 0.97, speculative fits there (802,856 KV tokens); the implication
        left speculative's frontier at 0.96."""
        turns_on = bool(heavier.get("speculative")) and not lighter.get("speculative")
        pinned = "max_running_requests" in self.space.group_params or \
            self.space.fixed.get("max_running_requests") is not None
        return not turns_on or pinned

    def launched(self, point: Mapping[str, Any]) -> bool:
        """Whether exactly this point was launched (a fit `status` may only imply it)."""
        return any(dict(o.point) == dict(point) for o in self.observations)

    def attempts(self, point: Mapping[str, Any]) -> int:
        """How often exactly this point was launched without a memory verdict (crash, timeout...)."""
        return sum(1 for o in self.observations if o.side is Side.UNKNOWN and dict(o.point) == dict(point))

    def fits(self) -> list[Observation]:
        return [o for o in self.observations if o.side is Side.FITS]
