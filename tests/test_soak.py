"""The soak, shortened for CI (`make test-slow`, run by `.ci/run`; `make soak` runs the full 300 trials): injected faults, then zero
stray processes, zero simulated memory, every trial accounted for, flat RSS and open files."""

from __future__ import annotations

from pathlib import Path

import pytest

from tools.bench.soak import print_report, soak


@pytest.mark.slow
def test_short_soak(tmp_path: Path) -> None:
    report = soak(24, tmp_path, fault_rate=0.5, seed=3)
    print_report(report)
    assert report.trials == 24 and report.injected >= 6
    assert report.stray_processes == [] and report.held_bytes == 0 and report.unaccounted == []
    # flat from the middle of the run to its end (the test process may still be shedding files and
    # memory that earlier tests left for the garbage collector: only growth counts)
    (_, rss_mid, fds_mid), (_, rss_last, fds_last) = report.samples[-2:]
    assert fds_last <= fds_mid, report.samples  # no file descriptor leaks across trials
    assert rss_last - rss_mid < 32, report.samples  # MiB
