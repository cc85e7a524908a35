"""`nvidia-smi`'s query mode for the simulated node: `python -m autotune.sim.nvidia_smi --query-gpu=...`.

The node comes from AUTOTUNE_SIM_NODE. Prints what the real one prints for
`--query-gpu=<fields> --format=csv,noheader,nounits` and `--query-compute-apps=<fields> ...`
(MiB, `, `-separated), so `autotune.gpu.nvidiasmi` is tested without a GPU. PIDs are the ones the
node recorded (the simulated server's own view), like a real container's mismatch with the host.
"""

from __future__ import annotations

import sys

from autotune.gpu.base import GpuState
from autotune.sim.node import SimNode

MIB = 1 << 20
DRIVER = "sim-550.00"


def _gpu_field(g: GpuState, field: str) -> str:
    values = {"index": str(g.index), "name": g.name, "memory.total": str(g.total_bytes // MIB),
              "memory.used": str(-(-g.used_bytes // MIB)), "memory.free": str(g.free_bytes // MIB),
              "uuid": f"GPU-sim-{g.index}", "driver_version": DRIVER}
    return values[field]


def main(argv: list[str]) -> int:
    queries = dict(a.split("=", 1) for a in argv if "=" in a)
    if queries.get("--format") != "csv,noheader,nounits":
        print("only --format=csv,noheader,nounits is simulated", file=sys.stderr)
        return 2
    states = SimNode.from_env().snapshot()
    if "--query-gpu" in queries:
        for gpu in states:
            print(", ".join(_gpu_field(gpu, f) for f in queries["--query-gpu"].split(",")))
    elif "--query-compute-apps" in queries:
        for gpu in states:
            for proc in gpu.processes:
                values = {"pid": str(proc.pid), "used_memory": str(-(-proc.used_bytes // MIB)),
                          "gpu_uuid": f"GPU-sim-{gpu.index}", "process_name": proc.name or "python"}
                print(", ".join(values[f] for f in queries["--query-compute-apps"].split(",")))
    else:
        print("give --query-gpu=... or --query-compute-apps=...", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
