"""The spec's types, checked strictly by pydantic: a wrong type is refused, never coerced.

`"no"` is not false, `2.9` is not 2, `"8x"` is not a number and `features` is not a list.
Only types live here (and defaults); what a value means — ranges, names, the model and
the machine, deadline scaling, fault injection — is policy, checked in `fields.py`.
`document(raw)` raises SpecError naming the dotted field (`probe.burst`) and the fix.
"""

from __future__ import annotations

import difflib
import types
import typing
from collections.abc import Collection, Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, ValidationError

from autotune.engines.registry import DEFAULT_ENGINE, default_version
from autotune.errors import SpecError
from autotune.settings import GOAL_CRITERIA, GOAL_ORDER


class _Strict(BaseModel):
    model_config = ConfigDict(strict=True, extra="forbid", frozen=True)


class SimulatedDoc(_Strict):
    gpus: int = 2
    gpu_mem_gib: float = 48.0
    gpu_name: str = "NVIDIA Simulated GPU"
    node_dir: str | None = None
    time_scale: float = 0.01
    faults: str = ""
    release_delay_s: float = 0.0
    fault_rate: float = 0.0
    min_deadline_s: float = 10.0
    boot_jitter_mib: float = 0.0


class GoalDoc(_Strict):
    order: list[str] = list(GOAL_ORDER)
    required_features: list[str] = []
    min_concurrency: int = 1


class ProbeDoc(_Strict):
    enabled: bool = True
    long_request: bool = True
    burst: int = 8
    burst_tokens: int = 1024
    max_new_tokens: int = 16
    timeout_s: float = 600.0


class CertifyDoc(_Strict):
    enabled: bool = True
    boots: int = 3
    safety_margin_gib: float = 0.0
    deadline_s: float = 1800.0


class BudgetDoc(_Strict):
    trials: int = 40
    wall_time_s: float = 8 * 3600.0
    unexplained_crashes: int = 3


class TimeoutsDoc(_Strict):
    startup_s: float = 3600.0
    no_progress_s: float = 600.0
    compile_no_progress_s: float = 1800.0
    ready_health_s: float = 120.0


class TargetDoc(_Strict):
    """Where the server runs (README, "Where the GPUs are"); leaving it out means this machine."""

    ssh: str | None = None  # user@host[:port]
    ssh_options: list[str] = []
    exec_prefix: list[str] = []  # e.g. [pct, exec, "101", "--"]
    python: str = "python3"  # the target's Python, for the tool's small helper
    nvidia_smi: list[str] = ["nvidia-smi"]
    network: Literal["auto", "shared", "container"] = "auto"  # does the prefix enter a network namespace?


class SpecDoc(_Strict):
    """The whole file. `launcher`, `gpus`, `space` and `start` take several forms and are
    checked by their own parsers (fields.py, space.py), as strictly."""

    study: str | None = None
    engine: str = DEFAULT_ENGINE
    engine_version: str = default_version(DEFAULT_ENGINE)
    model: str
    launcher: Any = None
    simulated: SimulatedDoc | None = None
    target: TargetDoc | None = None
    gpus: Any = None
    host: str = "127.0.0.1"
    port: int | None = None
    api_key_env: str | None = None
    env: dict[str, str | int | float | bool] = {}
    space: dict[str, Any] = {}
    start: dict[str, Any] = {}
    goal: GoalDoc = GoalDoc()
    probe: ProbeDoc = ProbeDoc()
    certify: CertifyDoc = CertifyDoc()
    budget: BudgetDoc = BudgetDoc()
    timeouts: TimeoutsDoc = TimeoutsDoc()
    strategy: str = "frontier"
    storage: str | None = None
    seed: int = 0
    parallel: int | str = 1  # slots on this box: an integer >= 1, or "auto" (spec/__init__.py checks the value)
    results_dir: str = "results"
    allow_busy_gpus: bool = False
    release_timeout_s: float = 60.0
    stop_grace_s: float = 15.0


# An empty section (`goal:` with nothing under it) reads as null: the same as leaving it out.
_EMPTY_MEANS_DEFAULT = ("env", "space", "start", "goal", "probe", "certify", "budget", "timeouts")

