"""One tuning run per study on a host: a second `autotune run` of the same study is refused.

Two runs of one study at once would see each other's servers as "someone else's memory",
record GPU_BUSY trials in the shared study and fight over the same points. The lock is an
advisory `flock` on a file keyed by (storage URL, study name) in a per-user directory under
the system temp dir, so it covers any storage, not only the default SQLite file. The kernel
drops it when the holder dies (SIGKILL included): a stale lock cannot block a resume.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import socket
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from autotune.errors import StoreError


class StudyLocked(StoreError):
    """Another live run on this host holds the study."""


def lock_path(storage: str, study: str, machine: str = "") -> Path:
    """Where the lock of (storage, study) lives; the same for every process of this user.
    `machine` names a simulated node (a host of its own: two of them on one box are two hosts)."""
    if storage.startswith("sqlite:///"):  # one file, however the path was spelled
        storage = "sqlite:///" + str(Path(storage.removeprefix("sqlite:///")).resolve())
    key = hashlib.sha256(f"{storage}\0{study}{chr(0) + machine if machine else ''}".encode()).hexdigest()[:20]
    return Path(tempfile.gettempdir()) / f"autotune-locks-{os.getuid()}" / f"{key}.lock"


@contextmanager
def study_lock(storage: str, study: str, machine: str = "") -> Iterator[None]:
    """Hold the run lock of `study` while the block runs, or raise StudyLocked at once."""
    path = lock_path(storage, study, machine)
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise _locked(study, _holder(fd)) from None
        os.ftruncate(fd, 0)
        os.write(fd, json.dumps({"pid": os.getpid(), "host": socket.gethostname(), "study": study,
                                 "since": time.strftime("%Y-%m-%d %H:%M:%S")}).encode())
        yield
    finally:
        os.close(fd)  # releases the lock


def _holder(fd: int) -> dict[str, object]:
    try:
        data = json.loads(os.pread(fd, 4096, 0) or b"{}")
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _locked(study: str, holder: dict[str, object]) -> StudyLocked:
    who = f"pid {holder.get('pid')}, since {holder.get('since')}" if holder.get("pid") else "another process"
    return StudyLocked(f"study {study!r} is already being tuned on this host ({who}); a second run of the same "
                       "study would take the first run's servers for someone else's memory",
                       hint="wait for that run to finish (or stop it with Ctrl-C; it resumes), or give this run "
                            "another study name (--study NAME)")
