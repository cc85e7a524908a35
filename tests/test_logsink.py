"""The log sink's teardown when its reading thread never started (out of threads: `can't start new
thread`): closing it must not raise over the launch's own error (seen in bench-parallel, where
`cannot join thread before it is started` hid the real cause)."""

from __future__ import annotations

import os
from pathlib import Path

from autotune.trial.logsink import LogSink


def test_a_sink_that_never_started_closes_quietly_and_keeps_its_file(tmp_path: Path) -> None:
    read_end, write_end = os.pipe()
    try:
        sink = LogSink(read_end, tmp_path / "server.log")  # the sink owns read_end: close() closes it
        sink.close(timeout_s=0.1)
        assert sink.file.closed and (tmp_path / "server.log").exists()
    finally:
        os.close(write_end)