_WANT = {
    "bool_type": "true or false", "int_type": "an integer", "float_type": "a number",
    "string_type": "a string", "list_type": "a list", "dict_type": "a mapping", "model_type": "a mapping",
}
_GENERIC_FIX = {
    "bool_type": "write true or false unquoted (YAML booleans); 'yes', 'no', \"false\" are refused so they are "
                 "never misread",
    "int_type": "a whole number without quotes, e.g. 8 (not 2.9, not '8x')",
    "float_type": "a number without quotes, e.g. 0.5",
    "string_type": "a string; quote it if YAML reads it as something else, e.g. '0.5.23'",
    "list_type": "a YAML list, e.g. [a, b]",
    "dict_type": "a mapping of name: value",
    "model_type": "a mapping of name: value",
}
_FIELD_FIX = {
    "model": "the path of the model directory (with config.json)",
    "budget.trials": "an integer >= 1, e.g. trials: 40",
    "budget.unexplained_crashes": "an integer >= 1: launches in a row ending with no error line before the run "
                                  "stops, e.g. 3",
    "seed": "an integer seed",
    "parallel": "an integer >= 1 (trials at once, each on its own GPUs), or auto",
    "port": "an integer 1024-65535, or leave it out for a free port per trial",
    "goal.order": f"a list, some of: {', '.join(GOAL_CRITERIA)}",
    "certify.boots": "an integer >= 1, e.g. boots: 3",
    "certify.safety_margin_gib": "a number of GiB >= 0, e.g. 0.5",
    "certify.deadline_s": "seconds > 0 the worst case may take, e.g. 3600",
    "goal.required_features": "a list, e.g. [speculative]",
    "goal.min_concurrency": "an integer >= 1",
    "env": "a mapping NAME: value",
}


def document(raw: Mapping[str, Any]) -> SpecDoc:
    """The spec file's fields, strictly typed; SpecError names the first wrong field."""
    cleaned = {k: v for k, v in raw.items() if not (k in _EMPTY_MEANS_DEFAULT and v is None)}
    try:
        return SpecDoc.model_validate(cleaned)
    except ValidationError as exc:
        raise as_spec_error(exc, SpecDoc) from None


def as_spec_error(exc: ValidationError, model: type[BaseModel], prefix: str = "") -> SpecError:
    """The first error of `exc` as a SpecError: dotted field, what was wrong, how to fix it."""
    err = exc.errors()[0]
    loc = [str(p) for p in err["loc"]]
    field = prefix + ".".join(loc)
    kind, value = err["type"], err.get("input")
    if kind == "extra_forbidden":
        return SpecError(field, "unknown field", did_you_mean(loc[-1], sorted(_fields_at(model, loc[:-1]))))
    if kind == "missing":
        return SpecError(field, "missing", _FIELD_FIX.get(field, "add it"))
    want = _WANT.get(kind, err["msg"].removeprefix("Input should be ").lower())
    got = "nothing (null)" if value is None else f"{type(value).__name__} {value!r}"
    return SpecError(field, f"expected {want}, got {got}", _FIELD_FIX.get(field, _GENERIC_FIX.get(kind, err["msg"])))


def did_you_mean(name: str, known: Collection[str], listing: str = "known fields") -> str:
    """The hint for an unknown `name`: the closest of `known`, or else `listing` and all of them."""
    close = difflib.get_close_matches(name, list(known), n=1)
    return f"did you mean '{close[0]}'?" if close else f"{listing}: {', '.join(known)}"


def _fields_at(model: type[BaseModel], path: list[str]) -> set[str]:
    """The field names of the (nested) model at `path`, for 'did you mean'."""
    for name in path:
        info = model.model_fields.get(name)
        inner = _model_in(info.annotation) if info else None
        if inner is None:
            return set()
        model = inner
    return set(model.model_fields)


def _model_in(annotation: Any) -> type[BaseModel] | None:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    if isinstance(annotation, types.UnionType) or typing.get_origin(annotation) is typing.Union:
        for arg in typing.get_args(annotation):
            found = _model_in(arg)
            if found is not None:
                return found
    return None
