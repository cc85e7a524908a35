"""The classifier on the corpus of real user logs (../shared/corpus/logs, outside the repo).

What is asserted is what the classifier really reaches, so a regression fails: at least
FLOOR of the complete logs right, overall and without the rules written from a log's own
source (leave-one-source-out); the held-out figure of the structural stage, run from its
pinned commit, is reported. Partial logs (cut before their evidence) are reported, not
asserted. Skips cleanly when ../shared is absent. Run with `-s` to see the tables.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from autotune.classifier import corpus
from autotune.records import Outcome

REPO = Path(__file__).resolve().parents[1]
CORPUS = REPO.parent / "shared" / "corpus" / "logs"
FLOOR = 0.90


@pytest.fixture(scope="module")
def cases() -> list[corpus.CorpusCase]:
    if not (CORPUS / "index.jsonl").is_file():
        pytest.skip(f"a whole-corpus check: the shared log corpus is not at {CORPUS} (beside the repository)")
    return corpus.load(CORPUS)


def _report(results: list[corpus.CaseResult]) -> list[str]:
    print("\n" + corpus.accuracy_table(results))
    misses = [corpus.describe_miss(r) for r in results if not r.right and r.case.complete]
    print("\n".join(misses))
    return misses


def test_complete_logs_reach_the_floor(cases: list[corpus.CorpusCase]) -> None:
    results = corpus.evaluate(cases)
    misses = _report(results)
    right, total = corpus.score(results, complete=True)
    assert total >= 60, "the corpus shrank: the floor would mean less"
    assert right >= FLOOR * total, f"{right}/{total} complete logs right, below {FLOOR:.0%}:\n" + "\n".join(misses)


def test_the_floor_holds_without_rules_fitted_to_a_logs_own_source(cases: list[corpus.CorpusCase]) -> None:
    results = corpus.leave_one_source_out(cases)
    right, total = corpus.score(results, complete=True)
    assert right >= FLOOR * total, f"leave-one-source-out: {right}/{total} complete logs right"


def test_switching_off_fitted_rules_changes_what_they_decided(cases: list[corpus.CorpusCase]) -> None:
    # The leave-one-source-out figure is only honest if switching a rule off takes effect.
    fitted = corpus.fitted_rules(cases)
    assert fitted, "no rule records the cases it was written from"
    names = frozenset().union(*fitted.values())
    plain = corpus.evaluate(cases)
    without = corpus.evaluate(cases, lambda c: names)
    assert any(a.outcome != b.outcome for a, b in zip(plain, without, strict=True))


@pytest.mark.skipif(shutil.which("git") is None, reason="git is needed to run a pinned stage")
def test_the_structural_stage_generalised_to_logs_it_never_saw(cases: list[corpus.CorpusCase]) -> None:
    stage = next(s for s in corpus.stages() if s.name == "structural rules")
    present = subprocess.run(["git", "-C", str(REPO), "cat-file", "-e", f"{stage.commit}^{{commit}}"],
                             capture_output=True, check=False)
    if present.returncode != 0:
        pytest.skip(f"a clone without the pinned commit {stage.commit[:10]} (shallow?)")
    outcomes = corpus.held_out(stage, cases, REPO)  # the stage at hand must run: a failure here is a failure
    unseen = [c for c in cases if c.complete and c.id in outcomes]
    right = sum(outcomes[c.id] == c.expected for c in unseen)
    print(f"\nheld out ({stage.commit[:10]}): {right}/{len(unseen)} complete logs right")
    assert len(unseen) >= 20 and right >= FLOOR * len(unseen)


@pytest.mark.parametrize("damage", sorted(corpus.DAMAGE))
def test_damaged_pastes_keep_their_verdict(cases: list[corpus.CorpusCase], damage: str) -> None:
    results = corpus.evaluate_damaged(cases, corpus.DAMAGE[damage])
    right, total = corpus.score(results, complete=True)
    assert right >= FLOOR * total, f"{damage}: {right}/{total} complete logs right"


def test_every_verdict_is_well_formed(cases: list[corpus.CorpusCase]) -> None:
    for r in corpus.evaluate(cases):
        got = r.got
        assert got.confidence in ("high", "low")
        assert len(got.evidence) <= 6
        if got.outcome is not None and got.outcome is not Outcome.READY:
            assert got.remedy, r.case.id
            assert got.figures["mfs_direction"] in (-1, 0, 1)
        if got.outcome is Outcome.OOM_RUNTIME and not got.missing:  # placed there only by a sign the server was up
            assert got.phase.rank >= got.phase.HTTP.rank, r.case.id


def test_labels_are_read_in_our_vocabulary(tmp_path: Path) -> None:
    (tmp_path / "index.jsonl").write_text(
        '{"id": "001", "engine": "vllm", "label": "CRASH_OTHER", "source": "vllm-project/vllm#1 (comment)"}\n'
        '{"id": "002", "engine": "sglang", "label": "READY", "partial": true, "source": "a/b#2"}\n')
    (tmp_path / "001.log").write_text("RuntimeError: NCCL error: unhandled system error\n")
    (tmp_path / "002.log").write_text("Decode batch. #running-req: 3, #token: 100, token usage: 0.01\n")
    loaded = corpus.load(tmp_path)
    assert [(c.expected, c.source, c.complete) for c in loaded] == [
        ("CRASH", "vllm-project/vllm", True), ("READY", "a/b", False)]
    assert [r.right for r in corpus.evaluate(loaded)] == [True, True]


def test_a_reading_misleads_only_when_wrong_sure_and_single(tmp_path: Path) -> None:
    """`misleads` is the reading the search would act on wrongly: wrong at a confidence not low, with the label
    among no alternative. A right reading, a low one, one naming the label as its alternative, or none does not."""
    from autotune.records import Classification, Phase
    case = corpus.CorpusCase("001", "vllm", "OOM_KV_POOL", "high", False, "a/b", "", tmp_path / "001.log")
    reading = {
        "right": Classification(Outcome.OOM_KV_POOL, Phase.KV_POOL),
        "sure and wrong": Classification(Outcome.CRASH, Phase.KV_POOL),
        "low": Classification(Outcome.CRASH, Phase.KV_POOL, confidence="low"),
        "the label an alternative": Classification(Outcome.OOM_RUNTIME, Phase.KV_POOL,
                                                   alternatives=((Outcome.OOM_KV_POOL, "why"),)),
        "none": Classification(None, Phase.KV_POOL),
    }
    assert {name for name, got in reading.items() if corpus.CaseResult(case, got).misleads} == {"sure and wrong"}
