"""A broken spec is refused before anything starts, with the field named and the fix said."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from autotune import spec as spec_mod
from autotune.config import LaunchConfig
from autotune.errors import SpecError
from autotune.settings import Budget, CertifySpec, Deadlines, Goal, ProbeSpec, SimulatedNode, Target
from tests.conftest import MODELS, REPO

GOOD: dict[str, Any] = {
    "study": "s", "engine_version": "0.5.23", "model": str(MODELS / "Meta-Llama-3.1-8B"), "launcher": "simulated",
    "simulated": {"gpus": 2, "gpu_mem_gib": 48}, "gpus": [0, 1],
    "space": {"tp": 1, "mem_fraction_static": {"min": 0.7, "max": 0.9, "step": 0.05}, "context_length": [8192, 32768],
              "torch_compile": [False, True]},
    "certify": {"enabled": False},  # a run's closing cold boots are test_certify's; here they only cost minutes
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


def test_what_a_spec_leaves_out_is_the_one_declared_default(tmp_path: Path) -> None:
    """Each parameter's default is LaunchConfig's (the fraction: a range to search), each section's its
    settings dataclass's: written once, read by the spec."""
    spec = load(tmp_path, {k: GOOD[k] for k in ("study", "engine_version", "model", "launcher")})
    assert spec.space["mem_fraction_static"] == tuple(round(0.6 + i * 0.01, 4) for i in range(36))
    assert spec.config({"mem_fraction_static": None}) == LaunchConfig(model_path=spec.model_path)
    assert (spec.goal, spec.probe, spec.certify, spec.budget, spec.deadlines, spec.target, spec.simulated) == (
        Goal(), ProbeSpec(), CertifySpec(), Budget(), Deadlines(), Target(), SimulatedNode())


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
    ("space.tp", None, "space.tp", "integer >= 1"),  # was a TypeError in parallel_slots
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
    # issue 10: an unknown version only warned, then every launch crashed at spawn
    ("engine_version", "0.4.0", "engine_version", "0.5.9 or newer"),  # older than every table
    ("engine_version", "latest", "engine_version", "e.g. 0.5.23"),
    # issue 10: strict types, never coerced ("no" was True, "false" stayed on, 2.9 became 2)
    ("allow_busy_gpus", "no", "allow_busy_gpus", "true or false"),
    ("probe.enabled", "false", "probe.enabled", "true or false"),
    ("probe.burst", "8x", "probe.burst", "whole number"),
    ("probe.burst", 2.9, "probe.burst", "whole number"),
    ("goal.order", "features", "goal.order", "a list"),
    ("probe.burts", 8, "probe.burts", "did you mean 'burst'"),
    ("seed", True, "seed", "integer"),
    ("engine_version", 0.5, "engine_version", "quote it"),
    # issue 10: start outside the space was a traceback after the study files existed, or clamped
    ("start.context_length", 12345, "start.context_length", "8192, 32768"),
    ("start.mem_fraction_static", 1.3, "start.mem_fraction_static", "0.7"),
    ("start.torch_compile", 1, "start.torch_compile", "False, True"),
    ("start.contxt_length", 8192, "start.contxt_length", "did you mean 'context_length'"),
    # issue 10: a bad host was a traceback after study.db was created
    ("host", "not a host!!", "host", "127.0.0.1"),
    ("space.speculative_algorithm", 5, "space.speculative_algorithm", "NEXTN"),
    ("space.context_length", {"values": 8192}, "space.context_length", "not a list"),
    ("study", "../../x", "study", "letters"),
    ("study", "..", "study", "letters"),
    # issue 15: a port given in extra_args was caught only at each trial (a MISMATCH every time)
    ("space.extra_args", ["--nccl-port", "29500"], "space.extra_args", "distributed-init port"),
    ("space.extra_args", ["--port=8000"], "space.extra_args", "take --port out"),
    ("space.extra_args", ["--disable-radix-cache", "--host", "0.0.0.0"], "space.extra_args", "spec's `host`"),
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


