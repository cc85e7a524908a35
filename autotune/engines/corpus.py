"""Accuracy of the log classifier on a labelled corpus of real user logs.

A corpus directory holds `index.jsonl` (one labelled case per line: `id`, `engine`,
`label`, `confidence` of the label, `partial`, `notes`, ...) and `<id>.log`. The corpus
names our CRASH `CRASH_OTHER`. A case is *clear* when its label has high confidence and
its log is not partial: the classifier must get every clear case right. The others
(partial logs, medium/low-confidence labels) are reported separately.
"""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

from autotune.engines.classify import classify_text
from autotune.records import Classification

LABEL_ALIASES = {"CRASH_OTHER": "CRASH"}


@dataclass(frozen=True)
class CorpusCase:
    id: str
    engine: str
    expected: str  # an Outcome value
    label_confidence: str
    partial: bool
    notes: str
    path: Path

    @property
    def clear(self) -> bool:
        return self.label_confidence == "high" and not self.partial


@dataclass(frozen=True)
class CaseResult:
    case: CorpusCase
    got: Classification

    @property
    def outcome(self) -> str:
        return self.got.outcome.value if self.got.outcome else "None"

    @property
    def right(self) -> bool:
        return self.outcome == self.case.expected


def load(directory: Path) -> list[CorpusCase]:
    """The cases of `directory`, sorted by id. FileNotFoundError if it has no index."""
    cases = []
    for line in (directory / "index.jsonl").read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        row = json.loads(line)
        label = LABEL_ALIASES.get(row["label"], row["label"])
        cases.append(CorpusCase(row["id"], row["engine"], label, row.get("confidence", "high"),
                                bool(row.get("partial")), row.get("notes", ""), directory / f"{row['id']}.log"))
    return sorted(cases, key=lambda c: c.id)


def evaluate(cases: list[CorpusCase]) -> list[CaseResult]:
    """Classify every case's log as a whole (decoded with errors replaced, exit code unknown)."""
    return [CaseResult(c, classify_text(c.path.read_bytes().decode("utf-8", errors="replace"), c.engine))
            for c in cases]


def accuracy_table(results: list[CaseResult]) -> str:
    """Right/total per expected class and engine, for clear cases and for the others."""
    lines = []
    for title, group in (("clear cases (high-confidence label, full log)", [r for r in results if r.case.clear]),
                         ("partial logs or medium/low-confidence labels", [r for r in results if not r.case.clear])):
        lines += [title, f"  {'class':<16}{'sglang':>10}{'vllm':>10}{'all':>10}"]
        counts: dict[tuple[str, str], list[int]] = defaultdict(lambda: [0, 0])
        for r in group:
            for key in ((r.case.expected, r.case.engine), (r.case.expected, "all"), ("TOTAL", r.case.engine),
                        ("TOTAL", "all")):
                counts[key][0] += r.right
                counts[key][1] += 1
        for cls in sorted({k[0] for k in counts} - {"TOTAL"}) + ["TOTAL"]:
            cells = [_cell(counts.get((cls, col))) for col in ("sglang", "vllm", "all")]
            lines.append(f"  {cls:<16}" + "".join(f"{c:>10}" for c in cells))
        lines.append("")
    return "\n".join(lines)


def _cell(count: list[int] | None) -> str:
    return "-" if not count else f"{count[0]}/{count[1]}"


def describe_miss(result: CaseResult) -> str:
    """A miss, for a human: id, expected, got, the classifier's confidence and its evidence."""
    c, got = result.case, result.got
    kind = "clear" if c.clear else ("partial" if c.partial else f"{c.label_confidence}-confidence label")
    head = f"{c.id} [{c.engine}, {kind}] expected {c.expected}, got {result.outcome} ({got.confidence})"
    body = [f"    evidence: {line}" for line in got.evidence] or ["    evidence: (none)"]
    return "\n".join([head, *body, f"    remedy: {got.remedy}" if got.remedy else "    remedy: -"])
