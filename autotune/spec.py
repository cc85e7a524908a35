"""The tuning spec (YAML): what to tune, on which machine, towards which goal, within what budget.

Every field is checked before anything starts; a wrong one raises SpecError naming the
field and the fix. The space lists each launch parameter as one value (fixed) or several
(searched), each list ordered by how much memory it needs (more context, more features,
bigger batches need more). See configs/demo.yaml for a documented example.
"""

from __future__ import annotations

import difflib
import os
import random
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from autotune.config import LaunchConfig
from autotune.engines import ENGINES
from autotune.engines.sglang import flag_table_version
from autotune.errors import ModelConfigError, SpecError
from autotune.modelshape import ModelShape
from autotune.modelshape import load as load_shape
from autotune.settings import Deadlines, ProbeSpec, TrialSettings
from autotune.spec_space import parse_space

TOP_KEYS = {"study", "engine", "engine_version", "model", "launcher", "simulated", "gpus", "host", "port",
            "api_key_env", "env", "space", "start", "goal", "probe", "budget", "timeouts", "strategy", "storage",
            "seed", "results_dir", "allow_busy_gpus", "release_timeout_s", "stop_grace_s"}
SPACE_KEYS = ("tp", "mem_fraction_static", "context_length", "speculative", "speculative_algorithm",
              "speculative_num_steps", "speculative_eagle_topk", "speculative_num_draft_tokens", "torch_compile",
              "cuda_graph_max_bs", "disable_cuda_graph", "max_running_requests", "chunked_prefill_size",
              "kv_cache_dtype", "extra_args")
BOOL_PARAMS = {"speculative", "torch_compile", "disable_cuda_graph"}
STRATEGIES = ("frontier", "tpe", "random", "grid")
GOAL_ORDER = ("features", "context_length", "kv_tokens")
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
    """Read and validate a spec file. `overrides` set dotted fields (`space.tp=2`) first."""
    path = Path(path)
    try:
        raw = yaml.safe_load(path.read_text())
    except FileNotFoundError:
        raise SpecError("<file>", f"{path} does not exist", "give the path of a spec YAML, e.g. configs/demo.yaml") from None
    except yaml.YAMLError as exc:
        raise SpecError("<file>", f"{path} is not valid YAML: {exc}", "fix the syntax (indentation, colons)") from None
    if not isinstance(raw, dict):
        raise SpecError("<file>", "the spec must be a mapping of fields", "see configs/demo.yaml")
    for key, value in (overrides or {}).items():
        _set_dotted(raw, key, value)
    return parse(raw, path)


def _set_dotted(raw: dict[str, Any], dotted: str, value: Any) -> None:
    parts = dotted.split(".")
    node = raw
    for part in parts[:-1]:
        node = node.setdefault(part, {})
        if not isinstance(node, dict):
            raise SpecError(dotted, "cannot set a field inside a non-mapping", "check the dotted path")
    node[parts[-1]] = value


def _unknown(where: str, keys: set[str], known: set[str] | tuple[str, ...]) -> None:
    for key in sorted(keys - set(known)):
        close = difflib.get_close_matches(key, list(known), n=1)
        hint = f"did you mean '{close[0]}'?" if close else f"known fields: {', '.join(sorted(known))}"
        raise SpecError(f"{where}{key}", "unknown field", hint)


def _typed(field_name: str, value: Any, kind: type | tuple[type, ...], hint: str) -> Any:
    if isinstance(value, bool) and kind in (int, float, (int, float)):
        raise SpecError(field_name, f"expected a number, got {value!r}", hint)
    if not isinstance(value, kind):
        want = kind.__name__ if isinstance(kind, type) else " or ".join(k.__name__ for k in kind)
        raise SpecError(field_name, f"expected {want}, got {type(value).__name__} {value!r}", hint)
    return value


