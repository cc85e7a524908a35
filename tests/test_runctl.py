"""Runs say what happened: exit codes per outcome, one run per study, trial tags unique per
host, recovery said at the start, Ctrl-C/SIGTERM on every command, and the API key kept a
reference. Real `autotune` subprocesses, real signals, the real Optuna storage."""

from __future__ import annotations

import dataclasses
import json
import os
import pty
import select
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import optuna
import psutil
import pytest

from autotune import spec as spec_mod
from autotune import store
from autotune.config import LaunchConfig
from autotune.engines import ENGINES
from autotune.engines.sglang import SglangEngine
from autotune.machine import prepare_backend
from autotune.records import Outcome, Phase, TrialResult
from autotune.redact import redact_argv, redact_url, secret_values
from autotune.report.markdown import render
from autotune.sim.backend import SimulatedBackend
from autotune.sim.node import SimNode
from autotune.trial.run import run_trial
from autotune.trial.supervisor import tagged_processes
from tests.conftest import REPO
from tests.test_faults import CLI, wait_for_running_trial, write_spec
from tests.test_trial import LLAMA8, settings


def spec_in(tmp_path: Path, name: str, **over: object) -> Path:
    """write_spec in its own directory (its own results, its own simulated node)."""
    d = tmp_path / name
    d.mkdir()
    return write_spec(d, **over)


def start_run(path: Path, *args: str, **kw: object) -> subprocess.Popen[str]:
    return subprocess.Popen([*CLI, "run", str(path), *args], cwd=REPO, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, **kw)  # type: ignore[call-overload]


def outcomes(path: Path) -> list[Outcome]:
    spec = spec_mod.load(path)
    return [r.outcome for r in store.results(store.load_study(spec.study, spec.storage))]


# -- issue 18: one study name, two results directories ------------------------------------------

@pytest.mark.slow  # make test-slow (the default run's time)
def test_same_study_name_in_two_results_dirs_never_stops_the_others_servers(tmp_path: Path) -> None:
    slow = spec_in(tmp_path, "slow", simulated={"time_scale": 0.3}, budget={"trials": 2})
    fast = spec_in(tmp_path, "fast", budget={"trials": 1})
    proc = start_run(slow)
    try:
        # the fast run starts once the slow run's trial 0 runs its server, so its trial 0 starts and ends inside that
        # one (started at once, the slow run's start-up could take longer than the whole fast run: a failed CI run)
        wait_for_running_trial(spec_mod.load(slow), timeout=120)
        out = subprocess.run([*CLI, "run", str(fast)], cwd=REPO, capture_output=True, text=True, timeout=300)
        assert out.returncode == 0, out.stderr
        _, err = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
            proc.communicate(timeout=60)
    slow_study, fast_study = (store.load_study("f", spec_mod.load(p).storage) for p in (slow, fast))
    s0, f0 = slow_study.trials[0], fast_study.trials[0]
    for path in (slow, fast):  # each run's verdicts are its own: nobody's server was killed under it
        assert Outcome.CRASH not in outcomes(path) and Outcome.READY in outcomes(path), outcomes(path)
    assert proc.returncode == 0, err
    assert s0.datetime_start < f0.datetime_complete < s0.datetime_complete, \
        "precondition: the fast run's trial 0 must end (and stop its server) while the slow run's trial 0 runs"
    assert s0.user_attrs["trial_id"] != f0.user_attrs["trial_id"]  # same study name, same number, two tags
    assert s0.user_attrs["trial_id"].startswith("f-") and s0.user_attrs["trial_id"].endswith("-0000")


# -- one run per study ------------------------------------------------------------------------

