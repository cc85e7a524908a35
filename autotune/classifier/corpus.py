"""Accuracy of the log classifier on a labelled corpus of real user logs, measured honestly.

A corpus directory holds `index.jsonl` (one labelled case per line: `id`, `engine`,
`label`, `confidence` of the label, `partial`, `source`, `notes`, ...) and `<id>.log`.
The corpus names our CRASH `CRASH_OTHER`. Complete logs and partial ones (cut before the
evidence) are always counted apart.

Scoring a classifier on the logs its rules were written from measures memory, not
understanding (docs/corpus-protocol.md). Besides the plain figure this module gives:
- `leave_one_source_out`: each case classified with every rule `derived_from` a case of
  the same source repository switched off;
- `held_out`: each pinned stage of the classifier (`autotune/data/corpus_pins.json`: a git
  commit and the first case id written after it) run from git on the cases it never saw.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import tarfile
import tempfile
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from autotune.classifier.classify import ENGINE_LOGS, classify_text, classify_unnamed
from autotune.records import Classification

LABEL_ALIASES = {"CRASH_OTHER": "CRASH"}
_RUN_AT_COMMIT = """
import json, sys
from pathlib import Path
# A stage pinned before the classifier left engines/ has it there. Asked by path, not by trying the new
# import: an installed (editable) autotune would answer `autotune.classifier` from today's tree.
if Path('autotune/classifier/classify.py').is_file():
    from autotune.classifier.classify import classify_text
else:
    from autotune.engines.classify import classify_text
out = {}
for case_id, engine, path in json.load(sys.stdin):
    got = classify_text(Path(path).read_bytes().decode("utf-8", errors="replace"), engine)
    out[case_id] = got.outcome.value if got.outcome else "None"
print(json.dumps(out))
"""


@dataclass(frozen=True)
class CorpusCase:
    id: str
    engine: str
    expected: str  # an Outcome value
    label_confidence: str
    partial: bool
    source: str  # the repository the log was taken from ("vllm-project/vllm")
    notes: str
    path: Path

    @property
    def complete(self) -> bool:
        return not self.partial


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

    @property
    def readings(self) -> frozenset[str]:
        """The classes the classification names: its outcome and each alternative (an ambiguous log says both)."""
        return frozenset({self.outcome, *(o.value for o, _ in self.got.alternatives)})

    @property
    def misleads(self) -> bool:
        """Wrong, and nothing in the reading says so: an outcome that is not the label, at a confidence that is
        not low, the label not among its alternatives. The search acts on such a reading as it stands; a low or
        ambiguous one it reads conservatively, no outcome not at all."""
        return (self.got.outcome is not None and self.got.confidence != "low"
                and self.case.expected not in self.readings)


def load(directory: Path) -> list[CorpusCase]:
    """The cases of `directory`, sorted by id. FileNotFoundError if it has no index."""
    cases = []
    for line in (directory / "index.jsonl").read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        row = json.loads(line)
        label = LABEL_ALIASES.get(row["label"], row["label"])
        source = str(row.get("source", "")).split("#")[0].split(" ")[0].strip() or "unknown"
        cases.append(CorpusCase(row["id"], row["engine"], label, row.get("confidence", "high"),
                                bool(row.get("partial")), source, row.get("notes", ""),
                                directory / f"{row['id']}.log"))
    return sorted(cases, key=lambda c: c.id)


def case_text(case: CorpusCase) -> str:
    """The case's log as the classifier reads it."""
    return case.path.read_bytes().decode("utf-8", errors="replace")


def evaluate(cases: list[CorpusCase],
             without: Callable[[CorpusCase], frozenset[str]] | None = None) -> list[CaseResult]:
    """Classify every case's log as a whole (exit code unknown); `without(case)` names rules to
    switch off for that case."""
    return [CaseResult(c, classify_text(case_text(c), c.engine, without=without(c) if without else frozenset()))
            for c in cases]


def fitted_rules(cases: Iterable[CorpusCase]) -> dict[str, frozenset[str]]:
    """For each source repository: the rules written from one of its cases."""
    by_id = {c.id: c.source for c in cases}
    fitted: dict[str, set[str]] = defaultdict(set)
    for log in ENGINE_LOGS.values():
        for rule in log.rules:
            for case_id in rule.derived_from:
                fitted[by_id.get(case_id, "unknown")].add(rule.name)
    return {source: frozenset(names) for source, names in fitted.items()}


def leave_one_source_out(cases: list[CorpusCase]) -> list[CaseResult]:
    """Each case classified without the rules written from any case of its source repository."""
    fitted = fitted_rules(cases)
    return evaluate(cases, lambda c: fitted.get(c.source, frozenset()))


@dataclass(frozen=True)
class Stage:
    name: str
    commit: str
    written_from: str
    held_out_from_id: int
    corpus: str = "shared"  # which corpus its held-out ids are in: "shared" or "extra" (tests/data/corpus-extra)