def parse(raw: Mapping[str, Any], path: Path) -> Spec:
    _unknown("", set(raw), TOP_KEYS)
    base = path.resolve().parent  # relative paths in a spec are relative to the spec file
    engine = str(raw.get("engine", "sglang"))
    if engine not in ENGINES:
        raise SpecError("engine", f"unknown engine {engine!r}", f"one of: {', '.join(sorted(ENGINES))}")
    version = str(raw.get("engine_version", "0.5.23"))
    _check_version(engine, version)
    model_path = _model_path(raw, base)
    shape = _shape(model_path)
    simulated = _simulated(raw.get("simulated"), raw.get("launcher"), base)
    launcher = _launcher(raw.get("launcher"), engine, simulated)
    results_dir = _path(raw.get("results_dir", "results"), base)
    gpus = _gpus(raw.get("gpus"), simulated)
    space = _space(raw.get("space") or {}, shape, len(gpus))
    spec = Spec(
        path=path, study=_study(raw.get("study"), path), engine=engine, engine_version=version,
        model_path=model_path, launcher=launcher, simulated=simulated, gpus=gpus,
        host=str(_typed("host", raw.get("host", "127.0.0.1"), str, "e.g. 127.0.0.1")),
        port=_port(raw.get("port")), api_key_env=_opt_str("api_key_env", raw.get("api_key_env")),
        env={str(k): str(v) for k, v in (_typed("env", raw.get("env") or {}, dict, "a mapping NAME: value")).items()},
        space=space, start=_start(raw.get("start") or {}, space), goal=_goal(raw.get("goal") or {}),
        probe=_probe(raw.get("probe") or {}), budget=_budget(raw.get("budget") or {}),
        deadlines=_deadlines(raw.get("timeouts") or {}), strategy=_strategy(raw.get("strategy", "frontier")),
        storage=str(raw.get("storage") or f"sqlite:///{results_dir / _study(raw.get('study'), path) / 'study.db'}"),
        seed=int(_typed("seed", raw.get("seed", 0), int, "an integer seed")), results_dir=results_dir,
        allow_busy_gpus=bool(raw.get("allow_busy_gpus", False)),
        release_timeout_s=float(_typed("release_timeout_s", raw.get("release_timeout_s", 60.0), (int, float), "seconds")),
        stop_grace_s=float(_typed("stop_grace_s", raw.get("stop_grace_s", 15.0), (int, float), "seconds")),
        shape=shape,
    )
    _check_combination(spec)
    return spec


def _study(value: Any, path: Path) -> str:
    name = str(value) if value else path.stem
    if not name.replace("-", "").replace("_", "").replace(".", "").isalnum():
        raise SpecError("study", f"{name!r} is not a usable name", "letters, digits, '-', '_' and '.' only")
    return name


def _check_version(engine: str, version: str) -> None:
    try:
        table = flag_table_version(version)
    except (KeyError, IndexError):
        raise SpecError("engine_version", f"no flag table for {engine} {version}", "e.g. 0.5.23 or 0.5.9") from None
    if table != version:
        print(f"WARNING: no flag table for {engine} {version}; commands are checked against {table}'s flags "
              "(spec field 'engine_version')", file=sys.stderr)


def _path(value: Any, base: Path) -> Path:
    p = Path(str(value)).expanduser()
    return p if p.is_absolute() else (base / p).resolve()


def _model_path(raw: Mapping[str, Any], base: Path) -> str:
    if "model" not in raw:
        raise SpecError("model", "missing", "the path of the model directory (with config.json)")
    value = _typed("model", raw["model"], str, "the path of the model directory (with config.json)")
    return str(_path(value, base))


def _shape(model_path: str) -> ModelShape:
    try:
        return load_shape(model_path)
    except ModelConfigError as exc:
        raise SpecError("model", exc.message, exc.hint) from None


def _simulated(value: Any, launcher: Any, base: Path) -> SimulatedNode | None:
    if launcher != "simulated":
        if value is not None:
            raise SpecError("simulated", "given, but launcher is not 'simulated'", "set launcher: simulated or remove it")
        return None
    value = _typed("simulated", value or {}, dict, "a mapping: gpus, gpu_mem_gib, gpu_name, time_scale")
    _unknown("simulated.", set(value), {"gpus", "gpu_mem_gib", "gpu_name", "node_dir", "time_scale", "faults",
                                        "release_delay_s", "fault_rate", "min_deadline_s"})
    node = SimulatedNode(
        gpus=int(_typed("simulated.gpus", value.get("gpus", 2), int, "an integer >= 1")),
        gpu_mem_gib=float(_typed("simulated.gpu_mem_gib", value.get("gpu_mem_gib", 48), (int, float), "GiB per GPU")),
        gpu_name=str(value.get("gpu_name", "NVIDIA Simulated GPU")),
        node_dir=_path(value["node_dir"], base) if value.get("node_dir") else None,
        time_scale=float(_typed("simulated.time_scale", value.get("time_scale", 0.01), (int, float), "e.g. 0.01")),
        faults=str(value.get("faults", "")),
        release_delay_s=float(value.get("release_delay_s", 0.0)),
        fault_rate=float(_typed("simulated.fault_rate", value.get("fault_rate", 0.0), (int, float), "0 to 1")),
        min_deadline_s=float(_typed("simulated.min_deadline_s", value.get("min_deadline_s", 10.0), (int, float),
                                    "seconds")),
    )
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
    if not isinstance(value, list) or not value or not all(isinstance(v, int) and v >= 0 for v in value):
        raise SpecError("gpus", f"{value!r} is not a list of GPU indices", "e.g. gpus: [0, 1]")
    if len(set(value)) != len(value):
        raise SpecError("gpus", f"{value!r} lists a GPU twice", "each index once")
    if simulated and max(value) >= simulated.gpus:
        raise SpecError("gpus", f"GPU {max(value)} does not exist on the simulated node ({simulated.gpus} GPUs)",
                        "lower the index or raise simulated.gpus")
    return tuple(value)


