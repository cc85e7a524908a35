"""The classifier on the corpus of real user logs (../shared/corpus/logs, outside the repo).

Every clear case (high-confidence label, full log) must be classified right; the others
(partial logs, medium/low-confidence labels) are reported, not asserted. Run with `-s`
to see the accuracy table.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from autotune.engines import corpus

CORPUS = Path(__file__).resolve().parents[2] / "shared" / "corpus" / "logs"


@pytest.fixture(scope="module")
def results() -> list[corpus.CaseResult]:
    if not (CORPUS / "index.jsonl").is_file():
        pytest.skip(f"no corpus at {CORPUS}")
    return corpus.evaluate(corpus.load(CORPUS))


def test_every_clear_case_is_classified_right(results: list[corpus.CaseResult]) -> None:
    print("\n" + corpus.accuracy_table(results))
    misses = [r for r in results if not r.right]
    for miss in misses:
        print(corpus.describe_miss(miss))
    clear_misses = [corpus.describe_miss(r) for r in misses if r.case.clear]
    assert not clear_misses, "\n".join(clear_misses)
    assert sum(r.case.clear for r in results) >= 30  # the corpus is the one we know


def test_every_verdict_is_well_formed(results: list[corpus.CaseResult]) -> None:
    for r in results:
        got = r.got
        assert got.confidence in ("high", "low")
        assert len(got.evidence) <= 6
        if got.outcome is not None and got.outcome.value != "READY":
            assert got.remedy, r.case.id
            assert got.figures["mfs_direction"] in (-1, 0, 1)


def test_label_aliases() -> None:
    assert corpus.LABEL_ALIASES["CRASH_OTHER"] == "CRASH"
