"""Score the classifier on SGLang's own start-up raise sites (tests/data/sglang-source-census).

Each row of the census is one place SGLang's source raises, asserts or logs while it starts, with
the outcome the source says it means. Rendered as the log a user would see, the classifier must
read it as that outcome. Unlike the corpora, these are not logs someone posted: they are every
check the source has, the rare ones too, so a rule written from one posted log is measured here
on the checks it was not written from.

    python -m tools.accuracy.census      # the figure by class, then each disagreement
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from autotune.classifier.classify import classify_text

CENSUS = Path(__file__).resolve().parents[2] / "tests" / "data" / "sglang-source-census" / "census.jsonl"
_ROOT = "/sgl-workspace/sglang/"
_NEUTRAL = "python/sglang/srt/entrypoints/engine.py"  # a frame of the chain the row does not locate: places nothing
_STAMP = "[2026-03-31 10:00:0{s}{rank}]"
_READY = "The server is fired up and ready to roll!"
_SIGQUIT = "Received sigquit from a child process. It usually means the child failed."
# The scheduler processes run everything after the arguments are read: their failures come under its fatal marker.
_IN_SCHEDULER = ("run_scheduler_process", "Scheduler.__init__", "TpModelWorker", "ModelRunner")


@dataclass(frozen=True)
class Row:
    file: str
    function: str
    exception: str
    message: str
    outcome: str
    why: str
    chain: tuple[str, ...]

    @property
    def in_scheduler(self) -> bool:
        return any(name.startswith(_IN_SCHEDULER) for name in self.chain)


def load(path: Path = CENSUS) -> list[Row]:
    rows = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip():
            r = json.loads(line)
            rows.append(Row(r["file"], r["function"], r["exception"], r["message"].replace(" (implicit)", ""),
                            r["outcome"], r["why"], tuple(r.get("call_chain") or (r["function"],))))
    return rows


def render(row: Row) -> str:
    """The log a user sees when start-up reaches this site: a warning (then, for a site start-up goes on from, the
    ready line), or the traceback through the call chain, under the scheduler's fatal marker where a scheduler runs it."""
    rank = " TP0" if row.in_scheduler else ""
    exception = row.exception.replace("(implicit)", "").strip()
    if exception.startswith(("logger.", "logging.")):
        lines = [f"{_STAMP.format(s=1, rank=rank)} {row.message}"]
        return "\n".join(lines + ([f"{_STAMP.format(s=2, rank='')} {_READY}"] if row.outcome == "READY" else []))
    frames = []
    for i, name in enumerate(row.chain):
        path = row.file if i == len(row.chain) - 1 else _NEUTRAL
        frames += [f'  File "{_ROOT}{path}", line {100 + i}, in {name.split(".")[-1]}', "    ..."]
    last = f"{exception}: {row.message}" if row.message and "no message" not in row.message else exception
    if not row.in_scheduler:
        return "\n".join(["Traceback (most recent call last):", *frames, last])
    return "\n".join([f"{_STAMP.format(s=1, rank=rank)} Scheduler hit an exception: Traceback (most recent call last):",
                      *frames, last, "", f"{_STAMP.format(s=2, rank='')} {_SIGQUIT}"])


def score(rows: list[Row]) -> list[tuple[Row, str]]:
    """Each row with the outcome the classifier reads from its rendered log."""
    out = []
    for row in rows:
        got = classify_text(render(row), "sglang")
        out.append((row, got.outcome.value if got.outcome else "None"))
    return out


def main() -> None:
    results = score(load())
    right = sum(got == row.outcome for row, got in results)
    print(f"SGLang's start-up raise sites (census of its source): {right}/{len(results)} read as the source means")
    by_class = Counter((row.outcome, got == row.outcome) for row, got in results)
    for outcome in sorted({row.outcome for row, _ in results}):
        print(f"  {outcome:15s} {by_class[(outcome, True)]}/{by_class[(outcome, True)] + by_class[(outcome, False)]}")
    for row, got in results:
        if got != row.outcome:
            print(f"  - {row.file}:{row.function} {row.outcome} read as {got}: {row.exception}: {row.message[:120]}")


if __name__ == "__main__":
    main()
