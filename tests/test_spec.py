"""A broken spec is refused before anything starts, with the field named and the fix said."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from autotune import spec as spec_mod
from autotune.errors import SpecError
from tests.conftest import MODELS, REPO

GOOD: dict[str, Any] = {
    "study": "s", "engine_version": "0.5.23", "model": str(MODELS / "Meta-Llama-3.1-8B"), "launcher": "simulated",
    "simulated": {"gpus": 2, "gpu_mem_gib": 48}, "gpus": [0, 1],
    "space": {"tp": 1, "mem_fraction_static": {"min": 0.7, "max": 0.9, "step": 0.05}, "context_length": [8192, 32768],
              "torch_compile": [False, True]},
}


def load(tmp_path: Path, raw: dict[str, Any]) -> spec_mod.Spec:
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(raw))
    return spec_mod.load(path)


def with_(path: str, value: Any) -> dict[str, Any]:
    raw = yaml.safe_load(yaml.safe_dump(GOOD))
    node = raw
    keys = path.split(".")
    for key in keys[:-1]:
        node = node.setdefault(key, {})
    if value is _DELETE:
        del node[keys[-1]]
    else:
        node[keys[-1]] = value
    return raw


_DELETE = object()


def test_good_spec_loads(tmp_path: Path) -> None:
    spec = load(tmp_path, GOOD)
    assert spec.space["mem_fraction_static"] == (0.7, 0.75, 0.8, 0.85, 0.9)
    assert spec.space["torch_compile"] == (False, True) and spec.searched().keys() == {
        "mem_fraction_static", "context_length", "torch_compile"}
    assert spec.storage.startswith("sqlite:///") and spec.storage.endswith("s/study.db")


@pytest.mark.parametrize("path,value,field,fix", [
    ("budget.trials", "many", "budget.trials", "integer"),
    ("budget.trials", 0, "budget", "trials"),
    ("space.mem_fraction_static", {"min": 0.9, "max": 0.7}, "space.mem_fraction_static", "min"),
    ("space.mem_fraction_static", 1.5, "space.mem_fraction_static", "between 0 and 1"),
    ("space.context_length", [8192, 300000], "space.context_length", "131072"),
    ("space.contxt_length", 8192, "space.contxt_length", "did you mean 'context_length'"),
    ("space.kv_cache_dtype", "fp8", "space.kv_cache_dtype", "fp8_e4m3"),
    ("space.torch_compile", "yes", "space.torch_compile", "true, false"),
    ("space.tp", 4, "space.tp", "GPUs"),
    ("strategy", "genetic", "strategy", "frontier"),
    ("engine", "tgi", "engine", "sglang"),
    ("engine_version", "0.3.0", "engine_version", "0.5.23"),
    ("gpus", [0, 5], "gpus", "simulated.gpus"),
    ("port", 80, "port", "1024"),
    ("model", "/nowhere/model", "model", "config.json"),
    ("model", _DELETE, "model", "config.json"),
    ("goal.order", ["speed"], "goal.order", "context_length"),
    ("goal.required_features", ["speculative"], "goal.required_features", "space.speculative"),
    ("space.speculative", True, "space.speculative", "MTP"),
    ("timeouts.no_progress_s", -5, "timeouts", "> 0"),
    ("zzzz", 1, "zzzz", "known fields"),
    ("gpuz", [0], "gpuz", "did you mean 'gpus'"),
])
def test_each_broken_field_is_named_with_a_fix(tmp_path: Path, path: str, value: Any, field: str, fix: str) -> None:
    with pytest.raises(SpecError) as err:
        load(tmp_path, with_(path, value))
    assert err.value.field == field
    assert fix in str(err.value), str(err.value)


def test_model_dir_without_config_json(tmp_path: Path) -> None:
    empty = tmp_path / "empty-model"
    empty.mkdir()
    with pytest.raises(SpecError) as err:
        load(tmp_path, with_("model", str(empty)))
    assert err.value.field == "model" and "no config.json" in str(err.value)


def test_invalid_yaml_and_missing_file(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("study: [unclosed\n")
    with pytest.raises(SpecError, match="not valid YAML"):
        spec_mod.load(bad)
    with pytest.raises(SpecError, match="does not exist"):
        spec_mod.load(tmp_path / "missing.yaml")


def test_cli_reports_spec_errors_without_a_traceback(tmp_path: Path) -> None:
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(with_("space.contxt_length", 8192)))
    out = subprocess.run([sys.executable, "-m", "autotune.cli", "run", str(path)], capture_output=True, text=True,
                         cwd=REPO)
    assert out.returncode == 2 and "Traceback" not in out.stderr  # `run`: 2 = bad input (README, exit status)
    assert "spec field 'space.contxt_length': unknown parameter" in out.stderr and "context_length" in out.stderr
    assert not (tmp_path / "results").exists()  # nothing started, nothing written


def test_non_local_host_is_announced(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    load(tmp_path, with_("host", "0.0.0.0"))
    assert "reachable from other machines" in capsys.readouterr().err
