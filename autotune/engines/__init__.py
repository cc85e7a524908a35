"""Engine adapters: each engine is data plus pure functions (argv, log → events → outcome,
URLs, verification), kept in the `ENGINES` registry. No `if engine == ...` chains outside it."""

from __future__ import annotations

from autotune.engines.base import Engine, Intent, verify
from autotune.engines.sglang import SglangEngine
from autotune.engines.vllm.adapter import VllmEngine

ENGINES: dict[str, Engine] = {"sglang": SglangEngine(), "vllm": VllmEngine("vllm"), "vllm-cpu": VllmEngine("vllm-cpu")}


def get_engine(name: str) -> Engine:
    try:
        return ENGINES[name]
    except KeyError:
        raise KeyError(f"unknown engine {name!r} (known: {', '.join(sorted(ENGINES))})") from None


__all__ = ["ENGINES", "Engine", "Intent", "get_engine", "verify"]
