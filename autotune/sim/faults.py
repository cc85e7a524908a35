"""Fault knobs of the simulated servers, read from the environment.

`AUTOTUNE_SIM_FAULTS` is a comma-separated list:

    hang@PHASE      stop making progress when PHASE begins (the process stays alive)
    crash@PHASE     a scheduler raises a non-memory error when PHASE begins (CRASH)
    exit0@PHASE     the launcher exits 0 when PHASE begins, children gone (early clean exit)
    ignore_sigterm  launcher and ranks ignore SIGTERM (only SIGKILL stops them)
    leak_child      rank 0 starts a grandchild that escapes the process group and holds memory
    silent          print nothing at all, then hang
    hangup          die of SIGHUP before printing anything (an environment that kills what it starts)
    flood           print a flood of log lines while loading weights
    bad_utf8        print some log lines with invalid UTF-8 bytes

PHASE is one of init_dist, load_weights, kv_pool, cuda_graph, http, warmup, serve.
`AUTOTUNE_SIM_RELEASE_DELAY_S` delays the release of a dead process's memory (node.py).
`AUTOTUNE_SIM_TIME_SCALE` scales modelled seconds into real sleeps (default 0.01).
`AUTOTUNE_SIM_SERVE_SLOWDOWN` multiplies the modelled seconds of serving (prefill forwards and
decode steps; default 1): a machine that computes slower, with the same memory.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

ENV_FAULTS = "AUTOTUNE_SIM_FAULTS"
ENV_TIME_SCALE = "AUTOTUNE_SIM_TIME_SCALE"
ENV_SERVE_SLOWDOWN = "AUTOTUNE_SIM_SERVE_SLOWDOWN"
PHASES = ("init_dist", "load_weights", "kv_pool", "cuda_graph", "http", "warmup", "serve")
SWITCHES = ("ignore_sigterm", "leak_child", "silent", "flood", "bad_utf8", "hangup")
AT_KINDS = ("hang", "crash", "exit0")


@dataclass(frozen=True)
class Faults:
    at: dict[str, str]  # phase -> "hang" | "crash" | "exit0"
    switches: frozenset[str]

    def on(self, name: str) -> bool:
        return name in self.switches

    def at_phase(self, phase: str) -> str | None:
        return self.at.get(phase)


def parse(text: str) -> Faults:
    at: dict[str, str] = {}
    switches: set[str] = set()
    for item in filter(None, (part.strip() for part in text.split(","))):
        if "@" in item:
            kind, phase = item.split("@", 1)
            if kind not in AT_KINDS or phase not in PHASES:
                raise ValueError(f"bad fault {item!r}: use {'|'.join(AT_KINDS)}@{'|'.join(PHASES)}")
            at[phase] = kind
        elif item in SWITCHES:
            switches.add(item)
        else:
            raise ValueError(f"unknown fault {item!r} (known: {', '.join(SWITCHES)}, KIND@PHASE)")
    return Faults(at, frozenset(switches))


def from_env() -> Faults:
    return parse(os.environ.get(ENV_FAULTS, ""))


def time_scale() -> float:
    return float(os.environ.get(ENV_TIME_SCALE, "0.01"))


def serve_slowdown() -> float:
    return max(0.0, float(os.environ.get(ENV_SERVE_SLOWDOWN, "1")))
