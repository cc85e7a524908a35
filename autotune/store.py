"""The record: an Optuna study (SQLite under results/ by default, any Optuna RDB URL accepted)
plus the artifacts of each trial under results/<study>/trials/<trial id>/.

Each told trial carries its whole TrialResult in the user attribute `result`, so reports,
`best` and `regress` read everything back from the study alone. A study records the
hardware/engine fingerprint it was made on and refuses a worker on a different machine.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import socket
import threading
import time
import uuid
import warnings
import weakref
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import optuna
from optuna.storages._heartbeat import (  # what RDBStorage implements
    BaseHeartbeat,
    is_heartbeat_enabled,
)

from autotune.errors import StoreError
from autotune.records import TrialResult
from autotune.redact import redact_url

optuna.logging.set_verbosity(optuna.logging.WARNING)

RESULT_ATTR = "result"
WORKER_ATTR = "worker"
TAG_ATTR = "tag"  # a short id made when the study is created: trial tags are unique per host with it


# SQLAlchemy's PostgreSQL drivers: the module each imports and the pip requirement that installs it. A plain
# `postgresql://` means SQLAlchemy's default driver, psycopg (3) since SQLAlchemy 2.1, which the project's `postgres`
# extra installs (with SQLAlchemy >= 2.1): the URL means the same to autotune as to SQLAlchemy, Optuna's own
# command and any script reading the study. `postgresql+psycopg2://` and the others name their driver.
_PG_DRIVERS = {"psycopg": ("psycopg", "psycopg[binary]"), "psycopg2": ("psycopg2", "psycopg2-binary"),
               "pg8000": ("pg8000", "pg8000"), "psycopg2cffi": ("psycopg2cffi", "psycopg2cffi")}
_FIRST_CONTACT_KEY = 0x6175746F74756E65  # "autotune": one advisory lock for schema + study creation
_claim_locks: dict[str, threading.Lock] = {}


def is_postgres(url: str) -> bool:
    scheme = url.split("://", 1)[0]
    return scheme == "postgresql" or scheme.startswith("postgresql+")


def heartbeat_s() -> tuple[int, int]:
    """(interval, grace period) of trial heartbeats on a shared (non-SQLite) storage: a trial whose
    worker has not beaten for the grace period is failed by the next worker that looks (Optuna's
    `fail_stale_trials`). The grace period must exceed the interval by a few beats."""
    interval = int(os.environ.get("AUTOTUNE_HEARTBEAT_S", "10"))
    return interval, int(os.environ.get("AUTOTUNE_HEARTBEAT_GRACE_S", str(6 * interval)))


SCHEMA_RACE_TRIES = 5


def storage_for(url: str) -> optuna.storages.RDBStorage:
    """An Optuna storage for `url`; SQLite files get their directory and a lock timeout, shared
    databases (PostgreSQL, MySQL) get trial heartbeats. The first contact with a PostgreSQL
    database (creating Optuna's tables) is made under an advisory lock: see `first_contact`."""
    sa_url = _dialect_url(url)
    heartbeat: dict[str, Any] = {}
    if url.startswith("sqlite:///"):
        path = Path(url.removeprefix("sqlite:///"))
        path.parent.mkdir(parents=True, exist_ok=True)
        timeout = float(os.environ.get("AUTOTUNE_DB_LOCK_TIMEOUT_S", "60"))
        engine_kwargs: dict[str, Any] = {"connect_args": {"timeout": timeout}}
    else:
        engine_kwargs = {}
        heartbeat = dict(zip(("heartbeat_interval", "grace_period"), heartbeat_s(), strict=True))
    for attempt in range(SCHEMA_RACE_TRIES):
        try:
            with first_contact(url), warnings.catch_warnings():
                warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)  # heartbeats: stable since 2.9
                storage = optuna.storages.RDBStorage(sa_url, engine_kwargs=engine_kwargs, **heartbeat)
            # Optuna never disposes the engine, so a dropped storage left its pooled connections to the garbage
            # collector: psycopg (3) warns of each (ResourceWarning, "deleted while still open"). Closed instead.
            weakref.finalize(storage, storage.engine.dispose)
            return storage
        except Exception as exc:  # SQLAlchemy/driver errors have no common base worth naming here
            if url.startswith("sqlite:///") and _lost_schema_race(exc) and attempt + 1 < SCHEMA_RACE_TRIES:
                # Another process (a second worker, `autotune report`) created Optuna's tables on this fresh
                # file in the same instant: they exist now; open again (PostgreSQL has first_contact's lock).
                time.sleep(0.1 * (attempt + 1))
                continue
            raise StoreError(f"cannot open storage {redact_url(url)}: {exc}",
                             hint="check the URL; for PostgreSQL install the driver: pip install 'autotune[postgres]'"
                             ) from exc
    raise AssertionError("unreachable")


