"""The launcher's side of the rank processes: spawning them and the `EngineIO` over them.

`RankIO` implements `EngineIO` for the simulated server: memory operations go to the
rank processes (which own the memory on the node), log lines are printed by the rank
that SGLang would print them from, and modelled time becomes real (scaled) sleep while
the log clock advances at real scale.
"""

from __future__ import annotations

import json
import os
import random
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from typing import IO

from autotune.sim import faults as sim_faults
from autotune.sim.node import SimNode, SimOutOfMemory
from autotune.sim.rank import emit


class RankDied(Exception):
    """A rank process went away (killed from outside)."""


class Clock:
    """The log clock: wall time at launch plus modelled (real-scale) seconds."""

    def __init__(self, scale: float) -> None:
        self.start = time.time()
        self.modelled_s = 0.0
        self.scale = scale

    def advance(self, seconds: float) -> None:
        self.modelled_s += seconds
        if self.scale > 0:
            time.sleep(seconds * self.scale)

    def stamp(self) -> str:
        return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(self.start + self.modelled_s))


class RankIO:
    """EngineIO over real rank processes. Thread-safe: HTTP and scheduler threads share it."""

    def __init__(self, node: SimNode, gpus: list[int], clock: Clock, faults: sim_faults.Faults,
                 on_fault: Callable[[str], None], store: tuple[str, int] | None = None) -> None:
        """`store`: the (host, port) rank 0 listens on for the distributed init (None: none)."""
        self.node, self.gpus, self.clock, self.faults = node, gpus, clock, faults
        self.store = store
        self.tp = len(gpus)
        self.on_fault = on_fault
        self.lock = threading.RLock()
        self.procs: list[subprocess.Popen[bytes]] = []
        self.ctl: list[socket.socket] = []
        self.readers: list[IO[bytes]] = []
        for rank, gpu in enumerate(gpus):
            parent, child = socket.socketpair()
            cmd = [sys.executable, "-m", "autotune.sim.rank", "--rank", str(rank), "--gpu", str(gpu),
                   "--ctl-fd", str(child.fileno())]
            proc = subprocess.Popen(cmd, pass_fds=(child.fileno(),), stdin=subprocess.DEVNULL)
            child.close()
            self.procs.append(proc)
            self.ctl.append(parent)
            self.readers.append(parent.makefile("rb"))

    def call(self, rank: int, msg: dict[str, object]) -> dict[str, object]:
        with self.lock:
            try:
                self.ctl[rank].sendall(json.dumps(msg).encode() + b"\n")
                line = self.readers[rank].readline()
            except OSError as exc:
                raise RankDied(f"rank {rank}: {exc}") from exc
            if not line:
                raise RankDied(f"rank {rank} exited")
            reply: dict[str, object] = json.loads(line)
            return reply

    def prefix(self, rank: int | None) -> str:
        tp = f" TP{rank}" if rank is not None and self.tp > 1 else ""
        return f"[{self.clock.stamp()}{tp}]"

    # -- EngineIO ---------------------------------------------------------------------

    def free(self, rank: int) -> int:
        return self.node.free_bytes(self.gpus[rank])

    def total(self, rank: int) -> int:
        return self.node.gpus[self.gpus[rank]].total_bytes

    def gpu_index(self, rank: int) -> int:
        return self.gpus[rank]

    def alloc(self, rank: int, nbytes: int) -> None:
        reply = self.call(rank, {"op": "alloc", "n": int(nbytes)})
        if not reply["ok"]:
            raise SimOutOfMemory(self.gpus[rank], nbytes, int(reply["free"]), int(reply["total"]),  # type: ignore[call-overload]
                                 int(reply["mine"]))  # type: ignore[call-overload]

    def release(self, rank: int, nbytes: int) -> None:
        self.call(rank, {"op": "release", "n": int(nbytes)})

    def log(self, rank: int | None, message: str) -> None:
        if self.faults.on("silent"):
            return
        line = f"{self.prefix(rank)} {message}"
        if rank is None:
            emit(line)
        else:
            self.call(rank, {"op": "log", "line": line})

    def advance(self, seconds: float) -> None:
        self.clock.advance(seconds)

    def enter(self, phase: str) -> None:
        self.on_fault(phase)

    def rendezvous(self) -> str | None:
        if self.store is None:
            return None
        host, port = self.store
        reply = self.call(0, {"op": "listen", "host": host, "port": port})
        if reply["ok"]:
            return None
        # torch's c10d TCPStore server, as SGLang's scheduler prints it (corpus log 064 has the same text)
        return ("torch.distributed.DistNetworkError: The server socket has failed to listen on any local network "
                f"address. port: {port}, useIpv6: 0, code: -98, name: EADDRINUSE, message: address already in use")

    # -- failure and teardown ---------------------------------------------------------------

    def fail(self, ranks: dict[int, list[str]]) -> bool:
        """Failing ranks print their exception, then the first SIGQUITs the launcher (as SGLang's do).
        False when that rank could not be asked to (it is gone)."""
        for rank, lines in ranks.items():
            try:
                self.call(rank, {"op": "fail", "lines": lines})
            except RankDied:
                pass
        with self.lock:
            try:
                self.ctl[min(ranks)].sendall(b'{"op": "sigquit"}\n')
            except OSError:
                return False
        return True

    def pids(self) -> list[int]:
        return [p.pid for p in self.procs]

    def shutdown(self) -> None:
        for rank in range(self.tp):
            try:
                self.call(rank, {"op": "exit"})
            except RankDied:
                pass
        for proc in self.procs:
            proc.wait(timeout=10)


def port_below_ephemeral(host: str, low: int = 22000, high: int = 29999, attempts: int = 64) -> int:
    """SGLang 0.5.23's `get_free_port_below_ephemeral` (utils/network.py), used when no --nccl-port
    is given: a random port below the kernel's ephemeral range that binds now. The rank binds it
    only later (init_dist), so two servers starting at once can draw the same one."""
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            high = min(high, int(f.read().split()[0]) - 1)
    except (OSError, ValueError, IndexError):
        high = min(high, 32767)
    for port in random.sample(range(low, high + 1), min(attempts, max(0, high - low + 1))):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            try:
                sock.bind((host, port))
            except OSError:
                continue
            return port
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def visible_gpus(node: SimNode) -> list[int]:
    """Node GPU indices this process may use, as CUDA_VISIBLE_DEVICES restricts them."""
    env = os.environ.get("CUDA_VISIBLE_DEVICES")
    if env is None or env.strip() == "":
        return [g.index for g in node.gpus]
    return [int(x) for x in env.split(",") if x.strip()]
