"""The overnight clock: certification's boots at once on free slots, a busy slot moved away from
rather than failed, certification started once the frontier has settled the answer, and the
timeline that shows where the time went. Real simulated servers, real Optuna studies."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from autotune import spec as spec_mod
from autotune import store
from autotune.machine import prepare_backend
from autotune.report import write_report
from autotune.search import certify as certify_mod
from autotune.search import goal as goal_mod
from autotune.search.loop import run
from autotune.trial.supervisor import tagged_processes
from tests.conftest import MODELS
from tests.test_faults import write_spec

SPACE = {"tp": 1, "mem_fraction_static": {"min": 0.80, "max": 0.92, "step": 0.04}, "context_length": [8192, 16384],
         "max_running_requests": 8}


def two_slots(tmp_path: Path, boots: int = 2) -> spec_mod.Spec:
    return spec_mod.load(write_spec(tmp_path, simulated={"gpus": 2, "time_scale": 0.002}, gpus=[0, 1], space=SPACE,
                                    parallel=2, certify={"enabled": True, "boots": boots}))


def boot_gpus(spec: spec_mod.Spec, trial_id: str) -> set[int]:
    """The GPUs a boot's server held memory on, from its result.json."""
    result = json.loads((spec.study_dir / "trials" / trial_id / "result.json").read_text())
    return {g["index"] for g in result["gpus"] if g["peak_bytes"] > g["baseline_bytes"]}


def test_certification_boots_run_at_once_each_on_a_slot_of_its_own(tmp_path: Path) -> None:
    spec = two_slots(tmp_path)
    backend = prepare_backend(spec)
    assert run(spec, backend).best is not None
    cert = certify_mod.run_certification(spec, backend, say=lambda _: None)
    assert cert.answer is cert.attempts[0], certify_mod.summary_lines(cert)  # the answer holds, as before
    a, b = cert.answer.boots
    assert a.slot != b.slot and boot_gpus(spec, a.trial_id).isdisjoint(boot_gpus(spec, b.trial_id))
    assert a.start_s is not None and b.start_s is not None and a.end_s is not None and b.end_s is not None
    assert max(a.start_s, b.start_s) < min(a.end_s, b.end_s), "the two boots did not run at once"
    assert not tagged_processes(spec.study)


def test_a_boot_on_a_slot_held_by_someone_else_moves_and_is_no_failure(tmp_path: Path) -> None:
    """A foreign process holds memory on slot 0's GPU: each boot that lands there is refused
    (GPU_BUSY, nothing launched) and moves to slot 1; the answer is certified as it stands,
    not stepped down for a boot that never ran."""
    spec = two_slots(tmp_path)
    backend = prepare_backend(spec)
    found = run(spec, backend).best
    assert found is not None
    env = {**os.environ, "AUTOTUNE_SIM_NODE": str(spec.node_dir())}
    holder = subprocess.Popen([sys.executable, "-m", "autotune.sim.hold", "--gpu", "0", "--gib", "4"],
                              stdout=subprocess.PIPE, text=True, env=env)
    try:
        assert holder.stdout is not None and holder.stdout.readline().startswith("holding")
        holder.stdout.close()
        cert = certify_mod.run_certification(spec, backend, say=lambda _: None)
    finally:
        holder.terminate()
        holder.wait()
    assert cert.answer is cert.attempts[0] and cert.answer.source_trial == found.trial_id, \
        certify_mod.summary_lines(cert)
    assert all(b.outcome != "GPU_BUSY" for a in cert.attempts for b in a.boots)
    assert len(cert.answer.boots) == 2 and all(boot_gpus(spec, b.trial_id) == {1} for b in cert.answer.boots)


