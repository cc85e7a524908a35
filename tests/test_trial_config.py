"""`autotune trial` relaunches what `autotune best --format json` printed: `--config FILE` / `--config -`
takes the whole record (or its "config" object), and `--set` takes a JSON list for a list field
(`extra_args=[]`), so the recommendation is launched exactly, on the simulated node."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from autotune import spec as spec_mod
from autotune.engines import get_engine
from tests.conftest import MODELS, REPO
from tests.test_faults import CLI, write_spec

EXTRA = ["--disable-radix-cache"]  # a real SGLang flag the space pins: extra_args is not empty in best's config


def cli(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, *args], cwd=REPO, capture_output=True, text=True, input=stdin, timeout=300)


def engine_flags(argv: list[str]) -> list[str]:
    """The engine flags of an argv, less the ports each launch draws (--port, --nccl-port) and the launcher
    (the simulator's module in a trial, the real engine's in `best`)."""
    flags = get_engine("sglang").flags_of(argv)
    out, skip = [], False
    for arg in flags:
        if skip:
            skip = False
        elif arg in ("--port", "--nccl-port"):
            skip = True
        else:
            out.append(arg)
    return out


def small_spec(tmp_path: Path, **over: Any) -> Path:
    space = {"tp": 1, "mem_fraction_static": {"min": 0.80, "max": 0.92, "step": 0.04},
             "context_length": [8192, 16384], "extra_args": EXTRA}
    return write_spec(tmp_path, space=space, **over)


def test_best_json_piped_into_trial_launches_exactly_the_config_best_printed(tmp_path: Path) -> None:
    spec = small_spec(tmp_path)
    ran = cli("run", str(spec))
    assert ran.returncode == 0, ran.stderr
    best = cli("best", str(spec), "--format", "json")
    assert best.returncode == 0, best.stderr
    record = json.loads(best.stdout)
    assert record["config"]["extra_args"] == EXTRA
    loaded = spec_mod.load(spec)  # best is not the spec's start: a trial that ignored --config would differ
    assert loaded.config(loaded.start).to_dict() != record["config"]
    trial = cli("trial", str(spec), "--config", "-", "--json", stdin=best.stdout)
    assert trial.returncode == 0, trial.stderr
    result = json.loads(trial.stdout)
    assert result["config"] == record["config"]
    assert engine_flags(result["argv"]) == engine_flags(record["argv"])
    assert result["outcome"] == record["outcome"] == "READY" and result["kv_tokens"] == record["kv_tokens"]
    # The same from a file, with --set over it
    path = tmp_path / "best.json"
    path.write_text(best.stdout)
    lower = cli("trial", str(spec), "--config", str(path), "--set", "mem_fraction_static=0.8", "--json")
    assert lower.returncode == 0, lower.stderr
    assert json.loads(lower.stdout)["config"] == {**record["config"], "mem_fraction_static": 0.8}


@pytest.mark.parametrize("value,launched", [("[]", []), ('["--disable-radix-cache"]', EXTRA),
                                            ("--disable-radix-cache", EXTRA)])
def test_set_takes_a_json_list_for_extra_args(tmp_path: Path, value: str, launched: list[str]) -> None:
    spec = write_spec(tmp_path)
    out = cli("trial", str(spec), "--set", f"extra_args={value}", "--json")
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    assert result["config"]["extra_args"] == launched and result["launched"]  # judged: any outcome
    assert ("--disable-radix-cache" in result["argv"]) is bool(launched)


RECORD: dict[str, Any] = {  # what `best --format json` prints, for the spec write_spec writes
    "argv": ["python", "-m", "sglang.launch_server"], "engine": "sglang", "engine_version": "0.5.23",
    "config": {"model_path": str(MODELS / "Meta-Llama-3.1-8B"), "tp": 1, "mem_fraction_static": 0.84,
               "context_length": 16384, "extra_args": []},
    "kv_tokens": 1, "trial_id": "x", "outcome": "READY", "gpu_peak_bytes": [1],
}


@pytest.mark.parametrize("text,field,says", [
    ('{"tp": 1,', "'--config'", "not valid JSON"),
    ("", "'--config'", "not valid JSON"),
    ("[1, 2]", "'--config'", "not an object"),
    ('{"tp": 1, "mem_fracton_static": 0.8}', "'--config mem_fracton_static'", "did you mean 'mem_fraction_static'"),
    (json.dumps({**RECORD, "config": {**RECORD["config"], "ctx": 8}}), "'--config config.ctx'", "unknown field"),
    (json.dumps({**RECORD, "argvs": []}), "'--config argvs'", "did you mean 'argv'"),
    (json.dumps({**RECORD, "config": [1]}), "'--config config'", "not an object"),
    (json.dumps({**RECORD, "engine_version": "0.5.9"}), "'--config engine_version'", "this spec launches '0.5.23'"),
    (json.dumps({**RECORD, "config": {**RECORD["config"], "model_path": "/m/other"}}), "'--config model_path'",
     "not this spec's model"),
    ('{"context_length": [8192, 16384]}', "'--config context_length'", "one value"),
    ('{"mem_fraction_static": 1.5}', "'--config mem_fraction_static'", "between 0 and 1"),
    ('{"extra_args": ["--port", "8000"]}', "'--config extra_args'", "take --port out"),
])
def test_a_bad_config_is_refused_before_launching(tmp_path: Path, text: str, field: str, says: str) -> None:
    spec = write_spec(tmp_path)
    out = cli("trial", str(spec), "--config", "-", stdin=text)
    assert out.returncode == 1 and "Traceback" not in out.stderr, out.stderr
    assert f"spec field {field}" in out.stderr and says in out.stderr and "hint:" in out.stderr, out.stderr
    assert not (tmp_path / "results").exists()  # nothing launched, nothing written


def test_a_config_file_that_is_not_there_is_named(tmp_path: Path) -> None:
    out = cli("trial", str(write_spec(tmp_path)), "--config", str(tmp_path / "nope.json"))
    assert out.returncode == 1 and "nope.json does not exist" in out.stderr and "Traceback" not in out.stderr