def test_a_second_run_of_the_same_study_is_refused_up_front(tmp_path: Path) -> None:
    path = write_spec(tmp_path, simulated={"time_scale": 1.0}, budget={"trials": 2})
    first = start_run(path)
    try:
        running = wait_for_running_trial(spec_mod.load(path), timeout=120)
        second = subprocess.run([*CLI, "run", str(path)], cwd=REPO, capture_output=True, text=True, timeout=120)
        assert tagged_processes(running.user_attrs["trial_id"]), "the first run's server must be untouched"
    finally:
        first.send_signal(signal.SIGINT)
        first.communicate(timeout=60)
    assert second.returncode == 2, second.stderr
    assert f"pid {first.pid}" in second.stderr and "already being tuned" in second.stderr
    assert "hint:" in second.stderr and "Traceback" not in second.stderr
    assert Outcome.GPU_BUSY not in outcomes(path)  # nothing of the refused run reached the study


# -- recovery of a trial left RUNNING ---------------------------------------------------------------

ASK_THEN_DIE = """
import os, signal, sys
from autotune import store
study = store.load_study(sys.argv[1], sys.argv[2])
study.ask()  # what `tpe`/`random` do; the tuner dies before it says who it is or launches
os.kill(os.getpid(), signal.SIGKILL)
"""


