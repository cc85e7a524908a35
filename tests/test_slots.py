"""Slots on one box (`parallel: N`): trials run at once, each on its own GPUs, and the search
ends on the same optimum as one slot."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import optuna
import pytest

from autotune import spec as spec_mod
from autotune import store
from autotune.errors import SpecError
from autotune.machine import prepare_backend
from autotune.report import write_report
from autotune.search import loop
from autotune.search.frontier import WAIT
from autotune.search.knowledge import Knowledge
from autotune.search.loop import run
from autotune.search.space import Space
from autotune.trial.supervisor import tagged_processes
from tests.test_faults import write_spec

SPACE = {"tp": 1, "mem_fraction_static": {"min": 0.80, "max": 0.92, "step": 0.04},
         "context_length": [8192, 16384], "torch_compile": [False, True]}


def two_gpu_spec(tmp_path: Path, name: str, parallel: int | str) -> spec_mod.Spec:
    d = tmp_path / name
    d.mkdir()
    return spec_mod.load(write_spec(d, simulated={"gpus": 2, "time_scale": 0.01}, gpus=[0, 1], space=SPACE,
                                    parallel=parallel))


def test_parallel_splits_the_gpus_by_tp_and_refuses_more_slots_than_fit(tmp_path: Path) -> None:
    assert two_gpu_spec(tmp_path, "auto", "auto").slots() == [(0,), (1,)]
    with pytest.raises(SpecError) as err:
        two_gpu_spec(tmp_path, "three", 3)
    assert err.value.field == "parallel" and "at most 2" in (err.value.hint or "")


@pytest.mark.slow  # two whole runs, ~40 s on 2 busy cores
def test_two_slots_run_trials_at_once_on_their_own_gpus_and_find_the_same_optimum(tmp_path: Path) -> None:
    one, two = two_gpu_spec(tmp_path, "one", 1), two_gpu_spec(tmp_path, "two", 2)
    alone = run(one, prepare_backend(one))
    both = run(two, prepare_backend(two))
    assert alone.best is not None and both.best is not None
    assert both.best.config.key() == alone.best.config.key()
    trials = store.load_study(two.study, two.storage).get_trials(deepcopy=False)
    windows = [(t.datetime_start, t.datetime_complete, {g["index"] for g in t.user_attrs["result"]["gpus"]})
               for t in trials if t.user_attrs.get("result", {}).get("launched")]
    overlapping = [(a, b) for i, a in enumerate(windows) for b in windows[i + 1:] if a[0] < b[1] and b[0] < a[1]]
    assert overlapping, "no two trials ran at once"
    assert all(a[2].isdisjoint(b[2]) for a, b in overlapping), "two trials at once on one GPU"
    keys = [r.config.key() for r in store.results(store.load_study(two.study, two.storage)) if r.launched]
    assert len(keys) == len(set(keys))


class Scripted:
    """A strategy that proposes `first` then `second`, once each, and calls `second` pointless as
    soon as `first`'s result is in: the loop's cancellation, apart from the frontier's judgement
    (tests/test_frontier_parallel.py tests that)."""

    done = "converged: both points are in"
    reason = "first's result settles it"

    def __init__(self, space: Space, first: dict[str, Any], second: dict[str, Any]) -> None:
        self.space, self.points, self.proposed = space, (first, second), 0
        self.sampler = optuna.samplers.RandomSampler(seed=0)

    def propose(self, study: optuna.Study, knowledge: Knowledge, predictor: Any,
                busy: Callable[[Mapping[str, Any]], bool]) -> optuna.trial.Trial | str | None:
        if self.proposed < 2:
            study.enqueue_trial(self.points[self.proposed], user_attrs={store.WORKER_ATTR: store.worker_identity()})
            self.proposed += 1
            return study.ask(self.space.distributions())
        return WAIT if any(busy(p) for p in self.points) else None

    def pointless(self, point: Mapping[str, Any], knowledge: Knowledge, predictor: Any) -> str | None:
        first_in = any(dict(o.point) == self.points[0] for o in knowledge.observations)
        return self.reason if first_in and dict(point) == self.points[1] else None


def test_a_running_point_a_fresh_result_makes_pointless_is_stopped_and_teaches_nothing(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    spec = two_gpu_spec(tmp_path, "cancel", 2)
    mfs = spec.searched()["mem_fraction_static"]
    first = {"mem_fraction_static": mfs[1], "context_length": 8192, "torch_compile": False}
    second = {"mem_fraction_static": mfs[2], "context_length": 16384, "torch_compile": False}
    monkeypatch.setattr(loop, "make_strategy", lambda name, space, **kw: Scripted(space, first, second))
    # the second trial's server hangs while loading weights: only a cancellation ends it before its deadline
    monkeypatch.setattr(spec_mod.Spec, "trial_env",
                        lambda self, number: {"AUTOTUNE_SIM_FAULTS": "hang@load_weights"} if number == 1 else {})
    summary = run(spec, prepare_backend(spec))
    assert summary.cancelled == 1 and summary.launched_now == 2
    trials = {t.number: t for t in store.load_study(spec.study, spec.storage).get_trials(deepcopy=False)}
    cancelled = trials[1]
    assert cancelled.state == optuna.trial.TrialState.FAIL
    assert cancelled.user_attrs["cancelled"] == Scripted.reason
    assert cancelled.user_attrs["outcome"] != "TIMEOUT"  # stopped, not waited out
    assert [r.config.context_length for r in store.results(store.load_study(spec.study, spec.storage))] == [8192]
    assert tagged_processes(cancelled.user_attrs["trial_id"]) == []
    # the report lists it apart from the results: counted, its point, marked cancelled, and why
    md, _ = write_report(spec.study, spec.storage, tmp_path / "report")
    text = md.read_text()
    assert "1 more launch(es) cancelled" in text and "## Cancelled" in text
    row = next(line for line in text.splitlines() if line.startswith("| 1 (cancelled) |"))
    assert f"mfs={mfs[2]}" in row and "ctx=16384" in row and Scripted.reason in row
