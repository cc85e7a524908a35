"""The main job on the simulated node: it converges on the true optimum, resumes after being
killed, and its recommended command parses with the engine's real flag table."""

from __future__ import annotations

import contextlib
import itertools
import os
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import optuna
import pytest
import yaml

from autotune import flagtable, store
from autotune import spec as spec_mod
from autotune.cli import STRATEGY_HELP
from autotune.engines import get_engine
from autotune.errors import SpecError
from autotune.machine import prepare_backend
from autotune.records import Outcome
from autotune.report import best_launch, write_report
from autotune.search.loop import run
from autotune.search.space import Space
from autotune.search.strategies import STRATEGIES, make_strategy
from autotune.settings import StrategyName
from autotune.sim.ground_truth import evaluate
from autotune.trial.supervisor import tagged_processes
from tests.conftest import MODELS, REPO


def write_spec(tmp_path: Path, **over: object) -> Path:
    raw: dict[str, object] = {
        "study": "t", "engine_version": "0.5.23", "model": str(MODELS / "Meta-Llama-3.1-8B"), "launcher": "simulated",
        "simulated": {"gpus": 1, "gpu_mem_gib": 24, "gpu_name": "NVIDIA GeForce RTX 4090", "time_scale": 0.0005},
        "space": {"tp": 1, "mem_fraction_static": {"min": 0.70, "max": 0.96, "step": 0.02},
                  "context_length": [16384, 32768, 65536], "torch_compile": [False, True]},
        "probe": {"burst": 2, "burst_tokens": 256}, "budget": {"trials": 30}, "results_dir": str(tmp_path / "results"),
        "certify": {"enabled": False},  # cold boots at the end of a run are tested in test_certify
    }
    raw.update(over)
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(raw))
    return path


def true_optimum(spec: spec_mod.Spec) -> tuple[int, int]:
    """(context, KV tokens) of the best point (the goal's required features on) by exhaustive
    evaluation of the simulator's truth for the spec's engine."""
    engine = get_engine(spec.engine)
    best = (0, 0)
    names = list(spec.searched())
    for combo in itertools.product(*(spec.searched()[n] for n in names)):
        cfg = spec.config(dict(zip(names, combo, strict=True)))
        argv = engine.argv(cfg, version=spec.engine_version, launcher=[], host="127.0.0.1", port=1)
        ctx = int(cfg.context_length or 0)
        t = evaluate(spec.engine, argv, gpus=1, gpu_mem_gib=24, version=spec.engine_version, probe_tokens=ctx - 24,
                     max_new_tokens=spec.probe.max_new_tokens, burst_tokens=spec.probe.burst * spec.probe.burst_tokens)
        if t.fits and t.kv_tokens >= ctx and all(getattr(cfg, f) for f in spec.goal.required_features):
            best = max(best, (ctx, t.kv_tokens))
    return best


def test_frontier_converges_on_the_true_optimum(tmp_path: Path) -> None:
    spec = spec_mod.load(write_spec(tmp_path))
    summary = run(spec, prepare_backend(spec))
    assert summary.stopped_because.startswith("converged")
    assert summary.best is not None
    found = (summary.best.config.context_length, summary.best.kv_tokens)
    assert found == true_optimum(spec)
    assert summary.launched_now <= 14, f"{summary.launched_now} launches for {spec_space_size(spec)} points"
    # every launch ended cleanly: nothing left on the node
    node = prepare_backend(spec)
    assert all(g.used_bytes == 0 for g in node.snapshot())


def test_bisect_is_a_strategy_by_name_and_converges_on_the_true_optimum(tmp_path: Path) -> None:
    """The frontier's older order (bisection from the lowest candidate), named in the spec like the others."""
    spec = spec_mod.load(write_spec(tmp_path, strategy="bisect", space={
        "tp": 1, "mem_fraction_static": {"min": 0.70, "max": 0.96, "step": 0.02}, "context_length": [16384, 32768]}))
    summary = run(spec, prepare_backend(spec))
    assert summary.strategy == "bisect" and summary.stopped_because.startswith("converged")
    assert summary.best is not None
    assert (summary.best.config.context_length, summary.best.kv_tokens) == true_optimum(spec)
    assert all(g.used_bytes == 0 for g in prepare_backend(spec).snapshot())


def test_every_strategy_name_is_made_by_the_registry_and_accepted_by_the_spec_and_the_cli() -> None:
    assert set(STRATEGIES) == set(StrategyName)
    space = Space({"mem_fraction_static": (0.8, 0.9)}, {"tp": 1})
    for name in StrategyName:
        assert spec_mod.check_strategy(name.value) == name.value
        assert make_strategy(name.value, space, seed=0, concurrency=1, start=None).done
        assert name.value in STRATEGY_HELP
    with pytest.raises(SpecError, match="unknown strategy 'nope'"):
        make_strategy("nope", space, seed=0, concurrency=1, start=None)


def test_frontier_converges_on_the_true_vllm_optimum_with_a_draft(tmp_path: Path) -> None:
    """The same on the simulated vLLM 0.33, speculative decoding required: MiMo's MTP layer drafts
    (vLLM's `mtp` method), which costs weights and KV the search has to account for."""
    spec = spec_mod.load(write_spec(
        tmp_path, engine="vllm", engine_version="0.33.0", model=str(MODELS / "MiMo-7B-Base"),
        space={"tp": 1, "mem_fraction_static": {"min": 0.80, "max": 0.96, "step": 0.02},
               "context_length": [8192, 16384, 32768], "speculative": [False, True], "speculative_num_draft_tokens": 4},
        goal={"order": ["features", "context_length", "kv_tokens"], "required_features": ["speculative"]}))
    summary = run(spec, prepare_backend(spec))
    assert summary.stopped_because.startswith("converged")
    assert summary.best is not None and summary.best.config.speculative
    assert (summary.best.config.context_length, summary.best.kv_tokens) == true_optimum(spec)
    assert all(g.used_bytes == 0 for g in prepare_backend(spec).snapshot())


