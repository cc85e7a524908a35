"""The kernel's OOM killer as the trial reads it (autotune/trial/oomkill.py), and the server's working processes it
watches once ready (Supervisor.workers). The real kills are tests/data/launch-census's (tests/test_launch_census.py)."""

from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path

import pytest

from autotune.classifier.classify import classify_text
from autotune.records import Classification, Need, Outcome, Phase
from autotune.trial import oomkill
from autotune.trial.supervisor import Supervisor
from tools.accuracy import launch_census as lc

VMSTAT = "nr_free_pages 4123\npgfault 98765\noom_kill {n}\nswap_ra 0\n"


def test_the_count_is_read_from_vmstat_and_none_where_it_cannot_be(tmp_path: Path) -> None:
    (tmp_path / "vmstat").write_text(VMSTAT.format(n=7))
    assert oomkill.kills(tmp_path / "vmstat") == 7
    (tmp_path / "old").write_text("nr_free_pages 4123\n")  # before Linux 4.13
    assert oomkill.kills(tmp_path / "old") is None
    assert oomkill.kills(tmp_path / "absent") is None
    if Path("/proc/vmstat").is_file():
        assert isinstance(oomkill.kills(), int)  # this host's own count


@pytest.mark.parametrize(("phase", "outcome", "need"), [
    (Phase.WEIGHTS, Outcome.OOM_WEIGHTS, None), (Phase.KV_POOL, Outcome.OOM_KV_POOL, Need.LESS_FRACTION),
    (Phase.CUDA_GRAPH, Outcome.OOM_CUDA_GRAPH, None), (Phase.INIT, Outcome.GPU_BUSY, None),
    (Phase.READY, Outcome.OOM_RUNTIME, None)])
def test_a_crash_while_the_kernel_killed_is_the_out_of_memory_of_its_phase(phase: Phase, outcome: Outcome,
                                                                            need: Need | None) -> None:
    crash = Classification(Outcome.CRASH, phase, "scheduler rank 0 died", ("Rank 0 scheduler is dead.",))
    got = oomkill.reading(crash, 3, 4)
    assert got is not None and (got.outcome, got.phase, got.needs) == (outcome, phase, need)
    assert "OOM killer" in got.remedy and "3 to 4" in got.remedy and got.evidence[-1] == "/proc/vmstat oom_kill 3 -> 4"


def test_on_a_gpu_engine_the_kill_is_a_crash_that_names_host_ram_not_the_weights() -> None:
    """The search reads OOM_WEIGHTS as the group's weights not fitting whatever the fraction: a host short of RAM on a
    GPU box (launches loading at once) must not rule the group out."""
    crash = Classification(Outcome.CRASH, Phase.WEIGHTS, "scheduler rank 0 died", ("Rank 0 scheduler is dead.",))
    got = oomkill.reading(crash, 3, 4, host_device=False)
    assert got is not None and (got.outcome, got.phase, got.confidence) == (Outcome.CRASH, Phase.WEIGHTS, "high")
    assert "host's RAM" in got.remedy and got.figures["mfs_direction"] == 0
    assert oomkill.reading(crash, 4, 4, host_device=False) is None


def test_no_reading_without_a_kill_or_where_the_engine_decided() -> None:
    crash = Classification(Outcome.CRASH, Phase.WEIGHTS)
    assert oomkill.reading(crash, 4, 4) is None
    assert oomkill.reading(crash, None, 5) is None and oomkill.reading(crash, 4, None) is None
    assert oomkill.reading(Classification(Outcome.CONFIG_ERROR, Phase.WEIGHTS), 4, 5) is None
    assert oomkill.reading(Classification(None, Phase.ARGS), 4, 5) is None  # before the engine began: nothing to place


def test_the_real_kills_are_read_as_memory_by_the_trial_and_as_a_crash_from_the_log_alone() -> None:
    kills = [launch for launch in lc.load() if launch.fault in ("oom-weights", "oom-kv")]
    assert len(kills) == 6
    for launch in kills:
        alone = classify_text(launch.text, launch.engine, launch.exit_code)
        assert alone.outcome is Outcome.CRASH
        got = oomkill.reading(alone, 0, launch.oom_kills)
        assert got is not None and got.outcome is launch.truth, (launch.build, launch.fault, got)


def test_the_working_processes_are_those_that_hold_memory_and_a_killed_one_is_gone(tmp_path: Path) -> None:
    hold = ("import os, subprocess, sys, time; b = bytearray(300 << 20); "
            "c = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)']); print('up', flush=True); "
            "time.sleep(60)")
    sup = Supervisor([sys.executable, "-c", hold], trial_id="workers-test", log_path=tmp_path / "server.log", env={})
    sup.start()
    try:
        deadline = time.monotonic() + 30
        while "up" not in (tmp_path / "server.log").read_text() and time.monotonic() < deadline:
            time.sleep(0.1)
        workers = sup.workers()
        assert list(workers) == [sup.pid], workers  # the 300 MiB holder; its idle child holds nothing
        os.kill(sup.pid, signal.SIGKILL)
        sup.proc.wait(timeout=10)  # type: ignore[union-attr]
        assert sup.workers() == {}
    finally:
        sup.stop(kill_now=True)
