"""Overnight-proof: everything that can go wrong in an unattended run, each with real processes.
Nothing may be lost, nothing may be left running, and every error says what to do."""

from __future__ import annotations

import os
import signal
import socket
import sqlite3
import stat
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import optuna
import pytest
import yaml

from autotune import spec as spec_mod
from autotune import store
from autotune.config import LaunchConfig
from autotune.errors import GpuError, LaunchError, SpecError
from autotune.gpu.nvml import NvmlBackend
from autotune.machine import check_launcher, prepare_backend
from autotune.records import Outcome, Phase, TrialResult
from autotune.search.loop import Progress, run
from autotune.sim.backend import SimulatedBackend
from autotune.sim.node import SimNode
from autotune.trial.run import run_trial
from autotune.trial.supervisor import tagged_processes
from tests.conftest import MODELS, REPO
from tests.test_trial import LLAMA8, settings

CLI = [sys.executable, "-m", "autotune.cli"]


def write_spec(tmp_path: Path, **over: Any) -> Path:
    raw: dict[str, Any] = {
        "study": "f", "engine_version": "0.5.23", "model": str(MODELS / "Meta-Llama-3.1-8B"), "launcher": "simulated",
        "simulated": {"gpus": 1, "gpu_mem_gib": 24, "time_scale": 0.0005},
        "space": {"tp": 1, "mem_fraction_static": {"min": 0.80, "max": 0.92, "step": 0.04},
                  "context_length": [8192, 16384]},
        "probe": {"burst": 2, "burst_tokens": 128}, "budget": {"trials": 12}, "results_dir": str(tmp_path / "results"),
        "certify": {"enabled": False},  # cold boots at the end of a run are tested in test_certify
    }
    for key, value in over.items():
        if isinstance(value, dict) and isinstance(raw.get(key), dict):
            raw[key] = {**raw[key], **value}
        else:
            raw[key] = value
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(raw))
    return path


def wait_for_running_trial(spec: spec_mod.Spec, timeout: float = 60) -> optuna.trial.FrozenTrial:
    """The first trial seen RUNNING with its server up. The study is opened once: opening it (a new
    storage, its schema checked) took most of a poll on a busy box, long enough to miss trials."""
    deadline = time.monotonic() + timeout
    study = None
    while time.monotonic() < deadline:
        time.sleep(0.05)
        try:
            study = study or store.load_study(spec.study, spec.storage)
            trials = study.get_trials(deepcopy=False)
        except Exception:  # not created yet, or its database busy with the run's write
            continue
        for t in trials:
            if t.state == optuna.trial.TrialState.RUNNING and tagged_processes(t.user_attrs.get("trial_id", "?")):
                return t
    raise AssertionError(f"no trial got running in {timeout:.0f} s")


# -- the tuner itself interrupted ------------------------------------------------------------------

@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_ctrl_c_and_sigterm_stop_the_server_with_the_tuner(tmp_path: Path, sig: int) -> None:
    path = write_spec(tmp_path, simulated={"time_scale": 0.02})
    proc = subprocess.Popen([*CLI, "run", str(path)], cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            text=True)
    spec = spec_mod.load(path)
    wait_for_running_trial(spec)
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130 and "the server was stopped" in err
    trials = store.load_study(spec.study, spec.storage).trials
    interrupted = [t for t in trials if t.user_attrs.get("interrupted")]
    assert len(interrupted) == 1 and interrupted[0].state == optuna.trial.TrialState.FAIL
    assert all(t.state == optuna.trial.TrialState.COMPLETE for t in trials if t not in interrupted)
    assert not tagged_processes(interrupted[0].user_attrs["trial_id"])
    assert all(g.used_bytes == 0 for g in prepare_backend(spec).snapshot())
    summary = run(spec_mod.load(path), prepare_backend(spec))  # resumes: the interrupted point is launched again
    assert summary.best is not None and summary.stopped_because.startswith("converged")


