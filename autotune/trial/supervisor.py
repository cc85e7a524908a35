"""Spawn an engine server and make sure that, whatever happens, nothing of it survives.

Shaped after mirakuru: the server runs without a shell in its own session and process
group (setsid), with `AUTOTUNE_TRIAL_ID=<id>` in its environment; its output goes through a
pipe to a `LogSink` (bounded log file, secrets scrubbed, lines for the watcher). `stop()` sends SIGTERM to the group, waits for a deadline, sends SIGKILL to the
group, then sweeps every process still carrying the trial's tag — descendants that
double-forked out of the group included. Processes are only ever found by group or by
tag, never by name.

Engines that rename their processes with setproctitle (vLLM's `VLLM::EngineCore`, its
workers) overwrite the memory `/proc/<pid>/environ` reads, which hides the tag. Every server
is started with `SPT_NOENV=1` (the setproctitle library then leaves the environment alone),
and the sweep does not rely on it: a process whose environment has no tag at all (blanked,
or unreadable) counts as the trial's when its process group or its parent chain leads to a
tagged process, or to the server's recorded process group.
"""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import psutil

from autotune.errors import LaunchError
from autotune.trial import shm
from autotune.trial.logsink import LogSink

TRIAL_ENV = "AUTOTUNE_TRIAL_ID"
# setproctitle (vLLM's process titles) leaves /proc/<pid>/environ intact when this is set.
KEEP_ENVIRON = {"SPT_NOENV": "1"}


@dataclass
class StopReport:
    """How a stop went: which signals were needed and what the sweep found."""

    terminated: bool = False  # SIGTERM sent to the group
    killed: bool = False  # SIGKILL sent to the group
    swept_pids: list[int] = field(default_factory=list)  # tagged stragglers outside the group
    stop_s: float = 0.0


def _tag_of(proc: psutil.Process) -> str | None:
    """The trial tag in `proc`'s environment, "" when it has none or it cannot be read."""
    try:
        return proc.environ().get(TRIAL_ENV, "")
    except psutil.AccessDenied:
        return ""


def tagged_processes(trial_id: str, pgids: Iterable[int] = ()) -> list[psutil.Process]:
    """Live processes of trial `trial_id` (not zombies): those whose environment carries
    AUTOTUNE_TRIAL_ID=trial_id, and those without a readable tag whose process group or parent
    chain leads to one of them or to a group in `pgids` (the server's, recorded at launch).
    A process tagged with another trial is never taken."""
    me = os.getpid()
    table: dict[int, tuple[psutil.Process, str | None, int, int]] = {}  # pid -> (proc, tag, ppid, pgid)
    for proc in psutil.process_iter(["pid"]):
        if proc.pid == me:
            continue
        try:
            if proc.status() == psutil.STATUS_ZOMBIE:
                continue
            table[proc.pid] = (proc, _tag_of(proc), proc.ppid(), os.getpgid(proc.pid))
        except (psutil.NoSuchProcess, psutil.ZombieProcess, ProcessLookupError):
            continue
        except psutil.AccessDenied:
            continue
    ours = {pid for pid, (_, tag, _, _) in table.items() if tag == trial_id}
    # A recorded group whose leader lives untagged (or tagged for another trial) is a reused id.
    recorded = {g for g in pgids if g not in table or table[g][1] == trial_id}
    # Only groups a tagged process leads (the server's own session), never this tuner's group: a tagged
    # process that merely sits in someone else's group does not make that group the trial's.
    groups = (recorded | {pid for pid in ours if table[pid][3] == pid}) - {os.getpgrp()}
    found = [table[pid][0] for pid in ours]
    for pid, (proc, tag, _, pgid) in table.items():
        if tag == "" and (pgid in groups or _ancestor_in(pid, ours, table)):
            found.append(proc)
    return sorted(found, key=lambda p: p.pid)


def _ancestor_in(pid: int, ours: set[int], table: Mapping[int, tuple[psutil.Process, str | None, int, int]]) -> bool:
    seen: set[int] = set()
    parent = table[pid][2]
    while parent in table and parent not in seen:
        if parent in ours:
            return True
        seen.add(parent)
        parent = table[parent][2]
    return False


