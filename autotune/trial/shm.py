"""Shared-memory segments a killed server leaves in /dev/shm.

vLLM's processes talk through `multiprocessing.shared_memory` segments (`/dev/shm/psm_*`); after a
SIGKILL nobody unlinks them, and each keeps its memory until removed (reference/vllm-cpu.md). Just
before a trial stops its server, it notes the /dev/shm segments the server's own processes map;
after the tree is gone, those of them that no live process maps any more are removed.

A mapping is matched by inode, not by the path /proc/PID/maps shows: glibc's `sem_open` creates a
semaphore under a temporary name (`sem.GoS6zD`), maps it, then links it to its real name
(`sem.mp-w6wb5yz4`), and maps keeps the first name (seen on SGLang 0.5.9's scheduler). Matching by
path missed every such semaphore and read a concurrent engine's live one as mapped by nobody (seen:
a concurrent vLLM's `sem.mp-*` removed under it).

Some leftovers are never mapped while they live: SGLang 0.5.9 creates `sglang_loads_<hex>_<hex>.shm`
during start-up and removes it later, so a server killed in that window leaves it behind. Those an
engine's adapter names (`shm_leftovers`) are swept by `sweep_leftovers`: created since the trial began, mapped and
held open by no live process, and only while no other process of that engine runs on the host (one
starting beside ours would own the same kind of file, unmapped too).

In a target (ssh, a container) the same code runs there: the tool sends this file's text to the helper
(`autotune.target.helper`, ops `stop` and `shmsweep`), so it stays standard library only and
Python 3.7-clean, as `autotune.gpu.hostread` is.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

SHM = Path("/dev/shm")


def _maps_under(pid: int | str, prefix: str) -> tuple[set[str], set[int]]:
    """(paths, inodes) of the mappings of `pid` under `prefix`."""
    paths: set[str] = set()
    inodes: set[int] = set()
    try:
        with open(f"/proc/{pid}/maps") as maps:
            for line in maps:
                idx = line.find(prefix)
                if idx >= 0:
                    paths.add(_undeleted(line[idx:].rstrip("\n")))
                    fields = line.split(maxsplit=5)
                    if len(fields) >= 5 and fields[4].isdigit():
                        inodes.add(int(fields[4]))
    except OSError:
        pass
    return paths, inodes


def _undeleted(path: str) -> str:
    """The path /proc shows, less the " (deleted)" it appends to an unlinked file."""
    return path[:-len(" (deleted)")] if path.endswith(" (deleted)") else path


def _entries(root: Path) -> dict[int, str]:
    """inode -> path of each file directly under `root`."""
    out: dict[int, str] = {}
    try:
        with os.scandir(root) as it:
            for entry in it:
                try:
                    out[entry.inode()] = entry.path
                except OSError:
                    continue
    except OSError:
        pass
    return out


def mapped_by(pids: Iterable[int], root: Path = SHM) -> set[str]:
    """The paths under `root` that processes `pids` map now: as mapped, and by inode under the name
    each file has now (a semaphore is mapped under a temporary name, then renamed)."""
    found: set[str] = set()
    inodes: set[int] = set()
    for pid in pids:
        paths, nodes = _maps_under(pid, f"{root}/")
        found |= paths
        inodes |= nodes
    entries = _entries(root)
    return found | {entries[i] for i in inodes if i in entries}


def _all_pids() -> list[int]:
    return [int(p) for p in os.listdir("/proc") if p.isdigit()]


def mapped_paths(root: Path = SHM) -> set[str]:
    """Every path under `root` some live process maps or holds open (from /proc/<pid>/maps and fd;
    unreadable ones skipped)."""
    pids = _all_pids()
    return mapped_by(pids, root) | _open_under(pids, root)


def _open_under(pids: Iterable[int], root: Path) -> set[str]:
    found: set[str] = set()
    prefix = f"{root}/"
    for pid in pids:
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            continue
        for fd in fds:
            try:
                target = os.readlink(f"/proc/{pid}/fd/{fd}")
            except OSError:
                continue
            if target.startswith(prefix):
                found.add(_undeleted(target))
    return found


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


def sweep_leftovers(patterns: Iterable[str], since: float, others_running: bool, root: Path = SHM) -> list[str]:
    """Remove the files matching `patterns` (what an engine is known to leave unmapped) created at or
    after `since` (epoch seconds) that no live process maps or holds open, and only when
    `others_running` is False (another live server of that engine could own them). Their names."""
    patterns = tuple(patterns)
    if not patterns or others_running:
        return []
    candidates = []
    for pattern in patterns:
        for path in root.glob(pattern):
            try:
                if path.is_file() and path.stat().st_ctime >= since - 1.0:
                    candidates.append(str(path))
            except OSError:
                continue
    return remove_unmapped(candidates, root) if candidates else []
