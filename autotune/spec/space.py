"""The `space` section of a spec: each launch parameter fixed or searched, with bounds.

The parameters, their defaults and the kind of value each takes are LaunchConfig's (`config.PARAMS`);
here is one parser per kind. Forms accepted for a numeric parameter: a value (fixed), a list of
values, `{values: [...]}`, or `{min, max, step}` (a fraction) / `{min, max}` (a context length:
powers of two from min up to max, max included). `null` means "the engine's default". Every tuple
comes back sorted by memory need, smallest first.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping
from typing import Any

from autotune.config import PARAMS, LaunchConfig
from autotune.engines import kvdtype
from autotune.errors import SpecError
from autotune.modelshape import ModelShape
from autotune.spec.schema import did_you_mean

# Each parameter's default in the space: LaunchConfig's, or a range to search where it says one.
DEFAULTS: dict[str, Any] = {f.name: f.metadata["space"] for f in dataclasses.fields(LaunchConfig) if f.name in PARAMS}


def parse_space(raw: Mapping[str, Any], shape: ModelShape, n_gpus: int) -> dict[str, tuple[Any, ...]]:
    if not isinstance(raw, Mapping):
        raise SpecError("space", "must be a mapping of parameter: value(s)", "see configs/demo.yaml")
    unknown = set(raw) - set(PARAMS)
    if unknown:
        key = sorted(unknown)[0]
        raise SpecError(f"space.{key}", "unknown parameter", did_you_mean(key, list(PARAMS), "known"))
    space = {key: _PARSERS[kind](f"space.{key}", raw.get(key, DEFAULTS[key]), shape) for key, kind in PARAMS.items()}
    if None in space["tp"]:  # every other integer knob has an engine default; the GPUs per server do not
        raise SpecError("space.tp", "null is not a tensor-parallel size", "an integer >= 1, or a list of them")
    for tp in space["tp"]:
        if tp > n_gpus:
            raise SpecError("space.tp", f"tp {tp} needs {tp} GPUs, the spec gives {n_gpus}", "add GPUs or lower tp")
    return space


def _values(field: str, value: Any) -> list[Any]:
    if isinstance(value, Mapping):
        if set(value) - {"values", "min", "max", "step"}:
            raise SpecError(field, f"unknown keys {sorted(set(value) - {'values', 'min', 'max', 'step'})}",
                            "use {values: [...]} or {min: .., max: ..}")
        if "values" in value:
            if not isinstance(value["values"], list):
                raise SpecError(field, f"values: {value['values']!r} is not a list", "e.g. {values: [8, 16]}")
            return list(value["values"])
        raise SpecError(field, "a {min, max} range is not accepted for this parameter", "list the values")
    return list(value) if isinstance(value, list) else [value]


def _bools(field: str, value: Any, shape: ModelShape) -> tuple[bool, ...]:
    values = _values(field, value)
    if not values or not all(isinstance(v, bool) for v in values):
        raise SpecError(field, f"{value!r} is not true/false", "true, false, or [false, true] to search both")
    return tuple(sorted(set(values)))


def _ints(field: str, value: Any, shape: ModelShape) -> tuple[int | None, ...]:
    values: list[Any] = _values(field, value)
    if values == [None]:
        return (None,)
    if not values or not all(isinstance(v, int) and not isinstance(v, bool) for v in values):
        raise SpecError(field, f"{value!r} is not an integer or a list of integers", "e.g. 8 or [8, 16, 32], or null")
    if min(values) < 1:
        raise SpecError(field, f"{min(values)} is below 1", "values >= 1")
    return tuple(sorted(set(values)))


def _fractions(field: str, value: Any, shape: ModelShape) -> tuple[float | None, ...]:
    if value is None:
        return (None,)
    if isinstance(value, Mapping) and "min" in value:
        lo: Any = value.get("min")
        hi: Any = value.get("max")
        step: Any = value.get("step", 0.01)
        if not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in (lo, hi, step)):
            raise SpecError(field, "min, max and step must be numbers", "e.g. {min: 0.7, max: 0.95, step: 0.01}")
        if not 0 < lo < hi < 1 or step <= 0:
            raise SpecError(field, f"need 0 < min < max < 1 and step > 0 (got {lo}, {hi}, {step})",
                            "e.g. {min: 0.7, max: 0.95, step: 0.01}")
        n = int(math.floor((hi - lo) / step + 1e-9))
        return tuple(round(lo + i * step, 4) for i in range(n + 1))
    values = _values(field, value)
    if not all(isinstance(v, (int, float)) and not isinstance(v, bool) and 0 < v < 1 for v in values):
        raise SpecError(field, f"{value!r}: fractions must be between 0 and 1", "e.g. 0.85 or [0.8, 0.85, 0.9]")
    return tuple(sorted({round(float(v), 4) for v in values}))


def _contexts(field: str, value: Any, shape: ModelShape) -> tuple[int | None, ...]:
    if value is None:
        return (None,)
    if isinstance(value, Mapping) and "min" in value:
        lo: Any = value.get("min")
        hi: Any = value.get("max", shape.max_context)
        if not all(isinstance(v, int) and not isinstance(v, bool) for v in (lo, hi)) or not 1 <= lo <= hi:
            raise SpecError(field, f"need integers 1 <= min <= max (got {lo}, {hi})", "e.g. {min: 4096, max: 131072}")
        values, v = [], lo
        while v < hi:
            values.append(v)
            v *= 2
        values.append(hi)
    else:
        values = _values(field, value)
        if not values or not all(isinstance(v, int) and not isinstance(v, bool) and v >= 1 for v in values):
            raise SpecError(field, f"{value!r} is not a positive integer or list of them", "e.g. [32768, 65536]")
    values = [int(v) for v in values]
    too_long = [v for v in values if v > shape.max_context]
    if too_long:
        raise SpecError(field, f"{max(too_long)} exceeds the model's maximum context {shape.max_context}",
                        f"keep context_length <= {shape.max_context} (the engine refuses longer ones)")
    return tuple(sorted(set(values)))


def _kv_dtypes(field: str, value: Any, shape: ModelShape) -> tuple[str, ...]:
    values = _values(field, value)
    bad = [v for v in values if v not in kvdtype.CONFIG_NAMES]
    if bad:
        raise SpecError(field, f"unknown KV dtype {bad[0]!r}", f"one of: {', '.join(kvdtype.CONFIG_NAMES)}")
    return tuple(sorted(set(values), key=kvdtype.order_bytes))


def _name(field: str, value: Any, shape: ModelShape) -> tuple[str, ...]:
    if not isinstance(value, str):
        raise SpecError(field, f"{value!r} is not a name", "e.g. NEXTN or EAGLE")
    return (value.upper(),)


def _argv(field: str, value: Any, shape: ModelShape) -> tuple[tuple[str, ...], ...]:
    if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value):
        raise SpecError(field, f"{value!r} is not a list of strings", "e.g. extra_args: ['--disable-radix-cache']")
    return (tuple(value),)


_PARSERS: dict[str, Callable[[str, Any, ModelShape], tuple[Any, ...]]] = {
    "bool": _bools, "int": _ints, "fraction": _fractions, "context": _contexts, "kv_dtype": _kv_dtypes,
    "name": _name, "argv": _argv}