def kill_tagged(trial_id: str, timeout_s: float = 10.0, pgids: Iterable[int] = ()) -> list[int]:
    """SIGKILL every live process of `trial_id` (see `tagged_processes`) and wait for them; their pids.
    The /dev/shm segments they mapped and nobody maps after them are removed (see `shm`)."""
    procs = tagged_processes(trial_id, pgids) if trial_id else []
    segments = shm.mapped_by(p.pid for p in procs)  # what only they could unlink, noted before they die
    for proc in procs:
        try:
            proc.kill()
        except psutil.Error:
            pass
    _wait_dead(procs, timeout_s)
    shm.remove_unmapped(segments)
    return [p.pid for p in procs]


def _wait_dead(procs: list[psutil.Process], timeout_s: float) -> None:
    """Until each of `procs` is gone or a zombie. A zombie holds nothing (its memory, GPU context,
    files and ports went at exit); only its parent, or init once orphaned, can reap it, and one
    that is neither ours nor reaped soon (a container without an init reaps nothing) would
    otherwise hold this wait to its timeout (psutil.wait_procs waits for the reaping)."""
    deadline = time.monotonic() + timeout_s
    while procs and time.monotonic() < deadline:
        procs = [p for p in procs if _running(p)]
        if procs:
            time.sleep(0.02)


def _running(proc: psutil.Process) -> bool:
    try:
        return proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE  # is_running: not a reused pid
    except psutil.Error:  # gone (or no longer ours to see)
        return False


WORKER_RSS = 256 << 20


def group_members(pgid: int) -> list[psutil.Process]:
    """Live (non-zombie) processes in process group `pgid`."""
    members = []
    for proc in psutil.process_iter(["pid"]):
        try:
            if os.getpgid(proc.pid) == pgid and proc.status() != psutil.STATUS_ZOMBIE:
                members.append(proc)
        except (ProcessLookupError, psutil.Error):
            continue
    return members