def test_tp_the_model_cannot_split_is_refused(tmp_path: Path) -> None:
    raw = with_("model", str(MODELS / "Qwen3.6-27B"))
    raw.update(simulated={"gpus": 4, "gpu_mem_gib": 48}, gpus=[0, 1, 2, 3], space={"tp": [2, 3]})
    with pytest.raises(SpecError) as err:
        load(tmp_path, raw)
    assert err.value.field == "space.tp" and "4 KV heads do not divide over tp=3" in str(err.value)
    assert "splits over: 1, 2, 4" in str(err.value)
    raw["space"] = {"tp": [2, 4]}
    assert load(tmp_path, raw).space["tp"] == (2, 4)
    (tmp_path / "spec.yaml").write_text(yaml.safe_dump(raw))
    with pytest.raises(SpecError) as err:
        spec_mod.load_trial(tmp_path / "spec.yaml", {"tp": 3})
    assert err.value.field == "--set tp" and "KV heads" in str(err.value)


def test_a_directory_or_a_binary_file_is_refused_as_the_spec(tmp_path: Path) -> None:
    with pytest.raises(SpecError, match="is a directory") as err:
        spec_mod.load(tmp_path)
    assert err.value.field == "<file>"
    binary = tmp_path / "model.bin"
    binary.write_bytes(bytes(range(256)) * 4)
    with pytest.raises(SpecError, match="not a text file"):
        spec_mod.load(binary)


def test_a_good_start_is_kept_and_strict_values_load(tmp_path: Path) -> None:
    raw = with_("start", {"context_length": 8192, "mem_fraction_static": 0.75, "torch_compile": True})
    raw["probe"] = {"enabled": False, "burst": 4}
    raw["allow_busy_gpus"] = False
    spec = load(tmp_path, raw)
    assert spec.start == {"context_length": 8192, "mem_fraction_static": 0.75, "torch_compile": True}
    assert spec.probe.enabled is False and spec.probe.burst == 4 and spec.allow_busy_gpus is False


@pytest.mark.parametrize("path,value", [
    ("start.context_length", 12345), ("host", "not a host!!"), ("engine_version", "0.4.0"), ("strategy", "bogus"),
    ("probe.enabled", "false"),
])
def test_cli_refuses_before_writing_anything(tmp_path: Path, path: str, value: Any) -> None:
    spec_dir = tmp_path / "spec"
    spec_dir.mkdir()
    path_ = spec_dir / "spec.yaml"
    path_.write_text(yaml.safe_dump(with_(path, value)))
    out = subprocess.run([sys.executable, "-m", "autotune.cli", "run", str(path_)], capture_output=True, text=True,
                         cwd=tmp_path)
    assert out.returncode == 2 and "Traceback" not in out.stderr, out.stderr
    assert f"spec field '{path}'" in out.stderr
    assert sorted(p.name for p in tmp_path.rglob("*")) == ["spec", "spec.yaml"]  # no results/, no study.db


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


# -- autotune trial --set: the same checks as the spec (issue 10) ----------------------------------


@pytest.mark.parametrize("key,value,fix", [
    ("mem_fraction_static", 1.5, "between 0 and 1"),
    ("mem_fraction_static", "abc", "between 0 and 1"),
    ("tp", 4, "GPUs"),
    ("speculative", "maybe", "true, false"),
    ("torch_compile", 0, "true, false"),
    ("context_length", [8192, 32768], "one value"),
    ("contxt_length", 8192, "did you mean 'context_length'"),
])
def test_trial_sets_are_validated_like_the_spec(tmp_path: Path, key: str, value: Any, fix: str) -> None:
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(GOOD))
    with pytest.raises(SpecError) as err:
        spec_mod.load_trial(path, {key: value})
    assert err.value.field == f"--set {key}" and fix in str(err.value), str(err.value)


def test_trial_sets_parse_to_the_spec_types(tmp_path: Path) -> None:
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(with_("start", {"context_length": 8192})))
    spec, params = spec_mod.load_trial(path, {"extra_args": "--foo --bar 'a b'", "torch_compile": True,
                                              "mem_fraction_static": 0.8})
    config = spec.config(params)
    assert config.extra_args == ("--foo", "--bar", "a b")  # not '- - f o o'
    assert config.torch_compile is True and config.mem_fraction_static == 0.8 and config.context_length == 8192


