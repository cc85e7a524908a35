"""Learning from one launch's figures: closed form, and against the simulated server.

The simulated server charges hidden costs (CUDA context, NCCL, allocator overhead, graph
memory) the estimator is never told; the test reads them back only through the log lines
a launch prints, as the tuner would on real GPUs.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest

from autotune import flagtable
from autotune.estimate import Launch, Machine, estimate_launch, learn
from autotune.modelshape import load
from autotune.records import GIB

MODELS = Path(__file__).resolve().parents[1] / "configs" / "models"
LLAMA = MODELS / "Meta-Llama-3.1-8B"


# -- closed form -------------------------------------------------------------------------------


def synthetic_figures(free: float, weights: float, cell: int, frac: float) -> dict[str, float]:
    """What SGLang 0.5.23 would log for a dense model: 2-decimal GiB, exact tokens."""
    rest = (free - weights - free * (1 - frac)) * GIB
    return {"avail_before_weights_gib": round(free, 2), "weights_gib": round(weights, 2),
            "avail_after_weights_gib": round(free - weights, 2), "kv_tokens": rest // cell,
            "kv_gib": round(rest // cell * cell / GIB, 2)}


def closed_form_tokens(free: float, weights: float, cell: int, frac: float) -> int:
    return int((free * frac - weights) * GIB // cell)


def info_limit(frac: float, learned_at: float, cell: int) -> float:
    """Tokens the 2-decimal free-memory figure cannot pin down: ±0.005 GiB x Δfraction, +2."""
    return 0.005 * abs(frac - learned_at) * GIB / cell + 2


@pytest.mark.parametrize("frac", [0.55, 0.7, 0.85, 0.93])
def test_one_launch_makes_other_fractions_closed_form_exact(frac: float) -> None:
    free, weights, cell = 78.4137, 15.2431, 131072  # hidden truth: odd context, overhead
    launch = Launch(gpu_mem_gib=80, gpus=1, tp=1, mem_fraction=0.8, context_length=8192)
    machine = learn(Machine(), synthetic_figures(free, weights, cell, 0.8), LLAMA, launch)
    predicted = estimate_launch(LLAMA, Launch(gpu_mem_gib=80, tp=1, mem_fraction=frac, context_length=8192), machine)
    truth = closed_form_tokens(free, weights, cell, frac)
    assert abs(predicted.kv_tokens - truth) <= info_limit(frac, 0.8, cell), (predicted.kv_tokens, truth)
    assert not any(a.startswith("prior: target weights") for a in predicted.assumptions)


def test_prior_alone_is_near_but_learning_is_exact() -> None:
    free, weights, cell = 78.4137, 15.2431, 131072
    launch = Launch(gpu_mem_gib=80, gpus=1, tp=1, mem_fraction=0.9, context_length=8192)
    prior = estimate_launch(LLAMA, launch)
    truth = closed_form_tokens(free, weights, cell, 0.9)
    assert abs(prior.kv_tokens - truth) / truth < 0.05  # priors: context 0.5 GiB, overhead 0.1 GiB
    machine = learn(Machine(), synthetic_figures(free, weights, cell, 0.7), LLAMA,
                    Launch(gpu_mem_gib=80, tp=1, mem_fraction=0.7, context_length=8192))
    assert abs(estimate_launch(LLAMA, launch, machine).kv_tokens - truth) <= info_limit(0.9, 0.7, cell)


def test_a_launch_that_died_at_the_pool_still_teaches_free_memory_and_weights() -> None:
    figures = {"avail_before_weights_gib": 78.41, "weights_gib": 15.24, "avail_after_weights_gib": 63.17,
               "min_mem_fraction_static": 0.195}
    launch = Launch(gpu_mem_gib=80, tp=1, mem_fraction=0.15, context_length=8192)
    machine = learn(Machine(), figures, LLAMA, launch)
    est = estimate_launch(LLAMA, Launch(gpu_mem_gib=80, tp=1, mem_fraction=0.9, context_length=8192), machine)
    truth = closed_form_tokens(78.4137, 15.2431, 131072, 0.9)
    assert abs(est.kv_tokens - truth) / truth < 0.001
    assert est.free_before_weights_gib == pytest.approx(78.41)


def test_several_launches_combine_and_other_tps_reuse_what_transfers() -> None:
    m = Machine()
    for frac in (0.6, 0.8):
        launch = Launch(gpu_mem_gib=80, tp=1, mem_fraction=frac, context_length=8192)
        m = learn(m, synthetic_figures(78.4137, 15.2431, 131072, frac), LLAMA, launch)
    assert len(m.observations) == 2
    est = estimate_launch(LLAMA, Launch(gpu_mem_gib=80, tp=1, mem_fraction=0.9, context_length=8192), m)
    assert abs(est.kv_tokens - closed_form_tokens(78.4137, 15.2431, 131072, 0.9)) <= info_limit(0.9, 0.6, 131072)
    # TP 2 has not been seen: the CUDA context is learned, NCCL and the weight split are not
    tp2 = estimate_launch(LLAMA, Launch(gpu_mem_gib=80, gpus=2, tp=2, mem_fraction=0.9, context_length=8192), m)
    assert tp2.free_before_weights_gib == pytest.approx(80 - (80 - 78.41) - 0.5)
    assert tp2.weights_gib_per_gpu == pytest.approx(15.24 / 2, rel=0.01)
    assert any("NCCL" in a for a in tp2.assumptions)


def test_kv_bytes_that_disagree_with_the_rules_are_learned() -> None:
    # a pool that logs 25 % more bytes per token than the rules say (an unknown layout)
    cell = 163840
    figs = synthetic_figures(78.4137, 15.2431, cell, 0.8)
    launch = Launch(gpu_mem_gib=80, tp=1, mem_fraction=0.8, context_length=8192)
    m = learn(Machine(), figs, LLAMA, launch)
    est = estimate_launch(LLAMA, Launch(gpu_mem_gib=80, tp=1, mem_fraction=0.9, context_length=8192), m)
    assert est.kv_bytes_per_token == cell
    assert abs(est.kv_tokens - closed_form_tokens(78.4137, 15.2431, cell, 0.9)) <= info_limit(0.9, 0.8, cell)


def test_vllm_budget_identity_is_learned_from_available_kv_memory() -> None:
    qwen = MODELS / "Qwen3-8B"
    capacity, weights, other, cell = 79.19, 15.29, 2.71, 147456  # other: activation + non-torch + graphs

    def figs(util: float) -> dict[str, float]:
        avail = math.ceil(capacity * GIB * util) / GIB - weights - other
        return {"weights_gib": weights, "kv_avail_gib": round(avail, 2), "gpu_memory_utilization": util,
                "kv_tokens": int(avail * GIB // (16 * cell)) * 16}

    launch = Launch(gpu_mem_gib=capacity, tp=1, engine="vllm", engine_version="0.33", mem_fraction=0.9,
                    context_length=16384)
    m = learn(Machine(), figs(0.9), qwen, launch)
    for util in (0.8, 0.95):
        est = estimate_launch(qwen, Launch(gpu_mem_gib=capacity, tp=1, engine="vllm", engine_version="0.33",
                                           mem_fraction=util, context_length=16384), m)
        assert abs(est.kv_tokens - figs(util)["kv_tokens"]) / figs(util)["kv_tokens"] < 0.001


# -- against the simulated server (hidden costs) -------------------------------------------


def simulate(argv: list[str], gpu_mem_gib: float, version: str) -> tuple[list[str], int]:
    """Log lines and true KV tokens of one simulated SGLang start-up (0 when it failed)."""
    from autotune.sim.sglang_args import resolve
    from autotune.sim.sglang_engine import SchedulerFailure, SglangEngine
    from autotune.sim.truth import VirtualIO

    ns = flagtable.parse("sglang", version, argv)
    shape = load(Path(ns.model_path))
    total = int(gpu_mem_gib * GIB)
    args = resolve(ns, version, shape, total // (1 << 20), {})
    io = VirtualIO([total] * args.tp)
    engine = SglangEngine(shape, args, io)
    try:
        engine.start()
    except SchedulerFailure:
        return io.lines, 0
    return io.lines, engine.state.kv_tokens


def log_figures(lines: list[str]) -> dict[str, float]:
    """The figures the project's own log classifier reads from these lines."""
    from autotune.engines.classify import classify_text

    return dict(classify_text("\n".join(lines), "sglang").figures)


