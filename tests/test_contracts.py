"""The stable surfaces: exported names, the JSON of each command, import directions, and the
study's refusal of a worker on other hardware."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import optuna
import pytest

import autotune
from autotune import store
from autotune.errors import StoreError
from tests.conftest import MODELS, REPO

CLI = [sys.executable, "-m", "autotune.cli"]
PACKAGE = REPO / "autotune"


def test_exported_names_are_pinned() -> None:
    assert sorted(autotune.__all__) == ["AutotuneError", "Classification", "LaunchConfig", "Outcome", "Phase",
                                        "TrialResult", "__version__"]


def imports_of(path: Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return found


@pytest.mark.parametrize("layer,forbidden", [
    ("gpu", ("autotune.search", "autotune.cli", "autotune.report", "autotune.trial", "autotune.estimate")),
    ("engines", ("autotune.search", "autotune.cli", "autotune.report", "autotune.trial", "autotune.sim")),
    ("sim", ("autotune.search", "autotune.estimate", "autotune.engines", "autotune.trial", "autotune.cli")),
    ("estimate", ("autotune.sim", "autotune.search", "autotune.cli", "autotune.trial")),
    ("trial", ("autotune.search", "autotune.cli", "autotune.report", "autotune.sim")),
])
def test_dependencies_point_one_way(layer: str, forbidden: tuple[str, ...]) -> None:
    for path in (PACKAGE / layer).rglob("*.py"):
        bad = [m for m in imports_of(path) if m.startswith(forbidden)]
        assert not bad, f"{path.relative_to(REPO)} imports {bad}"


def test_classify_json_contract(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    log.write_text("[2026-01-01 10:00:03 TP0] Load weight begin. avail mem=46.76 GB\n"
                   "[2026-01-01 10:00:22 TP0] Load weight end. elapsed=19.19 s, type=Qwen3_5ForConditionalGeneration, "
                   "dtype=torch.bfloat16, avail mem=20.66 GB, mem usage=26.10 GB.\n"
                   "[2026-01-01 10:00:22 TP0] Scheduler hit an exception: Traceback (most recent call last):\n"
                   "RuntimeError: Not enough memory. Please try to increase --mem-fraction-static. Current value: "
                   "self.server_args.mem_fraction_static=0.85\n"
                   "[2026-01-01 10:00:22] Received sigquit from a child process. It usually means the child failed.\n")
    out = subprocess.run([*CLI, "classify", str(log), "--engine", "sglang", "--json"], capture_output=True, text=True,
                         check=True)
    data = json.loads(out.stdout)
    assert {"outcome", "remedy", "phase", "evidence", "figures"} <= set(data)
    assert data["outcome"] == "OOM_KV_POOL" and data["phase"] == "kv_pool"
    assert data["figures"]["weights_gib"] == 26.1 and all(isinstance(v, (int, float)) for v in data["figures"].values())
    assert any("Not enough memory" in line for line in data["evidence"])


def test_estimate_json_contract() -> None:
    out = subprocess.run([*CLI, "estimate", "--model", str(MODELS / "Qwen3.6-27B"), "--gpu-mem-gib", "48", "--gpus",
                          "2", "--tp", "2", "--speculative", "--context-length", "65536", "--json"],
                         capture_output=True, text=True, check=True)
    data = json.loads(out.stdout)
    for key in ("weights_gib_per_gpu", "draft_weights_gib_per_gpu", "kv_bytes_per_token", "state_bytes_per_request",
                "default_mem_fraction", "kv_tokens", "max_context_length", "verdict", "assumptions"):
        assert key in data
    assert data["verdict"] in ("fits", "no_kv_room", "weights_do_not_fit")
    assert data["kv_bytes_per_token"] == 34816  # 16 full-attention layers x 2 KV heads/GPU x 256 x 2 x 2 B + draft
    assert 25 < data["weights_gib_per_gpu"] < 27 and data["assumptions"]


def test_bad_cli_input_is_an_error_not_a_traceback(tmp_path: Path) -> None:
    out = subprocess.run([*CLI, "classify", str(tmp_path / "missing.log")], capture_output=True, text=True)
    assert out.returncode == 1 and "Traceback" not in out.stderr and "cannot read" in out.stderr
    out = subprocess.run([*CLI, "estimate", "--model", str(tmp_path), "--gpu-mem-gib", "24"], capture_output=True,
                         text=True)
    assert out.returncode == 1 and "config.json" in out.stderr and "Traceback" not in out.stderr


def test_a_study_refuses_a_worker_on_other_hardware(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'study.db'}"
    fp = {"gpu_names": "NVIDIA H100", "engine_version": "0.5.23"}
    store.open_study("s", url, fp, optuna.samplers.RandomSampler())
    store.open_study("s", url, dict(fp), optuna.samplers.RandomSampler())  # same machine: fine
    with pytest.raises(StoreError) as err:
        store.open_study("s", url, {**fp, "gpu_names": "NVIDIA H200"}, optuna.samplers.RandomSampler())
    assert "different machine" in err.value.message and "new study name" in err.value.hint
