"""Slots on one box, measured: the same search on a simulated 8 x 80 GiB node with `parallel: 1`
and with `parallel: 4` (a TP 2 model: 4 slots of 2 GPUs), real simulated servers and real
Optuna studies. Prints, per scenario and in total, the wall time to the confirmed optimum, the
launches, and whether both found the exhaustive true optimum (scripts/bench.py's ground truth).

    python scripts/bench_parallel.py [--scenarios a,b] [--time-scale 0.02] [--slots 4]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from autotune import spec as spec_mod  # noqa: E402
from autotune.machine import prepare_backend  # noqa: E402
from autotune.search.loop import run  # noqa: E402
from scripts.bench import MFS, MODELS, ground_truth, verdict  # noqa: E402

# TP 2 scenarios that fit 80 GiB GPUs (bench.py's models and spaces, on the 8-GPU node)
SCENARIOS: dict[str, dict[str, Any]] = {
    "moe-qwen3-30b": {"model": "Qwen3-30B-A3B", "engine_version": "0.5.23",
                      "space": {"tp": 2, "mem_fraction_static": MFS,
                                "context_length": [4096, 8192, 16384, 32768, 40960],
                                "max_running_requests": [16, 64]}},
    "hybrid-mtp-qwen36": {"model": "Qwen3.6-27B", "engine_version": "0.5.9",
                          "space": {"tp": 2, "mem_fraction_static": MFS,
                                    "context_length": [16384, 32768, 65536, 131072, 262144],
                                    "speculative": [False, True], "speculative_num_steps": 3,
                                    "speculative_eagle_topk": 1, "speculative_num_draft_tokens": 4,
                                    "torch_compile": [False, True]}},
    "dense-qwen3-32b": {"model": "Qwen3-32B", "engine_version": "0.5.23",
                        "space": {"tp": 2, "mem_fraction_static": MFS, "context_length": [8192, 16384, 32768, 40960],
                                  "kv_cache_dtype": ["fp8_e4m3", "auto"]}},
    "dense-llama8b": {"model": "Meta-Llama-3.1-8B", "engine_version": "0.5.23",
                      "space": {"tp": 2, "mem_fraction_static": MFS,
                                "context_length": [8192, 16384, 32768, 65536, 131072],
                                "torch_compile": [False, True]}},
}


def write_spec(name: str, sc: dict[str, Any], workdir: Path, slots: int, time_scale: float) -> Path:
    raw = {
        "study": f"{name}-p{slots}", "engine": "sglang", "engine_version": sc["engine_version"],
        "model": str(MODELS / sc["model"]), "launcher": "simulated", "gpus": list(range(8)),
        "simulated": {"gpus": 8, "gpu_mem_gib": 80, "gpu_name": "H100", "time_scale": time_scale,
                      "node_dir": str(workdir / f"node-p{slots}")},
        "space": sc["space"], "goal": {"order": ["context_length", "kv_tokens"], "min_concurrency": 1},
        "probe": {"burst": 4, "burst_tokens": 512}, "budget": {"trials": 80, "wall_time_s": 3600},
        "strategy": "frontier", "seed": 1, "results_dir": str(workdir / "results"), "parallel": slots,
    }
    path = workdir / f"{name}-p{slots}.yaml"
    path.write_text(yaml.safe_dump(raw))
    return path


def measure(path: Path) -> tuple[float, int, Any]:
    spec = spec_mod.load(path)
    backend = prepare_backend(spec)
    t0 = time.monotonic()
    summary = run(spec, backend)
    return time.monotonic() - t0, summary.launched_now, summary.best


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--scenarios", default=",".join(SCENARIOS))
    ap.add_argument("--time-scale", type=float, default=0.02)
    ap.add_argument("--slots", type=int, default=4)
    args = ap.parse_args()
    totals = {1: [0.0, 0], args.slots: [0.0, 0]}
    print(f"{'scenario':<20} {'slots':>5} {'wall s':>8} {'launches':>8}  optimum")
    with tempfile.TemporaryDirectory(prefix="autotune-bench-par-") as tmp:
        for name in args.scenarios.split(","):
            workdir = Path(tmp) / name
            workdir.mkdir()
            for slots in (1, args.slots):
                path = write_spec(name, SCENARIOS[name], workdir, slots, args.time_scale)
                fits, _ = ground_truth(spec_mod.load(path))
                best_truth = max(fits, key=lambda t: (t.ctx, t.kv_tokens), default=None)
                wall, launched, best = measure(path)
                totals[slots][0] += wall
                totals[slots][1] += launched
                print(f"{name:<20} {slots:>5} {wall:>8.1f} {launched:>8}  {verdict(best, best_truth)}", flush=True)
    (w1, l1), (wn, ln) = totals[1], totals[args.slots]
    print(f"\ntotal: 1 slot {w1:.1f} s / {l1} launches; {args.slots} slots {wn:.1f} s / {ln} launches: "
          f"{w1 / wn:.2f}x faster, {ln / max(l1, 1):.2f}x the launches")


if __name__ == "__main__":
    main()
