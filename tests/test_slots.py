"""Slots on one box (`parallel: N`): trials run at once, each on its own GPUs, and the search
ends on the same optimum as one slot."""

from __future__ import annotations

from pathlib import Path

import pytest

from autotune import spec as spec_mod
from autotune import store
from autotune.errors import SpecError
from autotune.machine import prepare_backend
from autotune.search.loop import run
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