def _lost_schema_race(exc: Exception) -> bool:
    """The two ways creating Optuna's schema fails when another process creates it at the same time."""
    text = str(exc)
    return "already exists" in text or "UNIQUE constraint failed: alembic_version" in text


def _dialect_url(url: str) -> str:
    """`url` as given, once its PostgreSQL driver is known to import: a missing driver is refused with the
    pip command that installs it, before SQLAlchemy's bare "No module named ..." (or Optuna's "Failed to
    import DB access module") could be the only word."""
    scheme = url.split("://", 1)[0]
    if scheme == "postgres":
        raise StoreError(f"storage {redact_url(url)}: SQLAlchemy does not know the scheme 'postgres://'",
                         hint="write it postgresql://user:password@host:port/database")
    if not is_postgres(url):
        return url
    driver = scheme.partition("+")[2] or default_pg_driver()
    if driver not in _PG_DRIVERS:
        return url  # a driver this tool does not know: SQLAlchemy says what it lacks (see storage_for)
    module, requirement = _PG_DRIVERS[driver]
    try:
        importlib.import_module(module)
    except ImportError as exc:
        hint = f"pip install '{requirement}'"
        if not scheme.partition("+")[2]:
            hint += " (what the PostgreSQL extra installs: pip install 'autotune[postgres]')"
        others = [f"postgresql+{name}://" for name, (mod, _) in _PG_DRIVERS.items()
                  if name != driver and importlib.util.find_spec(mod) is not None]
        if others:
            hint += f"; or name a driver that is installed: {', '.join(others)}"
        where = "the plain postgresql:// means" if not scheme.partition("+")[2] else f"{scheme}:// names"
        raise StoreError(f"storage {redact_url(url)}: {where} the PostgreSQL driver '{module}', which cannot be "
                         f"imported ({exc})", hint=hint) from None
    return url


def default_pg_driver() -> str:
    """The driver SQLAlchemy uses for a plain `postgresql://` (its default dialect's; nothing imported)."""
    from sqlalchemy.dialects import postgresql

    return str(postgresql.dialect.driver)


@contextmanager
def first_contact(url: str) -> Iterator[None]:
    """Hold PostgreSQL's advisory lock for the block (a no-op for other databases).

    N workers started at once on an empty database would each create Optuna's tables and all
    but one fail ("relation alembic_version already exists", Optuna issue 1092); under this lock
    the first creates them and the others find them. The lock is per session: a worker that dies
    holding it releases it with its connection.
    """
    if not is_postgres(url):
        yield
        return
    with _advisory_lock(url, _FIRST_CONTACT_KEY):
        yield


@contextmanager
def claim(url: str, study_name: str) -> Iterator[None]:
    """Serialise choosing-and-asking the next trial among every worker of one study, so that
    a point RUNNING or done anywhere is seen before it is proposed again: an advisory lock
    keyed by the study on PostgreSQL, a lock per study among this process's threads otherwise."""
    if is_postgres(url):
        key = int.from_bytes(hashlib.sha256(f"claim\0{study_name}".encode()).digest()[:8], "big", signed=True)
        with _advisory_lock(url, key):
            yield
        return
    with _claim_locks.setdefault(f"{url}\0{study_name}", threading.Lock()):
        yield


@contextmanager
def _advisory_lock(url: str, key: int) -> Iterator[None]:
    import sqlalchemy  # comes with Optuna's RDB storage; imported here to keep `import store` light
    from sqlalchemy.pool import NullPool

    engine = sqlalchemy.create_engine(_dialect_url(url), poolclass=NullPool)
    try:
        with engine.connect() as conn:
            conn.execute(sqlalchemy.text("SELECT pg_advisory_lock(:k)"), {"k": key})
            conn.commit()
            try:
                yield
            finally:
                conn.execute(sqlalchemy.text("SELECT pg_advisory_unlock(:k)"), {"k": key})
                conn.commit()
    finally:
        engine.dispose()


def has_heartbeats(study: optuna.Study) -> bool:
    storage = study._storage  # noqa: SLF001 - Optuna exposes no public handle on a study's storage
    return isinstance(storage, BaseHeartbeat) and is_heartbeat_enabled(storage)


