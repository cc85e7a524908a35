"""The strategies behind one interface: propose the next point, or None when done; `STRATEGIES`
makes each by its name (settings.StrategyName).

`frontier` (default) is model-based (see frontier.py) and feeds Optuna its points with
`enqueue_trial`; `bisect` is the frontier in its older one-slot order; `tpe`, `random` and `grid`
let Optuna's samplers choose, for comparison. Failed launches reach the samplers as constraint
violations (`trial.set_constraint`), since Optuna's samplers ignore FAIL trials.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import optuna

from autotune import store
from autotune.search.frontier import Frontier, KvPredictor
from autotune.search.knowledge import Knowledge
from autotune.search.space import Space
from autotune.settings import StrategyName
from autotune.spec import check_strategy


class Strategy(Protocol):
    sampler: optuna.samplers.BaseSampler
    done: str  # why the search stops when `propose` has nothing left

    def propose(self, study: optuna.Study, knowledge: Knowledge, predictor: KvPredictor,
                busy: Callable[[Mapping[str, Any]], bool]) -> optuna.trial.Trial | str | None:
        """Ask the study for the next trial (params set), None when there is nothing left to try,
        or WAIT when what is left to try is all `busy` (running elsewhere)."""
        ...

    def pointless(self, point: Mapping[str, Any], knowledge: Knowledge, predictor: KvPredictor) -> str | None:
        """Why a running `point` need not finish given the results in (its launch may be stopped),
        or None."""
        ...

    def settled(self, answer: tuple[int, ...], order: Sequence[str], required: Sequence[str],
                knowledge: Knowledge, predictor: KvPredictor) -> bool:
        """Whether nothing left to launch can beat `answer` (its goal key): its certification may
        start before the search ends (search/alongside.py). False when the strategy cannot tell."""
        ...

    def answer_settled(self) -> None:
        """The run certifies the answer now: what the search does next only fills in the rest."""
        ...


class FrontierStrategy:
    done = "converged: every group's best is confirmed"

    def __init__(self, space: Space, frontier: Frontier) -> None:
        self.space, self.frontier = space, frontier
        self.sampler: optuna.samplers.BaseSampler = optuna.samplers.RandomSampler(seed=0)  # never consulted

    def propose(self, study: optuna.Study, knowledge: Knowledge, predictor: KvPredictor,
                busy: Callable[[Mapping[str, Any]], bool]) -> optuna.trial.Trial | str | None:
        point = self.frontier.next(knowledge, predictor, busy)
        if not isinstance(point, dict):
            return point  # None (done) or WAIT
        # Who runs it is recorded with the trial from its birth: a tuner killed right after
        # `ask` leaves a RUNNING trial that recovery can attribute (search/loop.py).
        study.enqueue_trial(point, skip_if_exists=False, user_attrs={store.WORKER_ATTR: store.worker_identity()})
        return study.ask(self.space.distributions())

    def pointless(self, point: Mapping[str, Any], knowledge: Knowledge, predictor: KvPredictor) -> str | None:
        return self.frontier.pointless(point, knowledge, predictor)

    def settled(self, answer: tuple[int, ...], order: Sequence[str], required: Sequence[str],
                knowledge: Knowledge, predictor: KvPredictor) -> bool:
        return self.frontier.settled(answer, order, required, knowledge, predictor)

    def answer_settled(self) -> None:
        self.frontier.hedge = False


class SamplerStrategy:
    """Optuna's own samplers; the point is whatever the sampler suggests."""

    done = "grid exhausted"  # the only sampler that runs out

    def __init__(self, space: Space, sampler: optuna.samplers.BaseSampler) -> None:
        self.space, self.sampler = space, sampler

    def propose(self, study: optuna.Study, knowledge: Knowledge, predictor: KvPredictor,
                busy: Callable[[Mapping[str, Any]], bool]) -> optuna.trial.Trial | str | None:
        if isinstance(self.sampler, optuna.samplers.GridSampler) and self._grid_done(study):
            return None
        return study.ask(self.space.distributions())

    def pointless(self, point: Mapping[str, Any], knowledge: Knowledge, predictor: KvPredictor) -> str | None:
        return None  # a sampler's point is never judged against the others

    def settled(self, answer: tuple[int, ...], order: Sequence[str], required: Sequence[str],
                knowledge: Knowledge, predictor: KvPredictor) -> bool:
        return False  # a sampler promises nothing about what it has not tried

    def answer_settled(self) -> None:
        return None

    def _grid_done(self, study: optuna.Study) -> bool:
        done = {tuple(sorted(t.params.items())) for t in study.get_trials(deepcopy=False)
                if t.state == optuna.trial.TrialState.COMPLETE}
        return len(done) >= self.space.size()


class _Grid(optuna.samplers.GridSampler):
    """Optuna's grid, its end left to the loop (`SamplerStrategy._grid_done`): its own after_trial
    calls study.stop() once the last point is told, which raises outside study.optimize; a grid
    run that reached its last point crashed there, the result told but the run lost."""

    def after_trial(self, study: optuna.Study, trial: optuna.trial.FrozenTrial, state: optuna.trial.TrialState,
                    values: Sequence[float] | None) -> None:
        return None


@dataclass(frozen=True)
class Setup:
    """What a strategy is made with: the spec's seed and start point, the concurrency its goal asks
    for, whether the goal ranks max_running_requests (a frontier per value), the run's slots."""

    seed: int
    concurrency: int
    start: Mapping[str, Any] | None
    per_concurrency: bool = False
    slots: int = 1


def _frontier(space: Space, s: Setup, bisect: bool = False) -> Strategy:
    return FrontierStrategy(space, Frontier(space, concurrency=s.concurrency, start=s.start,
                                            per_concurrency=s.per_concurrency, slots=s.slots, bisect=bisect))


def _grid(space: Space, s: Setup) -> Strategy:
    return SamplerStrategy(space, _Grid({k: list(v) for k, v in space.searched.items()}, seed=s.seed))


# The one registry of strategies. A new one: its name in settings.StrategyName, its factory here.
STRATEGIES: dict[StrategyName, Callable[[Space, Setup], Strategy]] = {
    StrategyName.FRONTIER: _frontier,
    StrategyName.BISECT: lambda space, s: _frontier(space, s, bisect=True),
    StrategyName.TPE: lambda space, s: SamplerStrategy(space, optuna.samplers.TPESampler(seed=s.seed,
                                                                                          n_startup_trials=5)),
    StrategyName.RANDOM: lambda space, s: SamplerStrategy(space, optuna.samplers.RandomSampler(seed=s.seed)),
    StrategyName.GRID: _grid,
}


def make_strategy(name: str, space: Space, *, seed: int, concurrency: int,
                  start: Mapping[str, Any] | None, per_concurrency: bool = False, slots: int = 1) -> Strategy:
    """The strategy `name` for `space`; SpecError naming `strategy` if there is none."""
    factory = STRATEGIES[StrategyName(check_strategy(name))]
    return factory(space, Setup(seed, concurrency, start, per_concurrency, slots))
