"""One simulated scheduler rank: a real child process that holds its GPU's memory.

The launcher (`autotune.sim.sglang`) drives it over a socket with JSON lines:
`alloc`/`release` memory on its GPU of the simulated node, `log` a line under its
`TPn` prefix, `listen` (rank 0: open the distributed-init store on a port), `fail` (print a
scheduler exception's traceback), `sigquit` (signal the
parent and wait to be killed) or `exit`. Like SGLang's schedulers it asks the kernel to
SIGKILL it when its parent dies (PR_SET_PDEATHSIG), so an orphaned rank does not
linger — unless the `leak_child` fault plants a grandchild that escapes on purpose.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import signal
import socket
import subprocess
import sys
import time

from autotune.sim import faults as sim_faults
from autotune.sim.node import SimNode, SimOutOfMemory

PR_SET_PDEATHSIG = 1


def die_with_parent() -> None:
    """Ask Linux to SIGKILL this process when its parent exits (as SGLang's schedulers do)."""
    try:
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except OSError:
        pass


def emit(text: str | bytes) -> None:
    """Write one whole line to stdout with a single write(), so ranks do not interleave."""
    data = text if isinstance(text, bytes) else text.encode("utf-8", "surrogateescape")
    os.write(1, data if data.endswith(b"\n") else data + b"\n")


def leak_grandchild(gpu: int) -> None:
    """Start a memory holder that escapes the process group and outlives this rank."""
    subprocess.Popen(
        [sys.executable, "-m", "autotune.sim.hold", "--gpu", str(gpu), "--gib", "1", "--detach"],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    ).wait()


def serve(ctl: socket.socket, node: SimNode, gpu: int) -> None:
    reader = ctl.makefile("rb")
    stores: list[socket.socket] = []  # rank 0's distributed-init store, held until the rank ends
    for raw in reader:
        msg = json.loads(raw)
        op = msg["op"]
        reply: dict[str, object] = {"ok": True}
        if op == "alloc":
            try:
                node.allocate(gpu, int(msg["n"]))
            except SimOutOfMemory as oom:
                reply = {"ok": False, "free": oom.free, "total": oom.total, "mine": oom.held_by_self}
        elif op == "release":
            node.release(gpu, int(msg["n"]))
        elif op == "listen":
            reply = listen(stores, str(msg["host"]), int(msg["port"]))
        elif op == "log":
            emit(msg["line"])
        elif op == "fail":
            emit("\n".join(msg["lines"]))  # one logging record, as SGLang's logger.error writes it
        elif op == "sigquit":  # what SGLang's scheduler does after logging its exception
            os.kill(os.getppid(), signal.SIGQUIT)
            while True:  # the launcher's kill_process_tree ends us
                time.sleep(3600)
        elif op == "exit":
            ctl.sendall(b'{"ok": true}\n')
            return
        ctl.sendall(json.dumps(reply).encode() + b"\n")


def listen(stores: list[socket.socket], host: str, port: int) -> dict[str, object]:
    """Open the distributed-init store's socket on `port`, as torch's TCPStore does (no
    SO_REUSEADDR, so a port someone holds is refused, EADDRINUSE)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.bind((host, port))
        sock.listen()
    except OSError as exc:
        sock.close()
        return {"ok": False, "errno": exc.errno}
    stores.append(sock)
    return {"ok": True}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="autotune.sim.rank")
    parser.add_argument("--rank", type=int, required=True)
    parser.add_argument("--gpu", type=int, required=True)
    parser.add_argument("--ctl-fd", type=int, required=True)
    args = parser.parse_args(argv)
    die_with_parent()
    faults = sim_faults.from_env()
    if faults.on("ignore_sigterm"):
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    node = SimNode.from_env()
    ctl = socket.socket(fileno=args.ctl_fd)
    if faults.on("leak_child") and args.rank == 0:
        leak_grandchild(args.gpu)
    try:
        serve(ctl, node, args.gpu)
    finally:
        node.release_all()


if __name__ == "__main__":
    main()
