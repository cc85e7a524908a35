"""The simulated SGLang server prints SGLang's start-up memory lines as the real engine does.

For each version, the memory lines of a real ready launch (tests/data/sglang-cpu, the real engine on this
machine's CPU: tiny Llama, fraction 0.3, context 4096, 4 requests) are compared with those of the simulator
launched with the same flags: numbers masked, every real line's shape (same words, same fields) must appear
in the simulator's log, in the same order. The simulator models a GPU; what differs for that reason alone
is named here and nothing else may differ:
- the summary line's `available_cpu_mem=` is `available_gpu_mem=` on a GPU (SGLang names the device);
- a GPU server captures CUDA graphs (its capture lines carry `avail mem=` / `mem usage=`); the CPU path
  captures none without torch.compile.
"""

from __future__ import annotations

import os
import re
import signal
from pathlib import Path

import pytest

from autotune.classifier import text as logtext
from autotune.sim.node import SimNode
from tests.conftest import MODELS, free_port

DATA = Path(__file__).resolve().parent / "data" / "sglang-cpu"
MODEL = str(MODELS / "tiny-llama-cpu-1m")
FLAGS = ["--model-path", MODEL, "--load-format", "dummy", "--skip-tokenizer-init", "--device", "cpu",
         "--host", "127.0.0.1", "--mem-fraction-static", "0.3", "--context-length", "4096",
         "--max-running-requests", "4", "--sleep-on-idle"]
# A start-up line that states memory: free or used memory, the pool's size, its dtype, the summary, the timings.
MEMORY_LINE = re.compile(r"avail mem=|mem usage=|#tokens: |max_total_num_tokens=|KV cache dtype|"
                         r"Engine startup timings")
NUMBER = re.compile(r"(?<![\w.])-?\d+(?:\.\d+)?(?!\w)")  # a figure, not the digits of a name (e2e, bfloat16)
GPU_FOR_CPU = {"available_cpu_mem=": "available_gpu_mem="}  # the device SGLang names: a GPU-vs-CPU difference
GPU_ONLY = re.compile(r"^Capture .*(?:cuda|CUDA) graph (?:begin|end)\.")  # graph capture: a GPU server's own


def memory_shapes(text: str) -> list[str]:
    """The start-up memory lines of a log (up to the HTTP server's start), header cut, numbers masked."""
    shapes = []
    for raw in text.splitlines():
        line = logtext.split(raw)[0]
        if "Started server process" in line:
            break
        if MEMORY_LINE.search(line):
            shapes.append(NUMBER.sub("N", line))
    return shapes


def as_on_a_gpu(shape: str) -> str:
    for cpu, gpu in GPU_FOR_CPU.items():
        shape = shape.replace(cpu, gpu)
    return shape


def in_order(wanted: list[str], got: list[str]) -> tuple[list[str], list[str]]:
    """(wanted shapes not found in order in `got`, `got` shapes left over)."""
    missing, left, at = [], list(got), 0
    for shape in wanted:
        try:
            found = got.index(shape, at)
        except ValueError:
            missing.append(shape)
            continue
        left[found] = ""
        at = found + 1
    return missing, [s for s in left if s]


@pytest.mark.parametrize("version", ["0.5.9", "0.5.23"])
def test_the_simulator_prints_the_real_memory_lines(version: str, node: SimNode, start_server) -> None:  # type: ignore[no-untyped-def]
    real = [as_on_a_gpu(s) for s in memory_shapes((DATA / f"{version}-ready-sigterm.log").read_text())]
    assert len(real) >= 6, real  # the real log holds them: the test compares something
    server = start_server([*FLAGS, "--port", str(free_port())], {"AUTOTUNE_SIM_SGLANG_VERSION": version})
    server.wait_for("The server is fired up and ready to roll!")
    os.killpg(server.proc.pid, signal.SIGTERM)  # stopped as the real one was
    server.wait()
    sim = memory_shapes(server.text())
    missing, extra = in_order(real, sim)
    assert not missing, f"real lines the simulator does not print (in this order):\n{missing}\nsimulator:\n{sim}"
    assert all(GPU_ONLY.match(s) for s in extra), f"simulator memory lines with no real counterpart: {extra}"
