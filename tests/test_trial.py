"""One trial against the simulated server, for every outcome: the verdict, the evidence,
how fast a decisive line kills the tree, and that nothing is left running or held."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from dataclasses import replace
from pathlib import Path

import pytest

from autotune.config import LaunchConfig
from autotune.records import Outcome, Phase, TrialResult
from autotune.settings import Deadlines, ProbeSpec, TrialSettings
from autotune.sim.backend import SimulatedBackend
from autotune.sim.node import SimNode
from autotune.trial.run import run_trial
from autotune.trial.supervisor import tagged_processes
from tests.conftest import MODELS, REPO, SIM_SGLANG

QWEN36 = str(MODELS / "Qwen3.6-27B")
LLAMA8 = str(MODELS / "Meta-Llama-3.1-8B")
QWEN32 = str(MODELS / "Qwen3-32B")
REFERENCE = LaunchConfig(model_path=QWEN36, tp=2, mem_fraction_static=0.85, context_length=65536, speculative=True,
                         speculative_num_steps=3, speculative_eagle_topk=1, speculative_num_draft_tokens=4,
                         torch_compile=True)


def settings(node: SimNode, tmp_path: Path, *, version: str = "0.5.23", gpus: tuple[int, ...] = (0,),
             faults: str = "", **kw: object) -> TrialSettings:
    env = {"AUTOTUNE_SIM_NODE": str(node.root), "AUTOTUNE_SIM_SGLANG_VERSION": version,
           "AUTOTUNE_SIM_TIME_SCALE": "0.001"}
    if faults:
        env["AUTOTUNE_SIM_FAULTS"] = faults
    base = TrialSettings(engine_version=version, launcher=SIM_SGLANG, gpus=gpus, env=env, trials_dir=tmp_path / "trials",
                         deadlines=Deadlines(startup_s=30, no_progress_s=3, compile_no_progress_s=3, ready_health_s=10),
                         grace_s=2.0, release_timeout_s=5.0, probe=ProbeSpec(burst=4, burst_tokens=512))
    return replace(base, **kw)  # type: ignore[arg-type]


def trial(node: SimNode, tmp_path: Path, config: LaunchConfig, **kw: object) -> TrialResult:
    result = run_trial(config, settings(node, tmp_path, **kw), SimulatedBackend(node.root))
    assert not tagged_processes(result.trial_id), "processes of the trial survived it"
    assert all(g.used_bytes == 0 for g in node.snapshot()), "simulated memory still held"
    assert result.released
    return result


def test_ready_with_figures_and_probe(node: SimNode, tmp_path: Path) -> None:
    r = trial(node, tmp_path, LaunchConfig(model_path=LLAMA8, mem_fraction_static=0.85, context_length=32768))
    assert r.outcome is Outcome.READY and r.phase is Phase.PROBE
    assert r.probe is not None and r.probe.ok and r.probe.long_request_tokens == 32768 - 24 and r.probe.burst_ok == 4
    assert r.kv_tokens and r.kv_tokens > 32768 and r.figures["weights_gib"] == pytest.approx(15.11, abs=0.02)
    assert r.resolved["mem_fraction_static"] == 0.85 and r.gpus[0].peak_bytes > 40 << 30
    assert r.gpu_s > 10  # the engine's clock: modelled real-scale seconds, not the scaled wall time
    assert json.loads(json.dumps(r.to_dict())) == r.to_dict() and TrialResult.from_dict(r.to_dict()) == r


def test_reference_scenario_is_oom_kv_pool_with_the_right_remedy(node: SimNode, tmp_path: Path) -> None:
    r = trial(node, tmp_path, REFERENCE, version="0.5.9", gpus=(0, 1))
    assert r.outcome is Outcome.OOM_KV_POOL and r.phase is Phase.KV_POOL
    assert any("Not enough memory. Please try to increase --mem-fraction-static" in e for e in r.evidence)
    assert "max-running-requests" in r.remedy and r.figures["mfs_direction"] == 1
    assert r.figures["weights_gib"] == pytest.approx(26.10, abs=0.02) and r.exit_code is not None


@pytest.mark.parametrize("config,kw,outcome,phase", [
    (LaunchConfig(model_path=QWEN32), {}, Outcome.OOM_WEIGHTS, Phase.WEIGHTS),
    (LaunchConfig(model_path=LLAMA8, mem_fraction_static=0.3), {}, Outcome.OOM_KV_POOL, Phase.KV_POOL),
    (LaunchConfig(model_path=LLAMA8, mem_fraction_static=0.996, context_length=8192), {"version": "0.5.9"},
     Outcome.OOM_CUDA_GRAPH, Phase.CUDA_GRAPH),
    (LaunchConfig(model_path=LLAMA8, mem_fraction_static=0.36, context_length=131072), {}, Outcome.KV_TOO_SMALL,
     Phase.READY),
    (LaunchConfig(model_path=LLAMA8, mem_fraction_static=0.96, chunked_prefill_size=16384, context_length=32768), {},
     Outcome.OOM_RUNTIME, Phase.PROBE),
    (LaunchConfig(model_path=LLAMA8, extra_args=("--kv-cache-dtype", "fp8")), {}, Outcome.CONFIG_ERROR, Phase.ARGS),
    (LaunchConfig(model_path=LLAMA8, mem_fraction_static=0.8), {"faults": "crash@cuda_graph"}, Outcome.CRASH,
     Phase.KV_POOL),  # it crashes as graph capture begins: the last progress line is the pool's
    (LaunchConfig(model_path=LLAMA8, mem_fraction_static=0.8), {"faults": "exit0@kv_pool"}, Outcome.CRASH,
     Phase.KV_POOL),  # weights were loaded: it died sizing the pool
])
def test_each_outcome(node: SimNode, tmp_path: Path, config: LaunchConfig, kw: dict[str, object], outcome: Outcome,
                      phase: Phase) -> None:
    r = trial(node, tmp_path, config, **kw)
    assert r.outcome is outcome, (r.outcome, r.evidence)
    assert r.phase is phase, (r.phase, r.evidence)
    assert r.evidence and (r.remedy or outcome is Outcome.READY)


def test_config_error_from_the_engine_itself(node: SimNode, tmp_path: Path) -> None:
    """A context above the model's max is refused by the engine (exit 1), not by our tables."""
    r = trial(node, tmp_path, LaunchConfig(model_path=LLAMA8, context_length=262144))
    assert r.outcome is Outcome.CONFIG_ERROR and r.launched and r.phase is Phase.ARGS
    assert any("greater than the derived context_length" in e for e in r.evidence)