def test_a_run_killed_between_trials_leaves_no_trial_running_and_the_resume_says_so_first(tmp_path: Path) -> None:
    # grid: the frontier converges on this space in one launch, and a converged study launches nothing more
    path = write_spec(tmp_path, budget={"trials": 1}, strategy="grid")
    assert subprocess.run([*CLI, "run", str(path)], cwd=REPO, capture_output=True, timeout=300).returncode == 0
    spec = spec_mod.load(path)
    killed = subprocess.run([sys.executable, "-c", ASK_THEN_DIE, spec.study, spec.storage], cwd=REPO)
    assert killed.returncode == -signal.SIGKILL
    stuck = [t.number for t in store.load_study(spec.study, spec.storage).trials
             if t.state == optuna.trial.TrialState.RUNNING]
    assert stuck == [1]
    out = subprocess.run([*CLI, "run", str(write_spec(tmp_path, budget={"trials": 2}))], cwd=REPO,
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    trial = store.load_study(spec.study, spec.storage).trials[1]
    assert trial.state == optuna.trial.TrialState.FAIL and trial.user_attrs["interrupted"] is True
    lines = out.stdout.splitlines()
    said = [i for i, line in enumerate(lines) if line.startswith("recovered trial 1 ")]
    assert said and said[0] < next(i for i, line in enumerate(lines) if line.startswith("study f:")), out.stdout


# -- exit codes ---------------------------------------------------------------------------------

def test_run_exit_status_says_whether_there_is_an_answer(tmp_path: Path) -> None:
    nothing = spec_in(tmp_path, "nothing", simulated={"gpu_mem_gib": 8}, budget={"trials": 3})
    out = subprocess.run([*CLI, "run", str(nothing)], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert out.returncode == 1 and "no answer: nothing fitted" in out.stderr, (out.returncode, out.stderr)
    assert "recommended command" not in out.stdout
    assert "Warning" not in out.stderr  # no matplotlib noise about an empty plot

    busy = spec_in(tmp_path, "busy")
    prepare_backend(spec_mod.load(busy))  # the node exists before the foreign process takes memory on it
    node = spec_mod.load(busy).node_dir()
    holder = subprocess.Popen([*CLI, "sim", "hold", "--gpu", "0", "--gib", "4"], stdout=subprocess.PIPE, text=True,
                              env={**os.environ, "AUTOTUNE_SIM_NODE": str(node)})
    try:
        assert holder.stdout is not None and holder.stdout.readline().startswith("holding")
        out = subprocess.run([*CLI, "run", str(busy)], cwd=REPO, capture_output=True, text=True, timeout=300)
    finally:
        holder.terminate()
        holder.communicate(timeout=30)
    assert out.returncode == 1 and "GPUs are busy" in out.stderr, (out.returncode, out.stderr)

    bad = spec_in(tmp_path, "bad", budget={"trials": "many"})
    out = subprocess.run([*CLI, "run", str(bad)], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert out.returncode == 2 and "budget" in out.stderr and "Traceback" not in out.stderr

    ok = spec_in(tmp_path, "ok", budget={"trials": 2})  # budget spent with a fitting config: an answer
    out = subprocess.run([*CLI, "run", str(ok)], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0 and "recommended command" in out.stdout, out.stderr


def test_run_takes_a_storage_url_and_the_tool_has_a_version(tmp_path: Path) -> None:
    path = write_spec(tmp_path, budget={"trials": 1})
    url = f"sqlite:///{tmp_path / 'elsewhere.db'}"
    out = subprocess.run([*CLI, "run", str(path), "--storage", url], cwd=REPO, capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, out.stderr
    assert len(store.results(store.load_study("f", url))) == 1
    assert not Path(spec_mod.load(path).storage.removeprefix("sqlite:///")).exists()
    version = subprocess.run([*CLI, "--version"], cwd=REPO, capture_output=True, text=True)
    assert version.returncode == 0 and version.stdout.startswith("autotune ")


def test_help_is_not_cut_at_80_columns_and_estimate_names_its_options() -> None:
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
    out = subprocess.run([*CLI, "estimate", "--help"], cwd=REPO, capture_output=True, text=True, env=env)
    assert "--mem-fraction-static / --gpu-memory-utilization" in out.stdout and "…" not in out.stdout
    out = subprocess.run([*CLI, "estimate", "--model", str(REPO / "configs/models/Meta-Llama-3.1-8B"),
                          "--gpu-mem-gib", "48", "--gpus", "2", "--tp", "3"], cwd=REPO, capture_output=True, text=True)
    assert out.returncode == 1 and "option --tp" in out.stderr and "spec field" not in out.stderr


# -- interrupts ---------------------------------------------------------------------------------

def _read_all(fd: int, sink: list[bytes]) -> None:
    while True:
        try:
            ready, _, _ = select.select([fd], [], [], 0.1)
            if ready:
                data = os.read(fd, 65536)
                if not data:
                    return
                sink.append(data)
        except OSError:  # EIO: the other side closed
            return


def test_ctrl_c_on_a_terminal_shows_the_cursor_again_and_names_the_signal(tmp_path: Path) -> None:
    path = write_spec(tmp_path, simulated={"time_scale": 0.05})
    master, slave = pty.openpty()
    proc = subprocess.Popen([*CLI, "run", str(path)], cwd=REPO, stdout=slave, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "TERM": "xterm"})
    os.close(slave)
    screen: list[bytes] = []
    reader = threading.Thread(target=_read_all, args=(master, screen), daemon=True)
    reader.start()
    try:
        wait_for_running_trial(spec_mod.load(path), timeout=120)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    finally:
        reader.join(timeout=10)
        os.close(master)
    text = b"".join(screen)
    assert proc.returncode == 130 and "interrupted (SIGINT): the server was stopped" in err, err
    assert b"\x1b[?25l" in text, "the live panel should have hidden the cursor"
    assert text.rfind(b"\x1b[?25h") > text.rfind(b"\x1b[?25l"), "the cursor is left hidden"


def test_a_second_signal_during_the_cleanup_does_not_escape(tmp_path: Path) -> None:
    path = write_spec(tmp_path, simulated={"time_scale": 0.05})
    proc = start_run(path)
    try:
        running = wait_for_running_trial(spec_mod.load(path), timeout=90)
    except AssertionError:
        proc.kill()  # reaped here, not left to a later test's garbage collection
        raise AssertionError(f"the run got no trial running: {proc.communicate(timeout=60)}") from None
    for sig in (signal.SIGINT, signal.SIGINT, signal.SIGTERM, signal.SIGINT):  # an impatient user, then a supervisor
        proc.send_signal(sig)
        time.sleep(0.02)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130 and "interrupted (SIGINT)" in err and "Traceback" not in err, err
    assert not tagged_processes(running.user_attrs["trial_id"])
    spec = spec_mod.load(path)
    states = {t.state for t in store.load_study(spec.study, spec.storage).trials}
    assert optuna.trial.TrialState.RUNNING not in states


def test_regress_under_sigterm_exits_130_not_regression(tmp_path: Path) -> None:
    path = write_spec(tmp_path, budget={"trials": 3})
    assert subprocess.run([*CLI, "run", str(path)], cwd=REPO, capture_output=True, timeout=300).returncode == 0
    slow = write_spec(tmp_path, budget={"trials": 3}, simulated={"time_scale": 0.1})
    proc = subprocess.Popen([*CLI, "regress", str(slow), "--baseline", "f"], cwd=REPO, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while not psutil.Process(proc.pid).children(recursive=True):  # a server is up
        assert time.monotonic() < deadline and proc.poll() is None, "regress never launched"
        time.sleep(0.05)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130 and "interrupted (SIGTERM)" in err and "Traceback" not in err, err


# -- the API key ----------------------------------------------------------------------------------

def test_the_recommended_command_refers_to_the_key_and_never_holds_it(tmp_path: Path) -> None:
    secret = "sk-RUNCTL-0123456789"
    path = write_spec(tmp_path, api_key_env="SERVER_KEY", host="0.0.0.0", budget={"trials": 2})
    env = {**os.environ, "SERVER_KEY": secret}
    out = subprocess.run([*CLI, "run", str(path)], cwd=REPO, capture_output=True, text=True, env=env, timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.count("takes its API key only as --api-key") == 1  # SGLang: said once
    spec = spec_mod.load(path)
    best = subprocess.run([*CLI, "best", str(path)], cwd=REPO, capture_output=True, text=True, env=env)
    report = (spec.study_dir / "report.md").read_text()
    for text in (out.stdout, best.stdout, report):
        assert '--api-key "$SERVER_KEY"' in text and secret not in text
    pasted = subprocess.run(["bash", "-c", f'set -- {best.stdout.strip()}; printf "%s\\n" "$@"'],
                            capture_output=True, text=True, env=env)
    args = pasted.stdout.splitlines()
    assert args[args.index("--api-key") + 1] == secret  # pasted, the shell fills in the key


@pytest.mark.parametrize("argv", [["--api-k", "s3cret-value"], ["--api-ke=s3cret-value"], ["--admin-api", "s3cret-value"]])
def test_abbreviated_secret_flags_are_redacted(argv: list[str]) -> None:
    full = ["python", "-m", "sglang.launch_server", "--model-path", "m", *argv]
    assert "s3cret-value" not in " ".join(redact_argv(full))
    assert "s3cret-value" in secret_values(full)
    assert redact_argv(["x", "--host", "h"]) == ["x", "--host", "h"]


@pytest.mark.parametrize(("url", "shown"), [
    ("postgresql://tuner:s3cret@db:5432/studies", "postgresql://tuner:***@db:5432/studies"),
    ("postgresql://tuner:p@ss@db/studies", "postgresql://tuner:***@db/studies"),  # an @ in the password
    ("postgresql://tuner@db/studies", "postgresql://tuner@db/studies"),  # no password: nothing to mask
    ("sqlite:///results/optuna.db", "sqlite:///results/optuna.db"),
])
def test_a_storage_url_is_shown_without_its_password(url: str, shown: str) -> None:
    assert redact_url(url) == shown


# -- report.md ----------------------------------------------------------------------------------

READY = "The server is fired up and ready to roll!"
DECODE_OOM = "Decode out of memory. Try to lower your batch size."
MARKER = "Scheduler hit an exception: Traceback (most recent call last):"
LOAD_END = "Load weight end. type=DeepseekV3ForCausalLM, dtype=torch.bfloat16, avail mem=21.73 GB, mem usage=166.59 GB."
PROFILED = "max_total_tokens=131072 is larger than the profiled value -561981. Use the profiled value instead."

DRAFT_LOAD = "Load weight begin. avail mem=1.54 GB"
TORCH_OOM = ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 0.18 GiB. GPU 0 has a total capacity of "
             "48.00 GiB of which 0.11 GiB is free.")


def failed(outcome: Outcome, *evidence: str) -> TrialResult:
    return TrialResult(trial_id="t", config=LaunchConfig(model_path="m"), engine="sglang", engine_version="0.5.23",
                       outcome=outcome, phase=Phase.PROBE, remedy="lower it", evidence=evidence, figures={}, argv=(),
                       log_path="", exit_code=None, launched=True, wall_s=1.0, gpu_s=1.0, gpus=(), kv_tokens=None,
                       resolved={})


@pytest.mark.parametrize(("result", "deciding", "context"), [
    (failed(Outcome.OOM_RUNTIME, READY, DECODE_OOM, MARKER), DECODE_OOM, READY),
    (failed(Outcome.OOM_KV_POOL, LOAD_END, PROFILED), PROFILED, LOAD_END),
    (failed(Outcome.OOM_KV_POOL, DRAFT_LOAD, TORCH_OOM, MARKER), TORCH_OOM, DRAFT_LOAD),  # the draft's pool, 0.5.9
])
def test_report_why_quotes_the_deciding_line_not_its_context(result: TrialResult, deciding: str, context: str) -> None:
    text = render("s", {"engine": "sglang"}, {}, [result], None)
    row = next(line for line in text.splitlines() if line.startswith("| 0 |"))
    assert f"`{deciding[:140]}`" in row and context[:40] not in row


def test_a_run_recognises_its_own_studys_processes_on_the_gpus(tmp_path: Path) -> None:
    # grid: the frontier converges on this space in one launch, and a converged study launches nothing more
    path = write_spec(tmp_path, budget={"trials": 1}, strategy="grid")
    assert subprocess.run([*CLI, "run", str(path)], cwd=REPO, capture_output=True, timeout=300).returncode == 0
    spec = spec_mod.load(path)
    own = f"f-{store.study_tag(store.load_study(spec.study, spec.storage))}-0099"  # e.g. a server that outlived it
    holder = subprocess.Popen([*CLI, "sim", "hold", "--gpu", "0", "--gib", "4"], stdout=subprocess.PIPE, text=True,
                              env={**os.environ, "AUTOTUNE_SIM_NODE": str(spec.node_dir()), "AUTOTUNE_TRIAL_ID": own})
    try:
        assert holder.stdout is not None and holder.stdout.readline().startswith("holding")
        out = subprocess.run([*CLI, "run", str(write_spec(tmp_path, budget={"trials": 3}, strategy="grid"))], cwd=REPO,
                             capture_output=True, text=True, timeout=300)
    finally:
        holder.terminate()
        holder.communicate(timeout=30)
    assert out.returncode == 1, out.stderr
    assert f"this study's own server(s), pid {holder.pid} (trial {own})" in out.stderr
    assert "someone else's" not in out.stderr


class EnvKeyEngine(SglangEngine):
    """The SGLang adapter as if its server read the key from the environment (as vLLM does)."""

    api_key_env = "VLLM_API_KEY"


@pytest.mark.parametrize(("engine", "on_argv"), [(SglangEngine(), True), (EnvKeyEngine(), False)])
def test_the_key_goes_by_environment_where_the_engine_reads_it_there(
        node: SimNode, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, engine: SglangEngine, on_argv: bool) -> None:
    monkeypatch.setitem(ENGINES, "sglang", dataclasses.replace(ENGINES["sglang"], adapter=engine))
    secret = "sk-ENV-ONLY-0123456789"
    seen: list[tuple[list[str], str | None]] = []

    def look(phase: str, used: tuple[int, ...], totals: tuple[int, ...]) -> None:
        for proc in tagged_processes("envkey-1"):
            try:
                seen.append((proc.cmdline(), proc.environ().get("VLLM_API_KEY")))
            except psutil.Error:
                pass

    result = run_trial(LaunchConfig(model_path=LLAMA8, mem_fraction_static=0.85, context_length=8192),
                       settings(node, tmp_path, api_key=secret), SimulatedBackend(node.root), "envkey-1", on_phase=look)
    assert result.outcome is Outcome.READY and seen
    assert any(secret in " ".join(cmd) for cmd, _ in seen) is on_argv  # what `ps` shows
    assert any(key == secret for _, key in seen) is not on_argv
    assert secret not in json.dumps(result.to_dict())
