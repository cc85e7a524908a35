"""The tag sweep finds a trial's processes whose environment no longer shows the tag (issue 18.3).

vLLM renames its engine processes with setproctitle, which blanks /proc/<pid>/environ. Here a
tagged "server" starts a child with an empty environment in its own process group — what the
renamed `VLLM::EngineCore` looks like to the sweep — and the sweep must still find it: by its
parent chain while the server lives, by the recorded process group once the server is gone.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from autotune.trial.supervisor import TRIAL_ENV, Supervisor, kill_tagged, tagged_processes

# The "server": tagged by its environment, in its own session; starts a blank-environment child in
# its group, prints the child's pid, then waits (or exits at once with `orphan`, leaving the child).
SERVER = """
import subprocess, sys, time
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"], env={})
print(child.pid, flush=True)
if sys.argv[1] == "orphan":
    sys.exit(0)
time.sleep(120)
"""


def _wait_for(predicate, timeout_s: float = 10.0) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.02)


@pytest.fixture
def server(tmp_path: Path) -> Iterator[object]:
    started: list[subprocess.Popen[str]] = []
    children: list[int] = []

    def start(mode: str, tag: str) -> tuple[subprocess.Popen[str], int]:
        script = tmp_path / "server.py"
        script.write_text(SERVER)
        proc = subprocess.Popen([sys.executable, str(script), mode], stdout=subprocess.PIPE, text=True,
                                env={**os.environ, TRIAL_ENV: tag}, start_new_session=True)
        started.append(proc)
        assert proc.stdout is not None
        child = int(proc.stdout.readline())
        children.append(child)
        _wait_for(lambda: psutil.Process(child).environ() == {})  # the child's exec is done: environment blank
        return proc, child

    yield start
    for proc in started:  # whatever a failing test left: by group id, never by name
        try:
            os.killpg(proc.pid, 9)
        except ProcessLookupError:
            pass
        proc.wait(timeout=10)
        if proc.stdout is not None:
            proc.stdout.close()
    for pid in children:
        try:
            os.kill(pid, 9)
        except ProcessLookupError:
            pass


def test_a_blank_environment_child_of_a_tagged_server_is_the_trials(server) -> None:  # type: ignore[no-untyped-def]
    """Fails before the fix: the sweep read only environments, and the child's shows no tag."""
    tag = f"sweep-{uuid.uuid4().hex[:8]}"
    proc, child = server("stay", tag)
    found = {p.pid for p in tagged_processes(tag)}
    assert found == {proc.pid, child}
    assert sorted(kill_tagged(tag)) == sorted([proc.pid, child])
    assert not psutil.pid_exists(child) or psutil.Process(child).status() == psutil.STATUS_ZOMBIE


def test_an_orphaned_blank_child_is_found_by_the_recorded_group(server) -> None:  # type: ignore[no-untyped-def]
    """The server died (as an APIServer can, before its EngineCore): the child is reparented, its
    environment blank, no tagged process left; only the group recorded at launch leads to it."""
    tag = f"sweep-{uuid.uuid4().hex[:8]}"
    proc, child = server("orphan", tag)
    proc.wait(timeout=10)
    assert tagged_processes(tag) == []  # nothing tagged is left to lead to it
    assert [p.pid for p in tagged_processes(tag, pgids=[proc.pid])] == [child]
    assert kill_tagged(tag, pgids=[proc.pid]) == [child]


def test_another_trials_process_in_a_recorded_group_is_never_taken(server) -> None:  # type: ignore[no-untyped-def]
    tag = f"sweep-{uuid.uuid4().hex[:8]}"
    proc, child = server("stay", tag)
    assert tagged_processes("some-other-trial", pgids=[proc.pid]) == []  # its leader is tagged for `tag`


