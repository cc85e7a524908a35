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

The second part (the engines' and launchers' own words for a hang) carries its engine and moment: each row is placed
only in its engine's log, at start-up (as above) or while serving (the start-up through the ready line, then a request
served), and its lines end the log as printed. A row that raised from a wait is scored again with its traceback cut
below the wait's frames, as users post them.

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
_THREE = ("OOM_WEIGHTS", "OOM_KV_POOL", "OOM_CUDA_GRAPH", "OOM_RUNTIME", "GPU_BUSY", "TIMEOUT")
_NOT_THESE = (*_THREE, "READY", "None")


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
    engine: str = "any"  # the engine whose log can show it: "sglang", "vllm" or "any"
    when: str = "start-up"  # "start-up" (before the engine is ready), "serving" (after), or "any"
    frames: tuple[str, ...] = ()  # the innermost frames of a wait that raised, as printed, innermost last
    # the second part's rows (the engines' and launchers' own words) are the log's last lines as printed, the
    # engine's or launcher's prefix on them: nothing of an engine's death is added ("stderr" there says only that the
    # lines went to stderr, not that the process then died)
    as_printed: bool = False

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
                                r["why"], path.stem, r.get("engine", "any"), r.get("when", "start-up"),
                                tuple(r.get("frames") or ()), "engine" in r))
    return rows


# -- where each message is placed: a raise site of each engine's census in that phase, and its progress lines so far

@dataclass(frozen=True)
class Placement:
    engine: str
    phase: str  # the outcome an OOM here is: OOM_WEIGHTS, OOM_KV_POOL, or OOM_RUNTIME once serving
    census: str
    file: str  # the start-up raise site whose traceback a runtime's exception takes ("" once serving)
    function: str
    last_progress: int  # the order of the last progress line printed before the failure (the phase has begun)

    @property
    def when(self) -> str:
        return "serving" if self.phase == "OOM_RUNTIME" else "start-up"


_ALL_PROGRESS = 10**6
PLACEMENTS = (
    Placement("sglang", "OOM_WEIGHTS", "sglang", "python/sglang/srt/model_loader/loader.py",
              "load_weights_and_postprocess", 12),
    Placement("sglang", "OOM_KV_POOL", "sglang", "python/sglang/srt/mem_cache/memory_pool.py", "_create_buffers", 18),
    Placement("vllm", "OOM_WEIGHTS", "vllm", "vllm/model_executor/model_loader/base_loader.py",
              "BaseModelLoader.load_model", 29),
    Placement("vllm", "OOM_KV_POOL", "vllm", "vllm/v1/worker/gpu_model_runner.py",
              "GPUModelRunner._allocate_kv_cache_tensors", 48),
    Placement("sglang", "OOM_RUNTIME", "sglang", "", "", _ALL_PROGRESS),
    Placement("vllm", "OOM_RUNTIME", "vllm", "", "", _ALL_PROGRESS),
)


def places(row: Row) -> list[Placement]:
    """Where the row's message can show: its engine's placements (both engines' for "any"), at start-up, while
    serving, or both."""
    return [p for p in PLACEMENTS if row.engine in ("any", p.engine) and row.when in ("any", p.when)]


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


# once serving, a request served comes before the row's lines
_SG_SERVED = '[2026-03-31 10:01:00] INFO:     127.0.0.1:45700 - "POST /v1/chat/completions HTTP/1.1" 200 OK'
_VL_SERVED = '(APIServer pid=10) INFO:     127.0.0.1:50000 - "POST /v1/chat/completions HTTP/1.1" 200 OK'


# an exception line under an engine's log prefix: "(EngineCore_DP0 pid=1) ERROR 10-02 10:06:20 [core.py:710] ",
# V0's "ERROR 10-22 10:03:20 async_llm_engine.py:64] ", SGLang's "[2026-03-31 10:05:20 TP0] "
_LOG_PREFIX = re.compile(r"(?:\([\w.-]+ pid=\d+\) )?"
                         r"(?:(?:ERROR|WARNING|INFO|DEBUG|CRITICAL) [\d-]+ [\d:.]+ \[?[\w.]+:\d+\] "
                         r"|\[[\d-]+ [\d:.]+(?: [\w ]+)?\] )?")


