"""Score the classifier on the engines' own start-up raise sites (tests/data/source-census).

Each row of a census is one place an engine's source raises, asserts or logs while it starts,
with the outcome the source says it means. Rendered as the log a user would see, the classifier
must read it as that outcome. Unlike the corpora, these are not logs someone posted: they are
every check the source has, the rare ones too, so a rule written from one posted log is measured
here on the checks it was not written from.

    python -m tools.accuracy.census      # each engine's figure by class, then each disagreement
"""

from __future__ import annotations

import json
import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from autotune.classifier.classify import LogClassifier, classify_text
from autotune.records import Phase

CENSUS = Path(__file__).resolve().parents[2] / "tests" / "data" / "source-census"
# each census file: the newest versions' (`sglang`, `vllm`), then older versions' sites the newest lack
CENSUSES = ("sglang", "vllm", "sglang-0.4", "vllm-0.6", "sglang-0.4.10", "vllm-0.8")


@dataclass(frozen=True)
class Row:
    engine: str
    file: str
    function: str
    exception: str  # "ValueError", "logger.warning", "torch.OutOfMemoryError (implicit)", ...
    message: str
    outcome: str
    why: str
    chain: tuple[str, ...]
    process: str  # vLLM: api_server, engine_core or worker (V0: engine or worker); SGLang: "" (read from the chain)
    version: str = ""  # "" for the newest census; an older census names the version it was read from

    @property
    def logged(self) -> bool:
        return self.exception.startswith(("logger.", "logging.", "warnings.warn"))

    def logged_line(self, header: str) -> str:
        """The line a logged site prints: under the logger's `header`, or as Python's warnings module prints one."""
        if self.exception.startswith("warnings.warn"):
            category = self.exception.partition("(")[2].rstrip(")") or "UserWarning"
            return f"{Path(self.file).name}:100: {category}: {self.message}"
        return f"{header}{self.message}"

    @property
    def exc(self) -> str:
        return self.exception.replace("(implicit)", "").strip()


def load(name: str) -> list[Row]:
    """The rows of census `name` (`sglang`, `vllm-0.6`, ...: the file's stem; its engine is the part before `-`)."""
    engine = name.split("-")[0]
    rows = []
    for line in (CENSUS / f"{name}.jsonl").read_text(encoding="utf-8").splitlines():
        if line.strip():
            r = json.loads(line)
            rows.append(Row(engine, r["file"], r["function"], r["exception"], r["message"].replace(" (implicit)", ""),
                            r["outcome"], r["why"], tuple(r.get("call_chain") or (r["function"],)),
                            r.get("process", ""), r.get("version", "")))
    return rows


def _frames(row: Row, root: str, neutral: str, start: str = "") -> list[str]:
    """The call chain as Python prints it (from its frame `start` where it has one: a child process's own traceback
    begins there): the raising file for the last frame; a file that places nothing for the others (the census names
    their functions, not their files)."""
    chain = row.chain[row.chain.index(start):] if start in row.chain else row.chain
    out = []
    for i, name in enumerate(chain):
        path = row.file if i == len(chain) - 1 else neutral
        out += [f'  File "{root}{path}", line {100 + i}, in {name.split(".")[-1]}', "    ..."]
    return out


def _exception_line(row: Row) -> str:
    return f"{row.exc}: {row.message}" if row.message and "no message" not in row.message else row.exc


# -- SGLang: the launcher reads the arguments; the scheduler processes run everything after, under their fatal marker

_SG_ROOT = "/sgl-workspace/sglang/"
_SG_NEUTRAL = "python/sglang/srt/entrypoints/engine.py"
_SG_IN_SCHEDULER = ("run_scheduler_process", "Scheduler.__init__", "TpModelWorker", "ModelRunner")


def _render_sglang(row: Row) -> str:
    scheduler = any(name.startswith(_SG_IN_SCHEDULER) for name in row.chain)
    rank = " TP0" if scheduler else ""
    if row.logged:
        lines = [row.logged_line(f"[2026-03-31 10:00:01{rank}] ")]
        return "\n".join(lines + (["[2026-03-31 10:00:02] The server is fired up and ready to roll!"]
                                  if row.outcome == "READY" else []))
    frames = _frames(row, _SG_ROOT, _SG_NEUTRAL)
    if not scheduler:
        return "\n".join(["Traceback (most recent call last):", *frames, _exception_line(row)])
    return "\n".join([f"[2026-03-31 10:00:01{rank}] Scheduler hit an exception: Traceback (most recent call last):",
                      *frames, _exception_line(row), "",
                      "[2026-03-31 10:00:02] Received sigquit from a child process. It usually means the child failed."])


