"""What reaching a server through a target costs, per HTTP request and per trial (the opening).

    .venv/bin/python -m tools.bench.target_overhead [REQUESTS]

Starts the test sshd on 127.0.0.1 and two container stand-ins (tests/sshd.py): one sharing the
host's network (PID namespace only), one with its own network namespace. A small HTTP server runs
on the host's 127.0.0.1 and one inside the network namespace. Then REQUESTS (default 200)
sequential GETs, each on a new connection (as the watcher's /health polls and the probe's requests
are), through: a plain local URL, `ssh -L` (the shared-network case), the relay through ssh + the
prefix, and the relay through the prefix alone. Prints the opening time of each way and the median
and 90th percentile per request, with the load average (the figures move with it). The opening
of `ssh -L` includes its control master's connection where the transport had none yet.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import requests

from autotune.settings import Target
from autotune.target.transport import close_all, transport_for
from autotune.trial.ports import kernel_port
from autotune.trial.remote import RUN_ROOT
from tests.sshd import make_sshd, open_container


def timed(url: str, n: int) -> list[float]:
    deadline = time.monotonic() + 60
    while True:  # the server up and the way open
        try:
            requests.get(url, timeout=10).raise_for_status()
            break
        except requests.RequestException:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)
    out = []
    for _ in range(n):
        t0 = time.perf_counter()
        requests.get(url, timeout=10).raise_for_status()
        out.append((time.perf_counter() - t0) * 1000)
    return out


def main(n: int) -> None:
    work = Path(tempfile.mkdtemp(prefix="target-overhead-"))
    (work / "health").write_text("ok\n")
    sshd = make_sshd(work / "sshd")
    sshd.start()
    shared, own = open_container(net=False), open_container(net=True)
    here_port, there_port, tag = kernel_port("127.0.0.1"), kernel_port("127.0.0.1"), f"overhead-{os.getpid()}"
    server = subprocess.Popen([sys.executable, "-m", "http.server", "--bind", "127.0.0.1", "--directory", str(work),
                               str(here_port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    ssh_own = transport_for(Target(ssh=sshd.address, ssh_options=tuple(sshd.options), exec_prefix=tuple(own.prefix)))
    doc = {"argv": ["python3", "-m", "http.server", "--bind", "127.0.0.1", "--directory", str(work), str(there_port)],
           "env": {}, "tag": tag}
    ssh_own.helper("start", f"{RUN_ROOT}/{tag}", stdin=json.dumps(doc))
    ways = []
    try:
        rows = [("local URL", None, here_port),
                ("ssh -L (shared network)", Target(ssh=sshd.address, ssh_options=tuple(sshd.options),
                                                   exec_prefix=tuple(shared.prefix)), here_port),
                ("relay: ssh + prefix", ssh_own.target, there_port),
                ("relay: prefix alone", Target(exec_prefix=tuple(own.prefix)), there_port)]
        print(f"load average {os.getloadavg()[0]:.1f}, {n} requests each, a new connection per request")
        for name, target, port in rows:
            if target is not None:
                transport_for(target).network()  # told once, at a trial's preflight: not part of the opening
            t0 = time.perf_counter()
            way = transport_for(target).reach(port, tag=tag) if target else None
            if target is not None and way is None:
                raise SystemExit(f"{name}: no tunnel or relay was chosen")
            opened_ms = (time.perf_counter() - t0) * 1000
            ways.append(way)
            local = way.local_port if way is not None else port
            ms = sorted(timed(f"http://127.0.0.1:{local}/health", n))
            print(f"{name:26s} open {opened_ms:7.1f} ms   per request median {statistics.median(ms):6.2f} ms, "
                  f"p90 {ms[int(len(ms) * 0.9)]:6.2f} ms")
    finally:
        for way in ways:
            if way is not None:
                way.close()
        ssh_own.helper("stop", tag, "5", "0")
        ssh_own.helper("clean", f"{RUN_ROOT}/{tag}", tag)
        server.terminate()
        server.wait()
        close_all()
        shared.close()
        own.close()
        sshd.stop()


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 200)
