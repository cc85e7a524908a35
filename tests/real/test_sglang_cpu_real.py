"""SGLang for real, on this machine's CPU (issue 31): 0.5.9 (the seed's release) and 0.5.23 (its upgrade),
installed by `make sglang-cpu` into ~/.cache/autotune/engines/sglang-<version>.

- `autotune run configs/sglang-cpu.yaml` converges, exits 0 and leaves no SGLang process and no /dev/shm
  entry behind;
- the command `best --format json` prints, launched by hand exactly as printed (its `env` prefix
  included), serves a request and its pool holds context x min_concurrency; the same command at the
  space's next larger context does not;
- a tuner SIGKILLed in the middle of a real launch leaves a real server holding memory: the next run
  finds it by its tag, stops it and resumes, nothing lost;
- `autotune regress` across the real upgrade (0.5.9 baseline, 0.5.23 current) exits 0 or 1 and its
  report names both versions.
One SGLang server at a time (the host's memory is the device); each test checks what is left.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest
import requests
import yaml

from autotune.engines.sglang import SglangCpuEngine
from autotune.engines.sglang.cpu import install_dir
from autotune.gpu.hostmem import processes_of
from tests.conftest import REPO
from tests.real.conftest import AUTOTUNE, trial_signalled

pytestmark = [pytest.mark.real_engine, pytest.mark.timeout(1500)]
def sglang_processes() -> list[Any]:
    return list(processes_of(SglangCpuEngine))


def shm_entries() -> set[str]:
    return {n for n in os.listdir("/dev/shm") if n.startswith(("sglang", "sem.mp-", "psm_"))}


def installed(version: str) -> Path:
    env = install_dir(version)
    if not (env / f".installed-{version}").is_file():
        pytest.skip(f"SGLang {version} is not installed in {env}: run `make sglang-cpu` first (~4 min a version)")
    return env


@pytest.fixture(scope="module")
def quiet() -> Iterator[None]:
    """No other SGLang on this host: it would hold host memory (the run would stop on a busy device)."""
    installed("0.5.9")
    if sglang_processes():
        pytest.skip(f"another SGLang runs on this host: {[(p.pid, p.name[:40]) for p in sglang_processes()]}")
    yield
    assert not sglang_processes(), f"SGLang processes left: {sglang_processes()}"


def write_spec(folder: Path, config: str = "sglang-cpu.yaml", **changes: Any) -> Path:
    raw = yaml.safe_load((REPO / "configs" / config).read_text())
    raw.update(model=str(REPO / "configs" / "models" / "tiny-llama-cpu-1m"), results_dir=str(folder / "results"))
    raw.update(changes)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / config
    path.write_text(yaml.safe_dump(raw))
    return path


def autotune(*args: str, timeout: float = 1400) -> subprocess.CompletedProcess[str]:
    done = subprocess.run([str(AUTOTUNE), *args], capture_output=True, text=True, timeout=timeout)
    print(f"$ autotune {' '.join(args)}  (rc {done.returncode})\n{done.stdout[-4000:]}\n{done.stderr[-3000:]}")
    return done


@pytest.fixture(scope="module")
def study_059(tmp_path_factory: pytest.TempPathFactory, quiet: None) -> Path:
    """One real run of configs/sglang-cpu.yaml (0.5.9), shared by the tests that read its study."""
    folder = tmp_path_factory.mktemp("sglang-059")
    spec = write_spec(folder)
    shm_before = shm_entries()
    t0 = time.monotonic()
    done = autotune("run", str(spec))
    print(f"autotune run: {time.monotonic() - t0:.0f} s")
    assert done.returncode == 0
    assert not sglang_processes(), f"left running: {sglang_processes()}"
    assert shm_entries() <= shm_before, f"left in /dev/shm: {shm_entries() - shm_before}"
    return spec


class Served:
    """A server started by hand from an argv, as a user pastes it; stopped like a user would (SIGTERM to
    its group). SGLang 0.5.9 stopped so leaves its multiprocessing semaphores (`sem.mp-*`) in /dev/shm
    (seen: two per server): that is the engine's, not the tool's, and `stop` removes what it left."""

    def __init__(self, argv: list[str], port: int, log: Path) -> None:
        self.port = port
        self.shm_before = shm_entries()
        self.out = log.open("w")
        self.proc = subprocess.Popen(argv, stdout=self.out, stderr=subprocess.STDOUT, start_new_session=True)

    def wait_ready(self, timeout_s: float = 600) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            assert self.proc.poll() is None, f"the server exited {self.proc.returncode}"
            try:
                if requests.get(f"http://127.0.0.1:{self.port}/health", timeout=5).status_code == 200:
                    return
            except requests.RequestException:
                pass
            time.sleep(1)
        raise AssertionError(f"not ready in {timeout_s} s")

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=30)
        deadline = time.monotonic() + 30
        while sglang_processes() and time.monotonic() < deadline:  # its children leave after the launcher
            time.sleep(0.5)
        self.out.close()
        left = shm_entries() - self.shm_before
        print(f"a hand-started server, stopped with SIGTERM, left in /dev/shm: {sorted(left)}")
        for name in left:
            Path("/dev/shm", name).unlink(missing_ok=True)


def with_port(argv: list[str], port: int, context: int | None = None) -> list[str]:
    out = list(argv)
    out[out.index("--port") + 1] = str(port)
    if context is not None:
        out[out.index("--context-length") + 1] = str(context)
    return out


def test_run_converges_and_the_printed_command_serves_its_context_and_no_more(study_059: Path, tmp_path: Path) -> None:
    done = autotune("best", str(study_059), "--format", "json")
    assert done.returncode == 0
    best = json.loads(done.stdout)
    argv, config = best["argv"], best["config"]
    assert argv[0] == "env" and "SGLANG_USE_CPU_ENGINE=1" in argv, "the command carries its environment"
    assert "--device" in argv and "--sleep-on-idle" in argv
    spec = yaml.safe_load(study_059.read_text())
    need = config["context_length"] * spec["goal"]["min_concurrency"]
    contexts = [c for c in (2 ** k for k in range(10, 21)) if c > config["context_length"]]
    shm_before = shm_entries()

    server = Served(with_port(argv, 31480), 31480, tmp_path / "best.log")  # exactly as printed, on a free port
    try:
        server.wait_ready()
        answer = requests.post("http://127.0.0.1:31480/generate", timeout=300,
                               json={"input_ids": list(range(1000, 1064)), "sampling_params": {"max_new_tokens": 4}})
        assert answer.status_code == 200 and len(answer.json()["output_ids"]) == 4
        pool = requests.get("http://127.0.0.1:31480/server_info", timeout=10).json()["max_total_num_tokens"]
        time.sleep(3)  # the request's last decode steps and the detokenizer
        scheduler = next(psutil.Process(p.pid) for p in sglang_processes() if p.name.startswith("sglang::scheduler"))
        idle = scheduler.cpu_times()
        time.sleep(10)
        busy_s = sum(scheduler.cpu_times()[:2]) - sum(idle[:2])
    finally:
        server.stop()
    print(f"idle scheduler: {busy_s:.2f} CPU-s in 10 s (it spins a whole core without --sleep-on-idle)")
    assert busy_s < 2.0
    print(f"best: context {config['context_length']}, pool {pool} tokens (needs {need})")
    assert pool >= need

    bigger = Served(with_port(argv, 31481, contexts[0]), 31481, tmp_path / "bigger.log")
    try:
        bigger.wait_ready()
        larger_pool = requests.get("http://127.0.0.1:31481/server_info", timeout=10).json()["max_total_num_tokens"]
    finally:
        bigger.stop()
    print(f"next context {contexts[0]}: pool {larger_pool} tokens (needs {contexts[0] * spec['goal']['min_concurrency']})")
    assert larger_pool < contexts[0] * spec["goal"]["min_concurrency"]
    assert not sglang_processes()
    assert shm_entries() <= shm_before, f"left in /dev/shm: {shm_entries() - shm_before}"


def test_a_tuner_killed_mid_launch_leaves_a_server_the_next_run_stops_and_resumes(tmp_path: Path, quiet: None) -> None:
    spec = write_spec(tmp_path, study="sglang-cpu-kill", budget={"trials": 3, "wall_time_s": 1800})
    shm_before = shm_entries()
    log = (tmp_path / "run1.log").open("w")
    tuner = subprocess.Popen([str(AUTOTUNE), "run", str(spec)], stdout=log, stderr=subprocess.STDOUT,
                             start_new_session=True)
    try:
        deadline = time.monotonic() + 600
        while not any(p.name.startswith("sglang::scheduler") for p in sglang_processes()):
            assert tuner.poll() is None, (tmp_path / "run1.log").read_text()[-2000:]
            assert time.monotonic() < deadline, "no scheduler after 600 s"
            time.sleep(0.5)
        os.kill(tuner.pid, signal.SIGKILL)  # the tuner only: its server lives in its own process group
        tuner.wait(timeout=30)
    finally:
        log.close()
    orphans = [psutil.Process(p.pid) for p in sglang_processes()]
    assert orphans, "the server died with its tuner: nothing to recover"
    held = sum(p.memory_info().rss for p in orphans)
    print(f"orphans: {[(p.pid, p.name()) for p in orphans]}, {held / 2**30:.2f} GiB resident")

    done = autotune("run", str(spec))
    assert "orphaned process(es) stopped" in done.stdout + done.stderr
    assert done.returncode == 0
    assert not any(p.is_running() for p in orphans)
    assert not sglang_processes()
    assert shm_entries() <= shm_before, f"left in /dev/shm: {shm_entries() - shm_before}"
    trials = list((tmp_path / "results" / "sglang-cpu-kill" / "trials").iterdir())
    interrupted = [t for t in trials if (t / "interrupted.json").is_file()]
    finished = [t for t in trials if (t / "result.json").is_file()]
    assert len(interrupted) == 1 and finished, "the interrupted trial is recorded, the run went on"


def test_regress_across_the_real_upgrade(study_059: Path, tmp_path: Path) -> None:
    installed("0.5.23")
    current = write_spec(study_059.parent, "sglang-cpu-0.5.23.yaml")
    shm_before = shm_entries()
    done = autotune("regress", str(current), "--baseline", "sglang-cpu", "--budget", "3")
    assert done.returncode in (0, 1), done.stderr[-2000:]
    report = study_059.parent / "results" / "sglang-cpu-0.5.23" / "regress-vs-sglang-cpu.md"
    text = report.read_text()
    assert "sglang-cpu 0.5.9" in text and "sglang-cpu 0.5.23" in text
    assert "the box's moves allowed for" in text  # the pool's change net of the host's memory moves
    assert not sglang_processes()
    assert shm_entries() <= shm_before


def test_a_scheduler_killed_while_serving_is_a_crash_not_a_slow_machine(tmp_path: Path, quiet: None) -> None:
    """SGLang 0.5.9 says nothing when its scheduler dies once it serves: /health answered, the front end stays up and
    the probe's request waits (tests/data/launch-census, kill-ready). The trial sees the process that held the weights
    gone since the ready line: CRASH at the probe, never the TIMEOUT of a slow machine; nothing is left."""
    spec = write_spec(tmp_path, study="sglang-cpu-dead-scheduler",
                      probe={"long_request": False, "burst": 1, "burst_tokens": 64, "max_new_tokens": 512,
                             "timeout_s": 30})
    shm_before = shm_entries()

    def scheduler_once_serving(log: str) -> int | None:
        served = log.split("The server is fired up and ready to roll!", 1)[-1] if "ready to roll" in log else ""
        # the probe's 64-token prompt is with the scheduler (0.5.9's /health prefills one token of its own)
        if not re.search(r"Prefill batch, #new-seq: \d+, #new-token: (?:[3-9]\d|\d{3,})", served):
            return None
        return next(p for p in sglang_processes() if p.name.startswith("sglang::scheduler")).pid

    result, killed, _ = trial_signalled(tmp_path, spec, scheduler_once_serving, signal.SIGKILL,
                                        waiting_for="a request served", end_s=300)
    print(f"killed scheduler {killed}: {result['outcome']} {result['phase']}: {result['remedy']}")
    assert (result["outcome"], result["phase"]) == ("CRASH", "probe"), result["remedy"]
    assert "died while it served" in result["remedy"] and str(killed) in result["remedy"]
    assert not sglang_processes()
    assert shm_entries() <= shm_before, f"left in /dev/shm: {shm_entries() - shm_before}"