# -- vLLM (V1): the API server builds the config; the EngineCore process runs the executor; with several GPUs the
# workers load, profile and capture. Each process prefixes its lines; a child's failure is re-raised by its parent.

_VL_ROOT = "/usr/local/lib/python3.12/dist-packages/"
_VL_NEUTRAL = "vllm/entrypoints/cli/main.py"
_VL_PREFIX = {"api_server": "(APIServer pid=10)", "engine_core": "(EngineCore_0 pid=20)", "worker": "(Worker_TP0 pid=30)"}
_VL_FAILED = {"engine_core": ("core.py:708", "EngineCore failed to start."),  # (the logging module, its line)
              "worker": ("multiproc_executor.py:597", "WorkerProc failed to start.")}
_VL_ENGINE_DIED = "RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}"
_VL_WORKER_DIED = ("Exception: WorkerProc initialization failed due to an exception in a background process. "
                   "See stack trace for root cause.")
_VL_READY = ["(APIServer pid=10) INFO 09-04 10:00:09 [api_server.py:1900] Starting vLLM API server 0 on http://0.0.0.0:8000",
             "(APIServer pid=10) INFO:     Application startup complete."]


def _pydantic(row: Row) -> bool:
    """vLLM's config classes are pydantic dataclasses: a ValueError or assert inside one reaches the user wrapped."""
    return row.file.startswith("vllm/config") and row.exc in ("ValueError", "AssertionError")


def _render_vllm(row: Row) -> str:
    process = row.process if row.process in _VL_PREFIX else "api_server"
    prefix = _VL_PREFIX[process]
    if row.logged:
        level = "WARNING" if "warning" in row.exception else "ERROR"
        lines = [row.logged_line(f"{prefix} {level} 09-04 10:00:01 [{Path(row.file).name}:100] ")]
        return "\n".join(lines + (_VL_READY if row.outcome == "READY" else []))
    if _pydantic(row):
        kind = "Value error" if row.exc == "ValueError" else "Assertion failed"
        last = ["pydantic_core._pydantic_core.ValidationError: 1 validation error for VllmConfig",
                f"  {kind}, {row.message} [type={'value_error' if row.exc == 'ValueError' else 'assertion_error'}, "
                "input_value=ArgsKwargs((), {}), input_type=ArgsKwargs]"]
    else:
        last = _exception_line(row).splitlines()  # a message of several lines: each under the process's prefix
    trace = ["Traceback (most recent call last):", *_frames(row, _VL_ROOT, _VL_NEUTRAL), *last]
    if process == "api_server":
        return "\n".join(f"{prefix} {line}" for line in trace)
    module, failed = _VL_FAILED[process]
    header = f"{prefix} ERROR 09-04 10:00:02 [{module}] "
    lines = [header + line for line in (failed, *trace)]
    if process == "worker":  # the engine core re-raises its worker's failure
        module, failed = _VL_FAILED["engine_core"]
        core = f"{_VL_PREFIX['engine_core']} ERROR 09-04 10:00:03 [{module}] "
        lines += [core + line for line in (failed, "Traceback (most recent call last):", f'  File "{_VL_ROOT}'
                                           'vllm/v1/executor/multiproc_executor.py", line 500, in wait_for_ready',
                                           _VL_WORKER_DIED)]
    return "\n".join([*lines, f"{_VL_PREFIX['api_server']} {_VL_ENGINE_DIED}"])


# -- vLLM's V0 engine (0.6.x): the API server builds the config and starts the engine in a process of its own
# (MQLLMEngine), which logs its failure and the API server gives up; tensor-parallel workers are processes of their
# own again, whose failure the engine re-raises. Only the workers prefix their lines.

_V0_WORKER = "(VllmWorkerProcess pid=30)"
_V0_ENGINE = "ERROR 12-20 10:00:02 engine.py:366] "
_V0_GAVE_UP = ["Traceback (most recent call last):",
               f'  File "{_VL_ROOT}vllm/entrypoints/openai/api_server.py", line 230, in '
               "build_async_engine_client_from_engine_args", "    raise RuntimeError(",
               "RuntimeError: Engine process failed to start. See stack trace for the root cause."]


