"""`autotune regress`: a 0.5.9 baseline re-launched on 0.5.23 shows what moved; the same
engine shows nothing; the exit status tells a pipeline which."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from autotune import spec as spec_mod
from autotune.machine import prepare_backend
from autotune.search.loop import run
from tests.conftest import MODELS, REPO

CLI = [sys.executable, "-m", "autotune.cli"]


@pytest.fixture(scope="module")
def baseline(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A 0.5.9 run of the hybrid MTP model with speculative decoding on and off, graphs pinned."""
    tmp_path = tmp_path_factory.mktemp("baseline")
    raw = {
        "study": "base", "engine_version": "0.5.9", "model": str(MODELS / "Qwen3.6-27B"), "launcher": "simulated",
        "simulated": {"gpus": 2, "gpu_mem_gib": 48, "gpu_name": "NVIDIA RTX A6000", "time_scale": 0.0005},
        "space": {"tp": 2, "mem_fraction_static": {"min": 0.80, "max": 0.97, "step": 0.01},
                  "context_length": [131072, 262144], "speculative": [False, True], "speculative_num_steps": 3,
                  "speculative_eagle_topk": 1, "speculative_num_draft_tokens": 4, "cuda_graph_max_bs": 32,
                  "max_running_requests": 8},
        "probe": {"burst": 8, "burst_tokens": 1024}, "budget": {"trials": 30},
        "results_dir": str(tmp_path / "results"),
    }
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(raw))
    spec = spec_mod.load(path)
    summary = run(spec, prepare_backend(spec))
    assert summary.best is not None
    return path


def regress(path: Path, *extra: str) -> tuple[int, dict]:  # type: ignore[type-arg]
    out = subprocess.run([*CLI, "regress", str(path), "--baseline", "base", "--json", *extra], cwd=REPO,
                         capture_output=True, text=True, timeout=600)
    assert out.returncode in (0, 1, 2), out.stderr
    return out.returncode, json.loads(out.stdout)


def test_upgrade_to_0_5_23_reports_what_moved(baseline: Path) -> None:
    code, report = regress(baseline, "--set", "engine_version=0.5.23")
    assert report["baseline_engine"] == "sglang 0.5.9" and report["current_engine"] == "sglang 0.5.23"
    assert report["fingerprints"]["baseline"]["engine_version"] == "0.5.9"
    assert report["fingerprints"]["current"]["engine_version"] == "0.5.23"
    rows = report["rows"]
    assert rows[0]["role"] == "recommended" and any(r["role"].startswith("boundary") for r in rows)
    # the speculative frontier's KV capacity drops: the draft's weights now count before the pool
    frontier = next(r for r in rows if r["role"] == "frontier speculative")
    assert frontier["before"]["outcome"] == frontier["after"]["outcome"] == "READY"
    kv = next(c for c in frontier["changes"] if c["name"] == "kv_tokens")
    assert kv["after"] < kv["before"] and kv["flagged"], kv
    assert all(c["before"] is not None for c in frontier["changes"])  # the figures are side by side
    # the recommended config ran out of slack under the prefill graphs 0.5.23 captures by default
    regressions = [r for r in rows if r["verdict"] == "REGRESSION"]
    assert regressions and code == 1 and report["exit_code"] == 1
    assert all(r["after"]["evidence"] and r["after"]["log_path"] for r in regressions)
    # renamed flags are reported with the new spelling
    assert all("ambiguous option: --cuda-graph-max-bs" in r["flags"] and "--cuda-graph-max-bs-decode" in r["flags"]
               for r in rows)
    md = (baseline.parent / "results" / "base-0.5.23" / "regress-vs-base.md").read_text()
    assert "## Regressions, with evidence" in md and "0.5.9" in md and "0.5.23" in md


def test_research_after_a_regression_finds_the_new_frontier(baseline: Path) -> None:
    code, report = regress(baseline, "--set", "engine_version=0.5.23", "--set", "study=base-research",
                           "--budget", "1", "--research")
    assert code == 1 and report["regressions"] == 1  # the recommended config no longer fits
    research = report["research"]
    assert research["stopped"].startswith("converged") and research["argv"]
    argv = research["argv"]
    assert "--cuda-graph-max-bs-decode" in argv  # spelled for 0.5.23
    new_mfs = float(argv[argv.index("--mem-fraction-static") + 1])
    old_mfs = report["rows"][0]["config"]["mem_fraction_static"]
    assert new_mfs < old_mfs  # the prefill graphs need slack: the new best sits lower


def test_same_engine_reports_no_regression(baseline: Path) -> None:
    code, report = regress(baseline, "--budget", "4")
    assert code == 0 and report["regressions"] == 0 and len(report["rows"]) == 4
    assert all(r["verdict"] == "unchanged" for r in report["rows"]), [(r["verdict"], r["after"]["evidence"]) for r in report["rows"]]
    assert all(r["before"]["peak_exact"] and r["after"]["peak_exact"] for r in report["rows"])  # simulator: true peaks
    assert all(not r["flags"] for r in report["rows"])


def test_missing_baseline_is_exit_2(tmp_path: Path) -> None:
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump({"study": "x", "model": str(MODELS / "Meta-Llama-3.1-8B"), "launcher": "simulated",
                                    "results_dir": str(tmp_path / "results")}))
    before = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*"))
    out = subprocess.run([*CLI, "regress", str(path), "--baseline", "nope"], cwd=REPO, capture_output=True, text=True)
    assert out.returncode == 2 and "no study 'nope'" in out.stderr and "Traceback" not in out.stderr
    assert sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*")) == before  # no study, node or file made