def stages(corpus: str | None = None) -> list[Stage]:
    """The pinned stages of the classifier (docs/corpus-protocol.md), those of `corpus` if given."""
    data = json.loads(resources.files("autotune.data").joinpath("corpus_pins.json").read_text(encoding="utf-8"))
    found = [Stage(s["name"], s["commit"], s["written_from"], int(s["held_out_from_id"]), s.get("corpus", "shared"))
             for s in data["stages"]]
    return [s for s in found if corpus is None or s.corpus == corpus]


def held_out(stage: Stage, cases: list[CorpusCase], repo: Path) -> dict[str, str]:
    """Outcome per case id of `stage`'s classifier, checked out from git, on the cases written
    after it. Raises RuntimeError when git or the commit is not at hand."""
    unseen = [c for c in cases if int(c.id) >= stage.held_out_from_id]
    archive = subprocess.run(["git", "-C", str(repo), "archive", stage.commit, "autotune"],
                             capture_output=True, check=False)
    if archive.returncode != 0:
        raise RuntimeError(f"git archive {stage.commit[:10]} failed: {archive.stderr.decode(errors='replace')[:200]}")
    with tempfile.TemporaryDirectory(prefix="corpus-stage-") as tmp:
        with tarfile.open(fileobj=io.BytesIO(archive.stdout)) as tar:
            tar.extractall(tmp, filter="data")
        payload = json.dumps([[c.id, c.engine, str(c.path)] for c in unseen])
        env = {**os.environ, "PYTHONPATH": tmp}
        done = subprocess.run([sys.executable, "-c", _RUN_AT_COMMIT], input=payload, capture_output=True,
                              text=True, cwd=tmp, env=env, check=False, timeout=300)
    if done.returncode != 0:
        raise RuntimeError(f"stage {stage.name} failed to run: {done.stderr[-300:]}")
    return dict(json.loads(done.stdout))


def _hard_wrap(text: str, width: int) -> str:
    out = []
    for line in text.splitlines():
        while len(line) > width:
            out.append(line[:width])
            line = line[width:]
        out.append(line)
    return "\n".join(out)


# The damage users' pastes carry, applied to every log: the verdict should not change.
DAMAGE: dict[str, Callable[[str], str]] = {
    "hard-wrapped at 80 columns": lambda t: _hard_wrap(t, 80),
    "hard-wrapped at 120 columns": lambda t: _hard_wrap(t, 120),
    "quoted in markdown": lambda t: "\n".join("> " + line for line in t.splitlines()),
    "ANSI colours": lambda t: "\n".join("\x1b[1;32m" + line[:12] + "\x1b[0m" + line[12:] for line in t.splitlines()),
    "indentation lost, CRLF": lambda t: "\r\n".join(line.lstrip() for line in t.splitlines()),
    # a collector's prefix on every line: `docker logs -t` / `kubectl logs --timestamps`, and journald's
    "container timestamps": lambda t: "\n".join(f"2026-12-05T10:{i // 60 % 60:02d}:{i % 60:02d}.{i:09d}Z " + line
                                                for i, line in enumerate(t.splitlines())),
    "journald prefix": lambda t: "\n".join(f"Dec 05 10:00:{i % 60:02d} gpu-node-3 python3[48213]: " + line
                                           for i, line in enumerate(t.splitlines())),
}


def evaluate_unnamed(cases: list[CorpusCase]) -> list[tuple[CaseResult, str | None]]:
    """Every case classified as `autotune classify` reads a log nobody named the engine of (`classify_unnamed`), with
    the engine its lines named (None where they named none)."""
    out = []
    for c in cases:
        text = case_text(c)
        engine, said, got = classify_unnamed(text.splitlines)
        out.append((CaseResult(c, got), engine if said else None))
    return out


def evaluate_damaged(cases: list[CorpusCase], damage: Callable[[str], str]) -> list[CaseResult]:
    """Classify every case's log after `damage` was done to its text."""
    return [CaseResult(c, classify_text(damage(case_text(c)), c.engine)) for c in cases]


def score(results: Iterable[CaseResult], *, complete: bool) -> tuple[int, int]:
    """Right and total among complete (or partial) cases."""
    group = [r for r in results if r.case.complete is complete]
    return sum(r.right for r in group), len(group)


def accuracy_table(results: list[CaseResult]) -> str:
    """Right/total per expected class and engine, for complete logs and for partial ones apart."""
    lines = []
    for title, group in (("complete logs", [r for r in results if r.case.complete]),
                         ("partial logs (cut before the evidence)", [r for r in results if r.case.partial])):
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
    """A miss, for a human: id, expected, got, the classifier's confidence, its evidence, and
    the label's own note (which says what the log shows and lacks)."""
    c, got = result.case, result.got
    kind = "partial" if c.partial else "complete"
    head = (f"{c.id} [{c.engine}, {kind}, {c.label_confidence}-confidence label] expected {c.expected}, "
            f"got {result.outcome} ({got.confidence})")
    body = [f"    evidence: {line}" for line in got.evidence] or ["    evidence: (none)"]
    note = c.notes if len(c.notes) <= 300 else c.notes[:297] + "..."
    return "\n".join([head, *body, f"    remedy: {got.remedy or '-'}", f"    label note: {note or '-'}"])