def spec_space_size(spec: spec_mod.Spec) -> int:
    n = 1
    for vals in spec.searched().values():
        n *= len(vals)
    return n


def test_rerun_resumes_without_repeating(tmp_path: Path) -> None:
    path = write_spec(tmp_path, budget={"trials": 3})
    spec = spec_mod.load(path)
    first = run(spec, prepare_backend(spec))
    assert first.total_trials == 3 and first.stopped_because.startswith("trial budget")
    spec = spec_mod.load(write_spec(tmp_path, budget={"trials": 30}))
    second = run(spec, prepare_backend(spec))
    points = [(r.config.mem_fraction_static, r.config.context_length, r.config.torch_compile) for r in second.results]
    assert len(points) == len(set(points)), "a finished trial was launched again"
    assert second.total_trials == first.total_trials + second.launched_now
    assert second.stopped_because.startswith("converged")


def test_best_command_parses_and_reports_exist(tmp_path: Path) -> None:
    spec = spec_mod.load(write_spec(tmp_path))
    run(spec, prepare_backend(spec))
    result, argv = best_launch(spec.study, spec.storage)
    assert argv[:3] == ["python", "-m", "sglang.launch_server"]  # the real engine's command, not the simulator's
    flags = get_engine("sglang").flags_of(argv)
    ns = flagtable.parse("sglang", "0.5.23", flags)
    assert ns.mem_fraction_static == result.config.mem_fraction_static and ns.host == "127.0.0.1"
    assert ns.context_length == result.config.context_length and ns.max_running_requests is not None
    md, png = write_report(spec.study, spec.storage, spec.study_dir)
    text = md.read_text()
    assert "## Frontier" in text and shlex.join(argv) in text and png.stat().st_size > 10_000
    out = subprocess.run([sys.executable, "-m", "autotune.cli", "best", str(tmp_path / "spec.yaml"), "--format", "json"],
                         capture_output=True, text=True, cwd=REPO, check=True)
    assert '"argv"' in out.stdout


@pytest.mark.parametrize("strategy", ["tpe", "random", "grid"])
def test_baseline_strategies_run_and_record(tmp_path: Path, strategy: str) -> None:
    spec = spec_mod.load(write_spec(tmp_path, budget={"trials": 6}, strategy=strategy))
    summary = run(spec, prepare_backend(spec))
    assert summary.total_trials == 6
    study = store.load_study(spec.study, spec.storage)
    trials = study.get_trials(states=(optuna.trial.TrialState.COMPLETE,))
    for t in trials:  # failures reach the samplers as constraint violations, with the evidence attached
        fits = t.user_attrs["outcome"] == Outcome.READY.value
        assert t.system_attrs["constraints:fits"] == (-1.0 if fits else 1.0)
        assert t.user_attrs["result"]["evidence"]


def test_a_grid_run_ends_at_its_last_point_without_a_crash(tmp_path: Path) -> None:
    """Optuna's GridSampler stops the study after telling its last point, which raises outside
    study.optimize: the run crashed after the last launch, its result told but no summary."""
    spec = spec_mod.load(write_spec(tmp_path, strategy="grid", budget={"trials": 6},
                                    space={"tp": 1, "mem_fraction_static": [0.80, 0.85], "context_length": [8192]}))
    summary = run(spec, prepare_backend(spec))
    assert summary.total_trials == 2 and summary.stopped_because == "grid exhausted"


def test_killed_run_resumes_and_the_orphan_is_stopped(tmp_path: Path) -> None:
    # Slow enough that a trial's server is up for seconds, so the poll below (a study read and a process
    # scan, each slow on a busy box) cannot miss every window: at 0.02 it did once in CI, beside another suite.
    path = write_spec(tmp_path, simulated={"gpus": 1, "gpu_mem_gib": 24, "time_scale": 0.1})
    proc = subprocess.Popen([sys.executable, "-m", "autotune.cli", "run", str(path)], cwd=REPO,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        spec = spec_mod.load(path)
        deadline = time.monotonic() + 120
        running = None
        while time.monotonic() < deadline and running is None and proc.poll() is None:
            time.sleep(0.05)  # wait for the second trial's server to be up
            try:
                trials = store.load_study(spec.study, spec.storage).get_trials(deepcopy=False)
            except Exception:  # the study not created yet, or its database busy with the run's write
                continue
            live = [t for t in trials if t.state == optuna.trial.TrialState.RUNNING and t.number >= 1]
            if live and tagged_processes(live[0].user_attrs.get("trial_id", "?")):
                running = live[0]
        assert running is not None, f"the run never got to a second trial (run exit status {proc.poll()})"
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)  # the tuner dies; its server (its own session) is orphaned
        proc.wait()
    orphan_id = running.user_attrs["trial_id"]
    assert tagged_processes(orphan_id), "the orphaned server should still be running"
    spec = spec_mod.load(write_spec(tmp_path))
    summary = run(spec, prepare_backend(spec))
    assert not tagged_processes(orphan_id)
    assert any(orphan_id in line for line in summary.recovered)
    study = store.load_study(spec.study, spec.storage)
    again = study.trials[running.number]
    assert again.state == optuna.trial.TrialState.FAIL and again.user_attrs["interrupted"] is True
    assert summary.stopped_because.startswith("converged") and summary.best is not None
