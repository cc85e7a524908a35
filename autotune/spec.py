"""The tuning spec (YAML): what to tune, on which machine, towards which goal, within what budget.

Every field is checked before anything starts; a wrong one raises SpecError naming the
field and the fix. The space lists each launch parameter as one value (fixed) or several
(searched), each list ordered by how much memory it needs (more context, more features,
bigger batches need more). See configs/demo.yaml for a documented example.
"""

from __future__ import annotations

import difflib
import ipaddress
import os
import random
import re
import shlex
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from autotune import flagtable
from autotune.config import LaunchConfig
from autotune.engines import ENGINES
from autotune.engines.sglang import flag_table_version
from autotune.errors import ModelConfigError, SpecError
from autotune.modelshape import ModelShape
from autotune.modelshape import load as load_shape
from autotune.settings import Deadlines, ProbeSpec, TrialSettings
from autotune.spec_schema import (
    GOAL_ORDER,
    BudgetDoc,
    GoalDoc,
    ProbeDoc,
    SimulatedDoc,
    TimeoutsDoc,
    document,
)
from autotune.spec_space import parse_space

SPACE_KEYS = ("tp", "mem_fraction_static", "context_length", "speculative", "speculative_algorithm",
              "speculative_num_steps", "speculative_eagle_topk", "speculative_num_draft_tokens", "torch_compile",
              "cuda_graph_max_bs", "disable_cuda_graph", "max_running_requests", "chunked_prefill_size",
              "kv_cache_dtype", "extra_args")
BOOL_PARAMS = {"speculative", "torch_compile", "disable_cuda_graph"}
STRATEGIES = ("frontier", "tpe", "random", "grid")
KV_DTYPES = ("auto", "fp8_e4m3", "fp8_e5m2", "bf16", "nvfp4", "fp4_e2m1", "mxfp8")
SIM_LAUNCHER = (sys.executable, "-m", "autotune.sim.sglang")


# Faults a soak injects at random (see `SimulatedNode.fault_rate`), as AUTOTUNE_SIM_FAULTS values.
SOAK_FAULTS = ("crash@load_weights", "crash@kv_pool", "crash@cuda_graph", "crash@warmup", "crash@serve",
               "hang@init_dist", "hang@load_weights", "hang@cuda_graph", "exit0@kv_pool", "exit0@http",
               "leak_child", "ignore_sigterm", "silent", "bad_utf8", "slow_release")


@dataclass(frozen=True)
class SimulatedNode:
    gpus: int = 2
    gpu_mem_gib: float = 48.0
    gpu_name: str = "NVIDIA Simulated GPU"
    node_dir: Path | None = None
    time_scale: float = 0.01
    faults: str = ""
    release_delay_s: float = 0.0
    fault_rate: float = 0.0  # soak: the share of trials that get one random fault
    min_deadline_s: float = 10.0  # floor of the scaled timeouts (real overheads do not scale)


@dataclass(frozen=True)
class Goal:
    order: tuple[str, ...] = GOAL_ORDER
    required_features: tuple[str, ...] = ()
    min_concurrency: int = 1


@dataclass(frozen=True)
class Budget:
    trials: int = 40
    wall_time_s: float = 8 * 3600.0


