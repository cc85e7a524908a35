"""A foreign process holding GPU memory on the simulated node (busy-GPU scenarios).

    python -m autotune.sim.hold --gpu 0 --gib 20 [--seconds S] [--detach]

It allocates, prints `holding N bytes on GPU g (pid P)`, and keeps the memory until it is
killed, interrupted or `--seconds` pass. `--detach` starts the holder in its own session
and returns at once: the holder is then nobody's child (a leaked process).
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time

from autotune.records import GIB
from autotune.sim.node import SimNode


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="autotune.sim.hold")
    parser.add_argument("--gpu", type=int, required=True)
    parser.add_argument("--gib", type=float, required=True)
    parser.add_argument("--seconds", type=float, default=None)
    parser.add_argument("--detach", action="store_true")
    args = parser.parse_args(argv)
    if args.detach:
        cmd = [sys.executable, "-m", "autotune.sim.hold", "--gpu", str(args.gpu), "--gib", str(args.gib)]
        if args.seconds is not None:
            cmd += ["--seconds", str(args.seconds)]
        subprocess.Popen(cmd, start_new_session=True, stdin=subprocess.DEVNULL,
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        return
    node = SimNode.from_env()
    nbytes = int(args.gib * GIB)
    node.allocate(args.gpu, nbytes)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    print(f"holding {nbytes} bytes on GPU {args.gpu} (pid {os.getpid()})", flush=True)
    deadline = None if args.seconds is None else time.monotonic() + args.seconds
    try:
        while deadline is None or time.monotonic() < deadline:
            time.sleep(0.2 if deadline is None else min(0.2, max(0.0, deadline - time.monotonic())))
    except KeyboardInterrupt:
        pass
    finally:
        node.release_all()


if __name__ == "__main__":
    main()
