"""Benchmark the search strategies on simulated scenarios whose true optimum is known.

For each scenario the true optimum is computed by exhaustive evaluation of the simulator's
ground truth (`autotune.sim.ground_truth`, per engine: the simulated SGLang's or vLLM's
procedure as arithmetic, plus the probe), without launching. Then each strategy runs for real — real simulated servers,
real Optuna studies — and the table shows whether it found the optimum (and how far it
was), the launches it used and the simulated GPU-seconds those launches cost, and, per feature
combination (speculative, torch.compile, KV dtype: one frontier each), the launches it took and
how far the search's first launch at the combination's optimum context was from the true largest
fraction there, in fraction steps (`first-prediction error`: + above the truth, - below; the
frontier launches the largest fraction its estimator predicts to fit first, so this is the
prediction's miss as launched).

    python scripts/bench.py [--set bench|held-out|all] [--scenarios a,b] [--strategies frontier,tpe,random,grid]
                            [--budget N]
"""

from __future__ import annotations

import argparse
import itertools
import math
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from autotune import spec as spec_mod  # noqa: E402
from autotune.engines import get_engine  # noqa: E402
from autotune.machine import prepare_backend  # noqa: E402
from autotune.records import TrialResult  # noqa: E402
from autotune.search import goal as goal_mod  # noqa: E402
from autotune.search.loop import run  # noqa: E402
from autotune.search.model import EstimatorPredictor  # noqa: E402
from autotune.sim import ground_truth as truth_mod  # noqa: E402

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


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--set", default="bench", choices=list(SETS),
                    help="bench: the scenarios the search was developed on; held-out: ones it never saw; all: both")
    ap.add_argument("--scenarios", default="", help="comma-separated names (default: the whole --set)")
    ap.add_argument("--strategies", default="frontier,tpe,random,grid")
    ap.add_argument("--budget", type=int, default=40)
    args = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory(prefix="autotune-bench-") as tmp:
        table = SETS["all"]
        for name in args.scenarios.split(",") if args.scenarios else list(SETS[args.set]):
            sc = table[name]
            workdir = Path(tmp) / name
            workdir.mkdir()
            base = spec_mod.load(write_spec(name, sc, workdir, "frontier", args.budget))
            t0 = time.monotonic()
            fits, total = ground_truth(base)
            best = max(fits, key=lambda t: (t.ctx, t.kv_tokens), default=None)
            print(f"\n== {name}: {total} points, {len(fits)} fit; true optimum: "
                  f"{best.point if best else None} -> ctx {best.ctx if best else '-'}, "
                  f"KV {best.kv_tokens if best else '-'}  (exhaustive truth in {time.monotonic() - t0:.1f} s)")
            combos = sorted(COMBOS[base.study])
            for strategy in args.strategies.split(","):
                spec = spec_mod.load(write_spec(name, sc, workdir, strategy, args.budget))
                t1 = time.monotonic()
                summary = run(spec, prepare_backend(spec))
                launches = sum(r.launched for r in summary.results)
                gpu_s = sum(r.gpu_s for r in summary.results)
                first = _first_hit(summary.results, best)
                per_combo = {c: sum(r.launched for r in summary.results if combo_of(r.config) == c) for c in combos}
                errors = _first_errors(summary.results, fits, combos, _step(spec))
                learned = _learned_errors(spec, summary.results, fits, combos, _step(spec))
                at_best = _combos_at_best(summary.results, fits, combos)
                row = (name, strategy, verdict(summary.best, best), launches, first, gpu_s,
                       math.log2(total), time.monotonic() - t1, summary.stopped_because, per_combo, errors, at_best, learned)
                rows.append(row)
                print(f"  {strategy:<9} optimum found: {row[2]:<40} launches {launches:>3} (first hit at "
                      f"{first or '-'}), {launches / len(combos):.1f} per combination ({_per(per_combo)}), "
                      f"first-prediction error {_errs(errors)}, after one launch {_errs(learned)}, combinations at their true best {_at(at_best)}, GPU-s {gpu_s:8.0f}, log2(space) {row[6]:.1f}, "
                      f"wall {row[7]:.0f} s; {summary.stopped_because}")
    print("\n| scenario | strategy | optimum found | combinations at their true best | launches | combinations | "
          "launches per combination | first-prediction error, steps | after one launch | first hit | simulated GPU-s | "
          "log2(space) | wall s |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r[0]} | {r[1]} | {r[2]} | {_at(r[11])} | {r[3]} | {len(r[9])} | {r[3] / len(r[9]):.1f} "
              f"({_per(r[9])}) | {_errs(r[10])} | {_errs(r[12])} | {r[4] or '-'} | {r[5]:.0f} | {r[6]:.1f} | {r[7]:.0f} |")
    print("\n| strategy | optimum found | combinations at their true best | launches | combinations | "
          "launches per combination | combinations in <= 3 launches | first prediction within 1 step | "
          "after one launch: exact |")
    print("|---|---|---|---|---|---|---|---|---|")
    for strategy in args.strategies.split(","):
        mine = [r for r in rows if r[1] == strategy]
        n_combos = sum(len(r[9]) for r in mine)
        errs = [e for r in mine for e in r[10].values() if e is not None]
        after = [e for r in mine for e in r[12].values() if e is not None]
        print(f"| {strategy} | {sum(r[2].startswith('yes') for r in mine)}/{len(mine)} | "
              f"{sum(sum(r[11].values()) for r in mine)}/{sum(len(r[11]) for r in mine)} | {sum(r[3] for r in mine)} | "
              f"{n_combos} | {sum(r[3] for r in mine) / max(n_combos, 1):.2f} | "
              f"{sum(v <= 3 for r in mine for v in r[9].values())}/{n_combos} | "
              f"{sum(abs(e) <= 1 for e in errs)}/{len(errs)} (exact {sum(e == 0 for e in errs)}) | "
              f"{sum(e == 0 for e in after)}/{len(after)} |")