def test_every_server_is_started_with_spt_noenv(tmp_path: Path) -> None:
    """setproctitle leaves the environment intact under SPT_NOENV=1 (issue 18.3)."""
    sup = Supervisor([sys.executable, "-c", "import os; print(os.environ.get('SPT_NOENV'))"], trial_id="t-spt",
                     log_path=tmp_path / "server.log", env={"PATH": os.environ.get("PATH", "")})
    sup.start()
    assert sup.proc is not None and sup.proc.wait(timeout=30) == 0
    sup.stop(kill_now=True)
    assert (tmp_path / "server.log").read_text().strip().endswith("1")


def test_a_tagged_process_in_someone_elses_group_does_not_take_that_group() -> None:
    """A tagged process that is not its group's leader (here: in the test runner's own group) leads
    nothing: an untagged neighbour in that group is not the trial's."""
    tag = f"sweep-{uuid.uuid4().hex[:8]}"
    sleep = [sys.executable, "-c", "import time; time.sleep(60)"]
    neighbour = subprocess.Popen(sleep, env={})
    tagged = subprocess.Popen(sleep, env={**os.environ, TRIAL_ENV: tag})
    try:
        _wait_for(lambda: psutil.Process(neighbour.pid).environ() == {}
                  and psutil.Process(tagged.pid).environ().get(TRIAL_ENV) == tag)
        assert [p.pid for p in tagged_processes(tag)] == [tagged.pid]
    finally:
        for proc in (neighbour, tagged):
            proc.kill()
            proc.wait(timeout=10)


def test_a_killed_process_nobody_reaps_counts_as_dead_at_once() -> None:
    """A killed process is a zombie until its parent (or init, once orphaned) reaps it, and a
    container without an init reaps nothing. A zombie holds no memory, GPU context or port, so the
    kill does not wait for the reaping. It used to (psutil.wait_procs), up to its timeout: that held
    the thread of every slot that cancelled another's point, 1 to 2 s per kill on this machine,
    whose init reaps about once a second."""
    tag = f"zombie-{uuid.uuid4().hex[:8]}"
    # an untagged parent that starts a tagged child and never waits for it
    parent = subprocess.Popen([sys.executable, "-c", "import os, subprocess, sys, time\n"
                               "env = {**os.environ, sys.argv[1]: sys.argv[2]}\n"
                               "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(120)'], env=env)\n"
                               "print(child.pid, flush=True)\ntime.sleep(120)", TRIAL_ENV, tag],
                              stdout=subprocess.PIPE, text=True, start_new_session=True)
    try:
        assert parent.stdout is not None
        child = int(parent.stdout.readline())
        _wait_for(lambda: [p.pid for p in tagged_processes(tag)] == [child])  # its exec is done
        t0 = time.monotonic()
        assert kill_tagged(tag, timeout_s=60) == [child]  # the child only: its untagged parent is not the trial's
        took = time.monotonic() - t0
        assert psutil.Process(child).status() == psutil.STATUS_ZOMBIE  # still unreaped: its parent sleeps on
        assert took < 30, f"the kill waited {took:.1f} s for a reaping that never comes"
        assert parent.poll() is None
    finally:
        os.killpg(parent.pid, 9)
        parent.wait(timeout=10)
        if parent.stdout is not None:
            parent.stdout.close()


def test_a_server_that_ended_by_itself_still_has_its_log_finished_by_the_stop(tmp_path: Path) -> None:
    """A server that exits on its own after a verdict that left it running (READY) is not running, but its log is not
    finished: the trial's teardown stops what `may_run`, and that stop writes the log's tail and closes the file and
    the pipe (an overnight run leaked one of each per such trial), without signalling a group no process holds."""
    sup = Supervisor([sys.executable, "-c", "print('up')"], trial_id="t-ended", log_path=tmp_path / "server.log",
                     env={"PATH": os.environ.get("PATH", "")})
    sup.start()
    assert sup.proc is not None and sup.proc.wait(timeout=30) == 0
    assert not sup.alive() and sup.may_run()  # nothing runs; the log is still open
    report = sup.stop()
    assert sup.sink is not None and sup.sink.closed and sup.sink.file.closed
    assert not sup.may_run() and not report.terminated and not report.killed
    assert (tmp_path / "server.log").read_text() == "up\n"
    sup.stop()  # a second stop finds nothing to do
