"""The classifier on SGLang's own start-up raise sites (tests/data/sglang-source-census, tools/accuracy/census.py).

Every check SGLang's source makes while it starts, rendered as the log a user sees: a measure on checks no rule
was written from one by one. The floor is the figure when the census was added (122/146) less a few; a rule that
turns many of them wrong fails here before any corpus shows it.
"""

from __future__ import annotations

from tools.accuracy import census


def test_most_of_sglangs_start_up_checks_are_read_as_the_source_means() -> None:
    results = census.score(census.load())
    right = sum(got == row.outcome for row, got in results)
    assert len(results) == 146
    assert right / len(results) >= 0.8, f"{right}/{len(results)}"


def test_a_warning_start_up_goes_on_from_never_fails_the_launch() -> None:
    results = census.score([row for row in census.load() if row.outcome == "READY"])
    assert results and all(got == "READY" for _, got in results), [(r.message, got) for r, got in results]


def test_every_memory_check_is_read_as_memory_of_its_phase() -> None:
    rows = [row for row in census.load() if row.outcome.startswith("OOM_") or row.outcome == "GPU_BUSY"]
    wrong = [(row.function, row.outcome, got) for row, got in census.score(rows) if got != row.outcome]
    assert len(wrong) <= 1, wrong  # the one: FlashInfer's autotune, a forward pass between the pool and the capture


def test_the_rendered_log_is_the_users_view_of_the_site() -> None:
    row = next(r for r in census.load() if "mem-fraction-static" in r.message)
    text = census.render(row)
    assert "Scheduler hit an exception: Traceback" in text and text.count('  File "') == len(row.chain)
    assert "RuntimeError: Not enough memory" in text and text.endswith("It usually means the child failed.")
