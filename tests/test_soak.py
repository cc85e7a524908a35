"""The soak, shortened for CI (`make soak` runs 300 trials): injected faults, then zero
stray processes, zero simulated memory, every trial accounted for, flat RSS and open files."""

from __future__ import annotations

from pathlib import Path

from scripts.soak import print_report, soak


def test_short_soak(tmp_path: Path) -> None:
    report = soak(24, tmp_path, fault_rate=0.5, seed=3)
    print_report(report)
    assert report.trials == 24 and report.injected >= 6
    assert report.stray_processes == [] and report.held_bytes == 0 and report.unaccounted == []
    (_, rss_first, fds_first), *_, (_, rss_last, fds_last) = report.samples[1:]
    assert fds_last == fds_first, report.samples  # no file descriptor leaks across trials
    assert rss_last - rss_first < 64, report.samples  # MiB; flat, not growing with trials
