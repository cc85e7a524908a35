"""Engines: one package per engine (`sglang/`, `vllm/`), each with its adapter, log rules,
public memory rules and version traits, kept in one registry (`registry.ENGINES`). No
`if engine == ...` chains outside it."""

from __future__ import annotations

from autotune.engines.base import Engine, EnginePackage, Intent, verify
from autotune.engines.registry import DEFAULT_ENGINE, ENGINES, get_engine, get_package

__all__ = ["DEFAULT_ENGINE", "ENGINES", "Engine", "EnginePackage", "Intent", "get_engine", "get_package", "verify"]
