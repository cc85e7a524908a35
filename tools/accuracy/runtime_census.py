"""Score the classifier on the runtimes' own messages (tests/data/runtime-census).

Beneath SGLang and vLLM run torch's allocators, the CUDA runtime and driver, NCCL, the CUDA libraries, the kernel
compilers, HIP, Level Zero, CANN, Neuron, XLA, Metal and more. When device memory runs out, another process holds the
device or a wait times out, a user's log often shows the runtime's message, in its own words. Each row of the census is
one such message, read from the runtime's source or manual, with the family its source means: `OOM`, `HELD_BY_OTHERS`,
`HANG`, or `NOT_THESE` (a look-alike: host memory, shared memory, launch resources, a refused connection).

Each row is rendered inside both engines' start-up, at two phases (the weights loading, the KV pool), as the user's log
shows it: the engine's progress lines up to the phase (tests/data/source-census/progress.jsonl), the runtime's native
lines, then the engine's traceback ending in the runtime's exception (`via` "exception") or the engine's own death
lines (`via` "stderr"). An OOM must read as that phase's OOM, memory held by others as GPU_BUSY, a hang as TIMEOUT, and
a look-alike as none of these.

    python -m tools.accuracy.runtime_census      # each family's figure, each runtime's, then each disagreement
"""

from __future__ import annotations

import dataclasses
import functools
import json
import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from autotune.classifier.classify import classify_text
from tools.accuracy import census

RUNTIME_CENSUS = Path(__file__).resolve().parents[2] / "tests" / "data" / "runtime-census"
FAMILIES = ("OOM", "HELD_BY_OTHERS", "HANG", "NOT_THESE")
_FAMILY_OUTCOME = {"HELD_BY_OTHERS": "GPU_BUSY", "HANG": "TIMEOUT"}
_NOT_THESE = ("OOM_WEIGHTS", "OOM_KV_POOL", "OOM_CUDA_GRAPH", "OOM_RUNTIME", "GPU_BUSY", "TIMEOUT", "READY", "None")


@dataclass(frozen=True)
class Row:
    runtime: str
    source: str
    file: str
    printed: tuple[str, ...]
    via: str  # "exception": the last lines are a Python exception as printed; "stderr": native output alone
    family: str
    why: str
    part: str  # the census file it comes from

    def split(self) -> tuple[list[str], str, str]:
        """The native lines printed before the exception, the exception's class and its message (several lines where
        the message has several). A "stderr" row is native lines alone."""
        lines = list(self.printed)
        if self.via != "exception":
            return lines, "", ""
        at = next((i for i, line in enumerate(lines) if _EXCEPTION.match(line)), len(lines) - 1)
        head, _, message = lines[at].partition(": ")
        return lines[:at], head, "\n".join([message, *lines[at + 1:]]).strip("\n")


# an exception as Python prints it: a dotted class name, then ": " (or nothing: an exception with no message)
_EXCEPTION = re.compile(r"(?:[A-Za-z_]\w*\.)*[A-Za-z_]\w*(?:Error|Exception|Exit|Failure|Timeout|Interrupt)\w*(?::|$)")


def load() -> list[Row]:
    rows = []
    for path in sorted(RUNTIME_CENSUS.glob("*.jsonl")):
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.strip():
                r = json.loads(line)
                rows.append(Row(r["runtime"], r["source"], r["file"], tuple(r["printed"]), r["via"], r["family"],
                                r["why"], path.stem))
    return rows


# -- where each message is placed: a raise site of each engine's census in that phase, and its progress lines so far

@dataclass(frozen=True)
class Placement:
    engine: str
    phase: str  # the outcome an OOM here is: OOM_WEIGHTS or OOM_KV_POOL
    census: str
    file: str
    function: str
    last_progress: int  # the order of the last progress line printed before the failure (the phase has begun)


PLACEMENTS = (
    Placement("sglang", "OOM_WEIGHTS", "sglang", "python/sglang/srt/model_loader/loader.py",
              "load_weights_and_postprocess", 12),
    Placement("sglang", "OOM_KV_POOL", "sglang", "python/sglang/srt/mem_cache/memory_pool.py", "_create_buffers", 18),
    Placement("vllm", "OOM_WEIGHTS", "vllm", "vllm/model_executor/model_loader/base_loader.py",
              "BaseModelLoader.load_model", 29),
    Placement("vllm", "OOM_KV_POOL", "vllm", "vllm/v1/worker/gpu_model_runner.py",
              "GPUModelRunner._allocate_kv_cache_tensors", 48),
)


