"""What a run found, for people: the frontier, the recommended command, a report and a plot."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from autotune import store
from autotune.errors import AutotuneError
from autotune.records import TrialResult
from autotune.report.command import launcher_of


def study_record(name: str, storage: str) -> tuple[dict[str, Any], dict[str, Any], list[TrialResult]]:
    """(spec summary, fingerprint, results) of a recorded study."""
    study = store.load_study(name, storage)
    return dict(study.user_attrs.get("spec", {})), dict(study.user_attrs.get("fingerprint", {})), store.results(study)


def write_report(name: str, storage: str, out_dir: Path) -> tuple[Path, Path]:
    from autotune.report.markdown import write
    from autotune.report.timeline import bars
    from autotune.search import certify

    spec, fingerprint, results = study_record(name, storage)
    study_obj = store.load_study(name, storage)
    cert = certify.load(dict(study_obj.user_attrs))
    return write(name, spec, fingerprint, results, out_dir, cert, store.trial_hosts(study_obj),
                 store.cancelled(study_obj), bars(study_obj))


def best_launch(name: str, storage: str, concurrency: int | None = None) -> tuple[TrialResult, list[str]]:
    """The recommended result and its complete, parser-checked command line: the certified
    answer where certification ran (`autotune certify`), else the goal's best; at
    `max_running_requests == concurrency` if given."""
    from autotune.report.command import command
    from autotune.search import certify
    from autotune.search import goal as goal_mod

    spec, _, results = study_record(name, storage)
    order, required = goal_mod.stored(spec)
    cert = certify.load(dict(store.load_study(name, storage).user_attrs), concurrency)
    best = certify.recommended(results, order, required, cert, concurrency)
    if best is None:
        at = f" at max_running_requests={concurrency}" if concurrency else ""
        raise AutotuneError(f"nothing fitted in study {name!r}{at} yet",
                            hint="see `autotune report` for why each launch failed" +
                                 (" and which concurrencies were searched" if concurrency else ""))
    launcher = launcher_of(spec)
    return best, command(best, launcher=launcher, host=spec.get("host", "127.0.0.1"),
                         api_key_env=spec.get("api_key_env"))


def best_standing(name: str, storage: str, concurrency: int | None = None) -> dict[str, Any]:
    """The recommendation's certification state and why (`certify.standing`)."""
    from autotune.search import certify

    return certify.standing(certify.load(dict(store.load_study(name, storage).user_attrs), concurrency))