def mark_interrupted(study: optuna.Study, trial: optuna.trial.FrozenTrial) -> None:
    """Mark a RUNNING trial a dead run left `interrupted`, before it is told FAIL: a Study has no
    handle on another process's trial, its storage does."""
    study._storage.set_trial_user_attr(trial._trial_id, "interrupted", True)  # noqa: SLF001


def fail_stale(study: optuna.Study) -> None:
    """Fail the RUNNING trials whose worker stopped beating (killed, host lost): their points can
    be proposed again. Marked `interrupted` like a trial recovered on its own host."""
    if not has_heartbeats(study):
        return
    storage = study._storage  # noqa: SLF001
    assert isinstance(storage, BaseHeartbeat)
    # Optuna's `fail_stale_trials`, marking the trial first (a finished trial takes no attributes).
    for trial_id in storage._get_stale_trial_ids(study._study_id):  # noqa: SLF001
        try:
            storage.set_trial_user_attr(trial_id, "interrupted", True)
            storage.set_trial_user_attr(trial_id, "failed_by", "heartbeat")
            storage.set_trial_state_values(trial_id, state=optuna.trial.TrialState.FAIL)
        except optuna.exceptions.UpdateFinishedTrialError:
            pass  # another worker failed it first


@contextmanager
def heartbeat(study: optuna.Study, trial: optuna.trial.Trial) -> Iterator[None]:
    """Beat for `trial` every heartbeat interval while the block runs (a no-op without heartbeats):
    Optuna beats only inside `study.optimize`, and a run asks and tells trials itself."""
    if not has_heartbeats(study):
        yield
        return
    storage = study._storage  # noqa: SLF001
    assert isinstance(storage, BaseHeartbeat)
    interval = storage.get_heartbeat_interval() or heartbeat_s()[0]
    stop = threading.Event()

    def beat() -> None:
        while True:
            try:
                storage.record_heartbeat(trial._trial_id)  # noqa: SLF001
            except Exception:  # noqa: BLE001 - a missed beat is retried; the trial must go on
                pass
            if stop.wait(interval):
                return

    thread = threading.Thread(target=beat, name=f"heartbeat-{trial.number}", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()


def open_study(name: str, url: str, fingerprint: Mapping[str, str], sampler: optuna.samplers.BaseSampler,
               spec_summary: Mapping[str, Any] | None = None) -> optuna.Study:
    """Create or resume the study; refuse when it was made on different hardware or engine.

    Creating the study and recording its fingerprint and tag happen under `first_contact`, so
    workers started together on one shared database agree on all three."""
    storage = storage_for(url)
    with first_contact(url):
        try:
            study = optuna.create_study(study_name=name, storage=storage, direction="maximize",
                                        load_if_exists=True, sampler=sampler)
        except Exception as exc:
            raise StoreError(f"cannot create or load study {name!r} in {redact_url(url)}: {exc}",
                             hint="is the database locked by another process or corrupted? try again, or use a "
                                  "new study name") from exc
        return _check_fingerprint(study, name, fingerprint, spec_summary)


def _check_fingerprint(study: optuna.Study, name: str, fingerprint: Mapping[str, str],
                       spec_summary: Mapping[str, Any] | None) -> optuna.Study:
    study_tag(study)
    recorded = study.user_attrs.get("fingerprint")
    if recorded is None:
        study.set_user_attr("fingerprint", dict(fingerprint))
        if spec_summary:
            study.set_user_attr("spec", dict(spec_summary))
        return study
    diff = {k: (recorded.get(k), fingerprint.get(k)) for k in set(recorded) | set(fingerprint)
            if recorded.get(k) != fingerprint.get(k) and (k in recorded or k not in FINGERPRINT_ADDED)}
    if diff:
        named = "; ".join(f"{k}: study has {a!r}, this worker has {b!r}" for k, (a, b) in sorted(diff.items()))
        raise StoreError(f"study {name!r} was recorded on a different machine or engine ({named})",
                         hint="run this worker on a new study name (--study NAME), or `autotune regress` to "
                              "compare engines")
    return study


# Fingerprint keys newer than some recorded studies: a study that never recorded one still resumes.
FINGERPRINT_ADDED = frozenset({"model_config"})


def study_tag(study: optuna.Study) -> str:
    """The study's short random id, made and stored the first time it is asked for.

    Two studies of the same name (two results directories, two storages) on one host get
    different tags, so their trials' process tags (`<study>-<tag>-<number>`) never collide.
    """
    tag = study.user_attrs.get(TAG_ATTR)
    if not tag:
        tag = uuid.uuid4().hex[:6]
        study.set_user_attr(TAG_ATTR, tag)
    return str(tag)


def load_study(name: str, url: str) -> optuna.Study:
    """An existing study, read-only: a missing SQLite file is refused, not created empty."""
    if url.startswith("sqlite:///") and not Path(url.removeprefix("sqlite:///")).is_file():
        raise StoreError(f"no study {name!r}: {url.removeprefix('sqlite:///')} does not exist",
                         hint="run `autotune run SPEC` first, or give the right --study / --storage")
    try:
        return optuna.load_study(study_name=name, storage=storage_for(url))
    except KeyError:
        raise StoreError(f"no study {name!r} in {redact_url(url)}", hint="run `autotune run SPEC` first") from None


def results(study: optuna.Study) -> list[TrialResult]:
    """TrialResults of the finished trials, in trial order."""
    out = []
    for trial in study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,)):
        data = trial.user_attrs.get(RESULT_ATTR)
        if data:
            out.append(TrialResult.from_dict(data))
    return out