@dataclass(frozen=True)
class Spec:
    path: Path
    study: str
    engine: str
    engine_version: str
    model_path: str
    launcher: tuple[str, ...]
    simulated: SimulatedNode | None
    gpus: tuple[int, ...]
    host: str
    port: int | None
    api_key_env: str | None
    env: Mapping[str, str]
    space: Mapping[str, tuple[Any, ...]]
    start: Mapping[str, Any]
    goal: Goal
    probe: ProbeSpec
    budget: Budget
    deadlines: Deadlines
    strategy: str
    storage: str
    seed: int
    results_dir: Path
    allow_busy_gpus: bool = False
    release_timeout_s: float = 60.0
    stop_grace_s: float = 15.0
    shape: ModelShape | None = field(default=None, repr=False, compare=False)

    @property
    def study_dir(self) -> Path:
        return self.results_dir / self.study

    def searched(self) -> dict[str, tuple[Any, ...]]:
        return {k: v for k, v in self.space.items() if len(v) > 1}

    def fixed(self) -> dict[str, Any]:
        return {k: v[0] for k, v in self.space.items() if len(v) == 1}

    def config(self, params: Mapping[str, Any]) -> LaunchConfig:
        """The LaunchConfig for searched `params` (plus every fixed value)."""
        values = {**self.fixed(), **params}
        values["extra_args"] = tuple(values.get("extra_args") or ())
        return LaunchConfig(model_path=self.model_path, **values)

    def sim_env(self) -> dict[str, str]:
        if self.simulated is None:
            return {}
        env = {"AUTOTUNE_SIM_NODE": str(self.node_dir()), "AUTOTUNE_SIM_SGLANG_VERSION": self.engine_version,
               "AUTOTUNE_SIM_TIME_SCALE": str(self.simulated.time_scale)}
        if self.simulated.faults:
            env["AUTOTUNE_SIM_FAULTS"] = self.simulated.faults
        return env

    def node_dir(self) -> Path:
        assert self.simulated is not None
        return self.simulated.node_dir or (self.study_dir / "node")

    def trial_env(self, number: int) -> dict[str, str]:
        """Environment for trial `number`: on a soak, maybe one fault, chosen reproducibly."""
        sim = self.simulated
        if sim is None or sim.fault_rate <= 0:
            return {}
        rng = random.Random(self.seed * 1_000_003 + number)
        if rng.random() >= sim.fault_rate:
            return {}
        fault = rng.choice(SOAK_FAULTS)
        if fault == "slow_release":
            return {"AUTOTUNE_SIM_RELEASE_DELAY_S": "0.3"}
        return {"AUTOTUNE_SIM_FAULTS": ",".join(filter(None, (sim.faults, fault)))}

    def trial_settings(self, api_key: str | None = None) -> TrialSettings:
        scale = self.simulated.time_scale if self.simulated else 1.0
        floor = self.simulated.min_deadline_s if self.simulated else 0.0
        return TrialSettings(
            engine=self.engine, engine_version=self.engine_version, launcher=self.launcher, host=self.host,
            port=self.port, gpus=self.gpus, env={**self.env, **self.sim_env()}, trials_dir=self.study_dir / "trials",
            deadlines=self.deadlines.scaled(scale, floor) if scale != 1.0 else self.deadlines,
            grace_s=self.stop_grace_s * (max(scale, 0.05) if self.simulated else 1.0),
            release_timeout_s=self.release_timeout_s * (max(scale, 0.1) if self.simulated else 1.0),
            allow_busy=self.allow_busy_gpus, required_concurrency=self.goal.min_concurrency,
            probe=self.probe, api_key=api_key,
        )

    def api_key(self) -> str | None:
        if not self.api_key_env:
            return None
        value = os.environ.get(self.api_key_env)
        if not value:
            raise SpecError("api_key_env", f"environment variable {self.api_key_env} is not set",
                            f"export {self.api_key_env}=... before running, or remove api_key_env")
        return value


# -- loading and validation ----------------------------------------------------------------------


def load(path: str | Path, overrides: Mapping[str, Any] | None = None) -> Spec:
    """Read and validate a spec file. `overrides` set dotted fields (`space.tp=2`) first.

    Pure: reads the spec and the model's config.json, writes nothing. Every refusal is a
    SpecError naming the field, raised before any caller creates a file or a process."""
    path = Path(path)
    raw = _read(path)
    for key, value in (overrides or {}).items():
        _set_dotted(raw, key, value)
    return parse(raw, path)


