"""The classifier on the engines' own start-up raise sites (tests/data/source-census, tools/accuracy/census.py).

Every check an engine's source makes while it starts, rendered as the log a user sees: a measure on checks no rule
was written from one by one. Each floor is a few below the figure when the census was scored last (SGLang 135/146,
vLLM 132/141, SGLang 0.4 78/89, vLLM 0.6 82/90, SGLang 0.4.10 72/85,
vLLM 0.8 84/98); a rule that turns many of them wrong fails here before any corpus shows it.
"""

from __future__ import annotations

import pytest

from tools.accuracy import census

FLOORS = {"sglang": (146, 0.88), "vllm": (141, 0.89), "sglang-0.4": (89, 0.84), "vllm-0.6": (90, 0.86),
          "sglang-0.4.10": (85, 0.81),
          "vllm-0.8": (98, 0.83)}


@pytest.mark.parametrize("name", census.CENSUSES)
def test_most_start_up_checks_are_read_as_the_source_means(name: str) -> None:
    results = census.score(census.load(name))
    right = sum(got == row.outcome for row, got in results)
    size, floor = FLOORS[name]
    assert len(results) == size
    assert right / len(results) >= floor, f"{right}/{len(results)}"


@pytest.mark.parametrize("name", census.CENSUSES)
def test_a_warning_start_up_goes_on_from_never_fails_the_launch(name: str) -> None:
    results = census.score([row for row in census.load(name) if row.outcome == "READY"])
    assert results and all(got == "READY" for _, got in results), [(r.message, got) for r, got in results]


def test_every_sglang_memory_check_is_read_as_memory_of_its_phase() -> None:
    rows = [row for row in census.load("sglang") if row.outcome.startswith("OOM_") or row.outcome == "GPU_BUSY"]
    wrong = [(row.function, row.outcome, got) for row, got in census.score(rows) if got != row.outcome]
    assert len(wrong) <= 1, wrong  # the one: FlashInfer's autotune, a forward pass between the pool and the capture


def test_the_rendered_log_is_the_users_view_of_the_site() -> None:
    row = next(r for r in census.load("sglang") if "mem-fraction-static" in r.message)
    text = census.render(row)
    assert "Scheduler hit an exception: Traceback" in text and text.count('  File "') == len(row.chain)
    assert "RuntimeError: Not enough memory" in text and text.endswith("It usually means the child failed.")
    worker = next(r for r in census.load("vllm") if r.process == "worker" and not r.logged)
    lines = census.render(worker).splitlines()
    assert lines[0].startswith("(Worker_TP0 pid=30) ERROR") and "WorkerProc failed to start." in lines[0]
    assert lines[-1].startswith("(APIServer pid=10) RuntimeError: Engine core initialization failed.")


def test_a_v0_engine_process_failure_is_logged_by_the_engine_then_given_up_on_by_the_api_server() -> None:
    row = next(r for r in census.load("vllm-0.6") if r.process == "engine" and not r.logged and "run_mp_engine" in r.chain)
    lines = census.render(row).splitlines()
    assert lines[0] == f"ERROR 12-20 10:00:02 engine.py:366] {row.message}"
    assert lines[2].endswith("in run_mp_engine")  # its own traceback starts in its own process
    assert lines[-1].startswith("RuntimeError: Engine process failed to start.")
    warning = next(r for r in census.load("sglang-0.4") if r.exception.startswith("warnings.warn"))
    assert census.render(warning).splitlines()[0].endswith(f": UserWarning: {warning.message}")


def test_a_start_up_read_line_by_line_is_never_placed_before_the_phase_its_lines_mark() -> None:
    """Five engine versions' start-up lines in order (progress.jsonl, read from their sources): after each line that
    marks weights loading or later, the classifier stands at least there, or an OOM right after it would be read as an
    earlier phase's. The three left: vLLM V1's torch.compile lines, which run inside its memory profile (the census
    calls them capture, the classifier the pool: the classifier is right), and two lines 0.6.1's API server prints
    after the capture, before its routes."""
    results = census.progress()
    assert len(results) > 200
    early = census.placed_too_early(results)
    assert len(early) <= 3, [(row["engine"], row["version"], row["order"], got) for row, got in early]
