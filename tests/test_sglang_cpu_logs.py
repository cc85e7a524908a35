"""The classifier on real logs of SGLang's CPU path, 0.5.9 and 0.5.23 (tests/data/sglang-cpu, see its README).

Each log is fed line by line as the trial watcher does and must be decided live (the failure is
decisive, or the ready line was seen) with the right outcome, and read whole, with the exit status the
launch really had, to the same outcome, phase, remedy direction and the engine's own figures. The knobs
this device cannot run are CONFIG_ERROR with the knob to turn off in the remedy, never CRASH or an OOM;
a server that was ready and then stopped with SIGTERM is READY, whatever 0.5.23 logs on the way out.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

from autotune.classifier.classify import LogClassifier, classify_text
from autotune.records import Need, Outcome, Phase

DATA = Path(__file__).resolve().parent / "data" / "sglang-cpu"
ENGINES = ("sglang-cpu", "sglang")  # the engine the tool launches these as, and the CLI's `--engine sglang`
OOMS = {Outcome.OOM_KV_POOL, Outcome.OOM_WEIGHTS, Outcome.OOM_CUDA_GRAPH, Outcome.OOM_RUNTIME}
SPEC_OFF = "no --speculative-algorithm"
COMPILE_OFF = "no --enable-torch-compile"


@dataclass(frozen=True)
class Case:
    outcome: Outcome
    phase: Phase
    exit_code: int  # the launcher's real exit status (README)
    needs: Need | None = None
    remedy: str = ""  # words the remedy must hold: the knob, or the direction and the engine's figure
    figures: tuple[tuple[str, float], ...] = ()


CASES = {
    "0.5.9-ready-sigterm.log": Case(Outcome.READY, Phase.READY, 137, figures=(("kv_tokens", 7395),)),
    "0.5.23-ready-sigterm.log": Case(Outcome.READY, Phase.READY, 137, figures=(("kv_tokens", 9887),)),
    "0.5.9-mfs-0.03.log": Case(Outcome.OOM_KV_POOL, Phase.KV_POOL, 137, Need.MORE_FRACTION,
                               "raise --mem-fraction-static (now 0.03)", (("mem_fraction_static", 0.03),)),
    "0.5.9-mfs-0.001.log": Case(Outcome.OOM_KV_POOL, Phase.KV_POOL, 137, Need.MORE_FRACTION,
                                "raise --mem-fraction-static (now 0.001)", (("mem_fraction_static", 0.001),)),
    # "Raise --mem-fraction-static above X": X is the lower bound the estimator learns from
    "0.5.23-mfs-0.03.log": Case(Outcome.OOM_KV_POOL, Phase.KV_POOL, 137, Need.MORE_FRACTION,
                                "raise --mem-fraction-static above 0.061",
                                (("mem_fraction_static", 0.03), ("min_mem_fraction_static", 0.061))),
    "0.5.23-mfs-0.001.log": Case(Outcome.OOM_KV_POOL, Phase.KV_POOL, 137, Need.MORE_FRACTION,
                                 "raise --mem-fraction-static above 0.058",
                                 (("mem_fraction_static", 0.001), ("min_mem_fraction_static", 0.058))),
    "0.5.9-torch-compile.log": Case(Outcome.CONFIG_ERROR, Phase.CUDA_GRAPH, 137, None, COMPILE_OFF),
    "0.5.23-torch-compile.log": Case(Outcome.CONFIG_ERROR, Phase.CUDA_GRAPH, 137, None, COMPILE_OFF),
    "0.5.9-ngram.log": Case(Outcome.CONFIG_ERROR, Phase.ARGS, 1, None, SPEC_OFF),
    "0.5.23-ngram.log": Case(Outcome.CONFIG_ERROR, Phase.KV_POOL, 137, None, SPEC_OFF),
    "0.5.9-standalone.log": Case(Outcome.CONFIG_ERROR, Phase.KV_POOL, 137, None, SPEC_OFF),
    "0.5.23-standalone.log": Case(Outcome.CONFIG_ERROR, Phase.KV_POOL, 137, None, SPEC_OFF),
}


def _lines(name: str) -> list[str]:
    return (DATA / name).read_bytes().decode("utf-8", errors="replace").splitlines()


def test_every_captured_log_has_a_case() -> None:
    assert sorted(p.name for p in DATA.glob("*.log")) == sorted(CASES)


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("name", sorted(CASES))
def test_a_real_sglang_cpu_log_is_decided_live_and_right(name: str, engine: str) -> None:
    case = CASES[name]
    clf = LogClassifier(engine)
    decided = False
    for line in _lines(name):
        clf.feed(line)
        decided = decided or clf.ready_seen or clf.decisive
    assert decided, "never decided"
    live = clf.classification(None)
    assert (live.outcome, live.phase) == (case.outcome, case.phase), live


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("name", sorted(CASES))
def test_a_real_sglang_cpu_log_read_whole(name: str, engine: str) -> None:
    case = CASES[name]
    for exit_code in (None, case.exit_code):
        got = classify_text("\n".join(_lines(name)), engine, exit_code)
        assert (got.outcome, got.phase, got.confidence) == (case.outcome, case.phase, "high"), (exit_code, got)
        assert got.needs is case.needs, got
        assert case.remedy in got.remedy, got.remedy
        for figure, value in case.figures:
            assert got.figures.get(figure) == value, (figure, got.figures)
        if case.outcome is Outcome.CONFIG_ERROR:
            assert got.figures["mfs_direction"] == 0 and "lowering memory will not help" in got.remedy
        if case.needs is Need.MORE_FRACTION:
            assert got.figures["mfs_direction"] == 1


@pytest.mark.parametrize("version", ["0.5.9", "0.5.23"])
def test_a_ready_server_stays_ready_through_its_stop(version: str) -> None:
    """After the ready line, no line of the stop (SIGTERM, 0.5.23's children 'crashed with exit code -15',
    SIGQUIT) makes it anything else at any point of the log."""
    clf = LogClassifier("sglang")
    seen_ready = False
    for line in _lines(f"{version}-ready-sigterm.log"):
        clf.feed(line)
        seen_ready = seen_ready or clf.ready_seen
        if seen_ready:
            assert clf.classification(None).outcome is Outcome.READY, line
            assert not clf.decisive, line
    assert seen_ready


def test_without_the_stop_line_the_same_tail_is_a_crash() -> None:
    """The stop is read from SGLang's SIGTERM line, not from the markers being late: the same real log
    without that line is a ready server whose child died (CRASH)."""
    lines = [line for line in _lines("0.5.23-ready-sigterm.log") if "SIGTERM received" not in line]
    got = classify_text("\n".join(lines), "sglang", 137)
    assert got.outcome is Outcome.CRASH


@pytest.mark.parametrize("name", [n for n, c in CASES.items() if c.outcome is Outcome.CONFIG_ERROR])
def test_a_cpu_knob_failure_never_reads_as_oom_and_stays_decided(name: str) -> None:
    """Read live: no prefix of the log is an OOM, and once its error line is read it stays CONFIG_ERROR
    (before that, the traceback's marker alone says a crash of unknown cause)."""
    clf = LogClassifier("sglang")
    decided_at = None
    for i, line in enumerate(_lines(name)):
        clf.feed(line)
        got = clf.classification(None)
        assert got.outcome not in OOMS, (line, got)
        if decided_at is None and got.outcome is Outcome.CONFIG_ERROR:
            decided_at = i
        if decided_at is not None:
            assert got.outcome is Outcome.CONFIG_ERROR, (line, got)
    assert decided_at is not None