def qwen36_spec(tmp_path: Path) -> spec_mod.Spec:
    """The demo's model (4 feature combinations) on 4 slots of 2 simulated 80 GiB GPUs, as make
    bench-parallel runs it."""
    raw: dict[str, Any] = {
        "study": "clock", "engine_version": "0.5.9", "model": str(MODELS / "Qwen3.6-27B"), "launcher": "simulated",
        "gpus": list(range(8)), "parallel": 4,
        "simulated": {"gpus": 8, "gpu_mem_gib": 80, "gpu_name": "H100", "time_scale": 0.01},
        "space": {"tp": 2, "mem_fraction_static": {"min": 0.70, "max": 0.97, "step": 0.01},
                  "context_length": [16384, 32768, 65536, 131072, 262144], "speculative": [False, True],
                  "speculative_num_steps": 3, "speculative_eagle_topk": 1, "speculative_num_draft_tokens": 4,
                  "torch_compile": [False, True], "max_running_requests": [8, 48]},
        "goal": {"order": ["context_length", "kv_tokens"], "min_concurrency": 1},
        "probe": {"burst": 4, "burst_tokens": 512}, "budget": {"trials": 80},
        "results_dir": str(tmp_path / "results"), "certify": {"boots": 3},
    }
    path = tmp_path / "clock.yaml"
    path.write_text(yaml.safe_dump(raw))
    return spec_mod.load(path)


def test_certification_starts_once_the_answer_is_settled_and_the_timeline_shows_it(tmp_path: Path) -> None:
    """With 4 slots the answer's boots start while the search still runs other feature combinations
    (their best cannot beat it), on free slots at once; what is certified is the final answer; the
    report's timeline has a row per slot, the boots among its bars."""
    from autotune.report import timeline as timeline_mod
    from autotune.search.loop import CLOCK_ATTR

    spec = qwen36_spec(tmp_path)
    summary = run(spec, prepare_backend(spec), certify=True)
    cert = summary.certification
    assert cert is not None and cert.answer is cert.attempts[0], cert and certify_mod.summary_lines(cert)
    study = store.load_study(spec.study, spec.storage)
    results = store.results(study)
    assert cert.answer.source_trial == goal_mod.best(results, spec.goal.order, []).trial_id  # type: ignore[union-attr]
    search_end = max(t.user_attrs[CLOCK_ATTR]["end_s"] for t in study.get_trials(deepcopy=False)
                     if CLOCK_ATTR in t.user_attrs)
    first_boot = min(b.start_s or 0 for b in cert.answer.boots)
    assert first_boot < search_end, "certification waited for the whole search"
    assert "started while the search went on" in cert.note
    bars = timeline_mod.bars(study)
    assert {b.slot for b in bars} == {0, 1, 2, 3}
    assert sum(b.kind == "boot" for b in bars) == 3 and summary.certify_launched == 3
    share = timeline_mod.idle_share(bars, 4)
    assert share is not None and 0 <= share < 1
    md, _ = write_report(spec.study, spec.storage, spec.study_dir)
    text = md.read_text()
    assert "## Timeline" in text and "![timeline](timeline.png)" in text and (md.parent / "timeline.png").stat().st_size
    assert not tagged_processes(spec.study)


def test_idle_share_counts_the_gaps_of_every_slot() -> None:
    from autotune.report import timeline as timeline_mod
    bar = timeline_mod.Bar
    bars = [bar(0, 0.0, 10.0, "READY", "search", ""), bar(1, 0.0, 5.0, "READY", "boot", "")]
    assert timeline_mod.idle_share(bars, 2) == pytest.approx(0.25)
    assert timeline_mod.idle_share(bars, 4) == pytest.approx(0.625)  # two slots that never ran anything
    assert timeline_mod.idle_share([], 4) is None


def test_early_certification_is_refused_where_the_goal_order_cannot_be_bounded() -> None:
    """`Frontier.settled` bounds what a group could still reach by its longest context and the KV
    there: an order that ranks KV before context, or a server-resolved max_running_requests, is
    beyond that bound, so certification waits for the search's end there."""
    from autotune.search.frontier import _boundable
    from autotune.search.space import Space

    space = Space({"mem_fraction_static": (0.8, 0.9), "context_length": (8192, 16384)}, {"max_running_requests": None})
    assert _boundable(["features", "context_length", "kv_tokens"], space)
    assert not _boundable(["kv_tokens", "context_length"], space)
    assert not _boundable(["features", "max_running_requests", "context_length", "kv_tokens"], space)
    searched = Space({"context_length": (8192, 16384), "max_running_requests": (8, 48)}, {})
    assert _boundable(["features", "max_running_requests", "context_length", "kv_tokens"], searched)
