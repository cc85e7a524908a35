"""The recommended launch command: complete, pinned, and checked against the engine's parser.

Every memory-relevant flag is pinned to what the winning launch actually ran with (the
resolved values from /server_info where the config left the engine's default), so the
command reproduces the verified launch rather than re-rolling the engine's defaults.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from autotune import flagtable
from autotune.config import LaunchConfig
from autotune.engines import get_engine
from autotune.engines.sglang import flag_table_version
from autotune.records import TrialResult


def pinned_config(result: TrialResult) -> LaunchConfig:
    """The result's config with engine-resolved values written in."""
    cfg = result.config
    resolved = result.resolved
    changes: dict[str, Any] = {}
    for name in ("mem_fraction_static", "context_length", "max_running_requests", "chunked_prefill_size"):
        if getattr(cfg, name) is None and resolved.get(name) is not None:
            changes[name] = resolved[name]
    return cfg.replace(**changes)


def command(result: TrialResult, *, launcher: Sequence[str], host: str = "127.0.0.1", port: int | None = None,
            api_key_placeholder: bool = False) -> list[str]:
    """argv of the recommended launch, parsed once with the engine version's real flag table."""
    engine = get_engine(result.engine)
    argv = engine.argv(pinned_config(result), version=result.engine_version, launcher=list(launcher), host=host,
                       port=port or engine.default_port)
    if api_key_placeholder:
        argv += ["--api-key", "$API_KEY"]
    flagtable.parse(result.engine, flag_table_version(result.engine_version), engine.flags_of(argv))
    return argv


def as_record(result: TrialResult, argv: Sequence[str]) -> Mapping[str, Any]:
    return {"argv": list(argv), "engine": result.engine, "engine_version": result.engine_version,
            "config": pinned_config(result).to_dict(), "kv_tokens": result.kv_tokens, "trial_id": result.trial_id,
            "outcome": result.outcome.value, "gpu_peak_bytes": [g.peak_bytes for g in result.gpus]}