def _step(spec: spec_mod.Spec) -> float:
    values = sorted(float(v) for v in spec.searched().get("mem_fraction_static", []) if v is not None)
    return min((b - a for a, b in zip(values, values[1:], strict=False)), default=0.01)


def _first_errors(results: list[TrialResult], fits: list[Truth], combos: list[str],
                  step: float) -> dict[str, int | None]:
    """Per feature combination: the first launch at the context of the combination's true optimum,
    its fraction minus the truth's largest fitting fraction for that launch's group and context,
    in fraction steps (None: nothing fits in the combination, or no launch at that context)."""
    out: dict[str, int | None] = {}
    for combo in combos:
        mine = [t for t in fits if _truth_combo(t) == combo]
        top = max(mine, key=lambda t: (t.ctx, t.kv_tokens), default=None)
        out[combo] = None
        if top is None:
            continue
        first = next((r for r in results if r.launched and combo_of(r.config) == combo
                      and goal_mod.context_of(r) == top.ctx and r.config.mem_fraction_static is not None), None)
        if first is None:
            continue
        group = _group(first.config)
        at = [float(t.point["mem_fraction_static"]) for t in mine if t.ctx == top.ctx and _group_of_point(t) == group]
        if at:
            out[combo] = round((float(first.config.mem_fraction_static or 0) - max(at)) / step)
    return out


def _learned_errors(spec: spec_mod.Spec, results: list[TrialResult], fits: list[Truth], combos: list[str],
                    step: float) -> dict[str, int | None]:
    """Per feature combination: after its first launch at the context of its true optimum, the
    estimator's largest fraction there (taught by every launch up to that one, on the space's grid)
    minus the truth's, in fraction steps (None as in `_first_errors`). The slack side learned from
    measurement: the first prediction of a combination is mostly the priors'; this one is not."""
    assert spec.shape is not None and spec.simulated is not None
    launched = [r for r in results if r.launched]
    grid = sorted(float(v) for v in spec.searched().get("mem_fraction_static", []) if v is not None)
    out: dict[str, int | None] = {}
    for combo in combos:
        mine = [t for t in fits if _truth_combo(t) == combo]
        top = max(mine, key=lambda t: (t.ctx, t.kv_tokens), default=None)
        out[combo] = None
        at_top = [i for i, r in enumerate(launched) if combo_of(r.config) == combo
                  and goal_mod.context_of(r) == (top.ctx if top else None) and r.config.mem_fraction_static is not None]
        if top is None or not at_top or not grid:
            continue
        first = launched[at_top[0]]
        truth = [float(t.point["mem_fraction_static"]) for t in mine
                 if t.ctx == top.ctx and _group_of_point(t) == _group(first.config)]
        predictor = EstimatorPredictor(spec.shape, engine=spec.engine, engine_version=spec.engine_version,
                                       gpu_mem_gib=spec.simulated.gpu_mem_gib, gpus=len(spec.gpus),
                                       concurrency=spec.goal.min_concurrency, config_of=spec.config,
                                       results=launched[:at_top[0] + 1])
        limit = predictor.max_fraction({name: getattr(first.config, name) for name in spec.searched()})
        below = [v for v in grid if limit is not None and v <= limit + 1e-9]
        if truth and below:
            out[combo] = round((below[-1] - max(truth)) / step)
    return out


def _truth_combo(t: Truth) -> str:
    return combo_of(t.config)


def _group(config: Any) -> tuple[Any, ...]:
    d = config.to_dict()
    return tuple(sorted((k, str(v)) for k, v in d.items() if k not in ("mem_fraction_static", "context_length")))


def _group_of_point(t: Truth) -> tuple[Any, ...]:
    return _group(t.config)


def _combos_at_best(results: list[TrialResult], fits: list[Truth], combos: list[str]) -> dict[str, bool]:
    """Per feature combination with anything fitting: whether the search's best fit in it has the
    truth's best context and KV tokens there (the frontier answers every combination)."""
    out = {}
    for combo in combos:
        top = max((t for t in fits if _truth_combo(t) == combo), key=lambda t: (t.ctx, t.kv_tokens), default=None)
        if top is None:
            continue
        found = [r for r in results if r.outcome.fits and combo_of(r.config) == combo]
        out[combo] = any(goal_mod.context_of(r) == top.ctx and (r.kv_tokens or 0) >= top.kv_tokens * 0.999
                         for r in found)
    return out


def _at(at_best: dict[str, bool]) -> str:
    missed = [c for c, ok in at_best.items() if not ok]
    return f"{sum(at_best.values())}/{len(at_best)}" + (f" (missed: {', '.join(missed)})" if missed else "")


def _per(per_combo: dict[str, int]) -> str:
    return ", ".join(f"{c} {n}" for c, n in per_combo.items())


def _errs(errors: dict[str, int | None]) -> str:
    return ", ".join(f"{c} {'-' if e is None else f'{e:+d}'}" for c, e in errors.items())


def _first_hit(results: list[TrialResult], best: Truth | None) -> int | None:
    """The launch number at which a strategy first launched the optimum."""
    if best is None:
        return None
    n = 0
    for r in results:
        n += r.launched
        if r.outcome.fits and goal_mod.context_of(r) == best.ctx and (r.kv_tokens or 0) >= best.kv_tokens * 0.999:
            return n
    return None


if __name__ == "__main__":
    main()