@pytest.mark.parametrize("item", ["mem_fraction_static=abc", "mem_fraction_static=1.5", "tp=4", "speculative=maybe",
                                  "torch_compile=0"])
def test_trial_cli_refuses_a_bad_set_before_launching(tmp_path: Path, item: str) -> None:
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(with_("results_dir", str(tmp_path / "results"))))
    out = subprocess.run([sys.executable, "-m", "autotune.cli", "trial", str(path), "--set", item],
                         capture_output=True, text=True, cwd=REPO, timeout=60)
    assert out.returncode == 1 and "Traceback" not in out.stderr, out.stderr
    assert f"spec field '--set {item.split('=')[0]}'" in out.stderr
    assert not (tmp_path / "results").exists()  # nothing launched, nothing written


# -- command-line options that stand for spec fields; read-only commands (issue 10) ---------------


def cli(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "autotune.cli", *args], capture_output=True, text=True, cwd=cwd,
                          timeout=120, env={**os.environ, "PYTHONPATH": str(REPO)})


def tree(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


@pytest.mark.parametrize("args,option,fix", [
    (["--strategy", "bogus"], "--strategy", "frontier"),
    (["--study", "../../x"], "--study", "letters"),
])
def test_run_options_are_checked_before_anything_is_written(tmp_path: Path, args: list[str], option: str,
                                                            fix: str) -> None:
    (tmp_path / "spec.yaml").write_text(yaml.safe_dump(with_("results_dir", "results")))
    out = cli(tmp_path, "run", "spec.yaml", *args)
    assert out.returncode == 2 and "Traceback" not in out.stderr, out.stderr
    assert f"option {option}" in out.stderr and fix in out.stderr
    assert tree(tmp_path) == ["spec.yaml"]  # no results/, no study.db, no node/, nothing above tmp_path either
    assert not (tmp_path.parent / "x").exists()  # results/../../x


@pytest.mark.parametrize("command", ["best", "report"])
def test_read_only_commands_on_a_missing_study_create_nothing(tmp_path: Path, command: str) -> None:
    out = cli(tmp_path, command, "--study", "nosuch")
    assert out.returncode == 1 and "Traceback" not in out.stderr, out.stderr
    assert "no study 'nosuch'" in out.stderr and "autotune run" in out.stderr
    assert tree(tmp_path) == []  # no results/nosuch/study.db left behind
    (tmp_path / "spec.yaml").write_text(yaml.safe_dump(with_("results_dir", "results")))
    out = cli(tmp_path, command, "spec.yaml")
    assert out.returncode == 1 and "no study 's'" in out.stderr
    assert tree(tmp_path) == ["spec.yaml"]


def test_run_with_another_study_name_uses_it_throughout(tmp_path: Path) -> None:
    raw = with_("results_dir", "results")
    raw.update(space={"tp": 1, "mem_fraction_static": 0.8, "context_length": 8192}, budget={"trials": 1},
               probe={"enabled": False})
    raw["simulated"]["time_scale"] = 0.0005
    (tmp_path / "spec.yaml").write_text(yaml.safe_dump(raw))
    out = cli(tmp_path, "run", "spec.yaml", "--study", "other")
    assert out.returncode == 0, out.stderr
    assert "study other:" in out.stdout + out.stderr and "study s:" not in out.stdout + out.stderr
    assert (tmp_path / "results" / "other" / "study.db").is_file() and not (tmp_path / "results" / "s").exists()


def test_reading_a_spec_imports_nothing_that_launches_or_searches() -> None:
    code = ("import sys, autotune.spec; print(sorted(m for m in sys.modules if m.startswith(("
            "'autotune.trial', 'autotune.search', 'autotune.cli', 'autotune.report'))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, check=True)
    assert out.stdout.strip() == "[]", out.stdout
