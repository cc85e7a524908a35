"""What each spec field means, once its type is right (`schema` checks types).

One function per field or section: it takes the typed value and returns the setting, or
raises SpecError naming the field and the fix. No file is read here but the model's
config.json, and none is written.
"""

from __future__ import annotations

import ipaddress
import logging
import os
import re
import sys
from collections.abc import Mapping
from dataclasses import astuple, replace
from pathlib import Path
from typing import Any

from autotune.config import PARAMS
from autotune.engines import registry
from autotune.errors import ModelConfigError, SpecError
from autotune.modelshape import ModelShape
from autotune.modelshape import load as load_sized
from autotune.modelshape import load_for_search as load_shape
from autotune.settings import (
    GOAL_CRITERIA,
    Budget,
    CertifySpec,
    Deadlines,
    Goal,
    ProbeSpec,
    SimulatedNode,
    StrategyName,
    Target,
)
from autotune.spec.schema import did_you_mean

STRATEGIES = tuple(s.value for s in StrategyName)


def check_study_name(name: str, field: str = "study") -> str:
    """A study name is a directory name under results_dir: it must not climb out of it."""
    if not name or name.startswith(".") or not name.replace("-", "").replace("_", "").replace(".", "").isalnum():
        raise SpecError(field, f"{name!r} is not a usable name",
                        "letters, digits, '-', '_' and '.' only, not starting with '.'")
    return name


def check_strategy(value: str, field: str = "strategy") -> str:
    if value not in STRATEGIES:
        raise SpecError(field, f"unknown strategy {value!r}", f"one of: {', '.join(STRATEGIES)}")
    return value


def check_version(engine: str, version: str) -> None:
    """A version older than every flag table is refused: its argv could not be checked and every
    launch might die on a renamed flag. A newer or in-between one runs with the nearest older
    table and traits, and the warning says which."""
    warning = registry.check_version(engine, version)
    if warning:
        logging.getLogger("autotune").warning("%s", warning)


def path_in(value: str, base: Path) -> Path:
    p = Path(value).expanduser()
    return p if p.is_absolute() else (base / p).resolve()


def simulator_runs(model_path: str) -> None:
    """The simulated server sizes its model as the estimator does: it refuses what that cannot size."""
    try:
        load_sized(model_path)
    except ModelConfigError as exc:
        raise SpecError("model", f"the simulated server cannot run it: {exc.message}",
                        "search it with a real engine launcher (no predictions), or simulate a known "
                        "architecture") from None


def model_shape(model_path: str) -> ModelShape:
    try:
        return load_shape(model_path)
    except ModelConfigError as exc:
        raise SpecError("model", exc.message, exc.hint) from None


def simulated_node(node: SimulatedNode | None, launcher: Any, base: Path) -> SimulatedNode | None:
    if launcher != "simulated":
        if node is not None:
            raise SpecError("simulated", "given, but launcher is not 'simulated'", "set launcher: simulated or remove it")
        return None
    node = node or SimulatedNode()
    if node.node_dir is not None:
        node = replace(node, node_dir=path_in(str(node.node_dir), base))
    if not 0 <= node.boot_jitter_mib <= 4096:
        raise SpecError("simulated.boot_jitter_mib", f"{node.boot_jitter_mib} out of range",
                        "MiB between 0 (off) and 4096, e.g. 64")
    if not 0 <= node.fault_rate <= 1:
        raise SpecError("simulated.fault_rate", f"{node.fault_rate} out of range", "a share between 0 and 1")
    if node.gpus < 1 or node.gpu_mem_gib <= 0:
        raise SpecError("simulated", "needs gpus >= 1 and gpu_mem_gib > 0", "e.g. gpus: 2, gpu_mem_gib: 48")
    if not 0 <= node.time_scale <= 10:
        raise SpecError("simulated.time_scale", f"{node.time_scale} out of range", "between 0 and 10 (0.01 = 100x faster)")
    return node