def test_hang_is_a_timeout_and_the_tree_is_stopped(node: SimNode, tmp_path: Path) -> None:
    r = trial(node, tmp_path, LaunchConfig(model_path=LLAMA8), faults="hang@kv_pool")
    assert r.outcome is Outcome.TIMEOUT and r.phase is Phase.KV_POOL and "no progress" in r.remedy


def test_server_that_ignores_sigterm_is_killed(node: SimNode, tmp_path: Path) -> None:
    t0 = time.monotonic()
    r = trial(node, tmp_path, LaunchConfig(model_path=LLAMA8, mem_fraction_static=0.8, context_length=8192),
              faults="ignore_sigterm")
    assert r.outcome is Outcome.READY
    assert time.monotonic() - t0 < 20


def test_child_that_outlives_its_parent_is_swept(node: SimNode, tmp_path: Path) -> None:
    r = trial(node, tmp_path, LaunchConfig(model_path=LLAMA8, mem_fraction_static=0.8, context_length=8192),
              faults="leak_child")
    assert r.outcome is Outcome.READY
    assert any("swept tagged stragglers" in n for n in r.notes)


def test_busy_gpu_is_refused_without_launching(node: SimNode, tmp_path: Path) -> None:
    holder = subprocess.Popen([sys.executable, "-m", "autotune.sim.hold", "--gpu", "1", "--gib", "5"],
                              stdout=subprocess.PIPE, text=True)
    assert holder.stdout is not None and holder.stdout.readline().startswith("holding")
    holder.stdout.close()
    try:
        r = run_trial(LaunchConfig(model_path=LLAMA8, tp=2), settings(node, tmp_path, gpus=(0, 1)),
                      SimulatedBackend(node.root))
        assert r.outcome is Outcome.GPU_BUSY and not r.launched
        assert any(f"pid {holder.pid}" in e for e in r.evidence)
        told = run_trial(LaunchConfig(model_path=LLAMA8, tp=2), settings(node, tmp_path, gpus=(0, 1), allow_busy=True),
                         SimulatedBackend(node.root))
        assert told.outcome is Outcome.GPU_BUSY and told.launched  # SGLang's own imbalance check
        assert any("memory capacity is unbalanced" in e for e in told.evidence)
    finally:
        holder.terminate()
        holder.wait()


