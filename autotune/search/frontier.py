"""The frontier strategy: per group, find the largest context that fits, then the largest
memory fraction (the most KV) at that context — predicting where it can, launching to confirm.

Within a group, contexts are taken from the largest down. A context is a candidate while
some fraction is neither known to fail (observed or implied, see `knowledge`) nor
predicted to leave the KV pool too small for `context × min_concurrency` tokens (the
estimator, refined by every launch's logged figures, does that arithmetic). Each feature
combination's open interval gets points in turn (`next_in_slots`), the combination with the
fewest running first, and within an interval the points nearest the predicted boundary go
first: the largest fraction predicted to leave the slack and the one above it, so two results
confirm the optimum (with several slots they run at once and bracket it); once a launch has
proven the prediction off, outwards from that launch in doubling steps. Groups whose
optimistic best cannot beat what their feature combination already has are skipped; points
implied by monotonicity are never launched; `pointless` names the running points a fresh
result has made useless, for the caller to stop. Speculation is kept to what mostly pays
(points running here or on other workers): a predicted interval runs at most two points at
once (`in_flight`), and a heavier group's point waits while a lighter group's point that would
settle it by failing runs (`hostage`); spare slots stay idle rather than launch to be cancelled.
A combination's best is always launched, even where a heavier group's fit implies it fits: the
goal ranks KV tokens, which only a launch gives.

The older order (`bisect=True`, the one-slot default until the prediction-led order measured
about three times fewer launches, 31 against 94 in tools/bench/parallel.py) takes the
lowest candidate fraction at a context first and bisects upwards from a fit.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final, Protocol

from autotune.records import Side
from autotune.search.knowledge import Knowledge
from autotune.search.space import CTX, FEATURES, MFS, Space

MRR = "max_running_requests"


class KvPredictor(Protocol):
    """What the frontier asks of a prediction. One that predicts no slack side subclasses this for
    `max_fraction`'s default."""

    def kv_tokens(self, point: Mapping[str, Any]) -> float | None:
        """Predicted KV pool tokens at `point`, or None when it cannot tell."""
        ...

    def confident(self, point: Mapping[str, Any]) -> bool:
        """Whether the prediction is learned from a launch (else it is a prior)."""
        ...

    def max_fraction(self, point: Mapping[str, Any]) -> float | None:
        """The largest fraction predicted to leave enough slack at `point`'s group and context, or None."""
        return None


WAIT: Final = "wait"  # every useful next point is running elsewhere: wait for a result, then ask again


def _idle(point: Mapping[str, Any]) -> bool:
    return False


