"""Ground truth without launching: the simulated engine's procedure run as arithmetic.

The benchmark uses this to find the true optimum of a scenario by exhaustive evaluation:
the same `SglangEngine` steps the simulated server takes, against GPUs that are plain
numbers (`VirtualIO`), then the same probe the tuner sends (one long request and a
burst). Only benchmarks and tests may use it — the tuner must learn by launching.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from autotune import flagtable
from autotune.modelshape import load as load_shape
from autotune.records import GIB
from autotune.sim.node import SimOutOfMemory
from autotune.sim.sglang_args import LaunchFailure, resolve
from autotune.sim.sglang_engine import SchedulerFailure, SglangEngine


class VirtualIO:
    """GPUs as numbers: `used[i]` bytes held on GPU i of capacity `totals[i]`."""

    def __init__(self, totals: list[int], used: list[int] | None = None) -> None:
        self.totals = list(totals)
        self.used = list(used or [0] * len(totals))
        self.tp = len(totals)
        self.seconds = 0.0
        self.lines: list[str] = []

    def free(self, rank: int) -> int:
        return self.totals[rank] - self.used[rank]

    def total(self, rank: int) -> int:
        return self.totals[rank]

    def gpu_index(self, rank: int) -> int:
        return rank

    def alloc(self, rank: int, nbytes: int) -> None:
        if nbytes > self.free(rank):
            raise SimOutOfMemory(rank, nbytes, self.free(rank), self.totals[rank], self.used[rank])
        self.used[rank] += nbytes

    def release(self, rank: int, nbytes: int) -> None:
        self.used[rank] = max(0, self.used[rank] - nbytes)

    def log(self, rank: int | None, message: str) -> None:
        """Kept with SGLang's prefix (`[time TPn]` when TP > 1), as the real server prints them."""
        tp = f" TP{rank}" if rank is not None and self.tp > 1 else ""
        self.lines.append(f"[2026-01-01 00:00:00{tp}] {message}")

    def advance(self, seconds: float) -> None:
        self.seconds += seconds

    def enter(self, phase: str) -> None:
        pass

    def rendezvous(self) -> str | None:
        return None  # the ground truth is about memory: no port is ever taken


@dataclass(frozen=True)
class Truth:
    """How a launch would end. `ended` is the phase that failed, or 'ready'/'probe'."""

    fits: bool
    ended: str
    error: str
    kv_tokens: int
    max_running_requests: int
    startup_s: float
    peak_used_bytes: int


def evaluate(
    argv: list[str], *, gpus: int, gpu_mem_gib: float, version: str = "0.5.23",
    probe_tokens: int | None = None, burst_tokens: int = 0, env: dict[str, str] | None = None,
) -> Truth:
    """Run the start-up (and the probe, when asked) of `argv` on an idle virtual node.

    The probe is what the tuner sends: one request of `probe_tokens` input tokens (capped
    below the context length and the KV pool), then a burst whose prompts add up to
    `burst_tokens`, prefilled together as the server batches them.
    """
    ns = flagtable.parse("sglang", version, argv)
    shape = load_shape(Path(ns.model_path))
    total = int(gpu_mem_gib * GIB)
    try:
        args = resolve(ns, version, shape, total // (1 << 20), dict(env if env is not None else os.environ))
    except LaunchFailure as exc:
        return Truth(False, "args", exc.exc_line, 0, 0, 0.0, 0)
    io = VirtualIO([total] * args.tp)
    engine = SglangEngine(shape, args, io)
    try:
        engine.start()
    except SchedulerFailure as exc:
        return Truth(False, exc.phase, exc.exc_line, engine.state.kv_tokens, 0, io.seconds, max(io.used))
    peak = max(io.used)
    if probe_tokens:
        try:
            io.advance(engine.forward(min(probe_tokens, args.context_len - 1, engine.state.kv_tokens)))
            if burst_tokens:
                io.advance(engine.forward(burst_tokens))
        except SchedulerFailure as exc:
            return Truth(False, "probe", exc.exc_line, engine.state.kv_tokens,
                         engine.state.max_running_requests, io.seconds, peak)
    return Truth(True, "ready", "", engine.state.kv_tokens, engine.state.max_running_requests, io.seconds, peak)
