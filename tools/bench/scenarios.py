"""The bench scenarios: simulated machines and search spaces, each with its true optimum.

`SCENARIOS` are the ones the search was developed on, `HELD_OUT` ones it never saw; `ground_truth`
evaluates every point of a scenario's space with the simulator's ground truth
(`autotune.sim.ground_truth`), without launching. Read by `python -m tools.bench` and its
`.parallel` and `.predictions`.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from autotune import spec as spec_mod
from autotune.engines import get_engine
from autotune.records import TrialResult
from autotune.search import goal as goal_mod
from autotune.sim import ground_truth as truth_mod
from tools import REPO

MODELS = REPO / "configs" / "models"
MFS = {"min": 0.60, "max": 0.97, "step": 0.01}
UTIL = {"min": 0.50, "max": 0.97, "step": 0.01}  # vLLM's --gpu-memory-utilization
SCENARIOS: dict[str, dict[str, Any]] = {
    "dense-llama8b-24g-tp1": {
        "model": "Meta-Llama-3.1-8B", "engine_version": "0.5.23", "gpus": 1, "gpu_mem_gib": 24, "gpu_name": "RTX 4090",
        "space": {"tp": 1, "mem_fraction_static": MFS, "context_length": [8192, 16384, 32768, 65536, 131072],
                  "torch_compile": [False, True]}},
    "moe-qwen3-30b-48g-tp2": {
        "model": "Qwen3-30B-A3B", "engine_version": "0.5.23", "gpus": 2, "gpu_mem_gib": 48, "gpu_name": "RTX A6000",
        "space": {"tp": 2, "mem_fraction_static": MFS, "context_length": [4096, 8192, 16384, 32768, 40960],
                  "max_running_requests": [16, 64]}},
    "mla-deepseekv3-141g-tp8": {
        "model": "DeepSeek-V3", "engine_version": "0.5.23", "gpus": 8, "gpu_mem_gib": 141, "gpu_name": "H200",
        "space": {"tp": 8, "mem_fraction_static": MFS, "context_length": [16384, 32768, 65536, 131072, 163840],
                  "speculative": [False, True], "speculative_num_draft_tokens": 4}},
    "hybrid-mtp-qwen36-48g-tp2": {
        "model": "Qwen3.6-27B", "engine_version": "0.5.9", "gpus": 2, "gpu_mem_gib": 48, "gpu_name": "RTX A6000",
        "space": {"tp": 2, "mem_fraction_static": MFS, "context_length": [16384, 32768, 65536, 131072, 262144],
                  "speculative": [False, True], "speculative_num_steps": 3, "speculative_eagle_topk": 1,
                  "speculative_num_draft_tokens": 4, "torch_compile": [False, True],
                  "max_running_requests": [8, 48]}},
    "dense-qwen3-32b-80g-tp1": {
        "model": "Qwen3-32B", "engine_version": "0.5.23", "gpus": 1, "gpu_mem_gib": 80, "gpu_name": "H100",
        "space": {"tp": 1, "mem_fraction_static": MFS, "context_length": [8192, 16384, 32768, 40960],
                  "kv_cache_dtype": ["fp8_e4m3", "auto"]}},
    "dense-llama70b-80g-tp4": {
        "model": "Meta-Llama-3.1-70B", "engine_version": "0.5.9", "gpus": 4, "gpu_mem_gib": 80, "gpu_name": "H100",
        "space": {"tp": 4, "mem_fraction_static": MFS, "context_length": [16384, 32768, 65536, 131072],
                  "torch_compile": [False, True], "cuda_graph_max_bs": [64, 256]}},
    "hybrid-qwen3next-48g-tp4": {
        "model": "Qwen3-Next-80B-A3B-Thinking", "engine_version": "0.5.23", "gpus": 4, "gpu_mem_gib": 48,
        "gpu_name": "RTX A6000",
        "space": {"tp": 4, "mem_fraction_static": MFS, "context_length": [16384, 65536, 131072, 262144]}},
    # vLLM (the simulated vLLM 0.33 server): mem_fraction_static is --gpu-memory-utilization
    "vllm-dense-llama8b-24g-tp1": {
        "engine": "vllm", "model": "Meta-Llama-3.1-8B", "engine_version": "0.33.0", "gpus": 1, "gpu_mem_gib": 24,
        "gpu_name": "RTX 4090",
        "space": {"tp": 1, "mem_fraction_static": UTIL, "context_length": [8192, 16384, 32768, 65536, 131072],
                  "cuda_graph_max_bs": [64, 512]}},
    "vllm-moe-mixtral-80g-tp2": {
        "engine": "vllm", "model": "Mixtral-8x7B-v0.1", "engine_version": "0.33.0", "gpus": 2, "gpu_mem_gib": 80,
        "gpu_name": "H100",
        "space": {"tp": 2, "mem_fraction_static": UTIL, "context_length": [4096, 8192, 16384, 32768],
                  "kv_cache_dtype": ["fp8_e4m3", "auto"]}},
    # EAGLE-style drafting as vLLM runs it for MiMo: method "mtp", the model's own MTP layer as the draft
    "vllm-eagle-mtp-mimo7b-24g-tp1": {
        "engine": "vllm", "model": "MiMo-7B-Base", "engine_version": "0.33.0", "gpus": 1, "gpu_mem_gib": 24,
        "gpu_name": "RTX 4090",
        "space": {"tp": 1, "mem_fraction_static": UTIL, "context_length": [8192, 16384, 32768],
                  "speculative": [False, True], "speculative_num_draft_tokens": 4},
        "goal": {"order": ["features", "context_length", "kv_tokens"], "required_features": ["speculative"]}},
}

# Held out: models and machines no rule, prior or bench figure was written from (written down before
# their first run, at 2026-12-04; never tuned on). `--set held-out` runs them, `--set all` both sets.
HELD_OUT: dict[str, dict[str, Any]] = {
    # the MLA case: DeepSeek-R1 on 8 x 141 GiB at TP 8, SGLang 0.5.9
    "mla-deepseekr1-141g-tp8-059": {
        "model": "DeepSeek-R1", "engine_version": "0.5.9", "gpus": 8, "gpu_mem_gib": 141, "gpu_name": "H200",
        "space": {"tp": 8, "mem_fraction_static": MFS, "context_length": [16384, 32768, 65536, 131072, 163840],
                  "speculative": [False, True], "speculative_num_draft_tokens": 4}},
    "moe-mtp-glm45air-80g-tp4": {
        "model": "GLM-4.5-Air", "engine_version": "0.5.23", "gpus": 4, "gpu_mem_gib": 80, "gpu_name": "H100",
        "space": {"tp": 4, "mem_fraction_static": MFS, "context_length": [16384, 32768, 65536, 131072],
                  "speculative": [False, True], "speculative_num_draft_tokens": 4, "torch_compile": [False, True]}},
    "hybrid-nemotron3nano-80g-tp1": {
        "model": "Nemotron-3-Nano-30B-A3B-BF16", "engine_version": "0.5.23", "gpus": 1, "gpu_mem_gib": 80,
        "gpu_name": "H100",
        "space": {"tp": 1, "mem_fraction_static": MFS, "context_length": [32768, 65536, 131072, 262144],
                  "torch_compile": [False, True]}},
    "hybrid-mtp-qwen35moe-48g-tp2-059": {
        "model": "Qwen3.5-35B-A3B", "engine_version": "0.5.9", "gpus": 2, "gpu_mem_gib": 48, "gpu_name": "RTX A6000",
        "space": {"tp": 2, "mem_fraction_static": MFS, "context_length": [16384, 65536, 131072, 262144],
                  "speculative": [False, True], "speculative_num_steps": 3, "speculative_eagle_topk": 1,
                  "speculative_num_draft_tokens": 4, "kv_cache_dtype": ["fp8_e4m3", "auto"]}},
    "dense-gemma3-12b-48g-tp1": {
        "model": "gemma-3-12b-it", "engine_version": "0.5.23", "gpus": 1, "gpu_mem_gib": 48, "gpu_name": "RTX A6000",
        "space": {"tp": 1, "mem_fraction_static": MFS, "context_length": [8192, 16384, 32768, 65536, 131072],
                  "torch_compile": [False, True]}},
    "moe-gptoss20b-24g-tp1-059": {
        "model": "gpt-oss-20b", "engine_version": "0.5.9", "gpus": 1, "gpu_mem_gib": 24, "gpu_name": "RTX 4090",
        "space": {"tp": 1, "mem_fraction_static": MFS, "context_length": [8192, 16384, 32768, 65536, 131072],
                  "cuda_graph_max_bs": [64, 256]}},
}
SETS = {"bench": SCENARIOS, "held-out": HELD_OUT, "all": {**SCENARIOS, **HELD_OUT}}


def write_spec(name: str, sc: dict[str, Any], workdir: Path, strategy: str, budget: int) -> Path:
    raw = {
        "study": f"{name}-{strategy}", "engine": sc.get("engine", "sglang"), "engine_version": sc["engine_version"],
        "model": str(MODELS / sc["model"]), "launcher": "simulated",
        "simulated": {"gpus": sc["gpus"], "gpu_mem_gib": sc["gpu_mem_gib"], "gpu_name": sc["gpu_name"],
                      "time_scale": 0.0005, "node_dir": str(workdir / f"node-{strategy}")},
        "space": sc["space"], "goal": {"order": ["context_length", "kv_tokens"], "min_concurrency": 1, **sc.get("goal", {})},
        "probe": {"burst": 4, "burst_tokens": 512}, "budget": {"trials": budget, "wall_time_s": 3600},
        "strategy": strategy, "seed": 1, "results_dir": str(workdir / "results"),
    }
    path = workdir / f"{name}-{strategy}.yaml"
    path.write_text(yaml.safe_dump(raw))
    return path


COMBOS: dict[str, set[str]] = {}  # study -> the feature combinations its space holds


def combo_of(config: Any) -> str:
    return "+".join(config.features()) or "base"


@dataclass(frozen=True)
class Truth:
    point: dict[str, Any]
    ctx: int
    kv_tokens: int
    startup_s: float
    config: Any = None  # the LaunchConfig the point makes


def ground_truth(spec: spec_mod.Spec) -> tuple[list[Truth], int]:
    """Every point of the space that truly fits (start-up, KV >= context, probe) and has the
    goal's required features on."""
    assert spec.simulated is not None and spec.shape is not None
    engine = get_engine(spec.engine)
    names = list(spec.searched())
    fits, total = [], 0
    for combo in itertools.product(*(spec.searched()[n] for n in names)):
        point = dict(zip(names, combo, strict=True))
        cfg = spec.config(point)
        COMBOS.setdefault(spec.study, set()).add(combo_of(cfg))
        argv = engine.argv(cfg, version=spec.engine_version, launcher=[], host="127.0.0.1", port=30000)
        ctx = cfg.context_length or spec.shape.max_context
        long_tokens = ctx - spec.probe.max_new_tokens - 8
        truth = truth_mod.evaluate(spec.engine, argv, gpus=cfg.tp, gpu_mem_gib=spec.simulated.gpu_mem_gib,
                                   version=spec.engine_version, probe_tokens=long_tokens,
                                   max_new_tokens=spec.probe.max_new_tokens,
                                   burst_tokens=spec.probe.burst * spec.probe.burst_tokens)
        total += 1
        wanted = all(getattr(cfg, feat) for feat in spec.goal.required_features)
        if truth.fits and wanted and truth.kv_tokens >= ctx * spec.goal.min_concurrency:
            fits.append(Truth(point, ctx, truth.kv_tokens, truth.startup_s, cfg))
    return fits, total


def verdict(found: TrialResult | None, best: Truth | None) -> str:
    if best is None:
        return "yes (nothing fits)" if found is None else "found a fit the truth denies"
    if found is None:
        return "no (nothing found)"
    ctx = goal_mod.context_of(found)
    if ctx == best.ctx and (found.kv_tokens or 0) >= best.kv_tokens * 0.999:
        return "yes"
    return f"no: ctx {ctx} vs {best.ctx}, KV {found.kv_tokens} vs {best.kv_tokens} ({(found.kv_tokens or 0) / best.kv_tokens - 1:+.1%})"
