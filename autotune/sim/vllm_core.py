"""The simulated vLLM's engine processes: `VLLM::EngineCore` and one `VLLM::Worker` per TP rank.

Both are real processes in the API server's process group, titled as vLLM titles them (argv[0]),
holding memory on the simulated node as vLLM's do: each worker takes its rank's non-KV memory
(weights, activation peak, non-torch, CUDA-graph estimate) and then its KV cache, by the public
rules of engines/vllm/rules.py. The engine core prints the KV size, or the engine's ValueError when
one request of max_model_len does not fit, and exits 1 then (the API server reports it). Loading
and profiling take the worker's modelled time, compilation and graph capture the core's, after
the KV check (a launch refused there never pays them).

Run as `python -m autotune.sim.vllm_core core|worker JSON`; the API server (sim/vllm.py) starts them.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from typing import Any

from autotune.engines.vllm import rules
from autotune.sim.faults import time_scale
from autotune.sim.node import SimNode, SimOutOfMemory
from autotune.sim.ranks import Clock

CORE_TITLE = "VLLM::EngineCore"
# The tree's log clock: the API server's start plus the modelled (real-scale) seconds of the phases
# so far (sim/vllm_plan.py's durations); each modelled second sleeps AUTOTUNE_SIM_TIME_SCALE seconds.
# A child takes the start and the time reached from its payload ("t0", "at").
CLOCK = Clock(time_scale())


def log(role: str, level: str, where: str, message: str) -> None:
    """One line as vLLM prints it: `(Role pid=N) LEVEL MM-DD HH:MM:SS [file.py:line] message`."""
    stamp = time.strftime("%m-%d %H:%M:%S", time.localtime(CLOCK.start + CLOCK.modelled_s))
    sys.stdout.write(f"({role} pid={os.getpid()}) {level} {stamp} [{where}] {message}\n")
    sys.stdout.flush()


def spawn(title: str, role: str, payload: dict[str, Any]) -> tuple[subprocess.Popen[bytes], int]:
    """A child titled `title` (argv[0], as setproctitle shows vLLM's) in this process group, and the
    read end of the pipe on which it reports (one JSON line; EOF when it died first)."""
    read_end, write_end = os.pipe()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    python = payload.setdefault("python", sys.executable)  # a retitled child's own sys.executable is ''
    proc = subprocess.Popen([title, "-m", "autotune.sim.vllm_core", role, json.dumps({**payload, "fd": write_end})],
                            executable=python, env=env, stdin=subprocess.DEVNULL, pass_fds=(write_end,))
    os.close(write_end)
    return proc, read_end


def report(p: dict[str, Any], what: dict[str, Any]) -> None:
    os.write(int(p["fd"]), (json.dumps(what) + "\n").encode())


def read_report(fd: int) -> dict[str, Any] | None:
    with os.fdopen(fd, "rb") as pipe:
        line = pipe.readline()
    return json.loads(line) if line else None


def budget_of(p: dict[str, Any], node: SimNode, gpu: int) -> rules.Budget:
    return rules.Budget(total_bytes=node.gpus[gpu].total_bytes, free_bytes=node.free_bytes(gpu),
                        utilization=float(p["utilization"]), non_kv_bytes=int(p["non_kv_bytes"]),
                        kv_bytes_per_token=int(p["kv_bytes_per_token"]), max_model_len=int(p["max_model_len"]))


def hold_until_orphaned() -> None:
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    while os.getppid() != 1:  # vLLM's children die with their parent
        time.sleep(0.2)
    sys.exit(0)


def worker(p: dict[str, Any]) -> None:
    rank = int(p["rank"])
    gpu = int(p["gpus"][rank])
    role = "Worker" if len(p["gpus"]) == 1 else f"Worker_TP{rank}"
    node = SimNode.from_env()
    b = budget_of(p, node, gpu)
    log(role, "INFO", "cpu_model_runner.py:68" if p["cpu"] else "gpu_model_runner.py:4007",
        f"Starting to load model {p['model']}...")
    if b.refused_at_start:  # vLLM's start-up check, in the worker as in vLLM
        log(f"VllmWorker-{rank}", "ERROR", "multiproc_executor.py:953",  # named so before its title is set
            rules.cpu_busy_message(b, gpu) if p["cpu"] else rules.gpu_busy_message(b, gpu))
        sys.exit(1)
    try:
        node.allocate(gpu, int(p["non_kv_bytes"]))
        CLOCK.advance(float(p["load_s"]) + float(p["profile_s"]))
        if b.kv_bytes > 0:
            node.allocate(gpu, b.kv_bytes)
    except SimOutOfMemory as exc:
        log(role, "ERROR", "multiproc_executor.py:844", f"torch.OutOfMemoryError: {exc}")
        sys.exit(1)
    if p["cpu"]:
        log(role, "INFO", "cpu_worker.py:260", rules.cpu_auto_set_message(b, node=gpu))
    else:
        log(role, "INFO", "gpu_worker.py:436", rules.gpu_available_kv_message(b))
    report(p, {"kv_bytes": b.kv_bytes, "free_bytes": b.free_bytes, "at": CLOCK.modelled_s})
    hold_until_orphaned()


def core(p: dict[str, Any]) -> None:
    node = SimNode.from_env()
    started = [spawn("VLLM::Worker" if len(p["gpus"]) == 1 else f"VLLM::Worker_TP{r}", "worker", {**p, "rank": r})
               for r in range(len(p["gpus"]))]
    reports = [read_report(fd) for _, fd in started]
    workers = [proc for proc, _ in started]
    if None in reports:
        log("EngineCore", "ERROR", "core.py:1510", "EngineCore failed to start.")
        _stop(workers)
        sys.exit(1)
    kv = min(int(r["kv_bytes"]) for r in reports if r)  # the smallest rank decides, as in vLLM
    CLOCK.modelled_s = max(float(r["at"]) for r in reports if r)  # the slowest rank's
    b = budget_of(p, node, int(p["gpus"][0]))
    b = rules.Budget(b.total_bytes, b.free_bytes, b.utilization, b.requested_bytes - kv, b.kv_bytes_per_token,
                     b.max_model_len)
    if not b.fits_one_request:
        log("EngineCore", "ERROR", "core.py:1510", "EngineCore failed to start.")
        log("EngineCore", "ERROR", "core.py:1510", rules.kv_too_small_message(b, cpu=bool(p["cpu"])))
        _stop(workers)
        sys.exit(1)
    log("EngineCore", "INFO", "kv_cache_utils.py:2327", rules.kv_size_message(b, "CPU" if p["cpu"] else "GPU"))
    CLOCK.advance(float(p["warmup_s"]))
    log("EngineCore", "INFO", "core.py:402",
        f"init engine (profile, create kv cache, warmup model) took {CLOCK.modelled_s:.2f} s")
    report(p, {"kv_tokens": b.kv_tokens, "at": CLOCK.modelled_s})
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    while all(w.poll() is None for w in workers) and os.getppid() != 1:
        time.sleep(0.2)
    _stop(workers)
    sys.exit(1)


def _stop(workers: list[subprocess.Popen[bytes]]) -> None:
    for w in workers:
        w.kill()
        w.wait()


def main(argv: list[str] | None = None) -> None:
    role, payload = (argv or sys.argv[1:])[:2]
    p = json.loads(payload)
    CLOCK.start, CLOCK.modelled_s = float(p["t0"]), float(p.get("at", 0.0))
    (core if role == "core" else worker)(p)


if __name__ == "__main__":
    main()
