"""The classifier on the repository's own extra corpus (tests/data/corpus-extra), which always
runs: a clone without ../shared still has it.

Batch A (ids 2xx) was read while the phase rules were written; batch B (ids 3xx) was labelled and
committed before them and scored once on the pinned commit (docs/corpus-protocol.md). The floors
are what the classifier really reaches, so a regression fails. Partial logs (cut before their
deciding line) must still get the most likely class and say what is missing.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from autotune.classifier import corpus
from autotune.classifier.classify import classify_text
from autotune.records import Outcome

EXTRA = Path(__file__).resolve().parent / "data" / "corpus-extra"
COMPLETE_FLOOR = 0.9  # 14/14 at the time of writing
# 3/12 since a traceback cut in serving, capture or distributed-init frames is guessed a crash, its phase's memory
# failure the alternative (docs/corpus-protocol.md, "Cut tracebacks: the guess from what most were"): this batch's
# four such partial excerpts were memory (7/12 before); across every corpus such cuts were crashes 59 to 31.
PARTIAL_FLOOR = 0.25


@pytest.fixture(scope="module")
def results() -> list[corpus.CaseResult]:
    return corpus.evaluate(corpus.load(EXTRA))


def test_every_log_has_its_source_link_and_a_batch() -> None:
    for line in (EXTRA / "index.jsonl").read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        assert row["url"].startswith("https://github.com/"), row["id"]
        assert row["batch"] == ("A" if row["id"].startswith("2") else "B"), row["id"]
        assert (EXTRA / f"{row['id']}.log").is_file()


def test_complete_logs_reach_the_floor(results: list[corpus.CaseResult]) -> None:
    print("\n" + corpus.accuracy_table(results))
    right, total = corpus.score(results, complete=True)
    assert total >= 14
    assert right >= COMPLETE_FLOOR * total, [corpus.describe_miss(r) for r in results if not r.right]


def test_partial_logs_reach_the_floor(results: list[corpus.CaseResult]) -> None:
    right, total = corpus.score(results, complete=False)
    assert total >= 12
    assert right >= PARTIAL_FLOOR * total


def test_a_guess_on_a_cut_log_is_low_confidence_and_says_what_is_missing(results: list[corpus.CaseResult]) -> None:
    for r in results:
        if r.case.partial and r.got.outcome is not None and r.got.missing:
            assert r.got.confidence == "low", r.case.id
    cut = next(r for r in results if r.case.id == "211")  # sglang#445: ends inside the model's constructor
    assert cut.got.outcome is Outcome.OOM_WEIGHTS and cut.got.confidence == "low"
    assert "exception line" in cut.got.missing and cut.got.to_dict()["missing"] == cut.got.missing


def test_an_oom_reported_by_a_dead_engine_to_its_clients_is_runtime() -> None:
    # vllm#15039 (corpus-extra 203): no start-up line, the OOM only inside MQEngineDeadError's text.
    got = classify_text((EXTRA / "203.log").read_text(encoding="utf-8"), "vllm")
    assert got.outcome is Outcome.OOM_RUNTIME and got.confidence == "high" and not got.missing


def test_a_complete_verdict_misses_nothing(results: list[corpus.CaseResult]) -> None:
    decided = [r for r in results if r.got.confidence == "high" and r.got.outcome is not None]
    assert decided and all(r.got.missing == "" for r in decided)
