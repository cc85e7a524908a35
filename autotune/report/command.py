"""The recommended launch command: complete, pinned, and checked against the engine's parser.

Every memory-relevant flag is pinned to what the winning launch actually ran with (the
resolved values from /server_info where the config left the engine's default), so the
command reproduces the verified launch rather than re-rolling the engine's defaults.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping, Sequence
from typing import Any

from autotune import flagtable
from autotune.config import LaunchConfig
from autotune.engines import DEFAULT_ENGINE, get_engine
from autotune.engines.registry import flag_table
from autotune.records import BEST_RECORD_KEYS, TrialResult


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
            api_key_env: str | None = None) -> list[str]:
    """argv of the recommended launch, parsed once with the engine version's real flag table.

    With `api_key_env` (the spec's), the server demands the key the tuned runs demanded:
    `--api-key $NAME`, a reference to the same environment variable, never its value
    (`as_shell` keeps it expandable). Without it, a server told to listen beyond localhost
    would start unauthenticated on every interface.
    """
    engine = get_engine(result.engine)
    argv = engine.argv(pinned_config(result), version=result.engine_version, launcher=list(launcher), host=host,
                       port=port or engine.default_port)
    if api_key_env:
        argv += [API_KEY_FLAG, env_reference(api_key_env)]
    flagtable.parse(*flag_table(result.engine, result.engine_version), engine.flags_of(argv))
    return argv


API_KEY_FLAG = "--api-key"


def env_reference(name: str) -> str:
    return "$" + name


def as_shell(argv: Sequence[str]) -> str:
    """The argv as one shell line: every element quoted, except the API key's `$NAME`
    reference, which is double-quoted so the shell expands it when the line is pasted."""
    out = []
    for i, arg in enumerate(argv):
        is_ref = i > 0 and argv[i - 1] == API_KEY_FLAG and _ENV_REF.fullmatch(arg) is not None
        out.append(f'"{arg}"' if is_ref else shlex.quote(arg))
    return " ".join(out)


_ENV_REF = re.compile(r"\$[A-Za-z_][A-Za-z0-9_]*")


def as_record(result: TrialResult, argv: Sequence[str], certification: Mapping[str, Any]) -> Mapping[str, Any]:
    record = {"argv": list(argv), "engine": result.engine, "engine_version": result.engine_version,
              "config": pinned_config(result).to_dict(), "kv_tokens": result.kv_tokens, "trial_id": result.trial_id,
              "outcome": result.outcome.value, "gpu_peak_bytes": [g.peak_bytes for g in result.gpus],
              "certification": dict(certification)}
    assert tuple(record) == BEST_RECORD_KEYS
    return record


def launcher_of(spec: Mapping[str, Any]) -> list[str]:
    """The launcher a recommended command starts with: the spec's, or for a simulated study the
    engine's real default (the simulator's own module means nothing on a GPU box). Where the trials
    ran with an environment of their own (the run's `launch_env`: SGLang's CPU path, the spec's `env`),
    `env NAME=value ...` comes first, so the command runs as printed, in a shell or as an argv."""
    if spec.get("simulated"):
        return list(get_engine(spec.get("engine") or DEFAULT_ENGINE).default_launcher)
    env = [f"{k}={v}" for k, v in (spec.get("launch_env") or {}).items()]
    return (["env", *env] if env else []) + list(spec.get("launcher", []))
