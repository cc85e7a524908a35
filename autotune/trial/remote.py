"""A server process tree inside a target, with the local `Supervisor`'s interface.

The server is started detached (helper `start`: setsid + double fork, log to a file in the target,
the trial tag and SPT_NOENV=1 in its environment), so a dropped connection does not stop it; only
the tool does, by tag (helper `stop`). Its log comes back through `helper follow` into the same
`LogSink` as a local server's pipe; a relay thread counts the bytes and, if the connection drops
while the server still runs, reconnects from that offset, so no line is lost or read twice.

The run directory in the target (`RUN_ROOT/<trial id>`: the log, pid and exit status) lives until
`close()`, after the tree is stopped and its log copied back; a tuner that dies first leaves it for
recovery (`run.stop_tagged`), which removes it once nothing tagged runs.
"""

from __future__ import annotations

import json
import os
import subprocess
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import psutil

from autotune.errors import LaunchError, TransportError
from autotune.gpu import hostread
from autotune.target.transport import RUN_ROOT, Transport
from autotune.trial import shm
from autotune.trial.logsink import LogSink
from autotune.trial.supervisor import WORKER_RSS, StopReport

RECONNECT_S = 30.0  # how long a dropped log stream is retried while the server may still run
# The tool's own code the helper runs there (ops `stop` and `shmsweep`), so both sides clean /dev/shm alike.
SHM_TEXT, HOSTREAD_TEXT = Path(shm.__file__).read_text(), Path(hostread.__file__).read_text()


def stop_there(transport: Transport, tag: str, grace_s: float, kill_now: bool, *,
               timeout_s: float = 60.0) -> dict[str, Any]:
    """The helper's `stop` of everything tagged `tag` in the target; the /dev/shm segments those processes
    map are removed after them there when nothing else maps them (`shm_removed`), as a local stop does."""
    answer: dict[str, Any] = transport.helper("stop", tag, f"{grace_s:g}", "1" if kill_now else "0",
                                              stdin=SHM_TEXT, timeout_s=timeout_s)
    return answer


def sweep_there(transport: Transport, patterns: Sequence[str], age_s: float, titles: Sequence[str],
                modules: Sequence[str]) -> list[str]:
    """The helper's `shmsweep`: what an engine leaves in the target's /dev/shm unmapped (`patterns`), created
    in the last `age_s` seconds (an age: the two clocks may differ), removed unless a process of that engine
    (`titles`, `modules`) runs there; their names."""
    sources = json.dumps({"shm": SHM_TEXT, "hostread": HOSTREAD_TEXT})
    answer = transport.helper("shmsweep", f"{max(0.0, age_s):.3f}", ",".join(patterns), ",".join(titles),
                              ",".join(modules), stdin=sources)
    return [str(name) for name in answer["removed"]]


