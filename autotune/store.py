"""The record: an Optuna study (SQLite under results/ by default, any Optuna RDB URL accepted)
plus the artifacts of each trial under results/<study>/trials/<trial id>/.

Each told trial carries its whole TrialResult in the user attribute `result`, so reports,
`best` and `regress` read everything back from the study alone. A study records the
hardware/engine fingerprint it was made on and refuses a worker on a different machine.
"""

from __future__ import annotations

import json
import os
import socket
import time
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import optuna

from autotune.errors import StoreError
from autotune.records import TrialResult

optuna.logging.set_verbosity(optuna.logging.WARNING)

RESULT_ATTR = "result"
WORKER_ATTR = "worker"
TAG_ATTR = "tag"  # a short id made when the study is created: trial tags are unique per host with it


def storage_for(url: str) -> optuna.storages.BaseStorage:
    """An Optuna storage for `url`; SQLite files get their directory and a lock timeout."""
    if url.startswith("sqlite:///"):
        path = Path(url.removeprefix("sqlite:///"))
        path.parent.mkdir(parents=True, exist_ok=True)
        timeout = float(os.environ.get("AUTOTUNE_DB_LOCK_TIMEOUT_S", "60"))
        engine_kwargs: dict[str, Any] = {"connect_args": {"timeout": timeout}}
    else:
        engine_kwargs = {}
    try:
        return optuna.storages.RDBStorage(url, engine_kwargs=engine_kwargs)
    except Exception as exc:  # SQLAlchemy/driver errors have no common base worth naming here
        raise StoreError(f"cannot open storage {redact_url(url)}: {exc}",
                         hint="check the URL; for PostgreSQL install the driver: pip install 'autotune[postgres]'") from exc


def redact_url(url: str) -> str:
    """The storage URL without its password."""
    if "@" in url and "://" in url:
        scheme, rest = url.split("://", 1)
        creds, host = rest.rsplit("@", 1)
        user = creds.split(":", 1)[0]
        return f"{scheme}://{user}:***@{host}"
    return url


def open_study(name: str, url: str, fingerprint: Mapping[str, str], sampler: optuna.samplers.BaseSampler,
               spec_summary: Mapping[str, Any] | None = None) -> optuna.Study:
    """Create or resume the study; refuse when it was made on different hardware or engine."""
    storage = storage_for(url)
    try:
        study = optuna.create_study(study_name=name, storage=storage, direction="maximize", load_if_exists=True,
                                    sampler=sampler)
    except Exception as exc:
        raise StoreError(f"cannot create or load study {name!r} in {redact_url(url)}: {exc}",
                         hint="is the database locked by another process or corrupted? try again, or use a new "
                              "study name") from exc
    study_tag(study)
    recorded = study.user_attrs.get("fingerprint")
    if recorded is None:
        study.set_user_attr("fingerprint", dict(fingerprint))
        if spec_summary:
            study.set_user_attr("spec", dict(spec_summary))
    elif dict(recorded) != dict(fingerprint):
        diff = {k: (recorded.get(k), fingerprint.get(k)) for k in set(recorded) | set(fingerprint)
                if recorded.get(k) != fingerprint.get(k)}
        raise StoreError(f"study {name!r} was recorded on a different machine or engine: {diff}",
                         hint="use a new study name for this machine (or `autotune regress` to compare engines)")
    return study


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


def worker_identity() -> dict[str, Any]:
    return {"host": socket.gethostname(), "pid": os.getpid()}


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
