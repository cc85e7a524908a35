"""Every outcome is handled by every consumer of its facts (records.OUTCOMES): the search reads
its side, `autotune report` draws it, the classifier places and words it. A new `Outcome` member
cannot fall through any of them silently (an UNKNOWN side, a KeyError in the plot, an empty remedy)."""

from __future__ import annotations

from pathlib import Path

import pytest
from matplotlib.colors import is_color_like
from matplotlib.markers import MarkerStyle

from autotune.classifier.classify import ENGINE_LOGS
from autotune.classifier.rules import resolve_oom
from autotune.config import LaunchConfig
from autotune.records import OUTCOMES, Need, Outcome, OutcomeFacts, Phase, Side, TrialResult
from autotune.report.markdown import write
from autotune.report.timeline import Bar
from autotune.search.knowledge import side_of


def _result(outcome: Outcome, needs: Need | None = None, mfs: float = 0.8) -> TrialResult:
    return TrialResult(trial_id=f"t-{outcome.value}", config=LaunchConfig(model_path="m", mem_fraction_static=mfs,
                                                                          context_length=8192),
                       engine="sglang", engine_version="0.5.23", outcome=outcome, phase=Phase.READY, remedy="r",
                       evidence=(), figures={}, argv=(), log_path="", exit_code=None, launched=True, wall_s=1.0,
                       gpu_s=1.0, gpus=(), kv_tokens=None, resolved={}, needs=needs)


def test_the_table_has_one_row_per_outcome() -> None:
    assert list(OUTCOMES) == list(Outcome)
    assert all(isinstance(facts, OutcomeFacts) for facts in OUTCOMES.values())


@pytest.mark.parametrize("outcome", list(Outcome))
def test_the_search_reads_each_outcome_by_its_declared_side(outcome: Outcome) -> None:
    """UNKNOWN only where the table says so, never by an omission; the need refines it only where declared."""
    facts = outcome.facts
    for needs in (None, *Need):
        assert side_of(_result(outcome, needs)) is facts.side_by_need.get(needs, facts.side)
    assert outcome.judges_config is (facts.side is not Side.UNKNOWN)
    assert outcome.fits is (facts.side is Side.FITS)


def test_the_report_draws_every_outcome(tmp_path: Path) -> None:
    """`autotune report` (markdown, explored-space plot, slot timeline) over one launch of each outcome."""
    for facts in OUTCOMES.values():
        MarkerStyle(facts.marker)  # raises on a marker matplotlib does not know
        assert is_color_like(facts.color), facts.color
    markers = [(f.marker, f.color) for f in OUTCOMES.values()]
    assert len(set(markers)) == len(markers), "two outcomes look the same in the plot"
    results = [_result(o, mfs=0.5 + 0.04 * i) for i, o in enumerate(Outcome)]
    bars = [Bar(0, float(i), i + 0.5, o.value, "search", f"#{i}") for i, o in enumerate(Outcome)]
    md, png = write("every-outcome", {"simulated": True}, {}, results, tmp_path, timeline=bars)
    assert png.stat().st_size > 0 and (tmp_path / "timeline.png").stat().st_size > 0
    assert all(o.value in md.read_text() for o in Outcome)


def test_every_outcome_has_a_remedy_or_says_why_not() -> None:
    for outcome, facts in OUTCOMES.items():
        assert bool(facts.remedy) != bool(facts.no_remedy), outcome


def _concluded_by_the_classifier() -> set[Outcome]:
    """The outcomes a log can be read as: by a rule (or its `unless`), or by a raw OOM's phase."""
    found = {Outcome.CONFIG_ERROR, Outcome.CRASH}  # verdict's own: exit status 2, an unexplained death
    for engine in ENGINE_LOGS.values():
        found |= {r.outcome for r in engine.rules if r.outcome is not None}
        found |= {u[1] for r in engine.rules for u in r.unless}
    for phase in Phase:
        for flags in (frozenset(), frozenset({"pool_done"})):
            placed = resolve_oom(phase, flags)
            found |= {placed[0]} if placed else set()
    return found


@pytest.mark.parametrize("engine", sorted(ENGINE_LOGS))
def test_each_engine_words_a_remedy_for_every_outcome_the_classifier_concludes(engine: str) -> None:
    """With no rule template and no special case, the verdict falls back to the engine's wording,
    else the outcome's default: neither may be empty for an outcome a log can be read as."""
    log = ENGINE_LOGS[engine]
    concluded = _concluded_by_the_classifier()
    assert concluded >= {o for o in Outcome if o.is_oom}
    for outcome in concluded:
        worded = log.fallback(outcome) or log.special(outcome, -1, "", {}, frozenset())
        assert worded, f"{engine} has no remedy for {outcome.value} ({outcome.facts.no_remedy})"


def test_a_raw_oom_in_an_outcomes_phase_is_that_outcome() -> None:
    """The classifier places a raw CUDA OOM by its phase (rules.resolve_oom) and an OOM class with no
    progress line by the table's phase: the two must agree for every outcome a raw OOM may be."""
    for outcome in (o for o in Outcome if o.is_oom or o is Outcome.GPU_BUSY):
        phase = outcome.facts.phase
        assert phase is not None, outcome
        placed = resolve_oom(phase, frozenset())
        assert placed is not None and placed[0] is outcome, (outcome, phase, placed)