class RemoteSupervisor:
    """One server inside a target. Not thread-safe; one owner. `pid` is the target's view of it."""

    def __init__(self, transport: Transport, argv: Sequence[str], *, trial_id: str, log_path: Path,
                 env: Mapping[str, str], secrets: Iterable[str] = ()) -> None:
        if not argv:
            raise LaunchError("empty command line")
        self.transport, self.argv, self.trial_id, self.log_path = transport, list(argv), trial_id, log_path
        self.env, self.secrets = dict(env), list(secrets)
        self.run_dir = f"{RUN_ROOT}/{trial_id}"
        self.sink: LogSink | None = None
        self.started_at = 0.0
        self.reconnects = 0
        self.removed_segments: list[str] = []  # /dev/shm segments its stop removed there (helper `stop`)
        self.stream_lost_since: float | None = None  # set while the log stream is down, until its next bytes
        self._pid: int | None = None
        self._ended = False  # set by poll(): the server is gone
        self._exit: int | None = None  # the exit status its waiter recorded; None: none was
        self._relay: threading.Thread | None = None
        self._follower: subprocess.Popen[bytes] | None = None

    @property
    def pid(self) -> int:
        assert self._pid is not None, "not started"
        return self._pid

    def start(self) -> None:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        doc = {"argv": self.argv, "env": self.env, "tag": self.trial_id}
        answer = self.transport.helper("start", self.run_dir, stdin=json.dumps(doc))
        if "error" in answer:
            raise LaunchError(f"cannot start {self.argv[0]!r} in the target: {answer['error']}",
                              hint="is the engine installed inside the target? or set the spec's launcher")
        self._pid = int(answer["pid"])
        read_end, write_end = os.pipe()
        self.sink = LogSink(read_end, self.log_path, self.secrets)
        self.sink.start()
        self.started_at = time.monotonic()
        self._relay = threading.Thread(target=self._relay_log, args=(write_end,), daemon=True)
        self._relay.start()

    def _relay_log(self, write_end: int) -> None:
        offset, lost_since = 0, None
        try:
            while True:
                self._follower = self.transport.popen(self.transport.helper_argv("follow", self.run_dir, str(offset)),
                                                      stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                                      stderr=subprocess.DEVNULL)
                assert self._follower.stdout is not None
                with self._follower.stdout as stream:
                    while chunk := os.read(stream.fileno(), 65536):
                        os.write(write_end, chunk)
                        offset += len(chunk)
                        lost_since = self.stream_lost_since = None
                if self._follower.wait() == 0:
                    return  # the server exited and its log is drained
                lost_since = lost_since or time.monotonic()
                self.stream_lost_since = lost_since
                if time.monotonic() - lost_since > RECONNECT_S:
                    return
                self.reconnects += 1
                time.sleep(0.5)
        finally:
            os.close(write_end)

    def log_stream_down(self, now: float) -> bool:
        """True while a dropped log stream is being reconnected (for at most RECONNECT_S): the
        watcher's no-progress clock must not run on the transport's gap, only on the server's."""
        lost = self.stream_lost_since
        return lost is not None and now - lost < RECONNECT_S and self._relay is not None and self._relay.is_alive()

    def _status(self) -> dict[str, object]:
        answer: dict[str, object] = self.transport.helper("status", self.run_dir)
        return answer

    @property
    def exit_unknown(self) -> bool:
        """It ended with no exit status recorded: the waiter the helper left with it died too."""
        return self._ended and self._exit is None

    def poll(self) -> int | None:
        """The server's exit status, or None while it runs (or while its log still streams). Ended
        with none recorded (`exit_unknown`): -1, "ended by a signal" to the watcher and the classifier,
        which need an ended server's status as a number; the trial records no exit code for it."""
        if not self._ended:
            if self._relay is not None and self._relay.is_alive():
                return None
            status = self._status()
            if status.get("running"):
                return None
            code = status.get("exit_code")
            self._ended, self._exit = True, int(code) if isinstance(code, int) else None
        return -1 if self._exit is None else self._exit

    def may_run(self) -> bool:
        return True  # not asked (a round trip): stop() is idempotent

    def mapped_segments(self) -> set[str]:
        return set()  # its tree maps nothing here: its stop removes what it mapped there (removed_segments)

    def workers(self) -> dict[int, str] | None:
        """Its tagged processes there holding at least `WORKER_RSS` (the helper's `workers`, read by the same code
        as a local group's); None when the round trip fails (then nothing is concluded from them)."""
        try:
            answer = self.transport.helper("workers", self.trial_id, str(WORKER_RSS), stdin=HOSTREAD_TEXT)
        except TransportError:
            return None
        return {int(pid): str(title) for pid, title in answer.items()}

    def clean_up(self, notes: list[str]) -> threading.Thread:
        """Remove its run directory in the target (`close`), in a thread: each try is a round trip. Not
        removed is a note, not an error: what it holds is a finished trial's copy, and recovery never
        needs it again."""

        def remove() -> None:
            try:
                if not self.close():
                    notes.append(f"kept {self.run_dir} in the target (its log was still being copied)")
            except TransportError as exc:
                notes.append(f"could not remove {self.run_dir} in the target: {exc}")

        thread = threading.Thread(target=remove, name=f"clean-{self.trial_id}", daemon=True)
        thread.start()
        return thread

    def cmdline(self) -> list[str]:
        """The running server's argv, read inside the target (for the intent check)."""
        answer: list[str] | None = self.transport.helper("argv", str(self.pid))
        if answer is None:  # it exited since: the intent check says so, like a local process gone
            raise psutil.NoSuchProcess(self.pid)
        return answer

    def stop(self, *, grace_s: float = 10.0, kill_now: bool = False) -> StopReport:
        """TERM everything tagged, wait up to `grace_s`, KILL what is left, inside the target.

        A TransportError here leaves the trial's running.json in place: the next contact
        (recover_orphans) finishes the job.
        """
        t0 = time.monotonic()
        answer = stop_there(self.transport, self.trial_id, grace_s, kill_now, timeout_s=grace_s + 60)
        self.removed_segments += answer.get("shm_removed", [])
        if answer.get("left"):
            raise TransportError("target", f"processes tagged {self.trial_id} survive SIGKILL: {answer['left']}",
                                 "look at the target (uninterruptible sleep in the driver?)")
        report = StopReport(terminated=bool(answer["terminated"]), killed=bool(answer["killed"]))
        if self._relay is not None:
            self._relay.join(timeout=10.0)
            if self._relay.is_alive() and self._follower is not None:
                self._follower.kill()  # the stream is stuck; the server is gone all the same
                self._relay.join(timeout=5.0)
        if self.sink is not None:  # stop may come twice (verdict, then teardown): the sink closes once
            self.sink.close()
        report.stop_s = time.monotonic() - t0
        return report

    def close(self) -> bool:
        """Remove the run directory in the target once the tree is stopped and its log is copied here.
        False (and the directory kept) while the log relay still runs or something tagged is alive."""
        if self._relay is not None and self._relay.is_alive():
            return False
        answer = self.transport.helper("clean", self.run_dir, self.trial_id)
        return bool(answer["removed"])