def test_sigkilled_trial_command_leaves_an_orphan_that_the_next_one_stops(tmp_path: Path) -> None:
    path = write_spec(tmp_path, simulated={"time_scale": 0.05}, start={"mem_fraction_static": 0.88,
                                                                        "context_length": 8192})
    spec = spec_mod.load(path)
    proc = subprocess.Popen([*CLI, "trial", str(path)], cwd=REPO, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not list((spec.study_dir / "trials").glob("*/running.json")):
        time.sleep(0.02)
    state = next((spec.study_dir / "trials").glob("*/running.json"))
    trial_id = state.parent.name
    # the trial's record is written before its server is spawned: kill the tuner once the server is there (a fixed
    # pause raced the spawn on a loaded machine)
    while time.monotonic() < deadline and not tagged_processes(trial_id):
        time.sleep(0.02)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert tagged_processes(trial_id), "the server should have outlived the killed tuner"
    out = subprocess.run([*CLI, "trial", str(path), "--json"], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert f"recovered {trial_id}" in out.stderr
    assert not tagged_processes(trial_id) and (state.parent / "interrupted.json").is_file()


# -- storage -------------------------------------------------------------------------------------

def test_locked_database_is_a_clear_error_and_nothing_starts(tmp_path: Path) -> None:
    path = write_spec(tmp_path)
    spec = spec_mod.load(path)
    run(spec_mod.load(write_spec(tmp_path, budget={"trials": 1})), prepare_backend(spec))  # the DB exists
    db = sqlite3.connect(spec.storage.removeprefix("sqlite:///"))
    db.execute("BEGIN EXCLUSIVE")
    try:
        out = subprocess.run([*CLI, "run", str(path)], cwd=REPO, capture_output=True, text=True, timeout=120,
                             env={**os.environ, "AUTOTUNE_DB_LOCK_TIMEOUT_S": "1"})
    finally:
        db.rollback()
        db.close()
    assert out.returncode == 2 and "Traceback" not in out.stderr  # run: 2 = could not start
    assert "locked" in out.stderr and "hint" in out.stderr
    assert len(store.results(store.load_study(spec.study, spec.storage))) == 1  # the study is intact


def test_disk_full_while_writing_artifacts_stops_cleanly_and_loses_nothing(tmp_path: Path) -> None:
    path = write_spec(tmp_path, strategy="grid")  # the frontier converges here in one launch: this needs two
    spec = spec_mod.load(path)
    study = optuna.create_study(study_name=spec.study, storage=store.storage_for(spec.storage), direction="maximize")
    trial_dir = spec.study_dir / "trials" / f"f-{store.study_tag(study)}-0001"  # trial ids carry the study's tag
    trial_dir.mkdir(parents=True)
    (trial_dir / "server.log").symlink_to("/dev/full")  # every write there fails with ENOSPC
    summary = run(spec, prepare_backend(spec))
    assert "results could not be written" in summary.stopped_because and "No space left" in summary.stopped_because
    assert summary.total_trials == 2  # the trial whose log could not be written is still in the study
    failed = summary.results[1]
    assert failed.outcome is not Outcome.CRASH and failed.evidence  # the verdict read every line anyway
    assert not any(tagged_processes(r.trial_id) for r in summary.results)
    again = run(spec_mod.load(write_spec(tmp_path, strategy="grid")), prepare_backend(spec))  # after "freeing space"
    assert again.best is not None


def test_corrupted_jsonl_mirror_is_rebuilt_and_the_study_is_intact(tmp_path: Path) -> None:
    path = write_spec(tmp_path, budget={"trials": 2}, strategy="grid")  # three launches in all, whatever converges
    spec = spec_mod.load(path)
    run(spec, prepare_backend(spec))
    mirror = spec.study_dir / "trials.jsonl"
    lines = mirror.read_text().splitlines()
    mirror.write_text(lines[0][: len(lines[0]) // 2] + "\n" + lines[1] + "\n")  # a write cut in the middle
    summary = run(spec_mod.load(write_spec(tmp_path, budget={"trials": 3}, strategy="grid")), prepare_backend(spec))
    assert any("not valid JSON" in r and "rewritten from the study" in r for r in summary.recovered)
    records, bad = store.read_jsonl(mirror)
    assert not bad and len(records) == 3 and summary.total_trials == 3
    assert list(spec.study_dir.glob("trials.jsonl.corrupt-*"))


# -- GPUs ----------------------------------------------------------------------------------------

def test_memory_not_released_stops_the_run(tmp_path: Path) -> None:
    path = write_spec(tmp_path, env={"AUTOTUNE_SIM_RELEASE_DELAY_S": "3"}, release_timeout_s=1)
    spec = spec_mod.load(path)
    summary = run(spec, prepare_backend(spec))
    assert summary.total_trials == 1 and "not released" in summary.stopped_because
    assert not summary.results[0].released
    backend = prepare_backend(spec)
    deadline = time.monotonic() + 10
    while any(g.used_bytes for g in backend.snapshot()) and time.monotonic() < deadline:
        time.sleep(0.1)


class GrabAfterFirst(Progress):
    """A foreign process grabs GPU memory after the first trial."""

    def __init__(self, node_dir: Path) -> None:
        self.holder: subprocess.Popen[str] | None = None
        self.env = {**os.environ, "AUTOTUNE_SIM_NODE": str(node_dir)}

    def trial_finished(self, result: TrialResult, best: TrialResult | None, done: int, budget: int,
                       note: str = "") -> None:
        if done == 1 and self.holder is None:  # the refused trial that follows is reported with done == 1 too
            self.holder = subprocess.Popen([sys.executable, "-m", "autotune.sim.hold", "--gpu", "0", "--gib", "4"],
                                           stdout=subprocess.PIPE, text=True, env=self.env)
            assert self.holder.stdout is not None and self.holder.stdout.readline().startswith("holding")
            self.holder.stdout.close()


def test_foreign_process_grabbing_memory_mid_run_stops_it(tmp_path: Path) -> None:
    path = write_spec(tmp_path, strategy="grid")  # a second launch must come after the grab
    spec = spec_mod.load(path)
    grab = GrabAfterFirst(spec.node_dir())
    try:
        summary = run(spec, prepare_backend(spec), progress=grab)
    finally:
        if grab.holder is not None:
            grab.holder.terminate()
            grab.holder.wait()
    assert "GPUs are busy" in summary.stopped_because and f"pid {grab.holder.pid}" in summary.stopped_because
    assert summary.total_trials == 1  # the refused trial is not a verdict and not counted


def test_nvml_unavailable_is_a_clear_error_and_the_simulator_is_unaffected(node: SimNode) -> None:
    try:
        import pynvml

        pynvml.nvmlInit()
        pynvml.nvmlShutdown()
        pytest.skip("NVML works here: nothing to show")
    except Exception:
        pass
    with pytest.raises(GpuError) as err:
        NvmlBackend().snapshot()
    assert "NVML" in err.value.message and "driver" in err.value.hint and "sim init" in err.value.hint
    assert SimulatedBackend(node.root).snapshot()[0].total_bytes == 48 << 30


# -- servers ---------------------------------------------------------------------------------------

def test_fixed_port_in_use_is_refused_clearly(node: SimNode, tmp_path: Path) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        with pytest.raises(LaunchError) as err:
            run_trial(LaunchConfig(model_path=LLAMA8), settings(node, tmp_path, port=busy.getsockname()[1]),
                      SimulatedBackend(node.root))
    assert "already in use" in err.value.message and "port" in err.value.hint


def test_port_taken_between_check_and_bind_is_not_an_oom(tmp_path: Path) -> None:
    from autotune.classifier.classify import classify_text

    log = ("INFO:     Application startup complete.\n"
           "ERROR:    [Errno 98] error while attempting to bind on address ('127.0.0.1', 30000): address already in use\n")
    verdict = classify_text(log, "sglang", exit_code=3)
    assert verdict.outcome is Outcome.CRASH and "port" in verdict.remedy.lower()


def test_silent_server_times_out(node: SimNode, tmp_path: Path) -> None:
    r = run_trial(LaunchConfig(model_path=LLAMA8), settings(node, tmp_path, faults="silent"),
                  SimulatedBackend(node.root))
    assert r.outcome is Outcome.TIMEOUT and not tagged_processes(r.trial_id)


def test_flooding_server_bounded_log_and_right_verdict(node: SimNode, tmp_path: Path) -> None:
    from dataclasses import replace

    import psutil

    from autotune.settings import Deadlines

    rss0 = psutil.Process().memory_info().rss
    # 100,000 lines take seconds to pass through the pipe, the sink and the classifier; on a loaded machine more than
    # the other fault tests' 30 s start-up deadline. What is tested is the log's bound and the verdict, not the speed.
    s = settings(node, tmp_path, faults="flood", deadlines=Deadlines(startup_s=300, no_progress_s=60,
                                                                     compile_no_progress_s=60, ready_health_s=10))
    r = run_trial(LaunchConfig(model_path=LLAMA8, mem_fraction_static=0.3), s, SimulatedBackend(node.root))
    grew = (psutil.Process().memory_info().rss - rss0) / 2**20
    assert r.outcome is Outcome.OOM_KV_POOL  # the failure after 100,000 flooded lines is still read
    log = Path(r.log_path)
    assert log.stat().st_size < 40 << 20
    print(f"\nflood: log file {log.stat().st_size / 2**20:.1f} MiB, tuner RSS grew {grew:.1f} MiB")
    assert grew < 100
    small = replace(s, trials_dir=tmp_path / "small")
    from autotune.trial import supervisor as sup_mod

    original = sup_mod.LogSink.__init__

    def tiny(self, *a, **kw):  # type: ignore[no-untyped-def]
        original(self, *a, **{**kw, "head_bytes": 1 << 20, "tail_bytes": 256 << 10})

    sup_mod.LogSink.__init__ = tiny  # type: ignore[method-assign]
    try:
        r2 = run_trial(LaunchConfig(model_path=LLAMA8, mem_fraction_static=0.3), small, SimulatedBackend(node.root))
    finally:
        sup_mod.LogSink.__init__ = original  # type: ignore[method-assign]
    assert r2.outcome is Outcome.OOM_KV_POOL, r2.outcome
    text = Path(r2.log_path).read_text(errors="replace")
    assert Path(r2.log_path).stat().st_size < 1.5 * 2**20 and "bytes of this log were dropped" in text
    assert "Not enough memory" in text or "Loaded weights leave no GPU memory" in text  # the tail is kept


def test_invalid_utf8_is_read(node: SimNode, tmp_path: Path) -> None:
    r = run_trial(LaunchConfig(model_path=LLAMA8, mem_fraction_static=0.8, context_length=8192),
                  settings(node, tmp_path, faults="bad_utf8"), SimulatedBackend(node.root))
    assert r.outcome is Outcome.READY


def test_crashes_with_no_error_line_stop_the_run_naming_the_environment(tmp_path: Path) -> None:
    """Three launches in a row that end with no error line (default budget.unexplained_crashes) stop the
    run with exit 1 and a message naming the launcher; none is a memory verdict, and no point is launched
    more than twice. Before, the run spent its whole budget (12 here) on such crashes."""
    path = write_spec(tmp_path, simulated={"faults": "hangup"})  # dies of SIGHUP before a word
    done = subprocess.run([*CLI, "run", str(path)], capture_output=True, text=True, cwd=REPO, timeout=300)
    assert done.returncode == 1, done.stdout[-2000:] + done.stderr[-2000:]
    spec = spec_mod.load(path)
    results = store.results(store.load_study(spec.study, spec.storage))
    assert len(results) == 3 and all(r.outcome is Outcome.CRASH and r.launched for r in results), results
    assert all("signal 1" in r.remedy for r in results), [r.remedy for r in results]
    points = [r.config.key() for r in results]
    assert max(points.count(p) for p in points) <= 2, "a crash with no error line is relaunched at most once"
    said = done.stdout + done.stderr
    assert "3 launches in a row ended with no error line" in said and "autotune.sim.sglang" in said, said[-2000:]


def test_only_unexplained_crashes_in_a_row_stop_the_run(tmp_path: Path) -> None:
    """The count restarts at a launch that says something (an OOM, a fit); GPU_BUSY (nothing launched)
    neither counts nor restarts it; the limit is the spec's field, which refuses a value below 1."""
    import threading
    import types
    from dataclasses import replace

    from autotune.search.loop import _unexplained
    from autotune.trial.run import UNEXPLAINED

    spec = spec_mod.load(write_spec(tmp_path, budget={"unexplained_crashes": 2}))
    search = types.SimpleNamespace(lock=threading.RLock(), unexplained=0)
    silent = TrialResult(trial_id="t", config=LaunchConfig(model_path="m"), engine="sglang", engine_version="0.5.23",
                         outcome=Outcome.CRASH, phase=Phase.SPAWN, remedy="r", evidence=(), figures={}, argv=(),
                         log_path="", exit_code=-1, launched=True, wall_s=1.0, gpu_s=1.0, gpus=(), kv_tokens=None,
                         resolved={}, notes=(f"{UNEXPLAINED}: ...",))
    oom = replace(silent, outcome=Outcome.OOM_KV_POOL, notes=())
    busy = replace(silent, outcome=Outcome.GPU_BUSY, launched=False, notes=())
    said = [_unexplained(search, r, spec) for r in (silent, oom, silent, busy, silent)]  # type: ignore[arg-type]
    assert said[:4] == ["", "", "", ""] and "2 launches in a row" in said[4], said
    with pytest.raises(SpecError) as info:
        spec_mod.load(write_spec(tmp_path, budget={"unexplained_crashes": 0}))
    assert info.value.field == "budget.unexplained_crashes"


# -- bad input -----------------------------------------------------------------------------------

def test_engine_not_installed_is_refused_before_anything_starts(tmp_path: Path) -> None:
    raw = yaml.safe_load(write_spec(tmp_path).read_text())
    raw.pop("simulated")
    raw["launcher"] = "/nonexistent/bin/python -m sglang.launch_server"
    (tmp_path / "spec.yaml").write_text(yaml.safe_dump(raw))
    with pytest.raises(SpecError) as err:
        check_launcher(spec_mod.load(tmp_path / "spec.yaml"))
    assert err.value.field == "launcher" and "not an executable" in err.value.message
    raw["launcher"] = f"{sys.executable} -m sglang.launch_server"  # this venv has no SGLang
    (tmp_path / "spec.yaml").write_text(yaml.safe_dump(raw))
    out = subprocess.run([*CLI, "run", str(tmp_path / "spec.yaml")], cwd=REPO, capture_output=True, text=True)
    assert out.returncode == 2 and "sglang is not installed" in out.stderr and "pip install sglang" in out.stderr
    assert not (tmp_path / "results").exists()


# -- security --------------------------------------------------------------------------------------

def test_secrets_never_reach_records_logs_or_reports(tmp_path: Path) -> None:
    secret = "sk-VERY-SECRET-0123456789"
    path = write_spec(tmp_path, api_key_env="SERVER_KEY")
    env = {**os.environ, "SERVER_KEY": secret}
    out = subprocess.run([*CLI, "run", str(path)], cwd=REPO, capture_output=True, text=True, env=env, timeout=300)
    assert out.returncode == 0, out.stderr
    assert secret not in out.stdout + out.stderr
    spec = spec_mod.load(path)
    summary_best = store.results(store.load_study(spec.study, spec.storage))
    assert any(r.outcome is Outcome.READY for r in summary_best)  # the server demanded the key and got it
    found = [p for p in spec.study_dir.rglob("*") if p.is_file() and secret.encode() in p.read_bytes()]
    assert not found, f"the secret leaked into {found}"
    logs = "".join(p.read_text(errors="replace") for p in spec.study_dir.rglob("server.log"))
    # the server printed it (0.5.23's server_args dict: 'api_key': '...'); the log we keep has it scrubbed
    assert "'api_key': '***'" in logs


def test_paths_with_spaces_quotes_and_semicolons_are_argv_elements(tmp_path: Path) -> None:
    odd = tmp_path / 'my model "x"; touch pwned'
    odd.mkdir()
    (odd / "config.json").write_text((MODELS / "Meta-Llama-3.1-8B" / "config.json").read_text())
    path = write_spec(tmp_path, model=str(odd), budget={"trials": 2})
    spec = spec_mod.load(path)
    summary = run(spec, prepare_backend(spec))
    assert any(r.outcome is Outcome.READY for r in summary.results)
    assert not list(tmp_path.rglob("pwned")) and not (REPO / "pwned").exists()


def test_servers_bind_localhost_and_results_are_not_world_writable(tmp_path: Path) -> None:
    path = write_spec(tmp_path, budget={"trials": 2})
    out = subprocess.run([*CLI, "run", str(path)], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    spec = spec_mod.load(path)
    for r in store.results(store.load_study(spec.study, spec.storage)):
        assert r.argv[r.argv.index("--host") + 1] == "127.0.0.1"
    writable = [p for p in spec.study_dir.rglob("*") if p.stat().st_mode & stat.S_IWOTH]
    assert not writable, writable
