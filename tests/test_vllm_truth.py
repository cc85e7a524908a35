"""The vLLM ground truth (sim/vllm_truth.py, what `make bench` takes as the true optimum) against the
simulated vLLM server's own verdicts: the server is launched for real at points on either side of
the boundary the truth draws, and must be ready exactly where the truth says the launch fits, log the
KV tokens the truth computed, hold the memory the truth says it holds, and take the modelled
start-up time the truth says it takes."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import requests

from autotune.records import GIB
from autotune.sim.node import SimNode
from autotune.sim.vllm_truth import evaluate
from autotune.trial.watch import log_time
from tests.conftest import REPO, free_port
from tests.test_sim_vllm import finish, until_ready_or_exit

MODELS = REPO / "configs" / "models"
UTILS = [round(0.50 + 0.01 * i, 2) for i in range(48)]  # the bench's --gpu-memory-utilization grid
KV_LINE = re.compile(r"GPU KV cache size: ([\d,]+) tokens")
TOO_SMALL = re.compile(r"the estimated maximum model length is (\d+)")
MTP = ["--speculative-config", '{"method":"mtp","num_speculative_tokens":3}']

# (model, TP, GiB per GPU, max_model_len, extra flags): the bench's three vLLM scenarios' shapes
CASES = [
    ("Meta-Llama-3.1-8B", 1, 24, 32768, ["--max-cudagraph-capture-size", "64"]),
    ("Mixtral-8x7B-v0.1", 2, 80, 32768, ["--kv-cache-dtype", "fp8_e4m3"]),
    ("MiMo-7B-Base", 1, 24, 16384, MTP),
]


def flags(model: str, tp: int, util: float, max_len: int, extra: list[str]) -> list[str]:
    return ["--model", str(MODELS / model), "--tensor-parallel-size", str(tp), "--gpu-memory-utilization",
            f"{util:g}", "--max-model-len", str(max_len), *extra]


def boundary(model: str, tp: int, gib: int, max_len: int, extra: list[str]) -> float:
    """The smallest utilisation of the grid at which the truth says the launch fits."""
    fitting = [u for u in UTILS if evaluate(flags(model, tp, u, max_len, extra), gpus=tp, gpu_mem_gib=gib).fits]
    assert fitting and fitting[0] > UTILS[0], "the boundary must lie inside the grid for the test to mean anything"
    return fitting[0]


def launch(node: SimNode, argv: list[str]) -> tuple[bool, list[str], list[int]]:
    """Run the simulated server; (ready, its lines, bytes held per GPU while ready)."""
    port = free_port()
    env = {**os.environ, "AUTOTUNE_SIM_NODE": str(node.root), "AUTOTUNE_SIM_VLLM_ENGINE": "vllm"}
    proc = subprocess.Popen([sys.executable, "-m", "autotune.sim.vllm", *argv, "--host", "127.0.0.1", "--port",
                             str(port)], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)
    held: list[int] = []
    try:
        ready = until_ready_or_exit(proc, port, timeout_s=60)
        if ready:
            held = [g.used_bytes for g in node.snapshot()]
            prompt = [1000] * 64
            done = requests.post(f"http://127.0.0.1:{port}/v1/completions", json={"prompt": prompt, "max_tokens": 4},
                                 timeout=10)
            ready = done.status_code == 200
    finally:
        lines = finish(proc)
    return ready, lines, held


@pytest.mark.parametrize(("model", "tp", "gib", "max_len", "extra"), CASES, ids=[c[0] for c in CASES])
def test_truth_matches_the_simulated_server_at_its_boundary(tmp_path: Path, model: str, tp: int, gib: int,
                                                            max_len: int, extra: list[str]) -> None:
    edge = boundary(model, tp, gib, max_len, extra)
    for util in (round(edge - 0.01, 2), edge):
        node = SimNode.create(tmp_path / f"node-{util}", gpus=tp, gpu_mem_gib=gib, gpu_name="H100")
        argv = flags(model, tp, util, max_len, extra)
        truth = evaluate(argv, gpus=tp, gpu_mem_gib=gib)
        ready, lines, held = launch(node, argv)
        text = "\n".join(lines)
        assert ready == truth.fits, (util, truth, text[-2000:])
        logged = KV_LINE.search(text) if truth.fits else TOO_SMALL.search(text)
        assert logged, text[-2000:]
        assert int(logged.group(1).replace(",", "")) == truth.kv_tokens, (util, truth)
        if ready:
            assert held == [truth.peak_used_bytes] * tp, (util, [h / GIB for h in held], truth.peak_used_bytes / GIB)
            assert f"warmup model) took {truth.startup_s:.2f} s" in text, (truth.startup_s, text[-2000:])
            stamps = [t for line in lines if (t := log_time(line)) is not None]  # the trial's GPU-s
            assert abs(max(stamps) - min(stamps) - truth.startup_s) <= 1.0, (stamps, truth.startup_s)


def test_the_mtp_draft_moves_the_truths_boundary() -> None:
    """Speculative decoding costs KV: with the MTP draft the truth's boundary moves up (the server
    agreeing there is the case above), so a truth that ignored --speculative-config would be caught."""
    plain = boundary("MiMo-7B-Base", 1, 24, 16384, [])
    drafted = boundary("MiMo-7B-Base", 1, 24, 16384, MTP)
    assert drafted > plain
    without = evaluate(flags("MiMo-7B-Base", 1, 0.97, 16384, []), gpus=1, gpu_mem_gib=24)
    with_draft = evaluate(flags("MiMo-7B-Base", 1, 0.97, 16384, MTP), gpus=1, gpu_mem_gib=24)
    assert with_draft.kv_tokens < without.kv_tokens


def test_eagle_without_a_draft_model_is_refused_by_both(tmp_path: Path) -> None:
    eagle = ["--speculative-config", '{"method":"eagle","num_speculative_tokens":3}']
    argv = flags("MiMo-7B-Base", 1, 0.9, 8192, eagle)
    truth = evaluate(argv, gpus=1, gpu_mem_gib=24)
    ready, lines, _ = launch(SimNode.create(tmp_path / "node", gpus=1, gpu_mem_gib=24), argv)
    assert not truth.fits and not ready
    assert truth.error in lines, lines[-5:]