def load_trial(path: str | Path, values: Mapping[str, Any],
               overrides: Mapping[str, Any] | None = None) -> tuple[Spec, dict[str, Any]]:
    """The spec and the one config `autotune trial --set k=v` launches: its start, with `values`.

    Each value goes through the same checks as the spec's own space (`space.k: v`), so a
    fraction above 1, a TP the GPUs or the model cannot take, 'maybe' for a boolean are refused
    as they would be in the file. A string `extra_args` is split like a shell (never run)."""
    sets: dict[str, Any] = {}
    for key, value in values.items():
        if key not in SPACE_KEYS:
            close = difflib.get_close_matches(key, list(SPACE_KEYS), n=1)
            raise SpecError(f"--set {key}", "not a space parameter",
                            f"did you mean '{close[0]}'?" if close else f"one of: {', '.join(SPACE_KEYS)}")
        if key == "extra_args" and isinstance(value, str):
            value = shlex.split(value)
        elif isinstance(value, (list, dict)):
            raise SpecError(f"--set {key}", f"{value!r}: a trial launches one value", f"e.g. --set {key}=<one value>")
        sets[f"space.{key}"] = sets[f"start.{key}"] = value
    try:
        spec = load(path, {**(overrides or {}), **sets})
    except SpecError as exc:
        if exc.field in sets:  # name the option the user typed, not the spec field it stands for
            raise SpecError(f"--set {exc.field.split('.', 1)[1]}", exc.detail, exc.hint) from None
        raise
    return spec, {**spec.start, **{k.split(".", 1)[1]: spec.space[k.split(".", 1)[1]][0] for k in sets}}


def _read(path: Path) -> dict[str, Any]:
    try:
        text = path.read_text(encoding="utf-8")
        raw = yaml.safe_load(text)
    except FileNotFoundError:
        raise SpecError("<file>", f"{path} does not exist", "give the path of a spec YAML, e.g. configs/demo.yaml") from None
    except IsADirectoryError:
        raise SpecError("<file>", f"{path} is a directory", "give the path of a spec YAML file inside it") from None
    except UnicodeDecodeError:
        raise SpecError("<file>", f"{path} is not a text file", "give the path of a spec YAML, e.g. configs/demo.yaml") from None
    except OSError as exc:
        raise SpecError("<file>", f"cannot read {path}: {exc.strerror}", "check the path and its permissions") from None
    except yaml.YAMLError as exc:
        raise SpecError("<file>", f"{path} is not valid YAML: {exc}", "fix the syntax (indentation, colons)") from None
    if not isinstance(raw, dict):
        raise SpecError("<file>", "the spec must be a mapping of fields", "see configs/demo.yaml")
    return raw


def _set_dotted(raw: dict[str, Any], dotted: str, value: Any) -> None:
    parts = dotted.split(".")
    node = raw
    for part in parts[:-1]:
        if node.get(part) is None:
            node[part] = {}
        node = node[part]
        if not isinstance(node, dict):
            raise SpecError(dotted, "cannot set a field inside a non-mapping", "check the dotted path")
    node[parts[-1]] = value


def parse(raw: Mapping[str, Any], path: Path) -> Spec:
    doc = document(raw)  # types, strictly; below: what the values mean
    base = path.resolve().parent  # relative paths in a spec are relative to the spec file
    if doc.engine not in ENGINES:
        raise SpecError("engine", f"unknown engine {doc.engine!r}", f"one of: {', '.join(sorted(ENGINES))}")
    _check_version(doc.engine, doc.engine_version)
    study = check_study_name(doc.study or path.stem)
    model_path = str(_path(doc.model, base))
    shape = _shape(model_path)
    simulated = _simulated(doc.simulated, doc.launcher, base)
    results_dir = _path(doc.results_dir, base)
    gpus = _gpus(doc.gpus, simulated)
    space = parse_space(doc.space, shape, len(gpus))
    spec = Spec(
        path=path, study=study, engine=doc.engine, engine_version=doc.engine_version,
        model_path=model_path, launcher=_launcher(doc.launcher, doc.engine, simulated), simulated=simulated,
        gpus=gpus, host=_host(doc.host), port=_port(doc.port), api_key_env=doc.api_key_env,
        env={k: str(v) for k, v in doc.env.items()}, space=space, start=_start(doc.start, space),
        goal=_goal(doc.goal), probe=_probe(doc.probe), budget=_budget(doc.budget), deadlines=_deadlines(doc.timeouts),
        strategy=check_strategy(doc.strategy),
        storage=doc.storage or f"sqlite:///{results_dir / study / 'study.db'}",
        seed=doc.seed, results_dir=results_dir, allow_busy_gpus=doc.allow_busy_gpus,
        release_timeout_s=_positive("release_timeout_s", doc.release_timeout_s),
        stop_grace_s=_positive("stop_grace_s", doc.stop_grace_s), shape=shape,
    )
    _check_combination(spec)
    return spec


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


