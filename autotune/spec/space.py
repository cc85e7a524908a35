"""The `space` section of a spec: each launch parameter fixed or searched, with bounds.

Forms accepted for a numeric parameter: a value (fixed), a list of values, `{values: [...]}`,
or `{min, max, step}` (mem_fraction_static) / `{min, max}` (context_length: powers of two
from min up to max, max included). `null` means "the engine's default". Every tuple comes
back sorted by memory need, smallest first.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from autotune.engines import kvdtype
from autotune.errors import SpecError
from autotune.modelshape import ModelShape
from autotune.spec.schema import did_you_mean

DEFAULTS: dict[str, Any] = {
    "tp": 1, "mem_fraction_static": {"min": 0.60, "max": 0.95, "step": 0.01}, "context_length": None,
    "speculative": False, "speculative_algorithm": "NEXTN", "speculative_num_steps": None,
    "speculative_eagle_topk": None, "speculative_num_draft_tokens": None, "torch_compile": False,
    "cuda_graph_max_bs": None, "disable_cuda_graph": False, "max_running_requests": None,
    "chunked_prefill_size": None, "kv_cache_dtype": "auto", "extra_args": [],
}
BOOLS = ("speculative", "torch_compile", "disable_cuda_graph")
INTS = ("tp", "speculative_num_steps", "speculative_eagle_topk", "speculative_num_draft_tokens",
        "cuda_graph_max_bs", "max_running_requests", "chunked_prefill_size")


def parse_space(raw: Mapping[str, Any], shape: ModelShape, n_gpus: int) -> dict[str, tuple[Any, ...]]:
    if not isinstance(raw, Mapping):
        raise SpecError("space", "must be a mapping of parameter: value(s)", "see configs/demo.yaml")
    unknown = set(raw) - set(DEFAULTS)
    if unknown:
        key = sorted(unknown)[0]
        raise SpecError(f"space.{key}", "unknown parameter", did_you_mean(key, list(DEFAULTS), "known"))
    space: dict[str, tuple[Any, ...]] = {}
    for key, default in DEFAULTS.items():
        value = raw.get(key, default)
        field = f"space.{key}"
        if key in BOOLS:
            space[key] = _bools(field, value)
        elif key in INTS:
            space[key] = _ints(field, value, minimum=1)
        elif key == "mem_fraction_static":
            space[key] = _fractions(field, value)
        elif key == "context_length":
            space[key] = _contexts(field, value, shape)
        elif key == "kv_cache_dtype":
            space[key] = _kv_dtypes(field, value)
        elif key == "speculative_algorithm":
            if not isinstance(value, str):
                raise SpecError(field, f"{value!r} is not a name", "e.g. NEXTN or EAGLE")
            space[key] = (value.upper(),)
        else:  # extra_args
            if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
                raise SpecError(field, f"{value!r} is not a list of strings", "e.g. extra_args: ['--disable-radix-cache']")
            space[key] = (tuple(value),)
    for tp in space["tp"]:
        if tp is not None and tp > n_gpus:
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


def _bools(field: str, value: Any) -> tuple[bool, ...]:
    values = _values(field, value)
    if not values or not all(isinstance(v, bool) for v in values):
        raise SpecError(field, f"{value!r} is not true/false", "true, false, or [false, true] to search both")
    return tuple(sorted(set(values)))


def _ints(field: str, value: Any, minimum: int) -> tuple[int | None, ...]:
    values: list[Any] = _values(field, value)
    if values == [None]:
        return (None,)
    if not values or not all(isinstance(v, int) and not isinstance(v, bool) for v in values):
        raise SpecError(field, f"{value!r} is not an integer or a list of integers", "e.g. 8 or [8, 16, 32], or null")
    if min(values) < minimum:
        raise SpecError(field, f"{min(values)} is below {minimum}", f"values >= {minimum}")
    return tuple(sorted(set(values)))


def _fractions(field: str, value: Any) -> tuple[float | None, ...]:
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


def _kv_dtypes(field: str, value: Any) -> tuple[str, ...]:
    values = _values(field, value)
    bad = [v for v in values if v not in kvdtype.CONFIG_NAMES]
    if bad:
        raise SpecError(field, f"unknown KV dtype {bad[0]!r}", f"one of: {', '.join(kvdtype.CONFIG_NAMES)}")
    return tuple(sorted(set(values), key=kvdtype.order_bytes))