class Supervisor:
    """One server process tree. Not thread-safe; one owner."""

    reconnects = 0  # its log is a pipe: never reconnected (a target's log stream may be)
    removed_segments: tuple[str, ...] = ()  # its /dev/shm segments go in the trial's teardown, here
    exit_unknown = False  # Popen always has its child's status

    def __init__(self, argv: Sequence[str], *, trial_id: str, log_path: Path, env: Mapping[str, str] | None = None,
                 cwd: Path | None = None, secrets: Iterable[str] = ()) -> None:
        if not argv:
            raise LaunchError("empty command line")
        self.argv = list(argv)
        self.trial_id = trial_id
        self.log_path = log_path
        self.env = dict(os.environ if env is None else env)
        self.env[TRIAL_ENV] = trial_id
        self.env.update(KEEP_ENVIRON)
        self.cwd = cwd
        self.secrets = list(secrets)
        self.proc: subprocess.Popen[bytes] | None = None
        self.sink: LogSink | None = None
        self.started_at = 0.0

    @property
    def pid(self) -> int:
        assert self.proc is not None, "not started"
        return self.proc.pid

    def start(self) -> None:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        read_end, write_end = os.pipe()
        try:
            self.proc = subprocess.Popen(
                self.argv, stdin=subprocess.DEVNULL, stdout=write_end, stderr=subprocess.STDOUT,
                env=self.env, cwd=self.cwd, start_new_session=True, close_fds=True,
            )
        except FileNotFoundError as exc:
            os.close(read_end)
            raise LaunchError(f"cannot start {self.argv[0]!r}: not found",
                              hint="is the engine installed in this environment? (e.g. pip install sglang) "
                                   "or set the spec's launcher to the right command") from exc
        except PermissionError as exc:
            os.close(read_end)
            raise LaunchError(f"cannot start {self.argv[0]!r}: permission denied", hint="check the file mode") from exc
        finally:
            os.close(write_end)  # the server holds it now; EOF comes when its whole tree is gone
        self.sink = LogSink(read_end, self.log_path, self.secrets)
        self.sink.start()
        self.started_at = time.monotonic()

    def poll(self) -> int | None:
        """The leader's exit status (Popen style: -9 = killed by SIGKILL), or None while it runs."""
        assert self.proc is not None
        return self.proc.poll()

    def log_stream_down(self, now: float) -> bool:
        """Never: its log is a pipe from the server here, which no transport drops (trial.watch.ServerTree)."""
        return False

    def alive(self) -> bool:
        """Anything of the trial still running: the leader, its group, or tagged stragglers."""
        if self.proc is None:
            return bool(tagged_processes(self.trial_id))
        if self.proc.poll() is None:
            return True
        return bool(group_members(self.pid)) or bool(tagged_processes(self.trial_id, [self.pid]))

    def may_run(self) -> bool:
        """Anything of it running, or its log not yet finished (a server that ended by itself, after a verdict that
        left it running: the stop that reaps it writes the log's tail and closes the file and the pipe)."""
        return self.alive() or (self.sink is not None and not self.sink.closed)

    def cmdline(self) -> list[str]:
        return psutil.Process(self.pid).cmdline()

    def mapped_segments(self) -> set[str]:
        """The /dev/shm segments its group and its tagged stragglers map now."""
        if self.proc is None:
            return set()
        return shm.mapped_by([p.pid for p in group_members(self.pid)] + [p.pid for p in tagged_processes(self.trial_id)])

    def workers(self) -> dict[int, str]:
        """Its group's processes holding at least `WORKER_RSS` (an engine's working processes import torch and
        hold its weights; a helper a moment's compile or query spawns does not): pid and title."""
        out = {}
        for p in group_members(self.pid) if self.proc is not None else []:
            try:
                if p.memory_info().rss >= WORKER_RSS:
                    out[p.pid] = " ".join(p.cmdline()).strip()[:80] or p.name()
            except psutil.Error:
                continue
        return out

    def clean_up(self, notes: list[str]) -> threading.Thread | None:
        return None  # nothing of a local tree outlives its stop

    def stop(self, *, grace_s: float = 10.0, kill_now: bool = False) -> StopReport:
        """TERM the group, wait up to `grace_s`, KILL the group, sweep tagged stragglers, reap.

        `kill_now` skips the polite part: a server that already failed has nothing to save.
        """
        report = StopReport()
        if self.proc is None:
            report.swept_pids = self._sweep()
            return report
        t0 = time.monotonic()
        pgid = self.proc.pid  # setsid: the leader's pid is the group id
        # a group whose leader ended and that has no member left is signalled no more: its id may be another's by now
        gone = self.proc.poll() is not None and not group_members(pgid)
        if not gone and not kill_now and self._signal_group(pgid, signal.SIGTERM):
            report.terminated = True
            self._wait_group(pgid, grace_s)
        if not gone and (group_members(pgid) or self.proc.poll() is None):
            report.killed = self._signal_group(pgid, signal.SIGKILL)
            self._wait_group(pgid, 5.0)
        report.swept_pids = self._sweep()
        try:
            self.proc.wait(timeout=5.0)
        except subprocess.TimeoutExpired:  # pragma: no cover - SIGKILL cannot be ignored
            pass
        if self.sink is not None:
            self.sink.close()
        report.stop_s = time.monotonic() - t0
        return report

    def _signal_group(self, pgid: int, sig: int) -> bool:
        try:
            os.killpg(pgid, sig)
            return True
        except (ProcessLookupError, PermissionError):
            return False

    def _wait_group(self, pgid: int, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc is not None:
                self.proc.poll()  # reap the leader so it does not count as a member
            if not group_members(pgid):
                return
            time.sleep(0.02)

    def _sweep(self) -> list[int]:
        swept: list[int] = []
        for _ in range(3):  # a straggler may fork while we look; look again
            killed = kill_tagged(self.trial_id, timeout_s=2.0, pgids=[self.proc.pid] if self.proc else [])
            if not killed:
                break
            swept += killed
        return sorted(set(swept))
