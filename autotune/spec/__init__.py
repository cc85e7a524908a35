"""The tuning spec (YAML): what to tune, on which machine, towards which goal, within what budget.

Every field is checked before anything starts; a wrong one raises SpecError naming the
field and the fix. The space lists each launch parameter as one value (fixed) or several
(searched), each list ordered by how much memory it needs (more context, more features,
bigger batches need more). See configs/demo.yaml for a documented example.
"""

from __future__ import annotations

import json
import os
import random
import shlex
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from autotune.config import PARAMS, LaunchConfig
from autotune.engines import registry
from autotune.errors import SpecError
from autotune.modelshape import ModelShape
from autotune.records import BEST_RECORD_KEYS
from autotune.settings import (
    Budget,
    CertifySpec,
    Deadlines,
    Goal,
    ProbeSpec,
    SimulatedNode,
    Target,
    TrialSettings,
)
from autotune.spec.fields import (
    check_budget,
    check_certify,
    check_deadlines,
    check_goal,
    check_probe,
    check_strategy,
    check_study_name,
    check_target,
    check_version,
    gpu_indices,
    host_name,
    launcher_argv,
    model_shape,
    path_in,
    port_number,
    positive_s,
    simulated_node,
    simulator_runs,
    start_values,
)
from autotune.spec.schema import did_you_mean, document
from autotune.spec.space import parse_space

# Faults a soak injects at random (see `SimulatedNode.fault_rate`), as AUTOTUNE_SIM_FAULTS values.
SOAK_FAULTS = ("crash@load_weights", "crash@kv_pool", "crash@cuda_graph", "crash@warmup", "crash@serve",
               "hang@init_dist", "hang@load_weights", "hang@cuda_graph", "exit0@kv_pool", "exit0@http",
               "leak_child", "ignore_sigterm", "silent", "bad_utf8", "slow_release")


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
    allow_busy_gpus: bool
    release_timeout_s: float
    stop_grace_s: float
    certify: CertifySpec
    parallel: int  # slots: trials run at once, each on its own `tp` GPUs (see `slots`)
    target: Target  # where the server runs; this machine unless the spec says
    shape: ModelShape | None = field(repr=False, compare=False)

    def slots(self) -> list[tuple[int, ...]]:
        """The GPUs of each slot: the spec's GPUs in consecutive groups of the largest `tp`."""
        tp = max(int(t) for t in self.space["tp"])
        return [self.gpus[i * tp:(i + 1) * tp] for i in range(self.parallel)]

    @property
    def study_dir(self) -> Path:
        return self.results_dir / self.study

    def searched(self) -> dict[str, tuple[Any, ...]]:
        return {k: v for k, v in self.space.items() if len(v) > 1}

    def fixed(self) -> dict[str, Any]:
        return {k: v[0] for k, v in self.space.items() if len(v) == 1}

    def config(self, params: Mapping[str, Any]) -> LaunchConfig:
        """The LaunchConfig for searched `params` (plus every fixed value): the one way a point becomes a config."""
        return LaunchConfig.from_dict({"model_path": self.model_path, **self.fixed(), **params})

    def sim_env(self) -> dict[str, str]:
        if self.simulated is None:
            return {}
        env = {"AUTOTUNE_SIM_NODE": str(self.node_dir()), "AUTOTUNE_SIM_SGLANG_VERSION": self.engine_version,
               "AUTOTUNE_SIM_VLLM_ENGINE": self.engine, "AUTOTUNE_SIM_VLLM_VERSION": self.engine_version,
               "AUTOTUNE_SIM_TIME_SCALE": str(self.simulated.time_scale)}
        if self.simulated.faults:
            env["AUTOTUNE_SIM_FAULTS"] = self.simulated.faults
        return env

    def certify_env(self) -> dict[str, str]:
        """What certification boots add: the simulated node's boot-to-boot variation, if any."""
        if self.simulated is None or self.simulated.boot_jitter_mib <= 0:
            return {}
        return {"AUTOTUNE_SIM_BOOT_JITTER_MIB": str(self.simulated.boot_jitter_mib)}

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
            probe=self.probe, api_key=api_key, target=self.target,
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


@dataclass(frozen=True)
class TrialConfig:
    """A whole config for `autotune trial --config`: its launch values and, where it says, the model and
    engine it was found for (`autotune best --format json` says all three)."""

    values: Mapping[str, Any]
    model_path: str | None = None
    engine: str | None = None
    engine_version: str | None = None


CONFIG_HINT = "give what `autotune best --format json` prints, or its \"config\" object"