def _check_version(engine: str, version: str) -> None:
    """Only versions whose flag table ships: for any other, argv could not be checked and
    every launch might die on a renamed flag (the whole budget spent on crashes)."""
    have = sorted(v for e, v in flagtable.available() if e == engine)
    if version not in have and f"{version}.0" not in have:
        try:
            near = f"; the nearest older one is {flag_table_version(version)}" if engine == "sglang" else ""
        except (KeyError, IndexError):
            near = ""
        raise SpecError("engine_version", f"no flag table for {engine} {version}{near}",
                        f"one of: {', '.join(have)} (capture a table with scripts/ for a new release)")


def _path(value: str, base: Path) -> Path:
    p = Path(value).expanduser()
    return p if p.is_absolute() else (base / p).resolve()


def _shape(model_path: str) -> ModelShape:
    try:
        return load_shape(model_path)
    except ModelConfigError as exc:
        raise SpecError("model", exc.message, exc.hint) from None


def _simulated(doc: SimulatedDoc | None, launcher: Any, base: Path) -> SimulatedNode | None:
    if launcher != "simulated":
        if doc is not None:
            raise SpecError("simulated", "given, but launcher is not 'simulated'", "set launcher: simulated or remove it")
        return None
    doc = doc or SimulatedDoc()
    node = SimulatedNode(
        gpus=doc.gpus, gpu_mem_gib=doc.gpu_mem_gib, gpu_name=doc.gpu_name,
        node_dir=_path(doc.node_dir, base) if doc.node_dir else None, time_scale=doc.time_scale, faults=doc.faults,
        release_delay_s=doc.release_delay_s, fault_rate=doc.fault_rate, min_deadline_s=doc.min_deadline_s)
    if not 0 <= node.fault_rate <= 1:
        raise SpecError("simulated.fault_rate", f"{node.fault_rate} out of range", "a share between 0 and 1")
    if node.gpus < 1 or node.gpu_mem_gib <= 0:
        raise SpecError("simulated", "needs gpus >= 1 and gpu_mem_gib > 0", "e.g. gpus: 2, gpu_mem_gib: 48")
    if not 0 <= node.time_scale <= 10:
        raise SpecError("simulated.time_scale", f"{node.time_scale} out of range", "between 0 and 10 (0.01 = 100x faster)")
    return node


def _launcher(value: Any, engine: str, simulated: SimulatedNode | None) -> tuple[str, ...]:
    if simulated is not None:
        return SIM_LAUNCHER
    if value is None:
        return tuple(getattr(ENGINES[engine], "default_launcher", ()))
    if isinstance(value, str):
        return tuple(value.split())  # split on whitespace only: never given to a shell
    if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
        return tuple(value)
    raise SpecError("launcher", f"{value!r} is not a command", "'simulated', a command string, or a list of argv items")


def _gpus(value: Any, simulated: SimulatedNode | None) -> tuple[int, ...]:
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


def _host(value: str) -> str:
    try:
        ipaddress.ip_address(value)
        return value
    except ValueError:
        pass
    if not _HOSTNAME.match(value):
        raise SpecError("host", f"{value!r} is neither an IP address nor a host name",
                        "e.g. 127.0.0.1 (this machine only) or 0.0.0.0 (every interface)")
    return value


def _port(port: int | None) -> int | None:
    if port is not None and not 1024 <= port <= 65535:
        raise SpecError("port", f"{port} out of range", "1024-65535, or leave it out for a free port per trial")
    return port


def _positive(name: str, seconds: float) -> float:
    if seconds <= 0:
        raise SpecError(name, f"{seconds} is not > 0", "seconds, e.g. 15")
    return float(seconds)


