"""`autotune trial` / `autotune run` on vLLM's real CPU build, one outcome each (issue 12), and the
recovery of a tuner SIGKILLed mid-boot (issue 18.3). Each checks the deciding line, the figures, and
that nothing is left: no engine process, the port free, no new /dev/shm entry, node memory back to
its baseline. One vLLM at a time; run with `make test-real`."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest
import yaml

from autotune.gpu.hostmem import HostMemBackend, engine_processes
from autotune.records import GIB
from tests.conftest import REPO
from tests.real.conftest import AUTOTUNE, trial_signalled

pytestmark = [pytest.mark.real_engine, pytest.mark.timeout(1200)]


@pytest.fixture
def quiet_host(vllm_python: Path) -> Iterator[set[str]]:
    """No other vLLM on this host (it would move node memory and make it busy); /dev/shm listed before."""
    others = engine_processes()
    if others:
        pytest.skip(f"another vLLM runs on this host: {[(p.pid, p.name[:40]) for p in others]}")
    before = set(os.listdir("/dev/shm"))
    yield before
    assert not engine_processes(), f"engine processes left: {engine_processes()}"


def write_spec(tmp_path: Path, **changes: Any) -> Path:
    raw = yaml.safe_load((REPO / "configs" / "vllm-cpu.yaml").read_text())
    raw.update(model=str(REPO / "configs" / "models" / "tiny-llama-cpu"), results_dir=str(tmp_path / "results"),
               launcher=f"{REPO / '.venv-vllm' / 'bin' / 'python'} -m vllm.entrypoints.openai.api_server")
    for key, value in changes.items():
        if key.startswith("space."):
            raw["space"][key.removeprefix("space.")] = value
        else:
            raw[key] = value
    path = tmp_path / "vllm-cpu.yaml"
    path.write_text(yaml.safe_dump(raw))
    return path


def trial(spec: Path, *sets: str, allow_busy: bool = False) -> dict[str, Any]:
    argv = [str(AUTOTUNE), "trial", str(spec), "--json", *(a for s in sets for a in ("--set", s))]
    if allow_busy:
        argv.append("--allow-busy")
    done = subprocess.run(argv, capture_output=True, text=True, timeout=1100)
    assert done.stdout.strip(), f"no result (rc {done.returncode}): {done.stderr[-2000:]}"
    result: dict[str, Any] = json.loads(done.stdout)
    print(json.dumps({k: result.get(k) for k in ("outcome", "evidence", "figures", "kv_tokens", "wall_s", "notes",
                                                  "gpus", "probe")}, indent=1))
    return result


def port_free(port: int) -> bool:
    """Nothing listens on it: a new server (which binds with SO_REUSEADDR, as uvicorn does) can take it,
    whatever closed connections still linger in TIME_WAIT."""
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
            s.listen()
            return True
        except OSError:
            return False


def back_to_baseline(final: int, baseline: int, within_s: float = 60.0) -> bool:
    """The node back within the release tolerance of the trial's baseline: as the trial recorded it, or, on
    a host whose used memory is still settling when the trial ends (seen on this VM with 1.5 GiB held by
    another process: 364-473 MiB above for a moment, with the code before this change too), by a fresh
    reading within `within_s`. A server that still held memory would never come back."""
    tolerance = HostMemBackend.release_tolerance_bytes
    if final - baseline <= tolerance:
        return True
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        used = HostMemBackend().snapshot()[0].used_bytes
        if used - baseline <= tolerance:
            print(f"node back within {tolerance >> 20} MiB of its baseline after the trial ended "
                  f"({(final - baseline) >> 20} MiB above when it did)")
            return True
        time.sleep(0.5)
    return False


def assert_clean(result: dict[str, Any], shm_before: set[str]) -> None:
    argv = result["argv"]
    if result["launched"]:
        assert port_free(int(argv[argv.index("--port") + 1]))
        (gpu,) = result["gpus"]
        assert result["released"], f"node memory not back: {gpu}"
        assert back_to_baseline(gpu["final_bytes"], gpu["baseline_bytes"]), gpu
    assert not engine_processes()
    assert not [n for n in set(os.listdir("/dev/shm")) - shm_before if n.startswith("psm_")]


def test_ready_with_the_probe(tmp_path: Path, quiet_host: set[str]) -> None:
    result = trial(write_spec(tmp_path), "context_length=16384", "mem_fraction_static=0.11")
    assert result["outcome"] == "READY" and result["probe"]["ok"] and result["probe"]["burst_ok"] == 2
    assert result["kv_tokens"] > 16384 and result["figures"]["context_len"] == 16384
    assert result["mismatches"] == []
    assert result["gpus"][0]["peak_bytes"] - result["gpus"][0]["baseline_bytes"] > GIB // 2
    assert_clean(result, quiet_host)


def test_oom_kv_pool_when_the_context_does_not_fit(tmp_path: Path, quiet_host: set[str]) -> None:
    result = trial(write_spec(tmp_path), "context_length=131072", "mem_fraction_static=0.07")
    assert result["outcome"] == "OOM_KV_POOL"
    assert any("KV cache is needed, which is larger than the available KV cache memory" in e
               for e in result["evidence"])
    assert result["figures"]["context_len"] == 131072 and 0 < result["figures"]["kv_avail_gib"] < 1.0
    assert 0 < result["figures"]["max_context_fit_tokens"] < 131072
    assert_clean(result, quiet_host)


@pytest.fixture
def memory_held_by_another() -> Iterator[None]:
    """1.5 GiB held by a process that is not the server (more than the 5 % that utilisation 0.95 leaves
    to others on this node): the busy verdicts must not depend on how busy the host happens to be (on a
    quiet host vLLM's own pre-check passed and the trial launched; seen in CI)."""
    holder = subprocess.Popen([sys.executable, "-c", "import sys, time; b = b'\\x01' * (3 << 29); "
                               "print('held', flush=True); time.sleep(600)"], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        yield
    finally:
        holder.kill()
        holder.communicate(timeout=30)


@pytest.mark.usefixtures("memory_held_by_another")
def test_gpu_busy_before_launch_by_vllms_own_check(tmp_path: Path, quiet_host: set[str]) -> None:
    result = trial(write_spec(tmp_path), "context_length=16384", "mem_fraction_static=0.95")
    assert result["outcome"] == "GPU_BUSY" and not result["launched"]
    assert "on startup is less than desired CPU memory utilization (0.95" in result["evidence"][0]
    assert_clean(result, quiet_host)


@pytest.mark.usefixtures("memory_held_by_another")
def test_gpu_busy_from_the_engine_when_allowed_to_launch(tmp_path: Path, quiet_host: set[str]) -> None:
    result = trial(write_spec(tmp_path), "context_length=16384", "mem_fraction_static=0.95", allow_busy=True)
    assert result["outcome"] == "GPU_BUSY" and result["launched"]
    assert any("on startup is less than desired CPU memory utilization" in e for e in result["evidence"])
    assert_clean(result, quiet_host)


def test_config_error_above_the_models_maximum_from_the_engine(tmp_path: Path, quiet_host: set[str]) -> None:
    """The spec refuses such a context itself; passed behind its back, the engine's words decide."""
    spec = write_spec(tmp_path, **{"space.context_length": None,
                                   "space.extra_args": ["--load-format", "dummy", "--skip-tokenizer-init",
                                                        "--max-model-len", "262144"]},
                      start={"mem_fraction_static": 0.11, "max_running_requests": 4})
    result = trial(spec)
    assert result["outcome"] == "CONFIG_ERROR" and result["launched"]
    assert any("derived_max_model_len" in e or "max_model_len" in e for e in result["evidence"])
    assert_clean(result, quiet_host)


def test_config_error_for_a_flag_the_parser_rejects_without_a_launch(tmp_path: Path, quiet_host: set[str]) -> None:
    spec = write_spec(tmp_path, **{"space.extra_args": ["--load-format", "dummy", "--no-such-flag", "1"]})
    result = trial(spec, "context_length=16384")
    assert result["outcome"] == "CONFIG_ERROR" and not result["launched"]
    # the version's own parser, rebuilt from its captured table (the same words as the engine: test_vllm_cpu_real)
    assert result["evidence"][0].startswith("api_server.py: error: unrecognized arguments: --no-such-flag")
    assert_clean(result, quiet_host)


def test_sigkill_of_the_tuner_mid_boot_then_the_next_run_stops_the_orphans(tmp_path: Path,
                                                                           quiet_host: set[str]) -> None:
    """Issue 18.3: EngineCore and its worker are renamed (`VLLM::…`); the next run finds them anyway."""
    spec = write_spec(tmp_path, budget={"trials": 1, "wall_time_s": 1200})
    log = (tmp_path / "run1.log").open("w")
    tuner = subprocess.Popen([str(AUTOTUNE), "run", str(spec)], stdout=log, stderr=subprocess.STDOUT,
                             start_new_session=True)
    try:
        deadline = time.monotonic() + 900
        while not any(p.name.startswith("VLLM::Worker") for p in engine_processes()):
            assert tuner.poll() is None, (tmp_path / "run1.log").read_text()[-2000:]
            assert time.monotonic() < deadline, "no VLLM::Worker after 900 s"
            time.sleep(0.5)
        os.kill(tuner.pid, signal.SIGKILL)  # the tuner only: its server lives in its own group
        tuner.wait(timeout=30)
    finally:
        log.close()
    orphans = engine_processes()
    handles = [psutil.Process(p.pid) for p in orphans]  # is_running() also tells a reused pid apart
    names = sorted(p.name.split()[0] for p in orphans)
    assert any(n.startswith("VLLM::EngineCore") for n in names) and any(n.startswith("VLLM::Worker") for n in names)
    base = HostMemBackend()
    done = subprocess.run([str(AUTOTUNE), "run", str(spec)], capture_output=True, text=True, timeout=1100)
    print(done.stdout[-3000:], done.stderr[-2000:])
    assert "orphaned process(es) stopped" in done.stdout + done.stderr
    assert not engine_processes(), f"left: {engine_processes()}"
    assert not base.snapshot()[0].processes
    for handle in handles:
        assert not handle.is_running() or handle.status() == psutil.STATUS_ZOMBIE
    assert not [n for n in set(os.listdir("/dev/shm")) - quiet_host if n.startswith("psm_")]


def test_an_engine_core_stopped_from_outside_while_loading_is_a_crash_not_a_hang(tmp_path: Path,
                                                                                  quiet_host: set[str]) -> None:
    """vLLM's EngineCore SIGTERMed while the weights load (by someone other than the tool): the engine logs its way out
    and its API server stays up, unready, for good (tests/data/launch-census, term-load). The trial decides a crash
    ended from outside once `watch.STOPPED_EXIT_S` has passed, not a hang at its no-progress deadline (600 s)."""
    def engine_core_once_loading(log: str) -> int | None:
        if "Starting to load model" not in log:
            return None
        return next((p.pid for p in engine_processes() if p.name.startswith("VLLM::EngineCore")), None)

    result, _, waited = trial_signalled(tmp_path, write_spec(tmp_path), engine_core_once_loading, signal.SIGTERM,
                                        waiting_for="the weights beginning to load")
    print(f"SIGTERM to the EngineCore; the trial ended {waited:.0f} s later: {result['outcome']}: {result['remedy']}")
    assert result["outcome"] == "CRASH" and "ended from outside" in result["remedy"], result["remedy"]
    assert waited < 300  # well before the no-progress deadline
    # nothing left: its port free, no engine process, no segment; the trial saw the memory released. (Not the node's
    # baseline within 60 s, which `assert_clean` also asks: after the first, cold vLLM start of a session the node
    # stayed 1 GiB above it once, with nothing of the server running.)
    argv = result["argv"]
    assert port_free(int(argv[argv.index("--port") + 1])) and result["released"]
    assert not engine_processes()
    assert not [n for n in set(os.listdir("/dev/shm")) - quiet_host if n.startswith("psm_")]