CANCELLED_ATTR = "cancelled"  # why a slot's running point was stopped early (search/loop.py)


@dataclass(frozen=True)
class CancelledTrial:
    """A launch stopped early because a fresh result made its point pointless (slots): FAIL in the
    study, no verdict on its config. `result`: its launch as far as it got (None when the run that
    recorded it kept no result for cancelled trials)."""

    number: int
    trial_id: str
    point: dict[str, Any]
    why: str
    result: TrialResult | None


def cancelled(study: optuna.Study) -> list[CancelledTrial]:
    """The study's cancelled trials, in trial order."""
    out = []
    for trial in study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.FAIL,)):
        why = trial.user_attrs.get(CANCELLED_ATTR)
        if not why:
            continue
        data = trial.user_attrs.get(RESULT_ATTR)
        out.append(CancelledTrial(trial.number, str(trial.user_attrs.get("trial_id", "")), dict(trial.params),
                                  str(why), TrialResult.from_dict(data) if data else None))
    return out


def worker_identity(node: str = "") -> dict[str, Any]:
    """Who runs a trial: host and pid, and the simulated node it drives, if any."""
    return {"host": socket.gethostname(), "pid": os.getpid(), **({"node": node} if node else {})}


def trial_hosts(study: optuna.Study) -> dict[str, str]:
    """Trial tag -> the host (and simulated node) that ran it, for reports."""
    out = {}
    for trial in study.get_trials(deepcopy=False):
        worker, tag = trial.user_attrs.get(WORKER_ATTR) or {}, trial.user_attrs.get("trial_id")
        if tag and worker.get("host"):
            node = f" (simulated node {worker['node']})" if worker.get("node") else ""
            out[str(tag)] = f"{worker['host']}{node}"
    return out


def append_jsonl(path: Path, record: Mapping[str, Any]) -> None:
    """Append one JSON line (0600-ish permissions: results are not world-writable)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    with os.fdopen(fd, "a") as fh:
        fh.write(json.dumps(record) + "\n")


def repair_mirror(path: Path, results: list[TrialResult]) -> str:
    """Check the human-readable mirror `trials.jsonl` against the study (the record).

    Corrupt lines (a crash mid-write, a hand edit) or missing trials: the file is moved aside
    and rewritten from the study. Returns what was done ('' when the mirror was fine).
    """
    records, bad = read_jsonl(path)
    known = {r.trial_id for r in results}
    if not bad and {rec.get("trial_id") for rec in records} >= known:
        return ""
    aside = path.with_name(f"{path.name}.corrupt-{int(time.time())}") if path.exists() else None
    if aside is not None:
        path.rename(aside)
    for result in results:
        append_jsonl(path, result.to_dict())
    what = f"lines {bad} were not valid JSON" if bad else "it lacked finished trials"
    return f"{path}: {what}; rewritten from the study" + (f" (old file kept as {aside.name})" if aside else "")


def read_jsonl(path: Path) -> tuple[list[dict[str, Any]], list[int]]:
    """Records of a JSONL file and the line numbers that were not valid JSON (skipped)."""
    good: list[dict[str, Any]] = []
    bad: list[int] = []
    if not path.is_file():
        return good, bad
    for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
        if not line.strip():
            continue
        try:
            good.append(json.loads(line))
        except ValueError:
            bad.append(number)
    return good, bad