def test_mismatch_before_launch_when_the_argv_contradicts_the_config(node: SimNode, tmp_path: Path) -> None:
    config = LaunchConfig(model_path=LLAMA8, speculative=False, extra_args=("--speculative-algorithm", "EAGLE"))
    r = trial(node, tmp_path, config)
    assert r.outcome is Outcome.MISMATCH and not r.launched
    assert any("speculative decoding is on" in m for m in r.mismatches)


def test_mismatch_after_ready_when_what_runs_differs(node: SimNode, tmp_path: Path) -> None:
    """A launcher wrapper adds a flag the config does not ask for: caught from the process and /server_info."""
    launcher = (*SIM_SGLANG, "--mem-fraction-static", "0.7")
    r = trial(node, tmp_path, LaunchConfig(model_path=LLAMA8, context_length=8192), launcher=launcher)
    assert r.outcome is Outcome.READY  # the config left the fraction to the engine: nothing to contradict
    cfg = LaunchConfig(model_path=QWEN36, tp=2, context_length=8192, mem_fraction_static=0.85)
    early = trial(node, tmp_path, cfg, launcher=(*SIM_SGLANG, "--speculative-algo", "NEXTN"), gpus=(0, 1))
    assert early.outcome is Outcome.MISMATCH and not early.launched  # visible in the argv: no launch spent
    wrapper = tmp_path / "wrapper.py"  # hides the extra flag from the argv we build, as a site wrapper would
    wrapper.write_text("import os, sys\n"
                       "os.execv(sys.executable, [sys.executable, '-m', 'autotune.sim.sglang', "
                       "'--speculative-algo', 'NEXTN', *sys.argv[1:]])\n")
    r = trial(node, tmp_path, cfg, launcher=(sys.executable, str(wrapper)), gpus=(0, 1))
    assert r.outcome is Outcome.MISMATCH and r.launched and r.phase is Phase.READY
    assert {m.split(":")[0] for m in r.mismatches} == {"process argv", "server_info"}


def test_decisive_line_to_dead_tree_latency(node: SimNode, tmp_path: Path) -> None:
    """An OOM line must end the launch at once, not at a timeout. Measured by an independent observer."""
    seen: dict[str, float] = {}
    stop = threading.Event()
    trials = tmp_path / "trials"

    def observe() -> None:
        while not stop.is_set():
            for log in trials.glob("*/server.log"):
                if "seen" not in seen and "Not enough memory" in log.read_text(errors="replace"):
                    seen["seen"] = time.monotonic()
            time.sleep(0.002)

    watcher = threading.Thread(target=observe)
    watcher.start()
    try:
        cfg = replace(REFERENCE, torch_compile=False)
        r = run_trial(cfg, settings(node, tmp_path, version="0.5.9", gpus=(0, 1), faults="ignore_sigterm"),
                      SimulatedBackend(node.root))
        done = time.monotonic()
    finally:
        stop.set()
        watcher.join()
    assert r.outcome is Outcome.OOM_KV_POOL and not tagged_processes(r.trial_id)
    latency = done - seen["seen"]
    print(f"\ndecisive line written -> verdict and dead process tree: {latency * 1000:.0f} ms "
          f"(internal: {r.verdict_latency_s})")
    assert latency < 2.0


def test_trial_cli_prints_the_reference_verdict(node: SimNode, tmp_path: Path) -> None:
    spec = tmp_path / "ref.yaml"
    spec.write_text(f"""
study: ref
engine_version: "0.5.9"
model: {QWEN36}
launcher: simulated
simulated: {{gpus: 2, gpu_mem_gib: 48, gpu_name: NVIDIA RTX A6000, time_scale: 0.001, node_dir: {node.root}}}
space:
  tp: 2
  mem_fraction_static: 0.85
  context_length: 65536
  speculative: true
  speculative_num_steps: 3
  speculative_eagle_topk: 1
  speculative_num_draft_tokens: 4
  torch_compile: true
results_dir: {tmp_path / "results"}
""")
    out = subprocess.run([sys.executable, "-m", "autotune.cli", "trial", str(spec), "--json"], capture_output=True,
                         text=True, cwd=REPO, timeout=120)
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert data["outcome"] == "OOM_KV_POOL" and data["phase"] == "kv_pool"
    assert "max-running-requests" in data["remedy"] and data["figures"]["weights_gib"] > 25
    assert any("mem_fraction_static=0.85" in e for e in data["evidence"])
