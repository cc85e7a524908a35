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

    python -m tools.bench [--set bench|held-out|all] [--scenarios a,b] [--strategies frontier,tpe,random,grid]
                          [--budget N]
"""

from __future__ import annotations

import argparse
import math
import tempfile
import time
from pathlib import Path
from typing import Any

from autotune import spec as spec_mod
from autotune.machine import prepare_backend
from autotune.records import TrialResult
from autotune.search import goal as goal_mod
from autotune.search.loop import run
from autotune.search.model import EstimatorPredictor
from tools.bench.scenarios import COMBOS, SETS, Truth, combo_of, ground_truth, verdict, write_spec


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