class Frontier:
    def __init__(self, space: Space, *, concurrency: int, start: Mapping[str, Any] | None = None,
                 prior_tolerance: float = 0.10, learned_tolerance: float = 0.002, per_concurrency: bool = False,
                 slots: int = 1, bisect: bool = False) -> None:
        """`per_concurrency`: the goal ranks max_running_requests, so each value of it keeps its own
        frontier (a heavier request pool is never skipped for holding less context). `slots`: how
        many trials this run keeps running at once. `bisect`: the older one-slot order (see `next`),
        the `bisect` strategy (tools/bench/parallel.py compares it with the slot order)."""
        self.space = space
        self.slots = slots
        self.bisect = bool(bisect)
        self.per_concurrency = per_concurrency
        self.concurrency = concurrency
        self.start = dict(start) if start else None
        self.prior_tolerance = prior_tolerance
        self.learned_tolerance = learned_tolerance
        # Two points of a predicted interval at once (the pair around the prediction) until the answer is
        # settled (`settled`, the run certifying it): after that the rest is the frontier table's, and one
        # point at a time spends no launch one slot would not (see `in_flight`).
        self.hedge = True

    # -- the next launch -------------------------------------------------------------------

    def next(self, knowledge: Knowledge, predictor: KvPredictor,
             busy: Callable[[Mapping[str, Any]], bool] = _idle) -> dict[str, Any] | str | None:
        """The next point to launch; None when every group's best is confirmed; WAIT when the
        points worth launching are all `busy` (running on another worker or slot).

        Points come in `interval`'s order (`next_in_slots`). The older order (`bisect`): bisection
        from the lowest candidate; while a feature combination has a point running, its other
        groups wait for that result (it may settle them); other feature combinations go ahead."""
        if not self.bisect:
            return self.next_in_slots(knowledge, predictor, busy)
        waiting: set[tuple[tuple[str, Any], ...]] = set()
        if self.start is not None:
            start = self.full_point(self.start)
            if not knowledge.launched(start):
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
            top = max(fitted, key=_num)
            above = [m for m, st in cands if st is None and _gt(m, top)]
            if not above:  # this group's best is confirmed; launched, unless a heavier group's fit implies it
                best = self.point(group, ctx, top)
                return None if knowledge.launched(best) else best
            pick = _k_section([busy(self.point(group, ctx, m)) for m in above])
            return self.point(group, ctx, above[pick])
        return None

    # -- several slots ---------------------------------------------------------------------

    def next_in_slots(self, knowledge: Knowledge, predictor: KvPredictor,
                      busy: Callable[[Mapping[str, Any]], bool] = _idle) -> dict[str, Any] | str | None:
        """`next` for a run with several slots. Each feature combination's open interval (`heads`)
        is a list of points, best first; the combination with the fewest of its points running
        gets the next one (independent combinations run side by side before any gets a second
        point), ties going to the lighter; a point `hostage` to a running one waits. None when no
        interval is open; WAIT when every open point runs or waits."""
        busy = _asked_once(busy)  # `hostage` asks after the same lighter points for every heavier one
        if self.start is not None:
            start = self.full_point(self.start)
            if not knowledge.launched(start) and not busy(start):
                return start
        offers = []
        for order, points in enumerate(self.heads(knowledge, predictor)):
            running = [p for p in points if busy(p)]
            idle = [p for p in points if not busy(p) and not self.hostage(p, busy)]
            offers.append((len(running), order, idle))
        for _, _, idle in sorted(offers, key=lambda o: (o[0], o[1])):
            if idle:
                return idle[0]
        return WAIT if offers else None

    def heads(self, knowledge: Knowledge, predictor: KvPredictor) -> list[list[dict[str, Any]]]:
        """Per feature combination, its first group (lightest first) that can still beat the
        combination's best and has an open interval: that interval's points, best first."""
        best = self.best_by_features(knowledge)
        out, seen = [], set()
        for group in self.space.groups():
            feats = self.features_of(group)
            if feats in seen:
                continue
            if feats in best and not _beats(self.potential(group, knowledge, predictor), best[feats]):
                continue
            points = self.interval(group, knowledge, predictor)
            if points:
                seen.add(feats)
                out.append(points[:self.in_flight(points, predictor)])
        return out

    def in_flight(self, points: list[dict[str, Any]], predictor: KvPredictor) -> int:
        """How many of an interval's points (best first) may run at once. Two where a slack
        prediction orders them: the pair around the prediction settles the interval when it holds
        and, the prediction missing by a step, one of the two mostly does; points further out ran
        mostly to be cancelled (tools/bench/parallel.py, 9 scenarios: 62 launches for 4 slots
        against 31 for one, 30 of them cancelled). All of them where nothing is predicted: each
        running point splits the interval (k-section). One once the answer is settled (`hedge`): the
        pair's second point was then mostly a launch one slot never makes, cancelled by the first's
        result (the demo's model, 4 slots: 2 of 10 launches), and the combinations left no longer
        hold up the answer."""
        if MFS not in self.space.searched or predictor.max_fraction(points[0]) is None:
            return len(points)
        return 2 if self.hedge else 1

    def hostage(self, point: Mapping[str, Any], busy: Callable[[Mapping[str, Any]], bool]) -> bool:
        """Whether a running point of a lighter group, at the same context and no larger fraction,
        would settle `point` by failing its slack (a heavier group fails wherever a lighter one does):
        then `point` waits for that result rather than run to be cancelled by it."""
        group = self.space.group_of(point)
        ctx = point.get(CTX)
        mfs = _num(point.get(MFS))
        fractions = [m for m in self.space.values(MFS) if _num(m) <= mfs + 1e-9] if MFS in self.space.searched \
            else [None]
        return any(busy(self.point(other, ctx, m))
                   for other in self.space.groups() if other != group and self.space.group_leq(other, group)
                   for m in fractions)

    def interval(self, group: Mapping[str, Any], knowledge: Knowledge,
                 predictor: KvPredictor) -> list[dict[str, Any]]:
        """The group's open points, best first ([] when its best is confirmed): at its largest
        context with candidates, the fractions above its best fit there (or all candidates, none
        fitting yet), none known or implied. Best first: the predicted boundary (the largest
        fraction the estimator says leaves the slack) and the one above it, then outwards in
        doubling steps, so two results can confirm the optimum; with no fit yet, the lowest
        candidate (it settles the whole context) third. With a prediction a launch at this group and
        context has proven off (`prediction_off`): outwards from that launch in doubling steps
        (`_probe`), as the estimator, taught by the launch, mostly misses by a step or two (the
        hybrid bench scenarios miss a runtime OOM by one step in every feature combination: one
        launch each, where bisection took four), while a far miss costs about twice bisection's
        launches, never a walk of the interval a fraction per result. With no prediction:
        bisection order (the middle, then the middles of the halves); with one slot, the lowest
        candidate first while nothing fits at the context (as the older order)."""
        for ctx in reversed(self.space.values(CTX)):
            cands = self.candidates(group, ctx, knowledge, predictor)
            if not cands:
                continue
            fitted = [m for m, st in cands if st is Side.FITS]
            top = max(fitted, key=_num) if fitted else None
            open_ = [m for m, st in cands if st is None and (top is None or _gt(m, top))]
            if top is not None and not knowledge.launched(self.point(group, ctx, top)):
                open_.insert(0, top)  # fits, implied by a heavier group's fit: launched for its KV figure (once)
            if not open_:
                return []
            limit = predictor.max_fraction(self.point(group, ctx, open_[0]))
            if limit is None or MFS not in self.space.searched:
                order = _bisection_order(len(open_))
                if limit is None and top is None and self.slots == 1:
                    order.remove(0)
                    order.insert(0, 0)
            else:
                off = self.prediction_off(group, ctx, limit, knowledge)
                if off is None:  # followed: the prediction's boundary and the fraction above it first
                    order = _gallop(len(open_), sum(1 for m in open_[1:] if _num(m) <= limit + 1e-9))
                else:  # contradicted: outwards from the contradiction (a miss is mostly near)
                    order = _probe(open_, self.space.values(MFS), *off)
                if top is None and 0 in order[2:]:
                    order.remove(0)
                    order.insert(2, 0)
            return [self.point(group, ctx, open_[i]) for i in order]
        return []

    def prediction_off(self, group: Mapping[str, Any], ctx: Any, limit: float,
                       knowledge: Knowledge) -> tuple[Side, Any] | None:
        """The launch at this group and context that contradicts the slack prediction `limit` nearest
        to it, if any: (FITS, fraction), a fit above it (the boundary is higher); (HIGH, fraction), a
        slack failure (needs less fraction) at or below it (the boundary is lower). The estimator
        learns from that launch, but a prediction still contradicted after it is not worth
        following further."""
        at = knowledge.ctx_of({CTX: ctx})
        high, fits = [], []
        for obs in knowledge.observations:
            if obs.mfs is None or obs.ctx != at or dict(obs.group) != dict(group):
                continue
            if obs.side is Side.FITS and obs.mfs > limit + 1e-9:
                fits.append(obs.mfs)
            elif obs.side is Side.HIGH and obs.mfs <= limit + 1e-9:
                high.append(obs.mfs)
        if high:
            return Side.HIGH, max(high)
        return (Side.FITS, min(fits)) if fits else None

    def pointless(self, point: Mapping[str, Any], knowledge: Knowledge, predictor: KvPredictor) -> str | None:
        """Why a running `point` need not finish, given the results in; None while it may still
        teach something (a point the interval of its group still holds, or the start point)."""
        status = knowledge.status(point)
        if status is not None and status is not Side.FITS:
            return f"a result already implies it ({status.value})"
        if self.start is not None and dict(point) == self.full_point(self.start):
            return None
        group = self.space.group_of(point)
        if dict(point) not in self.interval(group, knowledge, predictor):
            if status is Side.FITS:  # a fit implied below the group's best (its best is launched all the same)
                return "a result already implies it (fits)"
            return "no longer in its group's open interval (a fit above it, or a larger context confirmed)"
        best = self.best_by_features(knowledge).get(self.features_of(group))
        if best is not None and not _beats(self.potential(group, knowledge, predictor), best):
            return "its group can no longer beat the best of its feature combination (a lighter group's fit)"
        return None

    def settled(self, answer: tuple[int, ...], order: Sequence[str], required: Sequence[str],
                knowledge: Knowledge, predictor: KvPredictor) -> bool:
        """Whether no open point can still beat `answer` (the results' best, its goal key in `order`):
        every group with an open interval, at its most optimistic (`potential`), ranks no higher.
        Then its certification need not wait for the search's end (search/alongside.py); the search
        goes on all the same, and an answer it overtakes after all is certified anew. False where the
        goal's order cannot be bounded so: KV tokens ranked before context (a shorter context may
        leave more KV than `potential`'s, at the longest), or max_running_requests ranked but not
        searched (what each server resolves is known only by launching it)."""
        if not _boundable(order, self.space):
            return False
        for group in self.space.groups():
            if not self.interval(group, knowledge, predictor):
                continue  # its best is confirmed (or nothing is left): the results hold it
            ctx, kv = self.potential(group, knowledge, predictor)
            parts = {"features": int(all(bool(group.get(f)) for f in required)), "context_length": ctx,
                     "kv_tokens": kv, "max_running_requests": group.get(MRR, self.space.fixed.get(MRR))}
            if tuple(int(parts[name] or 0) for name in order) > tuple(answer):
                return False
        return True

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