def _start(raw: Mapping[str, Any], space: Mapping[str, tuple[Any, ...]]) -> dict[str, Any]:
    """The first launch: each value must be one the space holds (never clamped or snapped)."""
    for key in sorted(set(raw) - set(SPACE_KEYS)):
        close = difflib.get_close_matches(key, list(SPACE_KEYS), n=1)
        raise SpecError(f"start.{key}", "unknown field",
                        f"did you mean '{close[0]}'?" if close else f"known fields: {', '.join(SPACE_KEYS)}")
    start = {}
    for key, value in raw.items():
        value = tuple(value) if key == "extra_args" and isinstance(value, list) else value
        if value not in space[key] or (isinstance(value, bool) is not isinstance(space[key][0], bool)):
            shown = ", ".join("null" if v is None else str(v) for v in space[key][:12])
            raise SpecError(f"start.{key}", f"{value!r} is not in space.{key}",
                            f"pick one of: {shown}{', ...' if len(space[key]) > 12 else ''} (or widen space.{key})")
        start[key] = list(value) if key == "extra_args" else value
    return start


def _goal(doc: GoalDoc) -> Goal:
    for item in doc.order:
        if item not in GOAL_ORDER:
            raise SpecError("goal.order", f"unknown criterion {item!r}", f"use some of {', '.join(GOAL_ORDER)}")
    for feat in doc.required_features:
        if feat not in BOOL_PARAMS - {"disable_cuda_graph"}:
            raise SpecError("goal.required_features", f"unknown feature {feat!r}", "speculative, torch_compile")
    if doc.min_concurrency < 1:
        raise SpecError("goal.min_concurrency", f"{doc.min_concurrency} < 1", "at least 1 request at the full context")
    return Goal(tuple(doc.order), tuple(doc.required_features), doc.min_concurrency)


def _probe(doc: ProbeDoc) -> ProbeSpec:
    probe = ProbeSpec(enabled=doc.enabled, long_request=doc.long_request, burst=doc.burst,
                      burst_tokens=doc.burst_tokens, max_new_tokens=doc.max_new_tokens, timeout_s=doc.timeout_s)
    if probe.burst < 0 or probe.burst_tokens < 1 or probe.max_new_tokens < 1 or probe.timeout_s <= 0:
        raise SpecError("probe", "negative or zero sizes", "burst >= 0, burst_tokens >= 1, max_new_tokens >= 1")
    return probe


def _budget(doc: BudgetDoc) -> Budget:
    if doc.trials < 1 or doc.wall_time_s <= 0:
        raise SpecError("budget", "trials must be >= 1 and wall_time_s > 0", "e.g. trials: 40, wall_time_s: 28800")
    return Budget(doc.trials, float(doc.wall_time_s))


def _deadlines(doc: TimeoutsDoc) -> Deadlines:
    values = doc.model_dump()
    if any(v <= 0 for v in values.values()):
        raise SpecError("timeouts", "every timeout must be > 0", "seconds, e.g. no_progress_s: 600")
    return Deadlines(**{k: float(v) for k, v in values.items()})
def _check_combination(spec: Spec) -> None:
    tps = spec.space["tp"]
    if max(tps) > len(spec.gpus):
        raise SpecError("space.tp", f"tp {max(tps)} needs {max(tps)} GPUs, the spec gives {len(spec.gpus)}",
                        "add GPUs to `gpus` or lower tp")
    shape = spec.shape
    assert shape is not None  # parse() always reads it
    for tp in tps:
        problem = shape.tp_split_problem(tp) if tp is not None else ""
        if problem:  # the engine would assert while building the model: every such launch is wasted
            fits = [t for t in shape.splittable_tps() if t <= len(spec.gpus)]
            raise SpecError("space.tp", problem, f"use a TP the model splits over: {', '.join(map(str, fits))}")
    if True in spec.space["speculative"] and shape.mtp_layers == 0:
        if not any("--speculative-draft-model" in a for a in spec.space["extra_args"][0] or ()):
            raise SpecError("space.speculative", f"{shape.architecture} has no MTP/NextN layers",
                            "set speculative: false, or give a draft model in extra_args")
    for feat in spec.goal.required_features:
        if True not in spec.space[feat]:
            raise SpecError("goal.required_features", f"{feat} is required but the space never turns it on",
                            f"add true to space.{feat}")
    if spec.host not in ("127.0.0.1", "localhost", "::1"):
        print(f"WARNING: the server will listen on {spec.host}, reachable from other machines "
              "(spec field 'host'); use 127.0.0.1 unless you mean it.", file=sys.stderr)
