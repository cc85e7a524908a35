"""The partial-log ceiling `make corpus` prints (tools/accuracy/corpus.py): what any reading of what the classifier
settles on could reach on cut logs, each (outcome, phase, confidence) group given its commonest label."""

from __future__ import annotations

from pathlib import Path

from autotune.classifier.corpus import CaseResult, CorpusCase
from autotune.records import Classification, Outcome, Phase
from tools.accuracy.corpus import _partial_ceiling


def _result(label: str, outcome: Outcome | None, phase: Phase, *, partial: bool = True) -> CaseResult:
    case = CorpusCase("1", "vllm", label, "high", partial, "x/y", "", Path("1.log"))
    return CaseResult(case, Classification(outcome, phase, confidence="low"))


def test_the_ceiling_gives_each_group_its_commonest_label_and_counts_the_undecided() -> None:
    results = [
        # undecided at the weights: two labels say CRASH, one READY -> 2 of 3 at best
        _result("CRASH", None, Phase.WEIGHTS), _result("CRASH", None, Phase.WEIGHTS), _result("READY", None, Phase.WEIGHTS),
        # read as a crash while the KV pool is set up: OOM_KV_POOL twice, CRASH once -> 2 of 3 at best (the reading
        # itself is right once)
        _result("OOM_KV_POOL", Outcome.CRASH, Phase.KV_POOL), _result("OOM_KV_POOL", Outcome.CRASH, Phase.KV_POOL),
        _result("CRASH", Outcome.CRASH, Phase.KV_POOL),
        # a complete log is not counted
        _result("READY", None, Phase.WEIGHTS, partial=False)]
    said = _partial_ceiling(results)
    assert "no outcome in view: 3/6 (50 %)" in said
    assert said.endswith("fitted on these logs: 4/6 (67 %)")
