"""What one certification boot costs against the simulated SGLang server, and what it peaks at.

    python -m scripts.bench_worst_case [--boots 3] [--mrr N] [--mfs 0.90] [--time-scale 0.002] [--connections]

Each boot is a real trial (launch, ready, the worst case, teardown) of Llama-3.1-8B at
131072 tokens, mem_fraction_static 0.90, on one simulated 48 GiB GPU; without `--mrr` the
server sizes its running batch itself (SGLang's default: 2048 requests there), which is
the load that made certification expensive. `--connections`: the simulator takes the worst
case as one connection per request (what a real engine gets) instead of as one description. Prints per boot: wall seconds, the worst
case's own seconds, requests, outcome and peak, so two code versions can be compared on
the same machine (`git stash` in between). Figures, not a test: nothing is asserted.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

from autotune.config import LaunchConfig
from autotune.records import GIB
from autotune.settings import Deadlines, ProbeSpec, TrialSettings
from autotune.sim.backend import SimulatedBackend
from autotune.sim.node import SimNode
from autotune.trial.run import run_trial

MODEL = Path(__file__).resolve().parents[1] / "configs" / "models" / "Meta-Llama-3.1-8B"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--boots", type=int, default=3)
    ap.add_argument("--mrr", type=int, default=0, help="max_running_requests (0: the server's default)")
    ap.add_argument("--mfs", type=float, default=0.90)
    ap.add_argument("--time-scale", type=float, default=0.002)
    ap.add_argument("--connections", action="store_true", help="one connection per request, as a real engine gets it")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-worst-") as tmp:
        node = SimNode.create(Path(tmp) / "node", gpus=1, gpu_mem_gib=48, gpu_name="NVIDIA Simulated 48G")
        env = {"AUTOTUNE_SIM_NODE": str(node.root), "AUTOTUNE_SIM_SGLANG_VERSION": "0.5.23",
               "AUTOTUNE_SIM_TIME_SCALE": str(args.time_scale)}
        if args.connections:
            env["AUTOTUNE_SIM_WORST_CASE_CONNECTIONS"] = "1"
        settings = TrialSettings(launcher=(sys.executable, "-m", "autotune.sim.sglang"), gpus=(0,), env=env,
                                 trials_dir=Path(tmp) / "trials",
                                 deadlines=Deadlines(startup_s=120, no_progress_s=30, ready_health_s=30),
                                 grace_s=2.0, release_timeout_s=10.0,
                                 probe=ProbeSpec(burst=8, burst_tokens=1024, worst_case=True))
        config = LaunchConfig(model_path=str(MODEL), mem_fraction_static=args.mfs, context_length=131072,
                              max_running_requests=args.mrr or None)
        for i in range(1, args.boots + 1):
            t0 = time.monotonic()
            r = run_trial(config, settings, SimulatedBackend(node.root))
            wall = time.monotonic() - t0
            probe = r.probe
            print(f"boot {i}: {wall:6.1f} s wall, worst case {probe.elapsed_s if probe else 0:6.1f} s, "
                  f"{probe.burst_requests if probe else 0} batch requests + 1 long, {r.outcome.value}, "
                  f"peak {max(g.peak_bytes for g in r.gpus) / GIB:.3f} GiB"
                  + (f", {probe.error[:120]}" if probe and probe.error else ""), flush=True)


if __name__ == "__main__":
    main()