# each placement's raise site and progress lines are read once, not once for each of the census's messages
@functools.cache
def _template(place: Placement) -> census.Row:
    return next(r for r in census.load(place.census) if (r.file, r.function) == (place.file, place.function))


@functools.cache
def _progress(place: Placement) -> tuple[str, ...]:
    rows = [json.loads(line) for line in (census.CENSUS / "progress.jsonl").read_text(encoding="utf-8").splitlines()
            if line.strip()]
    version = next(r["version"] for r in rows if r["engine"] == place.engine)  # the newest version comes first
    ours = sorted((r for r in rows if (r["engine"], r["version"], r["variant"]) == (place.engine, version, "default")),
                  key=lambda r: int(r["order"]))
    return tuple(str(r["line"]) for r in ours if int(r["order"]) <= place.last_progress)


# the engines' own lines when a child process died with no Python exception (the census's renderers' words)
_SG_DIED = "[2026-03-31 10:00:20] Received sigquit from a child process. It usually means the child failed."
_VL_DIED = [f"{census._VL_PREFIX['engine_core']} ERROR 09-04 10:00:20 [{census._VL_FAILED['engine_core'][0]}] "
            f"{census._VL_FAILED['engine_core'][1]}", f"{census._VL_PREFIX['api_server']} {census._VL_ENGINE_DIED}"]


def render(row: Row, place: Placement) -> str:
    """The log a user sees when the runtime prints `row` at `place`."""
    native, exc, message = row.split()
    if exc:
        raised = dataclasses.replace(_template(place), exception=exc, message=message)
        tail = census.render(raised).splitlines()
    else:
        tail = [_SG_DIED] if place.engine == "sglang" else list(_VL_DIED)
    return "\n".join([*_progress(place), *native, *tail])


def expected(row: Row, place: Placement) -> str:
    """The outcome the row's family means at `place` ("NOT_THESE" for a look-alike: any reading outside the three)."""
    if row.family == "OOM":
        return place.phase
    return _FAMILY_OUTCOME.get(row.family, "NOT_THESE")


def right(row: Row, place: Placement, got: str) -> bool:
    want = expected(row, place)
    return got not in _NOT_THESE if want == "NOT_THESE" else got == want


def score(rows: list[Row]) -> list[tuple[Row, Placement, str]]:
    """Each row at each placement, with the outcome the classifier reads from the rendered log."""
    out = []
    for row in rows:
        for place in PLACEMENTS:
            got = classify_text(render(row, place), place.engine)
            out.append((row, place, got.outcome.value if got.outcome else "None"))
    return out


def main() -> None:
    rows = load()
    results = score(rows)
    ok = Counter((row.family, right(row, place, got)) for row, place, got in results)
    total = sum(ok[(f, True)] for f in FAMILIES)
    print(f"the runtimes' own messages (a census of their sources): {len(rows)} messages, each at "
          f"{len(PLACEMENTS)} places; {total}/{len(results)} read as their source means")
    for family in FAMILIES:
        n = ok[(family, True)] + ok[(family, False)]
        if n:
            print(f"  {family:15s} {ok[(family, True)]}/{n}")
    by_runtime = Counter((row.runtime, right(row, place, got)) for row, place, got in results)
    print("  by runtime:", ", ".join(f"{name} {by_runtime[(name, True)]}/{by_runtime[(name, True)] + by_runtime[(name, False)]}"
                                     for name in sorted({row.runtime for row in rows})))
    wrong: dict[Row, list[str]] = {}
    for row, place, got in results:
        if not right(row, place, got):
            wrong.setdefault(row, []).append(f"{place.engine}/{place.phase}:{got}")
    for row, misses in wrong.items():
        print(f"  - {row.runtime} {row.family} read as {', '.join(misses)}: {' | '.join(row.printed)[:160]}")


if __name__ == "__main__":
    main()
