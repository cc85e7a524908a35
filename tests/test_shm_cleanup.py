"""A trial removes the /dev/shm segments its killed server left (vLLM's psm_* after SIGKILL): only
those its own processes mapped, and only once nobody maps them; never another process's."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from autotune.trial import shm

MAPPER = """
import mmap, sys, time
files = [open(p, "r+b") for p in sys.argv[1:]]
maps = [mmap.mmap(f.fileno(), 4096) for f in files]
print("mapped", flush=True); time.sleep(60)"""


def mapper(*paths: Path) -> subprocess.Popen[str]:
    proc = subprocess.Popen([sys.executable, "-c", MAPPER, *map(str, paths)], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "mapped"
    return proc


def stop(proc: subprocess.Popen[str]) -> None:
    proc.kill()
    proc.wait(timeout=10)
    assert proc.stdout is not None
    proc.stdout.close()


def test_the_servers_segments_are_removed_once_unmapped_others_never(tmp_path: Path) -> None:
    for name in ("psm_server", "psm_shared", "sem.other"):
        (tmp_path / name).write_bytes(b"\0" * 4096)
    server = mapper(tmp_path / "psm_server", tmp_path / "psm_shared")
    other = mapper(tmp_path / "psm_shared")  # another live process maps this one too
    try:
        noted = shm.mapped_by([server.pid], tmp_path)
        assert noted == {str(tmp_path / "psm_server"), str(tmp_path / "psm_shared")}
        os.kill(server.pid, signal.SIGKILL)  # the server dies without unlinking
        server.wait(timeout=10)
        assert shm.remove_unmapped(noted, tmp_path) == ["psm_server"]
        # a segment the server never mapped (a concurrent engine's semaphore) is not touched
        assert sorted(p.name for p in tmp_path.iterdir()) == ["psm_shared", "sem.other"]
    finally:
        stop(other)
        if server.poll() is None:
            stop(server)
        elif server.stdout is not None:
            server.stdout.close()


# A server that made a real segment the way vLLM does (multiprocessing.shared_memory, its resource
# tracker a child of the tree, so SIGKILL takes the tracker too and nobody unlinks it).
SEGMENT_MAKER = """
import sys, time
from multiprocessing import shared_memory
seg = shared_memory.SharedMemory(create=True, size=4096)
print(seg.name, flush=True); time.sleep(60)"""


def test_stopping_an_orphaned_tree_removes_the_segments_it_held(tmp_path: Path) -> None:
    """Recovery after the tuner died (recover_orphans -> kill_tagged) cleans /dev/shm as a trial's own
    teardown does; before this, the orphans were killed and their psm_* segments stayed (issue 18)."""
    from autotune.trial.supervisor import TRIAL_ENV, kill_tagged

    tag = f"shm-orphan-{os.getpid()}"
    server = subprocess.Popen([sys.executable, "-c", SEGMENT_MAKER], stdout=subprocess.PIPE, text=True,
                              env={**os.environ, TRIAL_ENV: tag}, start_new_session=True)
    assert server.stdout is not None
    segment = Path("/dev/shm", server.stdout.readline().strip().lstrip("/"))
    try:
        assert segment.exists()
        assert server.pid in kill_tagged(tag)
        server.wait(timeout=10)
        assert not segment.exists(), f"{segment} left behind"
    finally:
        if server.poll() is None:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait(timeout=10)
        server.stdout.close()
        segment.unlink(missing_ok=True)
