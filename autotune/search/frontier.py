"""The frontier strategy: per group, find the largest context that fits, then the largest
memory fraction (the most KV) at that context — predicting where it can, launching to confirm.

Within a group, contexts are taken from the largest down. A context is a candidate while
some fraction is neither known to fail (observed or implied, see `knowledge`) nor
predicted to leave the KV pool too small for `context × min_concurrency` tokens (the
estimator, refined by every launch's logged figures, does that arithmetic). The first
launch at a context takes its lowest candidate fraction — the most slack left for graphs
and activations. If that fits, the context is confirmed and the fraction is bisected
upwards; if it runs out of slack, no fraction can serve that context and the search moves
down. Groups whose optimistic best cannot beat what their feature combination already
has are skipped; points implied by monotonicity are never launched.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Final, Protocol

from autotune.search.knowledge import Knowledge, Side
from autotune.search.space import CTX, FEATURES, MFS, Space

MRR = "max_running_requests"


class KvPredictor(Protocol):
    def kv_tokens(self, point: Mapping[str, Any]) -> float | None:
        """Predicted KV pool tokens at `point`, or None when it cannot tell."""
        ...

    def confident(self, point: Mapping[str, Any]) -> bool:
        """Whether the prediction is learned from a launch (else it is a prior)."""
        ...


WAIT: Final = "wait"  # every useful next point is running elsewhere: wait for a result, then ask again


def _idle(point: Mapping[str, Any]) -> bool:
    return False


class Frontier:
    def __init__(self, space: Space, *, concurrency: int, start: Mapping[str, Any] | None = None,
                 prior_tolerance: float = 0.10, learned_tolerance: float = 0.002, per_concurrency: bool = False) -> None:
        """`per_concurrency`: the goal ranks max_running_requests, so each value of it keeps its own
        frontier (a heavier request pool is never skipped for holding less context)."""
        self.space = space
        self.per_concurrency = per_concurrency
        self.concurrency = concurrency
        self.start = dict(start) if start else None
        self.prior_tolerance = prior_tolerance
        self.learned_tolerance = learned_tolerance

    # -- the next launch -------------------------------------------------------------------

    def next(self, knowledge: Knowledge, predictor: KvPredictor,
             busy: Callable[[Mapping[str, Any]], bool] = _idle) -> dict[str, Any] | str | None:
        """The next point to launch; None when every group's best is confirmed; WAIT when the
        points worth launching are all `busy` (running on another worker or slot).

        While a feature combination has a point running, its other groups wait for that result
        (it may settle them); other feature combinations are independent and go ahead."""
        waiting: set[tuple[tuple[str, Any], ...]] = set()
        if self.start is not None:
            start = self.full_point(self.start)
            if not any(dict(o.point) == start for o in knowledge.observations):
                if not busy(start):
                    return start
                waiting.add(self.features_of(self.space.group_of(start)))
        best = self.best_by_features(knowledge)
        for group in self.space.groups():
            feats = self.features_of(group)
            if feats in waiting:
                continue
            if feats in best and not _beats(self.potential(group, knowledge, predictor), best[feats]):
                continue  # cannot beat what its feature combination already has
            point = self.group_next(group, knowledge, predictor, busy)
            if point is not None and busy(point):
                waiting.add(feats)
            elif point is not None:
                return point
        return WAIT if waiting else None

    def full_point(self, partial: Mapping[str, Any]) -> dict[str, Any]:
        point = {}
        for name, vals in self.space.searched.items():
            point[name] = partial[name] if name in partial else vals[0] if name != CTX else vals[-1]
        return point

    def candidates(self, group: Mapping[str, Any], ctx: Any, knowledge: Knowledge,
                   predictor: KvPredictor) -> list[tuple[Any, Side | None]]:
        """Fractions still possible at `ctx` (ascending), with what is known of each."""
        need = knowledge.ctx_of({CTX: ctx}) * self.concurrency
        out: list[tuple[Any, Side | None]] = []
        for mfs in self.space.values(MFS):
            point = self.point(group, ctx, mfs)
            status = knowledge.status(point)
            if status is not None and status is not Side.FITS:
                continue
            if status is None and knowledge.attempts(point) >= 2:
                continue  # crashed twice without a memory verdict: do not burn a third launch
            if status is None and not self.enough_kv(point, need, predictor):
                continue
            out.append((mfs, status))
        return out

    def enough_kv(self, point: Mapping[str, Any], need: int, predictor: KvPredictor) -> bool:
        tokens = predictor.kv_tokens(point)
        if tokens is None:
            return self.lighter_enough(point, need, predictor)
        tolerance = self.learned_tolerance if predictor.confident(point) else self.prior_tolerance
        return tokens >= need * (1 - tolerance)

    def lighter_enough(self, point: Mapping[str, Any], need: int, predictor: KvPredictor) -> bool:
        """No prediction for `point` (a group no launch has anchored yet): a lighter group's learned
        prediction at the same context and fraction bounds it from above (a heavier group never
        holds more KV), so too little there is too little here. Without this, each new group of a
        model the estimator cannot size walked its fractions up from the lowest, one launch each."""
        group = self.space.group_of(point)
        for other in self.space.groups():
            if other == group or not self.space.group_leq(other, group):
                continue
            lighter = {**point, **other}
            tokens = predictor.kv_tokens(lighter)
            if tokens is not None and predictor.confident(lighter) and tokens < need * (1 - self.learned_tolerance):
                return False
        return True

    def group_next(self, group: Mapping[str, Any], knowledge: Knowledge, predictor: KvPredictor,
                   busy: Callable[[Mapping[str, Any]], bool] = _idle) -> dict[str, Any] | None:
        for ctx in reversed(self.space.values(CTX)):
            cands = self.candidates(group, ctx, knowledge, predictor)
            if not cands:
                continue
            fitted = [m for m, st in cands if st is Side.FITS]
            if not fitted:
                return self.point(group, ctx, cands[0][0])
            above = [m for m, st in cands if st is None and _gt(m, max(fitted, key=_num))]
            if not above:
                return None  # this group's best is confirmed
            pick = _k_section([busy(self.point(group, ctx, m)) for m in above])
            return self.point(group, ctx, above[pick])
        return None

    # -- what is known to be best, and what a group could still reach ------------------------------

    def point(self, group: Mapping[str, Any], ctx: Any, mfs: Any) -> dict[str, Any]:
        point = dict(group)
        if CTX in self.space.searched:
            point[CTX] = ctx
        if MFS in self.space.searched:
            point[MFS] = mfs
        return point

    def features_of(self, group: Mapping[str, Any]) -> tuple[tuple[str, Any], ...]:
        keys = (*FEATURES, MRR) if self.per_concurrency else FEATURES
        return tuple((k, group[k]) for k in keys if k in group)

    def best_by_features(self, knowledge: Knowledge) -> dict[tuple[tuple[str, Any], ...], tuple[int, int]]:
        best: dict[tuple[tuple[str, Any], ...], tuple[int, int]] = {}
        for obs in knowledge.fits():
            feats = self.features_of(obs.group)
            score = (obs.ctx, int(obs.result.kv_tokens or 0))
            best[feats] = max(best.get(feats, score), score)
        return best

    def potential(self, group: Mapping[str, Any], knowledge: Knowledge, predictor: KvPredictor) -> tuple[int, int]:
        """The best (context, KV tokens) the group might still reach: optimistic on the slack side."""
        for ctx in reversed(self.space.values(CTX)):
            cands = self.candidates(group, ctx, knowledge, predictor)
            if cands:
                tokens = predictor.kv_tokens(self.point(group, ctx, cands[-1][0]))
                return knowledge.ctx_of({CTX: ctx}), int(tokens) if tokens is not None else 1 << 62
        return (0, 0)


def _k_section(busy: list[bool]) -> int:
    """Which of the untested fractions above the best fit to launch: the middle (bisection) when
    none is running; else the middle of the longest run of idle ones between running ones
    (k-section: each running point already splits the interval). All busy: the middle one."""
    best_len, best_mid = 0, len(busy) // 2
    start = 0
    for i in range(len(busy) + 1):
        if i == len(busy) or busy[i]:
            if i - start > best_len:
                best_len, best_mid = i - start, start + (i - start) // 2
            start = i + 1
    return best_mid


def _beats(potential: tuple[int, int], best: tuple[int, int], tolerance: float = 0.005) -> bool:
    """A longer context, or more KV tokens than the best by more than the prediction's slop."""
    if potential[0] != best[0]:
        return potential[0] > best[0]
    return potential[1] > best[1] * (1 + tolerance)


def _num(value: Any) -> float:
    return -1.0 if value is None else float(value)


def _gt(a: Any, b: Any) -> bool:
    return _num(a) > _num(b)