def _boundable(order: Sequence[str], space: Space) -> bool:
    """Whether `potential` bounds every criterion of `order` that decides before its last (see `settled`)."""
    if MRR in order and None in space.values(MRR):  # left to the server: resolved, known only by launching
        return False
    if "kv_tokens" in order and "context_length" in order and order.index("kv_tokens") < order.index("context_length"):
        return False
    return "kv_tokens" not in order or "context_length" in order


def _asked_once(busy: Callable[[Mapping[str, Any]], bool]) -> Callable[[Mapping[str, Any]], bool]:
    """`busy`, each point asked once (a caller's `busy` builds the point's launch config to look it up)."""
    answers: dict[tuple[tuple[str, Any], ...], bool] = {}

    def asked(point: Mapping[str, Any]) -> bool:
        key = tuple(sorted(point.items()))
        if key not in answers:
            answers[key] = busy(point)
        return answers[key]
    return asked


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


def _bisection_order(n: int) -> list[int]:
    """0..n-1 as bisection visits them: the middle, then the middles of each half, and so on."""
    order, spans = [], [(0, n)]
    while spans:
        lo, hi = spans.pop(0)
        if lo < hi:
            mid = lo + (hi - lo) // 2
            order.append(mid)
            spans += [(lo, mid), (mid + 1, hi)]
    return order


