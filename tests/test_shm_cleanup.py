"""A trial removes the /dev/shm segments its killed server left (vLLM's psm_* after SIGKILL), and
never one that existed before it or that a live process still maps."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from autotune.trial import shm


def test_new_unmapped_segments_are_removed_mapped_and_old_ones_kept(tmp_path: Path) -> None:
    (tmp_path / "psm_old").write_bytes(b"\0" * 4096)
    before = shm.listing(tmp_path)
    (tmp_path / "psm_left").write_bytes(b"\0" * 4096)  # its owner was SIGKILLed
    held = tmp_path / "psm_held"
    held.write_bytes(b"\0" * 4096)
    holder = subprocess.Popen([sys.executable, "-c", f"""
import mmap, sys, time
f = open({str(held)!r}, "r+b"); m = mmap.mmap(f.fileno(), 4096)
print("mapped", flush=True); time.sleep(60)"""], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "mapped"
        assert str(held) in shm.mapped_paths(tmp_path)
        assert shm.remove_leftovers(before, tmp_path) == ["psm_left"]
        assert sorted(p.name for p in tmp_path.iterdir()) == ["psm_held", "psm_old"]
    finally:
        holder.kill()
        holder.wait(timeout=10)
        assert holder.stdout is not None
        holder.stdout.close()
