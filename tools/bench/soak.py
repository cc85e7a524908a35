"""Soak: many trials on the simulated node with injected faults, in one run.

Faults (crashes at random phases, hangs, leaked children, ignored SIGTERM, slow memory
release, silent servers, invalid UTF-8...) are injected into a share of the trials. After
the run: zero stray processes, zero simulated memory held, every trial accounted for, and
the tuner's own RSS and open files printed at start, middle and end (they must stay flat).

    python -m tools.bench.soak [--trials 300] [--fault-rate 0.35]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import optuna
import psutil
import yaml

from autotune import spec as spec_mod
from autotune import store
from autotune.machine import prepare_backend
from autotune.records import TrialResult
from autotune.search.loop import Progress, run
from autotune.trial.supervisor import TRIAL_ENV
from tools import REPO


@dataclass
class Samples(Progress):
    """Records the tuner's RSS and open files as trials finish."""

    marks: set[int]
    rows: list[tuple[int, float, int]] = field(default_factory=list)

    def sample(self, n: int) -> None:
        me = psutil.Process()
        self.rows.append((n, me.memory_info().rss / 2**20, me.num_fds()))

    def trial_finished(self, result: TrialResult, best: TrialResult | None, done: int, budget: int,
                       note: str = "") -> None:
        if done in self.marks:
            self.sample(done)


@dataclass
class SoakReport:
    trials: int
    outcomes: Counter[str]
    injected: int
    stray_processes: list[int]
    held_bytes: int
    unaccounted: list[int]
    samples: list[tuple[int, float, int]]
    wall_s: float
    stopped_because: str


def soak(trials: int, workdir: Path, fault_rate: float = 0.35, seed: int = 7) -> SoakReport:
    raw = {
        "study": "soak", "engine_version": "0.5.23", "model": str(REPO / "configs/models/Meta-Llama-3.1-8B"),
        "launcher": "simulated", "seed": seed,
        "simulated": {"gpus": 1, "gpu_mem_gib": 24, "time_scale": 0.0002, "fault_rate": fault_rate,
                      "min_deadline_s": 1.5},
        "space": {"tp": 1, "mem_fraction_static": {"min": 0.60, "max": 0.96, "step": 0.02},
                  "context_length": [4096, 8192, 16384, 32768]},
        "probe": {"burst": 2, "burst_tokens": 128, "max_new_tokens": 4},
        "budget": {"trials": trials, "wall_time_s": 3600}, "strategy": "random", "results_dir": str(workdir),
        "release_timeout_s": 100, "stop_grace_s": 20,
    }
    path = workdir / "soak.yaml"
    path.write_text(yaml.safe_dump(raw))
    spec = spec_mod.load(path)
    backend = prepare_backend(spec)
    progress = Samples(marks={1, max(1, trials // 2), trials})
    progress.sample(0)
    t0 = time.monotonic()
    summary = run(spec, backend, progress=progress)
    wall = time.monotonic() - t0
    study = store.load_study(spec.study, spec.storage)
    all_trials = study.get_trials(deepcopy=False)
    unaccounted = [t.number for t in all_trials
                   if not (t.state == optuna.trial.TrialState.COMPLETE and "result" in t.user_attrs)
                   and not t.user_attrs.get("interrupted")]
    stray = [p.pid for p in psutil.process_iter() if _tagged(p, f"{spec.study}-")]
    return SoakReport(len(all_trials), Counter(t.user_attrs.get("outcome", "?") for t in all_trials),
                      sum(1 for t in all_trials if t.user_attrs.get("injected_env")), stray,
                      sum(g.used_bytes for g in backend.snapshot()), unaccounted, progress.rows, wall,
                      summary.stopped_because)


def _tagged(proc: psutil.Process, prefix: str) -> bool:
    """A process carrying one of this run's trial tags (the study's trial ids share a prefix)."""
    try:
        return proc.environ().get(TRIAL_ENV, "").startswith(prefix) and proc.pid != psutil.Process().pid
    except psutil.Error:
        return False


def print_report(r: SoakReport) -> None:
    print(f"trials {r.trials} in {r.wall_s:.0f} s ({r.injected} with an injected fault); stopped: {r.stopped_because}")
    print("outcomes: " + ", ".join(f"{k} {v}" for k, v in sorted(r.outcomes.items())))
    print(f"stray processes: {len(r.stray_processes)} {r.stray_processes}")
    print(f"simulated memory held: {r.held_bytes} bytes")
    print(f"trials not accounted for: {r.unaccounted}")
    print("tuner RSS / open files:")
    for n, rss, fds in r.samples:
        print(f"  after {n:>4} trials: RSS {rss:7.1f} MiB, open files {fds}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--trials", type=int, default=300)
    ap.add_argument("--fault-rate", type=float, default=0.35)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="autotune-soak-") as tmp:
        report = soak(args.trials, Path(tmp), args.fault_rate)
    print_report(report)
    ok = not report.stray_processes and not report.held_bytes and not report.unaccounted
    sys.exit(0 if ok and report.trials == args.trials else 1)


if __name__ == "__main__":
    main()