def _port(value: Any) -> int | None:
    if value is None:
        return None
    port = _typed("port", value, int, "an integer 1024-65535, or leave it out for a free port per trial")
    if not 1024 <= port <= 65535:
        raise SpecError("port", f"{port} out of range", "1024-65535, or leave it out for a free port per trial")
    return int(port)


def _opt_str(name: str, value: Any) -> str | None:
    return None if value is None else str(_typed(name, value, str, "a string"))


def _space(raw: Mapping[str, Any], shape: ModelShape, n_gpus: int) -> dict[str, tuple[Any, ...]]:
    return parse_space(raw, shape, n_gpus)


def _start(raw: Any, space: Mapping[str, tuple[Any, ...]]) -> dict[str, Any]:
    raw = _typed("start", raw, dict, "a mapping of space parameters to their first values")
    _unknown("start.", set(raw), SPACE_KEYS)
    return dict(raw)


def _goal(raw: Any) -> Goal:
    raw = _typed("goal", raw, dict, "a mapping: order, required_features, min_concurrency")
    _unknown("goal.", set(raw), {"order", "required_features", "min_concurrency"})
    order = tuple(raw.get("order", GOAL_ORDER))
    for item in order:
        if item not in GOAL_ORDER:
            raise SpecError("goal.order", f"unknown criterion {item!r}", f"use some of {', '.join(GOAL_ORDER)}")
    feats = tuple(raw.get("required_features", ()))
    for feat in feats:
        if feat not in BOOL_PARAMS - {"disable_cuda_graph"}:
            raise SpecError("goal.required_features", f"unknown feature {feat!r}", "speculative, torch_compile")
    conc = _typed("goal.min_concurrency", raw.get("min_concurrency", 1), int, "an integer >= 1")
    if conc < 1:
        raise SpecError("goal.min_concurrency", f"{conc} < 1", "at least 1 request at the full context")
    return Goal(order, feats, int(conc))


def _probe(raw: Any) -> ProbeSpec:
    raw = _typed("probe", raw, dict, "a mapping: enabled, burst, burst_tokens, max_new_tokens, timeout_s")
    _unknown("probe.", set(raw), {"enabled", "long_request", "burst", "burst_tokens", "max_new_tokens", "timeout_s"})
    probe = ProbeSpec(enabled=bool(raw.get("enabled", True)), long_request=bool(raw.get("long_request", True)),
                      burst=int(raw.get("burst", 8)), burst_tokens=int(raw.get("burst_tokens", 1024)),
                      max_new_tokens=int(raw.get("max_new_tokens", 16)), timeout_s=float(raw.get("timeout_s", 600)))
    if probe.burst < 0 or probe.burst_tokens < 1 or probe.max_new_tokens < 1 or probe.timeout_s <= 0:
        raise SpecError("probe", "negative or zero sizes", "burst >= 0, burst_tokens >= 1, max_new_tokens >= 1")
    return probe


def _budget(raw: Any) -> Budget:
    raw = _typed("budget", raw, dict, "a mapping: trials, wall_time_s")
    _unknown("budget.", set(raw), {"trials", "wall_time_s"})
    trials = _typed("budget.trials", raw.get("trials", 40), int, "an integer >= 1")
    wall = _typed("budget.wall_time_s", raw.get("wall_time_s", 8 * 3600), (int, float), "seconds")
    if trials < 1 or wall <= 0:
        raise SpecError("budget", "trials must be >= 1 and wall_time_s > 0", "e.g. trials: 40, wall_time_s: 28800")
    return Budget(int(trials), float(wall))


def _deadlines(raw: Any) -> Deadlines:
    raw = _typed("timeouts", raw, dict, "a mapping: startup_s, no_progress_s, compile_no_progress_s")
    _unknown("timeouts.", set(raw), {"startup_s", "no_progress_s", "compile_no_progress_s", "ready_health_s"})
    d = Deadlines()
    values = {k: float(_typed(f"timeouts.{k}", raw.get(k, getattr(d, k)), (int, float), "seconds"))
              for k in ("startup_s", "no_progress_s", "compile_no_progress_s", "ready_health_s")}
    if any(v <= 0 for v in values.values()):
        raise SpecError("timeouts", "every timeout must be > 0", "seconds, e.g. no_progress_s: 600")
    return Deadlines(**values)


def _strategy(value: Any) -> str:
    if value not in STRATEGIES:
        raise SpecError("strategy", f"unknown strategy {value!r}", f"one of: {', '.join(STRATEGIES)}")
    return str(value)


def _check_combination(spec: Spec) -> None:
    tps = spec.space["tp"]
    if max(tps) > len(spec.gpus):
        raise SpecError("space.tp", f"tp {max(tps)} needs {max(tps)} GPUs, the spec gives {len(spec.gpus)}",
                        "add GPUs to `gpus` or lower tp")
    shape = spec.shape
    if shape is not None and True in spec.space["speculative"] and shape.mtp_layers == 0:
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