def _as_printed(row: Row, cut: bool) -> list[str]:
    """A second-part row's lines as the log shows them; an exception's traceback (its wait's frames, or a frame of the
    raising file) just above its exception line, under the same prefix. `cut`: the log ends at the last frame."""
    lines = list(row.printed)
    if row.via != "exception":
        return lines
    at, prefix = len(lines) - 1, ""
    for i in range(len(lines) - 1, -1, -1):
        prefix = _LOG_PREFIX.match(lines[i]).group(0)  # type: ignore[union-attr]  # the pattern matches "" at worst
        if _EXCEPTION.match(lines[i], len(prefix)):
            at = i
            break
    raising = f'/usr/local/lib/python3.12/dist-packages/{row.file.removeprefix("python/")}'
    frames = list(row.frames) or [f'  File "{raising}", line 100, in <module>']
    if not any("Traceback (most recent call last):" in line for line in lines[:at]):
        frames = ["Traceback (most recent call last):", *frames]
    shown = [*lines[:at], *(prefix + frame for frame in frames)]
    return shown if cut else [*shown, *lines[at:]]


def render(row: Row, place: Placement, cut: bool = False) -> str:
    """The log a user sees when the runtime prints `row` at `place`; `cut` (a second-part row): a traceback posted
    without its exception line and what follows. A first-part row is placed at start-up only."""
    if row.as_printed:
        served = [] if place.when == "start-up" else [_SG_SERVED if place.engine == "sglang" else _VL_SERVED]
        return "\n".join([*_progress(place), *served, *_as_printed(row, cut)])
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
    """A look-alike of the first part ends the log in a failure, which must read as neither of the three families nor
    as no failure; one of the second part may be a wait still under way (a server still loading, or serving), so it
    must only not read as the three."""
    want = expected(row, place)
    if want != "NOT_THESE":
        return got == want
    return got not in (_THREE if row.as_printed else _NOT_THESE)


def score(rows: list[Row]) -> list[tuple[Row, Placement, str]]:
    """Each row at each placement, with the outcome the classifier reads from the rendered log."""
    out = []
    for row in rows:
        for place in places(row):
            got = classify_text(render(row, place), place.engine)
            out.append((row, place, got.outcome.value if got.outcome else "None"))
    return out


def score_cut(rows: list[Row]) -> list[tuple[Row, Placement, str]]:
    """Each row that names the frames of its wait, its traceback cut below them, at each of its placements."""
    out = []
    for row in rows:
        if row.as_printed and row.via == "exception" and row.frames:
            for place in places(row):
                got = classify_text(render(row, place, cut=True), place.engine)
                out.append((row, place, got.outcome.value if got.outcome else "None"))
    return out


def main() -> None:
    rows = load()
    results = score(rows)
    ok = Counter((row.family, right(row, place, got)) for row, place, got in results)
    total = sum(ok[(f, True)] for f in FAMILIES)
    print(f"the runtimes' own messages (a census of their sources): {len(rows)} messages, each where its engine and "
          f"moment place it (of {len(PLACEMENTS)} places); {total}/{len(results)} read as their source means")
    for family in FAMILIES:
        n = ok[(family, True)] + ok[(family, False)]
        if n:
            print(f"  {family:15s} {ok[(family, True)]}/{n}")
    by_part = Counter((row.part, right(row, place, got)) for row, place, got in results)
    print("  by part:", ", ".join(f"{part} {by_part[(part, True)]}/{by_part[(part, True)] + by_part[(part, False)]}"
                                  for part in sorted({row.part for row in rows})))
    cut = score_cut(rows)
    if cut:
        print(f"  the same tracebacks cut below the frames of their wait (no exception line): "
              f"{sum(right(row, place, got) for row, place, got in cut)}/{len(cut)}")
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
