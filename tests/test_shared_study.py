"""Several workers on one study in a real PostgreSQL (the server `make pg` / .ci/run start)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import optuna
import pytest

from autotune import spec as spec_mod
from autotune import store
from autotune.errors import StoreError
from autotune.trial.supervisor import tagged_processes
from tests.conftest import REPO
from tests.test_faults import CLI, wait_for_running_trial, write_spec

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


def test_a_missing_driver_is_named_with_the_pip_command() -> None:
    with pytest.raises(StoreError) as err:
        store.storage_for("postgresql+pg8000://u:secret@127.0.0.1:1/db")  # pg8000 is not installed here
    assert "pg8000" in err.value.message and "secret" not in err.value.message
    assert "pip install 'pg8000'" in (err.value.hint or "")


def test_the_postgres_extra_installs_the_driver_a_plain_url_means() -> None:
    """`pip install 'autotune[postgres]'` must make a plain postgresql:// URL work as written, for
    SQLAlchemy itself (Optuna's command, a script reading the study), not only through autotune."""
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    from importlib.metadata import packages_distributions

    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    extra = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["optional-dependencies"]["postgres"]
    names = {canonicalize_name(Requirement(r).name) for r in extra}
    from sqlalchemy.dialects import postgresql

    module = postgresql.dialect.driver  # SQLAlchemy's default for postgresql:// (psycopg, psycopg2: the module's name)
    providers = {canonicalize_name(d) for d in packages_distributions().get(module, [])}
    assert providers, f"{module}, the driver of a plain postgresql:// URL, is not installed: pip install -e '.[postgres]'"
    assert providers & names, f"the postgres extra {extra} does not install {module} (from {providers})"


HIDE_PSYCOPG = """
import sys
sys.modules["psycopg"] = None  # as if not installed (whatever else is)
from autotune import store
from autotune.errors import StoreError
try:
    store.storage_for(sys.argv[1])
except StoreError as exc:
    print(exc.message); print(exc.hint); sys.exit(3)
"""


def test_a_plain_url_without_its_driver_names_the_pip_command() -> None:
    out = subprocess.run([sys.executable, "-c", HIDE_PSYCOPG, "postgresql://u:secret@127.0.0.1:1/db"],
                         capture_output=True, text=True, timeout=60, cwd=REPO)
    assert out.returncode == 3, out.stdout + out.stderr
    assert "'psycopg'" in out.stdout and "secret" not in out.stdout and "Traceback" not in out.stderr
    assert "pip install 'psycopg[binary]'" in out.stdout and "autotune[postgres]" in out.stdout


def test_an_explicit_psycopg2_url_opens_when_psycopg2_is_installed(pg_url: str) -> None:
    pytest.importorskip("psycopg2", reason="psycopg2 is not installed (the postgres extra installs psycopg 3)")
    url = pg_url.replace("postgresql://", "postgresql+psycopg2://", 1)
    study = store.open_study("explicit", url, {"gpu_names": "X"}, optuna.samplers.RandomSampler())
    assert study.user_attrs["fingerprint"] == {"gpu_names": "X"}


def test_a_run_on_a_plain_url_is_read_by_plain_optuna(pg_url: str, tmp_path: Path) -> None:
    """The URL as .ci/pg.sh prints it, given to `autotune run`, then to Optuna itself (no autotune code
    between it and SQLAlchemy): both open the same study."""
    assert pg_url.startswith("postgresql://")
    spec = two_host_spec(tmp_path, "a", pg_url, budget={"trials": 1})
    out = subprocess.run([*CLI, "run", str(spec)], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    read = subprocess.run([sys.executable, "-c", "import sys, optuna; "
                           "print(len(optuna.load_study(study_name='shared', storage=sys.argv[1]).trials))", pg_url],
                          capture_output=True, text=True, timeout=120)
    assert read.returncode == 0, read.stderr
    assert read.stdout.strip() == "1"


def test_a_worker_on_other_hardware_is_refused_with_the_difference_named(pg_url: str) -> None:
    import optuna

    fp = {"gpu_names": "NVIDIA H100 80GB HBM3", "gpu_count": "8", "engine_version": "0.5.23"}
    store.open_study("fp", pg_url, fp, optuna.samplers.RandomSampler())
    with pytest.raises(StoreError) as err:
        store.open_study("fp", pg_url, {**fp, "gpu_count": "4"}, optuna.samplers.RandomSampler())
    assert "gpu_count: study has '8', this worker has '4'" in err.value.message


# -- two hosts (two simulated nodes, two results directories) on one PostgreSQL study ------------------

def two_host_spec(tmp_path: Path, name: str, storage: str, space: dict[str, Any] | None = None, **over: Any) -> Path:
    """A spec on a simulated node of its own (a host), with two feature combinations to search."""
    space = space or {"tp": 1, "mem_fraction_static": {"min": 0.80, "max": 0.92, "step": 0.04},
                      "context_length": [8192, 16384], "torch_compile": [False, True]}
    d = tmp_path / name
    d.mkdir()
    return write_spec(d, study="shared", storage=storage, space=space, **over)


def frontier_of(study: optuna.Study) -> dict[tuple[str, ...], str]:
    """Per feature combination, the config key of its best fitting result."""
    best = {}
    for r in store.results(study):
        if r.outcome.fits:
            feats = r.config.features()
            best[feats] = max(best.get(feats, ("", -1)), (r.config.key(), r.kv_tokens or 0), key=lambda x: x[1])
    return {k: v[0] for k, v in best.items()}


def launched_keys(study: optuna.Study) -> list[str]:
    return [r.config.key() for r in store.results(study) if r.launched]


def start_worker(spec: Path, **env: str) -> subprocess.Popen[str]:
    return subprocess.Popen([*CLI, "run", str(spec)], cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env={**os.environ, **env}, start_new_session=True)


@pytest.mark.slow  # ~80 s on 2 shared cores: three whole runs
def test_two_hosts_share_one_study_without_launching_a_point_twice(pg_url: str, tmp_path: Path) -> None:
    solo = two_host_spec(tmp_path, "solo", f"sqlite:///{tmp_path / 'solo.db'}")
    out = subprocess.run([*CLI, "run", str(solo)], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    alone = store.load_study("shared", f"sqlite:///{tmp_path / 'solo.db'}")
    specs = [two_host_spec(tmp_path, h, pg_url, simulated={"time_scale": 0.01}) for h in ("a", "b")]
    workers = [start_worker(s) for s in specs]
    outs = [w.communicate(timeout=300) for w in workers]
    for w, (_, err) in zip(workers, outs, strict=True):
        assert w.returncode == 0, err
    shared = store.load_study("shared", pg_url)
    keys = launched_keys(shared)
    assert len(keys) == len(set(keys)), "a point was launched twice"
    assert frontier_of(shared) == frontier_of(alone)
    hosts = set(store.trial_hosts(shared).values())
    assert len(hosts) == 2, f"both hosts must have run trials: {hosts}"
    printed = [o.split("frontier (largest", 1)[1].splitlines()[1:] for o, _ in outs]  # each worker's last word
    frontiers = [[line for line in lines if line.startswith("  ")] for lines in printed]
    assert frontiers[0] and frontiers[0] == frontiers[1]


@pytest.mark.slow  # ~30 s on 2 shared cores
def test_a_worker_killed_mid_trial_is_recovered_by_the_other(pg_url: str, tmp_path: Path) -> None:
    beat = {"AUTOTUNE_HEARTBEAT_S": "1", "AUTOTUNE_HEARTBEAT_GRACE_S": "3"}
    # One point, so the search cannot converge without it: whether a dead worker's point is needed again
    # otherwise depends on what the other worker learns meanwhile (a larger fit makes it pointless).
    one = {"tp": 1, "mem_fraction_static": 0.88, "context_length": [16384], "torch_compile": False}
    dying = two_host_spec(tmp_path, "a", pg_url, one, simulated={"time_scale": 0.2})  # slow: killed mid-trial
    other = two_host_spec(tmp_path, "b", pg_url, one, simulated={"time_scale": 0.01})
    a = start_worker(dying, **beat)
    victim = wait_for_running_trial(spec_mod.load(dying), timeout=120)
    b = start_worker(other, **beat)
    os.killpg(a.pid, signal.SIGKILL)  # the tuner (and only it: the server has its own session) dies
    a.communicate(timeout=30)
    _, err = b.communicate(timeout=300)
    assert b.returncode == 0, err
    shared = store.load_study("shared", pg_url)
    failed = shared.trials[victim.number]
    assert failed.state == optuna.trial.TrialState.FAIL and failed.user_attrs.get("failed_by") == "heartbeat"
    rerun = [t for t in shared.trials if t.state == optuna.trial.TrialState.COMPLETE and t.params == victim.params]
    assert len(rerun) == 1, "the dead worker's point must be run again, once"
    assert not shared.get_trials(states=(optuna.trial.TrialState.RUNNING,))
    keys = launched_keys(shared)
    assert len(keys) == len(set(keys))
    # Host a comes back: its tuner stops the server its dead run left on its node; nothing is left.
    again = subprocess.run([*CLI, "run", str(dying)], cwd=REPO, capture_output=True, text=True, timeout=300,
                           env={**os.environ, **beat})
    assert again.returncode == 0, again.stderr
    assert not tagged_processes(victim.user_attrs["trial_id"])


@pytest.mark.slow  # two runs, ~40 s on 2 busy cores
def test_a_worker_on_a_different_machine_is_refused_by_run_with_the_difference(pg_url: str, tmp_path: Path) -> None:
    first = two_host_spec(tmp_path, "a", pg_url, budget={"trials": 1})
    out = subprocess.run([*CLI, "run", str(first)], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    other = two_host_spec(tmp_path, "b", pg_url, simulated={"gpu_mem_gib": 48}, budget={"trials": 1})
    refused = subprocess.run([*CLI, "run", str(other)], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert refused.returncode == 2, refused.stderr
    assert "gpu_total_bytes" in refused.stderr and "this worker has" in refused.stderr
    assert "Traceback" not in refused.stderr and "hint:" in refused.stderr
    assert len(store.load_study("shared", pg_url).trials) == 1  # the refused worker added nothing
