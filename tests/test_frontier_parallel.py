"""The frontier with points running elsewhere (other workers): it never proposes a running point,
splits a group's interval around running points (k-section), lets independent feature
combinations go ahead, and says WAIT when everything worth launching is running."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

from autotune.config import LaunchConfig
from autotune.records import Outcome, Phase, TrialResult
from autotune.search.frontier import WAIT, Frontier, KvPredictor
from autotune.search.knowledge import Knowledge
from autotune.search.space import Space

FRACTIONS = tuple(round(0.70 + 0.02 * i, 2) for i in range(14))  # 0.70 .. 0.96
SPACE = Space({"mem_fraction_static": FRACTIONS, "context_length": (8192,), "torch_compile": (False, True)},
              {"tp": 1})


class NoPredictions(KvPredictor):
    def kv_tokens(self, point: Mapping[str, Any]) -> float | None:
        return None

    def confident(self, point: Mapping[str, Any]) -> bool:
        return False


def fitted(mfs: float, torch_compile: bool) -> TrialResult:
    config = LaunchConfig(model_path="m", mem_fraction_static=mfs, context_length=8192, torch_compile=torch_compile)
    return TrialResult(trial_id="t", config=config, engine="sglang", engine_version="0.5.23", outcome=Outcome.READY,
                       phase=Phase.READY, remedy="", evidence=(), figures={}, argv=(), log_path="", exit_code=None,
                       launched=True, wall_s=1.0, gpu_s=1.0, gpus=(), kv_tokens=1000, resolved={})


def knowledge(*results: TrialResult) -> Knowledge:
    return Knowledge(SPACE, results, 8192)


def test_with_nothing_running_the_frontier_bisects_as_before() -> None:
    point = Frontier(SPACE, concurrency=1).next(knowledge(fitted(0.70, False), fitted(0.70, True)), NoPredictions())
    assert point == {"mem_fraction_static": FRACTIONS[1 + 13 // 2], "context_length": 8192, "torch_compile": False}


def test_a_running_midpoint_is_not_proposed_again_the_interval_is_split_around_it() -> None:
    k = knowledge(fitted(0.70, False), fitted(0.70, True))
    frontier = Frontier(SPACE, concurrency=1, bisect=True)  # the older order's k-section
    running = [frontier.next(k, NoPredictions())]
    for _ in range(3):  # three more workers ask while the earlier points run
        point = frontier.next(k, NoPredictions(), busy=lambda p: p in running)
        assert isinstance(point, dict) and point not in running
        assert point["mem_fraction_static"] > 0.70  # never a point the fit at 0.70 already implies
        running.append(point)
    fractions = sorted(p["mem_fraction_static"] for p in running if not p["torch_compile"])
    assert len(fractions) == 4 and len(set(fractions)) == 4  # one group, four distinct splits (k-section)


def test_when_every_point_worth_launching_runs_the_frontier_waits() -> None:
    # only 0.96 is left without torch.compile, only 0.92 with it (0.94 failed there)
    k = knowledge(fitted(0.94, False), fitted(0.90, True), result(0.94, True, Outcome.OOM_CUDA_GRAPH))
    frontier = Frontier(SPACE, concurrency=1)
    first = frontier.next(k, NoPredictions())
    second = frontier.next(k, NoPredictions(), busy=lambda p: p == first)
    assert first == {"mem_fraction_static": 0.96, "context_length": 8192, "torch_compile": False}
    assert second == {"mem_fraction_static": 0.92, "context_length": 8192, "torch_compile": True}
    assert frontier.next(k, NoPredictions(), busy=lambda p: p in (first, second)) == WAIT
    assert frontier.next(knowledge(fitted(0.96, False), fitted(0.96, True)), NoPredictions()) is None


# -- several slots of one run (Frontier(slots=N)) ------------------------------------------------

class Boundary(NoPredictions):
    """No KV predictions; the slack side predicted at a fixed fraction."""

    def __init__(self, limit: float) -> None:
        self.limit = limit

    def max_fraction(self, point: Mapping[str, Any]) -> float | None:
        return self.limit


def result(mfs: float, torch_compile: bool, outcome: Outcome) -> TrialResult:
    r = fitted(mfs, torch_compile)
    return TrialResult.from_dict({**r.to_dict(), "outcome": outcome.value})


def test_slots_give_every_feature_combination_a_point_before_any_gets_a_second() -> None:
    k = knowledge(fitted(0.70, False), fitted(0.70, True))
    frontier = Frontier(SPACE, concurrency=1, slots=4)
    first = frontier.next(k, NoPredictions())
    second = frontier.next(k, NoPredictions(), busy=lambda p: p == first)
    assert isinstance(first, dict) and isinstance(second, dict)
    # one slot each before k-section in either (the old order gave the first combination all slots)
    assert {first["torch_compile"], second["torch_compile"]} == {False, True}


def test_slots_bracket_the_predicted_boundary_and_a_heavier_group_waits_for_what_would_settle_it() -> None:
    k = knowledge(fitted(0.70, False), fitted(0.70, True))
    frontier = Frontier(SPACE, concurrency=1, slots=4)
    running: list[dict[str, Any]] = []
    while isinstance(point := frontier.next(k, Boundary(0.89), busy=lambda p: p in running), dict):
        running.append(point)
    assert point == WAIT
    # the largest fraction under the prediction, and the one above it; torch.compile (heavier) fails
    # wherever the lighter group fails its slack, so its points wait for those two results
    assert [(p["torch_compile"], p["mem_fraction_static"]) for p in running] == [(False, 0.88), (False, 0.90)]
    k = knowledge(fitted(0.70, False), fitted(0.70, True), fitted(0.88, False), result(0.90, False, Outcome.OOM_RUNTIME))
    running = []
    while isinstance(point := frontier.next(k, Boundary(0.89), busy=lambda p: p in running), dict):
        running.append(point)
    # settled without torch.compile; with it, 0.90 and above are known to fail: the prediction, and one below
    assert point is WAIT and [(p["torch_compile"], p["mem_fraction_static"]) for p in running] == [
        (True, 0.88), (True, 0.86)]
    # a lighter group's point at a larger fraction settles nothing here: the heavier group goes ahead
    lighter_above = {"mem_fraction_static": 0.92, "context_length": 8192, "torch_compile": False}
    heavier = {"mem_fraction_static": 0.88, "context_length": 8192, "torch_compile": True}
    assert not frontier.hostage(heavier, lambda p: p == lighter_above)
    assert frontier.hostage(heavier, lambda p: p == {**lighter_above, "mem_fraction_static": 0.88})


def test_before_a_context_is_confirmed_slots_launch_the_boundary_pair_and_hold_the_rest() -> None:
    space = Space({"mem_fraction_static": FRACTIONS, "context_length": (8192,)}, {"tp": 1})
    frontier = Frontier(space, concurrency=1, slots=4)
    k = Knowledge(space, (), 8192)
    running: list[dict[str, Any]] = []
    while isinstance(point := frontier.next(k, Boundary(0.90), busy=lambda p: p in running), dict):
        running.append(point)
    assert point == WAIT and [p["mem_fraction_static"] for p in running] == [0.90, 0.92]
    # next in line once the pair is in: the lowest candidate (it settles the context), then below the pair
    assert [p["mem_fraction_static"] for p in frontier.interval({}, k, Boundary(0.90))][:4] == [0.90, 0.92, 0.70, 0.88]
    # one slot in the older order (bisect), or without a slack prediction: the lowest candidate first
    assert Frontier(space, concurrency=1, bisect=True).next(k, Boundary(0.90)) == {"mem_fraction_static": 0.70,
                                                                                    "context_length": 8192}
    assert Frontier(space, concurrency=1).next(k, NoPredictions()) == {"mem_fraction_static": 0.70,
                                                                        "context_length": 8192}
    # one slot, by default, takes the same first point as the slots do
    assert Frontier(space, concurrency=1).next(k, Boundary(0.90)) == {"mem_fraction_static": 0.90,
                                                                       "context_length": 8192}
    assert Frontier(space, concurrency=1, slots=4).next(k, NoPredictions())["mem_fraction_static"] == 0.84  # type: ignore[index]


def test_slots_never_propose_a_point_a_result_implies() -> None:
    k = knowledge(fitted(0.70, False), result(0.90, False, Outcome.OOM_CUDA_GRAPH),
                  fitted(0.70, True), result(0.76, True, Outcome.OOM_CUDA_GRAPH))
    frontier = Frontier(SPACE, concurrency=1, slots=4)
    running: list[dict[str, Any]] = []
    while True:  # as many slots as it takes to run out of points
        point = frontier.next(k, Boundary(0.95), busy=lambda p: p in running)
        if not isinstance(point, dict):
            break
        running.append(point)
    assert point == WAIT
    assert all(k.status(p) is None for p in running)
    fractions = {tc: sorted(p["mem_fraction_static"] for p in running if p["torch_compile"] is tc)
                 for tc in (False, True)}
    assert fractions == {False: [0.86, 0.88], True: [0.72, 0.74]}  # a pair each: 0.88 is under the prediction


def test_a_fresh_result_makes_running_points_pointless_and_only_those() -> None:
    frontier = Frontier(SPACE, concurrency=1, slots=4)
    at = {m: {"mem_fraction_static": m, "context_length": 8192, "torch_compile": False} for m in FRACTIONS}
    before = knowledge(fitted(0.70, False))
    assert all(frontier.pointless(at[m], before, NoPredictions()) is None for m in (0.80, 0.88, 0.90, 0.94))
    after = knowledge(fitted(0.70, False), fitted(0.88, False), result(0.92, False, Outcome.OOM_CUDA_GRAPH))
    assert "open interval" in (frontier.pointless(at[0.80], after, NoPredictions()) or "")  # below a fit
    assert "implies" in (frontier.pointless(at[0.94], after, NoPredictions()) or "")  # above a failure
    assert frontier.pointless(at[0.90], after, NoPredictions()) is None  # the one point still open
    done = knowledge(fitted(0.70, False), fitted(0.90, False), result(0.92, False, Outcome.OOM_CUDA_GRAPH))
    assert frontier.pointless(at[0.90], done, NoPredictions()) is not None  # its fit is known: nothing to learn


def test_a_lighter_groups_fit_makes_a_heavier_groups_running_point_pointless() -> None:
    space = Space({"mem_fraction_static": FRACTIONS, "context_length": (8192,), "max_running_requests": (16, 64)},
                  {"tp": 1})

    class Tokens(NoPredictions):
        def kv_tokens(self, point: Mapping[str, Any]) -> float | None:
            return 100_000 * point["mem_fraction_static"]

    config = LaunchConfig(model_path="m", mem_fraction_static=0.96, context_length=8192, max_running_requests=16)
    light = TrialResult.from_dict({**fitted(0.96, False).to_dict(), "config": config.to_dict(), "kv_tokens": 200_000})
    heavy = {"mem_fraction_static": 0.90, "context_length": 8192, "max_running_requests": 64}
    frontier = Frontier(space, concurrency=1, slots=4)
    assert frontier.pointless(heavy, Knowledge(space, (), 8192), Tokens()) is None
    # the heavier request pool can at best hold 96,000 tokens at 0.96: it cannot beat the 200,000 in
    assert "lighter group" in (frontier.pointless(heavy, Knowledge(space, (light,), 8192), Tokens()) or "")


@pytest.mark.parametrize("slots", [1, 4])
def test_a_prediction_a_launch_proved_off_gives_way_to_doubling_steps_from_the_miss_not_a_walk(slots: int) -> None:
    """The estimator keeps saying 0.96 leaves the slack, and launches keep failing below it: the
    order must not restart at the (clamped) prediction after each result, walking down a fraction
    per launch; from the first contradiction it steps out one fraction, two, four, eight."""
    space = Space({"mem_fraction_static": FRACTIONS, "context_length": (8192,)}, {"tp": 1})
    frontier = Frontier(space, concurrency=1, slots=slots, bisect=False)
    fit = fitted(0.70, False)

    def at(*fractions_failed: float) -> dict[str, Any] | str | None:
        results = [fit, *(result(m, False, Outcome.OOM_CUDA_GRAPH) for m in fractions_failed)]
        return frontier.next(Knowledge(space, results, 8192), Boundary(0.96))
    assert at() == {"mem_fraction_static": 0.96, "context_length": 8192}  # the prediction, first
    # 0.96 failed its slack although predicted to fit: the nearest fraction below it (a near miss)
    assert at(0.96) == {"mem_fraction_static": 0.94, "context_length": 8192}
    assert at(0.96, 0.94) == {"mem_fraction_static": 0.92, "context_length": 8192}  # two steps from the miss
    assert at(0.96, 0.94, 0.92) == {"mem_fraction_static": 0.88, "context_length": 8192}  # four, not three
    assert at(0.96, 0.94, 0.92, 0.88) == {"mem_fraction_static": 0.80, "context_length": 8192}  # eight
    # bracketed (0.70 fits, 0.80 fails): what is left between is bisected
    assert at(0.96, 0.94, 0.92, 0.88, 0.80) == {"mem_fraction_static": 0.76, "context_length": 8192}
    # a prediction no launch contradicts is followed (the largest fraction under it, then the one above)
    assert frontier.next(knowledge(fit, fitted(0.70, True)), Boundary(0.89))["mem_fraction_static"] == 0.88  # type: ignore[index]


def test_a_fit_above_the_prediction_steps_up_from_it_in_doubling_steps() -> None:
    """The slack was underestimated (0.80 fits where 0.78 was the limit): the steps go up from that
    fit, one fraction, two, four; a fit further up does not restart them."""
    space = Space({"mem_fraction_static": FRACTIONS, "context_length": (8192,)}, {"tp": 1})
    frontier = Frontier(space, concurrency=1, slots=1, bisect=False)

    def at(*fits: float) -> dict[str, Any] | str | None:
        return frontier.next(Knowledge(space, [fitted(m, False) for m in fits], 8192), Boundary(0.78))
    assert at(0.80) == {"mem_fraction_static": 0.82, "context_length": 8192}
    assert at(0.80, 0.82) == {"mem_fraction_static": 0.84, "context_length": 8192}
    assert at(0.80, 0.82, 0.84) == {"mem_fraction_static": 0.88, "context_length": 8192}


class LearnedBoundary(Boundary):
    """A slack prediction learned from a launch (as the estimator's after the first one)."""

    def confident(self, point: Mapping[str, Any]) -> bool:
        return True


def test_a_learned_prediction_gets_its_bracketing_pair_and_no_slots_for_points_further_out() -> None:
    """Points beyond the pair around a learned boundary would mostly run only to be cancelled when
    the pair's results come in: spare slots wait (or serve other combinations) instead."""
    k = knowledge(fitted(0.70, False), fitted(0.70, True))
    frontier = Frontier(SPACE, concurrency=1, slots=8)
    running: list[dict[str, Any]] = []
    while isinstance(point := frontier.next(k, LearnedBoundary(0.89), busy=lambda p: p in running), dict):
        running.append(point)
    assert point == WAIT
    assert sorted((p["torch_compile"], p["mem_fraction_static"]) for p in running) == [(False, 0.88), (False, 0.90)]
    # the pair contradicted the prediction (a fit above it): two steps up from that fit, one and two
    k = knowledge(fitted(0.70, False), fitted(0.90, False), fitted(0.70, True))
    offered = frontier.heads(k, LearnedBoundary(0.89))[0]
    assert [p["mem_fraction_static"] for p in offered] == [0.92, 0.94]


@pytest.mark.parametrize("bisect", [False, True])
def test_a_fit_only_implied_by_a_heavier_groups_fit_is_still_launched_for_its_kv_figure(bisect: bool) -> None:
    """torch_compile=True (heavier) fitted at 0.90 before the lighter group's own launch there (a
    slot finished first); 0.92 failed in the lighter group. 0.90 then fits there by implication,
    but the goal ranks KV tokens, which only a launch gives: the lighter group's best must run. The
    frontier used to call the lighter group confirmed and recommend the heavier group's answer."""
    k = knowledge(fitted(0.70, False), fitted(0.90, True), result(0.92, False, Outcome.OOM_CUDA_GRAPH),
                  result(0.92, True, Outcome.OOM_CUDA_GRAPH))
    frontier = Frontier(SPACE, concurrency=1, bisect=bisect)
    best = {"mem_fraction_static": 0.90, "context_length": 8192, "torch_compile": False}
    assert frontier.next(k, NoPredictions()) == best
    assert frontier.pointless(best, k, NoPredictions()) is None  # not cancelled as "implied" while it runs
    assert frontier.next(k, NoPredictions(), busy=lambda p: p == best) == WAIT
    launched = knowledge(fitted(0.70, False), fitted(0.90, True), result(0.92, False, Outcome.OOM_CUDA_GRAPH),
                         result(0.92, True, Outcome.OOM_CUDA_GRAPH), fitted(0.90, False))
    assert frontier.next(launched, NoPredictions()) is None
    # launched and failed after all (not monotone: noise, or a flake): known, so not launched again
    contradicted = knowledge(fitted(0.70, False), fitted(0.90, True), result(0.92, False, Outcome.OOM_CUDA_GRAPH),
                             result(0.92, True, Outcome.OOM_CUDA_GRAPH), result(0.90, False, Outcome.OOM_CUDA_GRAPH))
    assert frontier.next(contradicted, NoPredictions()) is None
    below = {"mem_fraction_static": 0.80, "context_length": 8192, "torch_compile": False}
    assert "open interval" in (frontier.pointless(below, k, NoPredictions()) or "")  # below the best: pointless


def test_a_slack_failure_without_speculation_says_nothing_of_speculation_with_the_batch_left_to_the_engine() -> None:
    """SGLang caps the running batch at 48 with speculative decoding on (graphs captured that far),
    so its slack can be smaller than the base's: DeepSeek-V3 at 163840 on 8 x 141 GiB (0.5.23), the
    base fails its probe at 0.97 and speculative fits there. The frontier took the base's failure
    as speculative's and left its best at 0.96. With max_running_requests pinned the implication holds."""
    from dataclasses import replace

    space = Space({"mem_fraction_static": FRACTIONS, "context_length": (8192,), "speculative": (False, True)}, {"tp": 1})
    base = fitted(0.96, False)
    failed = replace(base, config=replace(base.config, mem_fraction_static=0.96), outcome=Outcome.OOM_RUNTIME)
    spec_point = {"mem_fraction_static": 0.96, "context_length": 8192, "speculative": True}
    assert Knowledge(space, [failed], 8192).status(spec_point) is None
    pinned = Space(space.searched, {"tp": 1, "max_running_requests": 64})
    assert Knowledge(pinned, [failed], 8192).status(spec_point) is not None
