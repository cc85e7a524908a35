"""Slots on one box, measured: the same run on a simulated 8 x 80 GiB node with `parallel: 1`
and with `parallel: 4` (a TP 2 model: 4 slots of 2 GPUs), real simulated servers and real
Optuna studies. The scenarios are tools/bench/scenarios.py's, moved to TP 2 on that node (those where
nothing fits there are left out). A run is the search and the certification of its answer
(3 cold boots under the worst case, as `autotune run` does). Prints, per scenario and in total,
the wall time of the run (from its first ask until the answer is certified), the launches (servers
started, cancelled ones and certification's boots included), the idle share of the slots (1 − the
launches' own wall time / (slots × the run's wall time)), whether each found the exhaustive true
optimum (the scenarios' ground truth), and whether both recommend the same command with the
same certification. `--timelines DIR` keeps each run's timeline picture (the report's).

    python -m tools.bench.parallel [--scenarios a,b] [--time-scale 0.02] [--slots 4] [--bisect-one-slot]
                                   [--no-certify] [--timelines DIR]

`--bisect-one-slot` adds one slot in the frontier's older order (bisection from the lowest
candidate fraction), the one-slot default until this benchmark showed it three times the launches.
"""

from __future__ import annotations

import argparse
import dataclasses
import inspect
import json
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from autotune import spec as spec_mod
from autotune.errors import AutotuneError
from autotune.machine import prepare_backend
from autotune.report import best_launch
from autotune.search import certify as certify_mod
from autotune.search import goal as goal_mod
from autotune.search.loop import run
from tools.bench.scenarios import MODELS, ground_truth, verdict
from tools.bench.scenarios import SCENARIOS as BENCH_SCENARIOS

NODE_GPUS, NODE_GIB, TP = 8, 80, 2


def scenarios() -> dict[str, dict[str, Any]]:
    """The bench scenarios moved onto the 8 x 80 GiB node at TP 2 (their spaces otherwise as they are);
    those where nothing fits there (the exhaustive truth says so) are left out, and said."""
    out: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory(prefix="autotune-bench-par-truth-") as tmp:
        for name, sc in BENCH_SCENARIOS.items():
            moved = {**sc, "space": {**sc["space"], "tp": TP}}
            short = name.rsplit("-", 2)[0]  # the machine part of the name no longer applies
            try:
                fits, _ = ground_truth(spec_mod.load(write_spec(short, moved, Path(tmp), 1, 0.02)))
            except AutotuneError as exc:
                print(f"{short}: left out ({exc})")
                continue
            if not fits:
                print(f"{short}: left out (nothing fits at tp {TP} on {NODE_GIB} GiB GPUs)")
                continue
            out[short] = moved
    return out


def write_spec(name: str, sc: dict[str, Any], workdir: Path, slots: int, time_scale: float, label: str = "") -> Path:
    label = label or f"p{slots}"
    raw = {
        "study": f"{name}-{label}", "engine": sc.get("engine", "sglang"), "engine_version": sc["engine_version"],
        "model": str(MODELS / sc["model"]), "launcher": "simulated", "gpus": list(range(NODE_GPUS)),
        "simulated": {"gpus": NODE_GPUS, "gpu_mem_gib": NODE_GIB, "gpu_name": "H100", "time_scale": time_scale,
                      "node_dir": str(workdir / f"node-{label}")},
        "space": sc["space"], "goal": {"order": ["context_length", "kv_tokens"], "min_concurrency": 1},
        "probe": {"burst": 4, "burst_tokens": 512}, "budget": {"trials": 80, "wall_time_s": 3600},
        "strategy": "frontier", "seed": 1, "results_dir": str(workdir / "results"), "parallel": slots,
    }
    path = workdir / f"{name}-{label}.yaml"
    path.write_text(yaml.safe_dump(raw))
    return path


@dataclass(frozen=True)
class Measured:
    wall_s: float  # from the first ask to the certified answer (to the confirmed optimum with --no-certify)
    launched: int  # servers started, cancelled ones and certification's boots included
    cancelled: int
    best: Any
    stopped_because: str
    idle: float  # the share of slot time with no launch running
    command: tuple[str, ...]  # the recommended command
    certification: str  # its state and the config certified


def measure(path: Path, bisect: bool, certify: bool, timelines: Path | None) -> Measured:
    """One run; `bisect`: the frontier's older order (bisection from the lowest candidate), else its
    default (the same for one slot and for several). Runs with a `run()` that certifies alongside its
    search where it can (`certify=`), else (the code before it) certifies after it, as `autotune run` did."""
    spec = spec_mod.load(path)
    if bisect:
        spec = dataclasses.replace(spec, strategy="bisect")
    backend = prepare_backend(spec)
    alongside = "certify" in inspect.signature(run).parameters
    t0 = time.monotonic()
    summary = run(spec, backend, certify=certify) if alongside else run(spec, backend)
    cert, cert_launched = None, 0
    if certify and alongside:
        cert, cert_launched = summary.certification, summary.certify_launched
    elif certify and summary.best is not None:
        cert = certify_mod.run_certification(spec, backend, say=lambda _: None)
        cert_launched = len({b.trial_id for a in cert.attempts for b in a.boots})
    wall = time.monotonic() - t0
    launches = summary.launched_now + cert_launched
    busy = sum(json.loads(p.read_text())["wall_s"] for p in (spec.study_dir / "trials").glob("*/result.json"))
    if timelines is not None:
        keep_timeline(spec, timelines)
    answer = cert.answer if cert else None
    state = certify_mod.standing(cert)["state"] + (f" {answer.config}" if answer else "")
    command = tuple(best_launch(spec.study, spec.storage)[1]) if summary.best is not None else ()
    return Measured(wall, launches, summary.cancelled, summary.best, summary.stopped_because,
                    max(0.0, 1 - busy / (spec.parallel * wall)), command, state)