def launcher_argv(value: Any, engine: str, simulated: SimulatedNode | None,
                  base: Path | None = None) -> tuple[str, ...]:
    """The launcher's argv. A relative program path (`../.venv-vllm/bin/python`) is relative to the
    spec file, as every other path in it, when it names a file there."""
    adapter = registry.get_engine(engine)
    if simulated is not None:
        return (sys.executable, "-m", adapter.simulated_module)
    if value is None:
        return adapter.default_launcher
    argv: tuple[str, ...] | None = None
    if isinstance(value, str):
        argv = tuple(value.split())  # split on whitespace only: never given to a shell
    elif isinstance(value, list) and value and all(isinstance(v, str) for v in value):
        argv = tuple(value)
    if argv:
        if argv[0].startswith("~"):  # ~/.cache/autotune/engines/...: the home of whoever runs the tool
            argv = (os.path.expanduser(argv[0]), *argv[1:])
        prog = Path(argv[0])
        if base is not None and "/" in argv[0] and not prog.is_absolute() and (base / prog).is_file():
            return (str((base / prog).absolute()), *argv[1:])
        return argv
    raise SpecError("launcher", f"{value!r} is not a command", "'simulated', a command string, or a list of argv items")


def gpu_indices(value: Any, simulated: SimulatedNode | None) -> tuple[int, ...]:
    if value is None:
        return tuple(range(simulated.gpus)) if simulated else (0,)
    if isinstance(value, int) and not isinstance(value, bool):
        value = [value]
    if not isinstance(value, list) or not value or not all(
            isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in value):
        raise SpecError("gpus", f"{value!r} is not a list of GPU indices", "e.g. gpus: [0, 1]")
    if len(set(value)) != len(value):
        raise SpecError("gpus", f"{value!r} lists a GPU twice", "each index once")
    if simulated and max(value) >= simulated.gpus:
        raise SpecError("gpus", f"GPU {max(value)} does not exist on the simulated node ({simulated.gpus} GPUs)",
                        "lower the index or raise simulated.gpus")
    return tuple(value)


_HOSTNAME = re.compile(r"^(?=.{1,253}$)[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*$")


def host_name(value: str) -> str:
    try:
        ipaddress.ip_address(value)
        return value
    except ValueError:
        pass
    if not _HOSTNAME.match(value):
        raise SpecError("host", f"{value!r} is neither an IP address nor a host name",
                        "e.g. 127.0.0.1 (this machine only) or 0.0.0.0 (every interface)")
    return value


def port_number(port: int | None) -> int | None:
    if port is not None and not 1024 <= port <= 65535:
        raise SpecError("port", f"{port} out of range", "1024-65535, or leave it out for a free port per trial")
    return port


def positive_s(name: str, seconds: float) -> float:
    if seconds <= 0:
        raise SpecError(name, f"{seconds} is not > 0", "seconds, e.g. 15")
    return float(seconds)


def start_values(raw: Mapping[str, Any], space: Mapping[str, tuple[Any, ...]]) -> dict[str, Any]:
    """The first launch: each value must be one the space holds (never clamped or snapped)."""
    for key in sorted(set(raw) - set(PARAMS)):
        raise SpecError(f"start.{key}", "unknown field", did_you_mean(key, PARAMS))
    start = {}
    for key, value in raw.items():
        value = tuple(value) if key == "extra_args" and isinstance(value, list) else value
        if value not in space[key] or (isinstance(value, bool) is not isinstance(space[key][0], bool)):
            shown = ", ".join("null" if v is None else str(v) for v in space[key][:12])
            raise SpecError(f"start.{key}", f"{value!r} is not in space.{key}",
                            f"pick one of: {shown}{', ...' if len(space[key]) > 12 else ''} (or widen space.{key})")
        start[key] = list(value) if key == "extra_args" else value
    return start