def _render_vllm_v0(row: Row) -> str:
    process = row.process if row.process in ("engine", "worker") else "api_server"
    if row.logged:
        level = "WARNING" if "warning" in row.exception else "ERROR"
        prefix = f"{_V0_WORKER} " if process == "worker" else ""
        lines = [row.logged_line(f"{prefix}{level} 12-20 10:00:01 {Path(row.file).name}:100] ")]
        ready = ["INFO 12-20 10:00:09 api_server.py:640] Starting vLLM API server on http://0.0.0.0:8000",
                 "INFO:     Application startup complete."]
        return "\n".join(lines + (ready if row.outcome == "READY" else []))
    start = "" if process == "api_server" else "run_mp_engine"  # the engine process's own traceback starts there
    trace = ["Traceback (most recent call last):", *_frames(row, _VL_ROOT, "vllm/engine/llm_engine.py", start),
             *_exception_line(row).splitlines()]
    if process == "api_server":
        return "\n".join(trace)
    lines = []
    if process == "worker":
        method = next((n.split(".")[-1] for n in reversed(row.chain) if n.split(".")[0] == "Worker"), "load_model")
        header = f"{_V0_WORKER} ERROR 12-20 10:00:02 multiproc_worker_utils.py:242] "
        lines += [header + line for line in (f"Exception in worker VllmWorkerProcess while processing method {method}.",
                                             *trace)]
    lines += [_V0_ENGINE + line for line in (row.message or row.exc, *trace)]
    return "\n".join(lines + _V0_GAVE_UP)


def render(row: Row) -> str:
    """The log a user sees when start-up reaches this site."""
    if row.engine == "sglang":
        return _render_sglang(row)
    return _render_vllm_v0(row) if _v0(row.version) else _render_vllm(row)


def _v0(version: str) -> bool:
    """vLLM before 0.8, whose only engine is V0 ("" is the newest census, V1)."""
    numbers = [int(n) for n in re.findall(r"\d+", version)[:2]]
    return bool(numbers) and tuple(numbers) < (0, 8)


def score(rows: list[Row]) -> list[tuple[Row, str]]:
    """Each row with the outcome the classifier reads from its rendered log."""
    out = []
    for row in rows:
        got = classify_text(render(row), row.engine)
        out.append((row, got.outcome.value if got.outcome else "None"))
    return out


# -- the start-up progress lines (progress.jsonl): each engine version's lines in the order a start-up prints them, with
# the phase each shows the server in; the classifier, fed the log line by line, must have reached that phase

_ORDER = [phase.value for phase in Phase]
_PLACED = ("load_weights", "kv_pool", "cuda_graph", "http", "ready")  # the phases a progress line decides an OOM by


def progress(variants: tuple[str, ...] = ("default", "tp2")) -> list[tuple[dict[str, object], str]]:
    """Each progress line of the census's sequences (`variants` of them) with the phase the classifier has reached
    after reading the sequence up to it."""
    rows = [json.loads(line) for line in (CENSUS / "progress.jsonl").read_text(encoding="utf-8").splitlines() if line]
    out = []
    for engine, version in dict.fromkeys((r["engine"], r["version"]) for r in rows):
        classifier = LogClassifier(engine)
        for row in sorted((r for r in rows if (r["engine"], r["version"]) == (engine, version)
                           and r["variant"] in variants), key=lambda r: int(r["order"])):
            for line in str(row["line"]).splitlines():
                classifier.feed(line)
            got = classifier.classification(None, log_complete=False).phase
            out.append((row, got.value if got else "None"))
    return out


def placed_too_early(results: list[tuple[dict[str, object], str]]) -> list[tuple[dict[str, object], str]]:
    """The lines of a placing phase (weights onward) after which the classifier stands in an earlier phase: an OOM
    right after them would be read as an earlier phase's."""
    return [(row, got) for row, got in results if row["phase"] in _PLACED
            and (got not in _ORDER or _ORDER.index(got) < _ORDER.index(str(row["phase"])))]


def main() -> None:
    for name in CENSUSES:
        rows = load(name)
        results = score(rows)
        right = sum(got == row.outcome for row, got in results)
        versions = sorted({row.version for row in rows if row.version})
        version = f" ({', '.join(versions)})" if versions else ""
        print(f"{name}{version}'s start-up raise sites (a census of its source): {right}/{len(results)} read as the "
              "source means")
        by_class = Counter((row.outcome, got == row.outcome) for row, got in results)
        for outcome in sorted({row.outcome for row, _ in results}):
            print(f"  {outcome:15s} {by_class[(outcome, True)]}/{by_class[(outcome, True)] + by_class[(outcome, False)]}")
        for row, got in results:
            if got != row.outcome:
                print(f"  - {row.file}:{row.function} {row.outcome} read as {got}: {row.exc}: {row.message[:110]}")
        print()
    reached = progress()
    early = placed_too_early(reached)
    placing = [line for line, _ in reached if line["phase"] in _PLACED]
    print(f"start-up progress lines (a census of five engine versions' sources): of {len(placing)} that mark weights "
          f"onward, {len(placing) - len(early)} leave the classifier at or past the phase they mark")
    for line, phase in early:
        print(f"  - {line['engine']} {line['version']} #{line['order']}: {line['phase']} read as {phase}: "
              f"{str(line['line'])[:100]}")


if __name__ == "__main__":
    main()
