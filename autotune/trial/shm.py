"""Shared-memory segments a killed server leaves in /dev/shm.

vLLM's processes talk through `multiprocessing.shared_memory` segments (`/dev/shm/psm_*`); after a
SIGKILL nobody unlinks them, and each keeps its memory until removed (reference/vllm-cpu.md). A
trial lists /dev/shm before it launches; after the tree is stopped, a segment that is new since
then and that no live process maps any more is the trial's leftover and is removed. A segment some
live process still maps (another trial's, another program's) is never touched.
"""

from __future__ import annotations

import os
from pathlib import Path

SHM = Path("/dev/shm")


def listing(root: Path = SHM) -> set[str]:
    try:
        return set(os.listdir(root))
    except OSError:
        return set()


def mapped_paths(root: Path = SHM) -> set[str]:
    """Every path under `root` some live process maps (from /proc/<pid>/maps; unreadable ones skipped)."""
    out: set[str] = set()
    prefix = f"{root}/"
    for pid in (p for p in os.listdir("/proc") if p.isdigit()):
        try:
            with open(f"/proc/{pid}/maps") as maps:
                for line in maps:
                    idx = line.find(prefix)
                    if idx >= 0:
                        out.add(line[idx:].rstrip("\n").removesuffix(" (deleted)"))
        except OSError:
            continue
    return out


def remove_leftovers(before: set[str], root: Path = SHM) -> list[str]:
    """Remove the entries of `root` that are new since `before` and mapped by no live process;
    their names. Another process's open-but-unmapped segment cannot be told apart: it is
    only ever one created during this trial, by the trial's own engine in practice."""
    new = sorted(listing(root) - before)
    if not new:
        return []
    mapped = mapped_paths(root)
    removed = []
    for name in new:
        path = root / name
        if str(path) in mapped or not path.is_file():
            continue
        try:
            path.unlink()
            removed.append(name)
        except OSError:
            continue
    return removed
