"""Shared-memory segments a killed server leaves in /dev/shm.

vLLM's processes talk through `multiprocessing.shared_memory` segments (`/dev/shm/psm_*`); after a
SIGKILL nobody unlinks them, and each keeps its memory until removed (reference/vllm-cpu.md). Just
before a trial stops its server, it notes the /dev/shm segments the server's own processes map;
after the tree is gone, those of them that no live process maps any more are removed. Nothing
else in /dev/shm is touched: a listing taken before the launch is not enough on a shared host,
where another engine starting at the same moment creates segments (and semaphores) of its own
that are briefly mapped by nobody (seen: a concurrent vLLM's `sem.mp-*` removed under it).
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

SHM = Path("/dev/shm")


def _maps_under(pid: int | str, prefix: str) -> set[str]:
    out: set[str] = set()
    try:
        with open(f"/proc/{pid}/maps") as maps:
            for line in maps:
                idx = line.find(prefix)
                if idx >= 0:
                    out.add(line[idx:].rstrip("\n").removesuffix(" (deleted)"))
    except OSError:
        pass
    return out


def mapped_by(pids: Iterable[int], root: Path = SHM) -> set[str]:
    """The paths under `root` that processes `pids` map now."""
    found: set[str] = set()
    for pid in pids:
        found |= _maps_under(pid, f"{root}/")
    return found


def mapped_paths(root: Path = SHM) -> set[str]:
    """Every path under `root` some live process maps (from /proc/<pid>/maps; unreadable ones skipped)."""
    return mapped_by((int(p) for p in os.listdir("/proc") if p.isdigit()), root)


def remove_unmapped(paths: Iterable[str], root: Path = SHM) -> list[str]:
    """Remove those of `paths` (the trial's, from `mapped_by`) that still exist and that no live
    process maps any more; their names."""
    wanted = sorted(p for p in set(paths) if Path(p).parent == root and Path(p).is_file())
    if not wanted:
        return []
    still = mapped_paths(root)
    removed = []
    for path in wanted:
        if path in still:
            continue
        try:
            os.unlink(path)
            removed.append(Path(path).name)
        except OSError:
            continue
    return removed