def read_trial_config(text: str, source: str) -> TrialConfig:
    """`text` (JSON) as a TrialConfig: either a whole `best --format json` record or only its `config`
    object. Not JSON, not an object, or a field no config has: refused, naming it."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise SpecError("--config", f"{source} is not valid JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})",
                        CONFIG_HINT) from None
    if not isinstance(data, dict):
        raise SpecError("--config", f"{source} holds a JSON {type(data).__name__}, not an object", CONFIG_HINT)
    about: dict[str, str | None] = {"engine": None, "engine_version": None}
    record = "config" in data
    if record:  # the whole record
        _known_keys(data, BEST_RECORD_KEYS, "")  # `config` is what a trial launches
        for key in about:
            if data.get(key) is not None and not isinstance(data[key], str):
                raise SpecError(f"--config {key}", f"{data[key]!r} is not a name", CONFIG_HINT)
            about[key] = data.get(key)
        data = data["config"]
        if not isinstance(data, dict):
            raise SpecError("--config config", f"{source}: 'config' is not an object", CONFIG_HINT)
    _known_keys(data, ("model_path", *PARAMS), "config." if record else "")
    values = dict(data)
    model_path = values.pop("model_path", None)
    if model_path is not None and not isinstance(model_path, str):
        raise SpecError("--config model_path", f"{model_path!r} is not a path", CONFIG_HINT)
    return TrialConfig(values=values, model_path=model_path, **about)


def _known_keys(data: Mapping[str, Any], known: tuple[str, ...], prefix: str) -> None:
    for key in data:
        if key not in known:
            raise SpecError(f"--config {prefix}{key}", "unknown field", did_you_mean(str(key), known))


def load_trial(path: str | Path, values: Mapping[str, Any], overrides: Mapping[str, Any] | None = None,
               config: TrialConfig | None = None) -> tuple[Spec, dict[str, Any]]:
    """The spec and the one config `autotune trial` launches: its start, with the values of a whole
    `config` (`--config`), then `values` (`--set k=v`) over them.

    Each value goes through the same checks as the spec's own space (`space.k: v`), so a
    fraction above 1, a TP the GPUs or the model cannot take, 'maybe' for a boolean are refused
    as they would be in the file. A string `extra_args` is split like a shell (never run); a list
    is taken as it is. A config found for another model or engine is refused."""
    sets: dict[str, Any] = {}
    option: dict[str, str] = {}  # space key -> the option that gave it, for the error
    given = [("--config", config.values if config else {}), ("--set", values)]
    for opt, items in given:
        for key, value in items.items():
            if key not in PARAMS:
                raise SpecError(f"{opt} {key}", "not a space parameter", did_you_mean(key, PARAMS, "one of"))
            if key == "extra_args" and isinstance(value, str):
                value = shlex.split(value)
            elif isinstance(value, dict) or (isinstance(value, list) and key != "extra_args"):
                raise SpecError(f"{opt} {key}", f"{value!r}: a trial launches one value", f"e.g. --set {key}=<one value>")
            sets[f"space.{key}"] = sets[f"start.{key}"] = value
            option[key] = opt
    try:
        spec = load(path, {**(overrides or {}), **sets})
    except SpecError as exc:
        if exc.field in sets:  # name the option the user typed, not the spec field it stands for
            key = exc.field.split(".", 1)[1]
            raise SpecError(f"{option[key]} {key}", exc.detail, exc.hint) from None
        raise
    if config is not None:
        _check_found_for(spec, config)
    return spec, {**spec.start, **{k.split(".", 1)[1]: spec.space[k.split(".", 1)[1]][0] for k in sets}}


def _check_found_for(spec: Spec, config: TrialConfig) -> None:
    """A config is relaunched exactly only on the model and engine it was found for."""
    hint = ("use the spec of the study that recommended it; to launch its values on this spec's engine anyway, "
            "give only its \"config\" object, without model_path")
    if config.model_path is not None and os.path.normpath(config.model_path) != os.path.normpath(spec.model_path):
        raise SpecError("--config model_path", f"{config.model_path} is not this spec's model ({spec.model_path})", hint)
    for key in ("engine", "engine_version"):
        theirs, ours = getattr(config, key), getattr(spec, key)
        if theirs is not None and theirs != ours:
            raise SpecError(f"--config {key}", f"the config was found on {theirs!r}; this spec launches {ours!r}", hint)


def read_text(path: Path, field: str, wanted: str) -> str:
    """A text file the user named, or a SpecError naming `field` and saying what is `wanted` there."""
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise SpecError(field, f"{path} does not exist", f"give the path of {wanted}") from None
    except IsADirectoryError:
        raise SpecError(field, f"{path} is a directory", f"give the path of {wanted} inside it") from None
    except UnicodeDecodeError:
        raise SpecError(field, f"{path} is not a text file", f"give the path of {wanted}") from None
    except OSError as exc:
        raise SpecError(field, f"cannot read {path}: {exc.strerror}", "check the path and its permissions") from None


def _read(path: Path) -> dict[str, Any]:
    text = read_text(path, "<file>", "a spec YAML, e.g. configs/demo.yaml")
    try:
        raw = yaml.safe_load(text)
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
    if doc.engine not in registry.launchable():
        raise SpecError("engine", f"unknown engine {doc.engine!r}", f"one of: {', '.join(registry.launchable())}")
    check_version(doc.engine, doc.engine_version)
    study = check_study_name(doc.study or path.stem)
    model_path = str(path_in(doc.model, base))
    shape = model_shape(model_path)
    simulated = simulated_node(doc.simulated, doc.launcher, base)
    results_dir = path_in(doc.results_dir, base)
    gpus = gpu_indices(doc.gpus, simulated)
    space = parse_space(doc.space, shape, len(gpus))
    spec = Spec(
        path=path, study=study, engine=doc.engine, engine_version=doc.engine_version,
        model_path=model_path, launcher=launcher_argv(doc.launcher, doc.engine, simulated, base), simulated=simulated,
        gpus=gpus, host=host_name(doc.host), port=port_number(doc.port), api_key_env=doc.api_key_env,
        env={k: str(v) for k, v in doc.env.items()}, space=space, start=start_values(doc.start, space),
        goal=check_goal(doc.goal), probe=check_probe(doc.probe), budget=check_budget(doc.budget),
        deadlines=check_deadlines(doc.timeouts),
        strategy=check_strategy(doc.strategy),
        storage=doc.storage or f"sqlite:///{results_dir / study / 'study.db'}",
        seed=doc.seed, results_dir=results_dir, allow_busy_gpus=doc.allow_busy_gpus,
        release_timeout_s=positive_s("release_timeout_s", doc.release_timeout_s),
        stop_grace_s=positive_s("stop_grace_s", doc.stop_grace_s), certify=check_certify(doc.certify), shape=shape,
        target=check_target(doc.target), parallel=parallel_slots(doc.parallel, space, len(gpus)),
    )
    _check_combination(spec)
    return spec


def parallel_slots(value: int | str, space: Mapping[str, tuple[Any, ...]], gpus: int) -> int:
    """`parallel` as a slot count: 'auto' is as many as the GPUs hold at the largest tp."""
    tp = max(int(t) for t in space["tp"])
    fit = max(1, gpus // tp)
    if value == "auto":
        return fit
    if isinstance(value, str) or value < 1:
        raise SpecError("parallel", f"{value!r} is not a slot count", "an integer >= 1, or auto")
    if value > fit:
        raise SpecError("parallel", f"{value} slots at tp {tp} need {value * tp} GPUs, the spec gives {gpus}",
                        f"at most {fit} (or auto), or give more GPUs")
    return value


# Flags each trial's command line carries already, from the spec or drawn per trial: given again in
# extra_args, the engine takes the later one and the trial watches a server that is not where it
# listens, or several slots' servers fight over one rendezvous port (every trial a MISMATCH).
OWNED_FLAGS = {
    "--host": "the address its server listens on (the spec's `host`)",
    "--port": "its own HTTP port (the spec's `port`, or a free one drawn per trial where unset)",
    "--nccl-port": "its own distributed-init port, drawn per trial so parallel slots never share one",
}


def _check_combination(spec: Spec) -> None:
    tps = spec.space["tp"]
    if max(tps) > len(spec.gpus):
        raise SpecError("space.tp", f"tp {max(tps)} needs {max(tps)} GPUs, the spec gives {len(spec.gpus)}",
                        "add GPUs to `gpus` or lower tp")
    shape = spec.shape
    assert shape is not None  # parse() always reads it
    if not shape.sized and spec.simulated is not None:
        simulator_runs(spec.model_path)
    for tp in tps if shape.sized else ():  # unsized: nothing is known of the heads; the engine will say
        problem = shape.tp_split_problem(tp) if tp is not None else ""
        if problem:  # the engine would assert while building the model: every such launch is wasted
            fits = [t for t in shape.splittable_tps() if t <= len(spec.gpus)]
            raise SpecError("space.tp", problem, f"use a TP the model splits over: {', '.join(map(str, fits))}")
    for knob, reason, note in registry.get_engine(spec.engine).unsupported(spec.space):
        raise SpecError(f"space.{knob}", f"{spec.engine} {spec.engine_version} cannot run it: {reason}",
                        f"set space.{knob}: false ({note})")
    if shape.sized and True in spec.space["speculative"] and shape.mtp_layers == 0:
        if not any("--speculative-draft-model" in a for a in spec.space["extra_args"][0] or ()):
            raise SpecError("space.speculative", f"{shape.architecture} has no MTP/NextN layers",
                            "set speculative: false, or give a draft model in extra_args")
    for arg in spec.space["extra_args"][0] or ():
        flag = arg.split("=", 1)[0]
        if flag in OWNED_FLAGS:
            raise SpecError("space.extra_args", f"{flag} is set by autotune for each trial: {OWNED_FLAGS[flag]}",
                            f"take {flag} out of extra_args" + (" and set the spec's `host`" if flag == "--host" else ""))
    for feat in spec.goal.required_features:
        if True not in spec.space[feat]:
            raise SpecError("goal.required_features", f"{feat} is required but the space never turns it on",
                            f"add true to space.{feat}")
    if spec.host not in ("127.0.0.1", "localhost", "::1"):
        print(f"WARNING: the server will listen on {spec.host}, reachable from other machines "
              "(spec field 'host'); use 127.0.0.1 unless you mean it.", file=sys.stderr)