def keep_timeline(spec: Any, out: Path) -> None:
    """The run's timeline picture, as the report draws it (code without one: nothing)."""
    try:
        from autotune.report import timeline
    except ImportError:
        return
    from autotune import store
    found = timeline.bars(store.load_study(spec.study, spec.storage))
    timeline.plot(found, out / f"{spec.study}.png", f"{spec.study}: launches per slot", spec.parallel)


def same_optimum(a: Any, b: Any) -> bool:
    if a is None or b is None:
        return a is b
    return bool(goal_mod.context_of(a) == goal_mod.context_of(b) and a.kv_tokens == b.kv_tokens)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--scenarios", default="", help="comma-separated; default: every bench scenario that fits")
    ap.add_argument("--time-scale", type=float, default=0.02)
    ap.add_argument("--slots", type=int, default=4)
    ap.add_argument("--bisect-one-slot", action="store_true",
                    help="also run 1 slot in the older order (bisection from the lowest candidate)")
    ap.add_argument("--no-certify", action="store_true", help="the search alone, as this benchmark measured before")
    ap.add_argument("--timelines", type=Path, default=None, help="keep each run's timeline PNG in this folder")
    args = ap.parse_args()
    if args.timelines:
        args.timelines.mkdir(parents=True, exist_ok=True)
    table = scenarios()
    names = args.scenarios.split(",") if args.scenarios else list(table)
    # (label, slots, bisect): "1" and N take points in the same (default) order
    variants = [("1", 1, False), (str(args.slots), args.slots, False)]
    if args.bisect_one_slot:
        variants.append(("1-bisect", 1, True))
    totals = {v[0]: [0.0, 0, 0.0] for v in variants}  # wall s, launches, idle slot-seconds
    print(f"{'scenario':<20} {'slots':>8} {'wall s':>8} {'launches':>8} {'cancelled':>9} {'idle':>5}  optimum; "
          "certification")
    all_same = True
    with tempfile.TemporaryDirectory(prefix="autotune-bench-par-") as tmp:
        for i, name in enumerate(names):
            workdir = Path(tmp) / name
            workdir.mkdir()
            found: dict[str, Measured] = {}
            # rotate which goes first, so no variant always meets the machine's load first
            for label, slots, bisect in variants[i % len(variants):] + variants[:i % len(variants)]:
                path = write_spec(name, table[name], workdir, slots, args.time_scale, label=f"s{label}")
                fits, _ = ground_truth(spec_mod.load(path))
                best_truth = max(fits, key=lambda t: (t.ctx, t.kv_tokens), default=None)
                m = measure(path, bisect=bisect, certify=not args.no_certify, timelines=args.timelines)
                found[label] = m
                totals[label][0] += m.wall_s
                totals[label][1] += m.launched
                totals[label][2] += m.idle * m.wall_s * slots
                print(f"{name:<20} {label:>8} {m.wall_s:>8.1f} {m.launched:>8} {m.cancelled:>9} {m.idle:>5.0%}  "
                      f"{verdict(m.best, best_truth)}; {m.certification or '-'}", flush=True)
            one, many = found[variants[0][0]], found[variants[1][0]]
            same = all(same_optimum(one.best, found[v[0]].best) for v in variants[1:])
            same_cmd = one.command == many.command and one.certification == many.certification
            all_same &= same and same_cmd
            print(f"{name:<20} {'':>8} {args.slots} vs 1: {one.wall_s / many.wall_s:.2f}x faster, launches "
                  f"{many.launched} vs {one.launched}; same command and certification: "
                  f"{'yes' if same_cmd else 'NO'}", flush=True)
    print(f"\ntotal over {len(names)} scenarios (wall s / launches / idle share of slot time):")
    for label, slots, _ in variants:
        w, n, idle = totals[label]
        print(f"  {label:>8} slot(s): {w:8.1f} s / {n} launches / idle {idle / max(w * slots, 1e-9):.0%}")
    (w1, l1, _), (wn, ln, _) = totals["1"], totals[str(args.slots)]
    print(f"{args.slots} slots vs 1 slot: {w1 / wn:.2f}x faster, {ln / max(l1, 1):.2f}x the launches")
    if args.bisect_one_slot:
        wb, lb, _ = totals["1-bisect"]
        print(f"1 slot vs 1 slot in the older order: {wb / max(w1, 1e-9):.2f}x faster, {l1 / max(lb, 1):.2f}x the "
              f"launches; {args.slots} slots vs 1 slot in the older order: {wb / wn:.2f}x faster, {ln / max(lb, 1):.2f}x")
    print(f"same optimum, command and certification in every scenario: {'yes' if all_same else 'NO'}")


if __name__ == "__main__":
    main()
