"""Slots on one box, measured: the same search on a simulated 8 x 80 GiB node with `parallel: 1`
and with `parallel: 4` (a TP 2 model: 4 slots of 2 GPUs), real simulated servers and real
Optuna studies. The scenarios are scripts/bench.py's, moved to TP 2 on that node (those where
nothing fits there are left out). Prints, per scenario and in total, the wall time of the
run (from its first ask until the frontier has confirmed the optimum), the launches (servers
started, cancelled ones included), and whether each found the exhaustive true optimum
(scripts/bench.py's ground truth) and both the same one.

    python scripts/bench_parallel.py [--scenarios a,b] [--time-scale 0.02] [--slots 4] [--bisect-one-slot]

`--bisect-one-slot` adds one slot in the frontier's older order (bisection from the lowest
candidate fraction), the one-slot default until this benchmark showed it three times the launches.
"""

from __future__ import annotations

import argparse
import functools
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from autotune import spec as spec_mod  # noqa: E402
from autotune.errors import AutotuneError  # noqa: E402
from autotune.machine import prepare_backend  # noqa: E402
from autotune.search import goal as goal_mod  # noqa: E402
from autotune.search import loop  # noqa: E402
from autotune.search.loop import run  # noqa: E402
from scripts.bench import MODELS, ground_truth, verdict  # noqa: E402
from scripts.bench import SCENARIOS as BENCH_SCENARIOS  # noqa: E402

NODE_GPUS, NODE_GIB, TP = 8, 80, 2


def scenarios() -> dict[str, dict[str, Any]]:
    """bench.py's scenarios moved onto the 8 x 80 GiB node at TP 2 (their spaces otherwise as they are);
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
    wall_s: float  # run() alone: from the first ask to the confirmed optimum (the frontier converged)
    launched: int  # servers started, cancelled ones included
    cancelled: int
    best: Any
    stopped_because: str


def measure(path: Path, bisect: bool) -> Measured:
    """One run; `bisect`: the frontier's older order (bisection from the lowest candidate), else its
    default (the same for one slot and for several)."""
    spec = spec_mod.load(path)
    backend = prepare_backend(spec)
    t0 = time.monotonic()
    with patched_strategy(bisect=bisect):
        summary = run(spec, backend)
    return Measured(time.monotonic() - t0, summary.launched_now, summary.cancelled, summary.best,
                    summary.stopped_because)


@contextmanager
def patched_strategy(**kw: Any) -> Iterator[None]:
    """The search loop's strategy factory with extra keyword arguments, for one run."""
    original = loop.make_strategy
    loop.make_strategy = functools.partial(original, **kw)  # type: ignore[assignment]
    try:
        yield
    finally:
        loop.make_strategy = original  # type: ignore[assignment]


def same_optimum(a: Any, b: Any) -> bool:
    if a is None or b is None:
        return a is b
    return bool(goal_mod.context_of(a) == goal_mod.context_of(b) and a.kv_tokens == b.kv_tokens)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--scenarios", default="", help="comma-separated; default: every bench.py scenario that fits")
    ap.add_argument("--time-scale", type=float, default=0.02)
    ap.add_argument("--slots", type=int, default=4)
    ap.add_argument("--bisect-one-slot", action="store_true",
                    help="also run 1 slot in the older order (bisection from the lowest candidate)")
    args = ap.parse_args()
    table = scenarios()
    names = args.scenarios.split(",") if args.scenarios else list(table)
    # (label, slots, bisect): "1" and N take points in the same (default) order
    variants = [("1", 1, False), (str(args.slots), args.slots, False)]
    if args.bisect_one_slot:
        variants.append(("1-bisect", 1, True))
    totals = {v[0]: [0.0, 0] for v in variants}
    print(f"{'scenario':<20} {'slots':>8} {'wall s':>8} {'launches':>8} {'cancelled':>9}  optimum")
    all_same = True
    with tempfile.TemporaryDirectory(prefix="autotune-bench-par-") as tmp:
        for i, name in enumerate(names):
            workdir = Path(tmp) / name
            workdir.mkdir()
            found = {}
            # rotate which goes first, so no variant always meets the machine's load first
            for label, slots, bisect in variants[i % len(variants):] + variants[:i % len(variants)]:
                path = write_spec(name, table[name], workdir, slots, args.time_scale, label=f"s{label}")
                fits, _ = ground_truth(spec_mod.load(path))
                best_truth = max(fits, key=lambda t: (t.ctx, t.kv_tokens), default=None)
                m = measure(path, bisect=bisect)
                found[label] = m.best
                totals[label][0] += m.wall_s
                totals[label][1] += m.launched
                print(f"{name:<20} {label:>8} {m.wall_s:>8.1f} {m.launched:>8} {m.cancelled:>9}  "
                      f"{verdict(m.best, best_truth)}; {m.stopped_because}", flush=True)
            all_same &= all(same_optimum(found[variants[0][0]], found[v[0]]) for v in variants[1:])
    print(f"\ntotal over {len(names)} scenarios (wall s / launches):")
    for label, _, _ in variants:
        print(f"  {label:>8} slot(s): {totals[label][0]:8.1f} s / {totals[label][1]} launches")
    (w1, l1), (wn, ln) = totals["1"], totals[str(args.slots)]
    print(f"{args.slots} slots vs 1 slot: {w1 / wn:.2f}x faster, {ln / max(l1, 1):.2f}x the launches")
    if args.bisect_one_slot:
        wb, lb = totals["1-bisect"]
        print(f"1 slot vs 1 slot in the older order: {wb / max(w1, 1e-9):.2f}x faster, {l1 / max(lb, 1):.2f}x the "
              f"launches; {args.slots} slots vs 1 slot in the older order: {wb / wn:.2f}x faster, {ln / max(lb, 1):.2f}x")
    print(f"same optimum in every scenario: {'yes' if all_same else 'NO'}")


if __name__ == "__main__":
    main()
