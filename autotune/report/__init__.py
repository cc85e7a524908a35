"""What a run found, for people: the frontier, the recommended command, a report and a plot."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from autotune import store
from autotune.errors import AutotuneError
from autotune.records import TrialResult
from autotune.search import goal as goal_mod


def study_record(name: str, storage: str) -> tuple[dict[str, Any], dict[str, Any], list[TrialResult]]:
    """(spec summary, fingerprint, results) of a recorded study."""
    study = store.load_study(name, storage)
    return dict(study.user_attrs.get("spec", {})), dict(study.user_attrs.get("fingerprint", {})), store.results(study)


def write_report(name: str, storage: str, out_dir: Path) -> tuple[Path, Path]:
    from autotune.report.markdown import write

    spec, fingerprint, results = study_record(name, storage)
    return write(name, spec, fingerprint, results, out_dir, store.trial_hosts(store.load_study(name, storage)))


def best_launch(name: str, storage: str) -> tuple[TrialResult, list[str]]:
    """The recommended result and its complete, parser-checked command line."""
    from autotune.report.command import command

    spec, _, results = study_record(name, storage)
    goal = spec.get("goal", {})
    best = goal_mod.best(results, goal.get("order", goal_mod_order()), goal.get("required_features", []))
    if best is None:
        raise AutotuneError(f"nothing fitted in study {name!r} yet",
                            hint="see `autotune report` for why each launch failed")
    launcher = ["python", "-m", "sglang.launch_server"] if spec.get("simulated") else spec.get("launcher", [])
    return best, command(best, launcher=launcher, host=spec.get("host", "127.0.0.1"),
                         api_key_env=spec.get("api_key_env"))


def goal_mod_order() -> list[str]:
    return ["features", "context_length", "kv_tokens"]