SCENARIOS = [
    # model, GiB per GPU, TP, version, speculative, context
    ("Qwen3-8B", 80.0, 1, "0.5.23", False, 32768),
    ("Meta-Llama-3.1-70B", 80.0, 4, "0.5.23", False, 65536),
    ("Qwen3.6-27B", 48.0, 2, "0.5.23", False, 32768),
    ("Qwen3.6-27B", 48.0, 2, "0.5.23", True, 32768),
    ("Qwen3.6-27B", 48.0, 2, "0.5.9", False, 32768),
    ("DeepSeek-V3", 141.0, 8, "0.5.23", True, 16384),
    ("DeepSeek-V3", 141.0, 8, "0.5.9", True, 16384),
    ("gpt-oss-20b", 24.0, 1, "0.5.23", False, 8192),
]


@pytest.mark.parametrize(("model", "gib", "tp", "version", "spec", "context"), SCENARIOS)
def test_after_one_simulated_launch_other_fractions_are_within_one_percent(
        model: str, gib: float, tp: int, version: str, spec: bool, context: int) -> None:
    path = str(MODELS / model)
    base = ["--model-path", path, "--tp-size", str(tp), "--context-length", str(context)]
    base += ["--speculative-algorithm", "NEXTN"] if spec else []
    lines, _ = simulate(base + ["--mem-fraction-static", "0.8"], gib, version)
    common: dict[str, Any] = {"gpu_mem_gib": gib, "gpus": tp, "tp": tp, "engine_version": version, "speculative": spec,
              "context_length": context}
    machine = learn(Machine(), log_figures(lines), path, Launch(mem_fraction=0.8, **common))
    worst = 0.0
    for frac in (0.7, 0.75, 0.85, 0.9):
        _, truth = simulate(base + ["--mem-fraction-static", str(frac)], gib, version)
        est = estimate_launch(path, Launch(mem_fraction=frac, **common), machine)
        if truth == 0:
            assert not est.fits or est.kv_tokens == 0
            continue
        worst = max(worst, abs(est.kv_tokens - truth) / truth)
    assert worst < 0.01, worst