def _gallop(n: int, b: int) -> list[int]:
    """0..n-1 from index `b` outwards: b, b+1, b-1, b+2, b-2, b+4, b-4, ... then the rest in
    bisection order."""
    b = min(max(b, 0), n - 1)
    order, step = [b], 1
    while step < n:
        for i in (b + step, b - step):
            if 0 <= i < n and i not in order:
                order.append(i)
        step *= 2
    return order + [i for i in _bisection_order(n) if i not in order]


def _probe(open_: list[Any], values: Sequence[Any], side: Side, pivot: Any) -> list[int]:
    """Indices into `open_` (ascending fractions) from the contradicting launch at `pivot` outwards,
    in doubling steps over the space's `values`: one step, two, four... below a slack failure
    (HIGH), above a fit (FITS); then the rest in bisection order. The pivot stays where the
    prediction first failed, so failures further out widen the steps instead of restarting them:
    a near miss costs one launch, a far one about twice bisection's."""
    direction = -1 if side is Side.HIGH else 1
    at = {_num(m): i for i, m in enumerate(open_)}
    base = [_num(v) for v in values].index(_num(pivot))
    order, step = [], 1
    while 0 <= base + direction * step < len(values):
        i = at.get(_num(values[base + direction * step]))
        if i is not None:
            order.append(i)
        step *= 2
    return order + [i for i in _bisection_order(len(open_)) if i not in order]


def _beats(potential: tuple[int, int], best: tuple[int, int], tolerance: float = 0.005) -> bool:
    """A longer context, or more KV tokens than the best by more than the prediction's slop."""
    if potential[0] != best[0]:
        return potential[0] > best[0]
    return potential[1] > best[1] * (1 + tolerance)


def _num(value: Any) -> float:
    return -1.0 if value is None else float(value)


def _gt(a: Any, b: Any) -> bool:
    return _num(a) > _num(b)

