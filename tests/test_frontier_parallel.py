"""The frontier with points running elsewhere (other workers): it never proposes a running point,
splits a group's interval around running points (k-section), lets independent feature
combinations go ahead, and says WAIT when everything worth launching is running."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from autotune.config import LaunchConfig
from autotune.records import Outcome, Phase, TrialResult
from autotune.search.frontier import WAIT, Frontier
from autotune.search.knowledge import Knowledge
from autotune.search.space import Space

FRACTIONS = tuple(round(0.70 + 0.02 * i, 2) for i in range(14))  # 0.70 .. 0.96
SPACE = Space({"mem_fraction_static": FRACTIONS, "context_length": (8192,), "torch_compile": (False, True)},
              {"tp": 1})


class NoPredictions:
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
    frontier = Frontier(SPACE, concurrency=1)
    running = [frontier.next(k, NoPredictions())]
    for _ in range(3):  # three more workers ask while the earlier points run
        point = frontier.next(k, NoPredictions(), busy=lambda p: p in running)
        assert isinstance(point, dict) and point not in running
        assert point["mem_fraction_static"] > 0.70  # never a point the fit at 0.70 already implies
        running.append(point)
    fractions = sorted(p["mem_fraction_static"] for p in running if not p["torch_compile"])
    assert len(fractions) == 4 and len(set(fractions)) == 4  # one group, four distinct splits (k-section)


def test_when_every_point_worth_launching_runs_the_frontier_waits() -> None:
    k = knowledge(fitted(0.94, False), fitted(0.94, True))  # only 0.96 is left in each group
    frontier = Frontier(SPACE, concurrency=1)
    first = frontier.next(k, NoPredictions())
    second = frontier.next(k, NoPredictions(), busy=lambda p: p == first)
    assert isinstance(first, dict) and isinstance(second, dict) and first["torch_compile"] != second["torch_compile"]
    assert frontier.next(k, NoPredictions(), busy=lambda p: p in (first, second)) == WAIT
    assert frontier.next(knowledge(fitted(0.96, False), fitted(0.96, True)), NoPredictions()) is None