def check_goal(goal: Goal) -> Goal:
    for item in goal.order:
        if item not in GOAL_CRITERIA:
            raise SpecError("goal.order", f"unknown criterion {item!r}", f"use some of {', '.join(GOAL_CRITERIA)}")
    if len(set(goal.order)) != len(goal.order):
        raise SpecError("goal.order", "a criterion is named twice", "name each criterion at most once")
    for feat in goal.required_features:
        if PARAMS.get(feat) != "bool" or feat == "disable_cuda_graph":
            raise SpecError("goal.required_features", f"unknown feature {feat!r}", "speculative, torch_compile")
    if goal.min_concurrency < 1:
        raise SpecError("goal.min_concurrency", f"{goal.min_concurrency} < 1", "at least 1 request at the full context")
    return goal


def check_probe(probe: ProbeSpec) -> ProbeSpec:
    if probe.burst < 0 or probe.burst_tokens < 1 or probe.max_new_tokens < 1 or probe.timeout_s <= 0:
        raise SpecError("probe", "negative or zero sizes", "burst >= 0, burst_tokens >= 1, max_new_tokens >= 1")
    return probe


def check_certify(certify: CertifySpec) -> CertifySpec:
    if certify.boots < 1:
        raise SpecError("certify.boots", f"{certify.boots} < 1", "at least 1 cold boot, e.g. boots: 3 (or enabled: false)")
    if certify.safety_margin_gib < 0:
        raise SpecError("certify.safety_margin_gib", f"{certify.safety_margin_gib} < 0", "GiB of headroom >= 0, e.g. 0.5")
    if certify.deadline_s <= 0:
        raise SpecError("certify.deadline_s", f"{certify.deadline_s} <= 0",
                        "seconds the whole worst case may take before it is inconclusive, e.g. 3600")
    return certify


def check_budget(budget: Budget) -> Budget:
    if budget.trials < 1 or budget.wall_time_s <= 0:
        raise SpecError("budget", "trials must be >= 1 and wall_time_s > 0", "e.g. trials: 40, wall_time_s: 28800")
    if budget.unexplained_crashes < 1:
        raise SpecError("budget.unexplained_crashes", f"{budget.unexplained_crashes} < 1",
                        "launches in a row ending with no error line before the run stops, e.g. 3")
    return budget


def check_deadlines(deadlines: Deadlines) -> Deadlines:
    if any(v <= 0 for v in astuple(deadlines)):
        raise SpecError("timeouts", "every timeout must be > 0", "seconds, e.g. no_progress_s: 600")
    return deadlines


_SSH_ADDRESS = re.compile(r"^(?:[A-Za-z0-9._][A-Za-z0-9._-]*@)?([A-Za-z0-9._-]+|\[[0-9A-Fa-f:.]+\])(?::(\d{1,5}))?$")


def check_target(target: Target) -> Target:
    """The spec's `target`, checked: an ssh address that ssh cannot take for an option, argv lists
    without empty items. Nothing here contacts the target (that is the preflight's job)."""
    ssh = target.ssh
    if ssh is not None:
        match = _SSH_ADDRESS.match(ssh)
        if not match or ssh.startswith("-") or (match.group(2) and not 0 < int(match.group(2)) < 65536):
            raise SpecError("target.ssh", f"{ssh!r} is not user@host[:port]",
                            "e.g. root@gpu-box:22 (other ssh settings go in target.ssh_options)")
    for name, items in (("exec_prefix", target.exec_prefix), ("nvidia_smi", target.nvidia_smi)):
        if any(not item for item in items):
            raise SpecError(f"target.{name}", "has an empty item", "one argv item per list entry, e.g. [pct, exec, '101', '--']")
    if not target.nvidia_smi:
        raise SpecError("target.nvidia_smi", "empty", "leave it out for nvidia-smi")
    if not target.python:
        raise SpecError("target.python", "empty", "leave it out for python3")
    return target
