"""The estimator against real logged measurements (../shared/calibration).

Prints the predicted-vs-measured table (run with -s to see it) and asserts the targets
where they apply: dense BF16/FP8 weights within 2 %, KV bytes per token exact (within
the logs' 2-decimal rounding), KV tokens within 1 % given the logged KV memory. Rows
above target must carry their reason. Skipped cleanly when the calibration folder is absent.
"""

from __future__ import annotations

import pytest

from tools.accuracy import calibration
from tools.accuracy.calibration import CALIBRATION, Report

pytestmark = pytest.mark.skipif(not (CALIBRATION / "measurements.jsonl").is_file(),
                                reason=f"a whole-corpus check: the shared calibration data is not at {CALIBRATION} "
                                       "(beside the repository)")


@pytest.fixture(scope="module")
def report() -> Report:
    rep = calibration.collect(CALIBRATION)
    print("\n" + calibration.render(rep))
    return rep


def test_every_check_meets_its_target_or_is_explained(report: Report) -> None:
    rows = report.rows
    assert len(rows) >= 30
    misses = [r for r in rows if not r.within_target]
    assert not misses, [(r.mid, r.check, r.err_pct) for r in misses]
    large = [r for r in rows if r.target_pct is None and abs(r.err_pct) > 2.0]
    assert all(r.explanation for r in large), [(r.mid, r.check) for r in large if not r.explanation]


@pytest.mark.parametrize(("check", "limit", "at_least"), [
    ("weights", 2.0, 10),
    ("kv_tokens", 1.0, 12),
])
def test_targets_by_check(report: Report, check: str, limit: float, at_least: int) -> None:
    rows = [r for r in report.rows if r.check == check and r.target_pct is not None]
    assert len(rows) >= at_least
    worst = max(abs(r.err_pct) for r in rows if not r.explanation)
    assert worst <= limit


def test_kv_bytes_per_token_are_exact(report: Report) -> None:
    rows = [r for r in report.rows if r.check == "kv_bytes"]
    assert len(rows) >= 5
    assert all(r.within_target for r in rows)  # predicted pool GiB rounds to the logged GiB


def test_skipped_measurements_are_counted_with_reasons(report: Report) -> None:
    skipped = report.skipped
    assert skipped and all(reason for _, reason in skipped)
