"""Several workers on one study in a real PostgreSQL (the server `make pg` / .ci/run start)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from autotune import store
from autotune.errors import StoreError

# A worker: wait for the start signal (so all start in the same instant), open the study, say what it got.
OPEN_STUDY = """
import json, os, sys, time
from pathlib import Path
import optuna
from autotune import store
go = Path(sys.argv[2])
while not go.exists():
    time.sleep(0.001)
study = store.open_study("shared", sys.argv[1], {"gpu_names": "X"}, optuna.samplers.RandomSampler())
print(json.dumps({"id": study._study_id, "tag": store.study_tag(study)}))
"""


def test_workers_started_together_on_a_fresh_database_all_join_one_study(pg_url: str, tmp_path: Path) -> None:
    go = tmp_path / "go"
    procs = [subprocess.Popen([sys.executable, "-c", OPEN_STUDY, pg_url, str(go)], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for _ in range(4)]
    time.sleep(1.0)  # let all four import and reach the wait; the start below is one instant for all
    go.touch()
    outs = [p.communicate(timeout=120) for p in procs]
    errors = [err for p, (_, err) in zip(procs, outs, strict=True) if p.returncode != 0]
    assert not errors, errors[0]
    joined = [json.loads(out) for out, _ in outs]
    assert len({j["id"] for j in joined}) == 1 and len({j["tag"] for j in joined}) == 1, joined


def test_plain_postgresql_url_opens_with_the_extra_installed(pg_url: str) -> None:
    import optuna

    assert pg_url.startswith("postgresql://")
    study = store.open_study("plain", pg_url, {"gpu_names": "X"}, optuna.samplers.RandomSampler())
    assert study.user_attrs["fingerprint"] == {"gpu_names": "X"}


def test_a_missing_driver_is_named_with_the_extra_to_install() -> None:
    with pytest.raises(StoreError) as err:
        store.storage_for("postgresql+pg8000://u:secret@127.0.0.1:1/db")  # pg8000 is not installed here
    assert "pg8000" in err.value.message and "secret" not in err.value.message
    assert "autotune[postgres]" in (err.value.hint or "")


def test_a_worker_on_other_hardware_is_refused_with_the_difference_named(pg_url: str) -> None:
    import optuna

    fp = {"gpu_names": "NVIDIA H100 80GB HBM3", "gpu_count": "8", "engine_version": "0.5.23"}
    store.open_study("fp", pg_url, fp, optuna.samplers.RandomSampler())
    with pytest.raises(StoreError) as err:
        store.open_study("fp", pg_url, {**fp, "gpu_count": "4"}, optuna.samplers.RandomSampler())
    assert "gpu_count: study has '8', this worker has '4'" in err.value.message
