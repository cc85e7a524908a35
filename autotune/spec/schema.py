"""The spec's types, checked strictly by pydantic: a wrong type is refused, never coerced.

`"no"` is not false, `2.9` is not 2, `"8x"` is not a number and `features` is not a list.
Only types live here; each section's fields and defaults are its settings dataclass's, read by
`section`. What a value means — ranges, names, the model and the machine, deadline scaling, fault
injection — is policy, checked in `fields.py`.
`document(raw)` raises SpecError naming the dotted field (`probe.burst`) and the fix.
"""

from __future__ import annotations

import dataclasses
import difflib
import typing
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, GetCoreSchemaHandler, ValidationError, create_model
from pydantic_core import core_schema

from autotune.engines.registry import DEFAULT_ENGINE, default_version
from autotune.errors import SpecError
from autotune.settings import (
    DEFAULT_STRATEGY,
    GOAL_CRITERIA,
    Budget,
    CertifySpec,
    Deadlines,
    Goal,
    ProbeSpec,
    SimulatedNode,
    Target,
    TrialSettings,
)


class _Strict(BaseModel):
    model_config = ConfigDict(strict=True, extra="forbid", frozen=True)


@dataclass(frozen=True)
class _Section:
    """A settings dataclass as a spec section (`Annotated[Goal, section(Goal)]`): the file's mapping is
    checked strictly by `model`, then built into the dataclass, whose fields and defaults are the only
    declaration of both."""

    model: type[BaseModel]
    build: Callable[[BaseModel], Any]

    def __get_pydantic_core_schema__(self, source: Any, handler: GetCoreSchemaHandler) -> core_schema.CoreSchema:
        schema = core_schema.no_info_after_validator_function(self.build, handler(self.model))
        return core_schema.nullable_schema(schema) if type(None) in typing.get_args(source) else schema


def section(cls: type, omit: tuple[str, ...] = ()) -> _Section:
    """`cls`'s fields (less `omit`: the tool's own, never the user's) with their defaults, typed as YAML
    writes them: a list for a tuple, a string for a path (an empty one: none)."""
    hints = typing.get_type_hints(cls)
    fields: dict[str, Any] = {f.name: (_yaml_type(hints[f.name]), list(f.default) if isinstance(f.default, tuple)
                                       else f.default) for f in dataclasses.fields(cls) if f.name not in omit}
    model = create_model(f"{cls.__name__}Doc", __base__=_Strict, **fields)

    def build(doc: BaseModel) -> Any:
        return cls(**{name: _from_yaml(hints[name], value) for name, value in doc})

    return _Section(model, build)


def _yaml_type(hint: Any) -> Any:
    if typing.get_origin(hint) is tuple:
        return list.__class_getitem__(typing.get_args(hint)[0])
    return str | None if hint == Path | None else hint


def _from_yaml(hint: Any, value: Any) -> Any:
    if isinstance(value, list):
        return tuple(value)
    return (Path(value) if value else None) if hint == Path | None else value


class SpecDoc(_Strict):
    """The whole file. `launcher`, `gpus`, `space` and `start` take several forms and are
    checked by their own parsers (fields.py, space.py), as strictly."""

    study: str | None = None
    engine: str = DEFAULT_ENGINE
    engine_version: str = default_version(DEFAULT_ENGINE)
    model: str
    launcher: Any = None
    simulated: Annotated[SimulatedNode | None, section(SimulatedNode)] = None
    target: Annotated[Target, section(Target)] = Target()
    gpus: Any = None
    host: str = TrialSettings.host  # these four: the trial's own defaults
    port: int | None = None
    api_key_env: str | None = None
    env: dict[str, str | int | float | bool] = {}
    space: dict[str, Any] = {}
    start: dict[str, Any] = {}
    goal: Annotated[Goal, section(Goal)] = Goal()
    probe: Annotated[ProbeSpec, section(ProbeSpec, omit=("worst_case",))] = ProbeSpec()
    certify: Annotated[CertifySpec, section(CertifySpec)] = CertifySpec()
    budget: Annotated[Budget, section(Budget)] = Budget()
    timeouts: Annotated[Deadlines, section(Deadlines, omit=("poll_s",))] = Deadlines()
    strategy: str = DEFAULT_STRATEGY
    storage: str | None = None
    seed: int = 0
    parallel: int | str = 1  # slots on this box: an integer >= 1, or "auto" (spec/__init__.py checks the value)
    results_dir: str = "results"
    allow_busy_gpus: bool = TrialSettings.allow_busy
    release_timeout_s: float = TrialSettings.release_timeout_s
    stop_grace_s: float = TrialSettings.grace_s


# An empty section (`goal:` with nothing under it) reads as null: the same as leaving it out.
_EMPTY_MEANS_DEFAULT = ("env", "space", "start", "goal", "probe", "certify", "budget", "timeouts", "target")

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
        raise as_spec_error(exc) from None


def as_spec_error(exc: ValidationError) -> SpecError:
    """The first error of `exc` as a SpecError: dotted field, what was wrong, how to fix it."""
    err = exc.errors()[0]
    loc = [str(p) for p in err["loc"]]
    field = ".".join(loc)
    kind, value = err["type"], err.get("input")
    if kind == "extra_forbidden":
        return SpecError(field, "unknown field", did_you_mean(loc[-1], sorted(_fields_at(loc[:-1]))))
    if kind == "missing":
        return SpecError(field, "missing", _FIELD_FIX.get(field, "add it"))
    want = _WANT.get(kind, err["msg"].removeprefix("Input should be ").lower())
    got = "nothing (null)" if value is None else f"{type(value).__name__} {value!r}"
    return SpecError(field, f"expected {want}, got {got}", _FIELD_FIX.get(field, _GENERIC_FIX.get(kind, err["msg"])))


def did_you_mean(name: str, known: Collection[str], listing: str = "known fields") -> str:
    """The hint for an unknown `name`: the closest of `known`, or else `listing` and all of them."""
    close = difflib.get_close_matches(name, list(known), n=1)
    return f"did you mean '{close[0]}'?" if close else f"{listing}: {', '.join(known)}"


def _fields_at(path: list[str]) -> Collection[str]:
    """The field names of the spec, or of its section `path[0]`, for 'did you mean'."""
    if not path:
        return SpecDoc.model_fields
    info = SpecDoc.model_fields.get(path[0])
    found = [m.model for m in info.metadata if isinstance(m, _Section)] if info else []
    return found[0].model_fields if found else ()
