"""The NVML backend and the supervisor against a real NVIDIA GPU: one short, prepared check.

Run on a machine with an NVIDIA driver and PyTorch (CUDA); it needs nothing of autotune's but
psutil and nvidia-ml-py. Prints measured figures and a JSON summary (`--out FILE` also writes it):

1. NVML against nvidia-smi: total and used memory of every GPU, read both ways at once (idle,
   and again while the stand-in holds memory), and whether each lists compute processes.
2. A stand-in server in its own process group, tagged as a trial is: a leader and one child,
   each holding GPU memory through PyTorch (`--leader-gib`, `--child-gib`). The sampler reads
   NVML about 10 times a second, as a trial's watcher does: the peak it sees against what was
   allocated, and what `busy_reasons` says while it holds (the GPU_BUSY text a launch would see).
3. The stop a trial ends with (TERM to the group, grace, KILL, the tag sweep), then the release
   wait: how long until NVML reads the baseline again, and whether NVML still lists the pids.

Nothing is left running: the stand-in is stopped by its group and tag, never by name.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from autotune.gpu.nvidiasmi import NvidiaSmiBackend
from autotune.gpu.nvml import NvmlBackend
from autotune.records import GIB
from autotune.trial import gpumem
from autotune.trial.supervisor import Supervisor, tagged_processes

# Leader and child each take their share with PyTorch, say so, and wait. The leader reports "ready"
# once both hold it, as a server's ready line follows its allocations.
HOLDER = r"""
import os, subprocess, sys, time
import torch
gib = float(sys.argv[1])
child = None
if len(sys.argv) > 2:
    child = subprocess.Popen([sys.executable, "-c", sys.argv[3], sys.argv[2]], stdout=subprocess.PIPE, text=True)
x = torch.empty(int(gib * (1 << 30)), dtype=torch.uint8, device="cuda")
x.fill_(1)
torch.cuda.synchronize()
print(f"pid {os.getpid()} holds {gib} GiB", flush=True)
if child is not None:
    print(child.stdout.readline().strip(), flush=True)
    print("ready", flush=True)
time.sleep(3600)
"""


def compare_backends(nvml: NvmlBackend) -> list[dict[str, object]]:
    smi = NvidiaSmiBackend(["nvidia-smi"]).read()
    ours = nvml.snapshot()
    rows = []
    for a, b in zip(ours, smi, strict=True):
        rows.append({"index": a.index, "name": a.name, "nvml_total_gib": round(a.total_bytes / GIB, 3),
                     "smi_total_gib": round(b.total_bytes / GIB, 3), "nvml_used_gib": round(a.used_bytes / GIB, 3),
                     "smi_used_gib": round(b.used_bytes / GIB, 3), "nvml_processes": len(a.processes),
                     "smi_processes": len(b.processes)})
    return rows


def sample(nvml: NvmlBackend, trace: gpumem.MemoryTrace, stop: threading.Event, t0: float) -> None:
    while not stop.wait(0.1):
        trace.add(time.monotonic() - t0, nvml.snapshot())


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gpu", type=int, default=0)
    ap.add_argument("--leader-gib", type=float, default=8.0)
    ap.add_argument("--child-gib", type=float, default=16.0)
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    nvml = NvmlBackend()
    out: dict[str, object] = {"backends": compare_backends(nvml)}
    print("NVML vs nvidia-smi:", json.dumps(out["backends"], indent=1))
    out["busy_before"] = gpumem.busy_reasons(nvml, [args.gpu])
    base = gpumem.start_trace(nvml, [args.gpu]).base
    tagged: list[int] = []
    trial_id = f"device-check-{os.getpid()}"
    work = Path(tempfile.mkdtemp(prefix="autotune-device-"))
    argv = [sys.executable, "-c", HOLDER, str(args.leader_gib), str(args.child_gib), HOLDER]
    sup = Supervisor(argv, trial_id=trial_id, log_path=work / "server.log",
                     env={**os.environ, "CUDA_VISIBLE_DEVICES": str(args.gpu), "CUDA_DEVICE_ORDER": "PCI_BUS_ID"})
    trace = gpumem.start_trace(nvml, [args.gpu])
    stop_sampling = threading.Event()
    t0 = time.monotonic()
    sampler = threading.Thread(target=sample, args=(nvml, trace, stop_sampling, t0), daemon=True)
    sampler.start()
    sup.start()
    try:
        deadline = time.monotonic() + 120
        while "ready" not in (work / "server.log").read_text() and time.monotonic() < deadline:
            if sup.poll() is not None:
                raise SystemExit(f"the stand-in exited {sup.poll()}: {(work / 'server.log').read_text()[-2000:]}")
            time.sleep(0.05)
        ready_s = time.monotonic() - t0
        time.sleep(1.0)  # a few samples at the plateau
        held = nvml.snapshot()[args.gpu]
        out["backends_while_held"] = compare_backends(nvml)
        tagged = sorted(p.pid for p in tagged_processes(trial_id))
        out.update(ready_s=round(ready_s, 2), tagged_pids=tagged,
                   nvml_holders=[{"pid": p.pid, "gib": round(p.used_bytes / GIB, 3)} for p in held.processes],
                   held_gib=round((held.used_bytes - base[args.gpu]) / GIB, 3),
                   allocated_gib=args.leader_gib + args.child_gib,
                   busy_while_held=gpumem.busy_reasons(nvml, [args.gpu]))
    finally:
        t_stop = time.monotonic()
        report = sup.stop(grace_s=10.0)
        stopped_s = time.monotonic() - t_stop
        ok, used = gpumem.wait_released(nvml, base, 60.0)
        released_s = time.monotonic() - t_stop
        stop_sampling.set()
        sampler.join()
    gone = gpumem.wait_gone(nvml, set(tagged), 10.0)
    peak = trace.summary()[0]
    out.update(stop_s=round(stopped_s, 3), terminated=report.terminated, killed=report.killed,
               swept=report.swept_pids, released=ok, released_after_stop_s=round(released_s, 3),
               used_after_gib=round(used[args.gpu] / GIB, 3), base_gib=round(base[args.gpu] / GIB, 3),
               sampled_peak_above_base_gib=round((peak.peak_bytes - base[args.gpu]) / GIB, 3),
               samples=len(trace.timeline), pids_gone_from_nvml=gone,
               left_running=[p.pid for p in tagged_processes(trial_id)])
    print(json.dumps(out, indent=1))
    if args.out:
        args.out.write_text(json.dumps(out, indent=1))
    subprocess.run(["nvidia-smi"], check=False)
    return 0 if ok and not out["left_running"] else 1


if __name__ == "__main__":
    sys.exit(main())
