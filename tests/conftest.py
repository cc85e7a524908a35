"""Shared fixtures: a fresh simulated node per test, real server processes, and a check
after every test that nothing is left running and no simulated memory is held."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil
import pytest

from autotune.sim.node import SimNode
from autotune.trial.ports import kernel_port
from autotune.trial.supervisor import TRIAL_ENV, tagged_processes

REPO = Path(__file__).resolve().parents[1]
MODELS = REPO / "configs" / "models"
SHARED = REPO.parent / "shared"
SIM_SGLANG = (sys.executable, "-m", "autotune.sim.sglang")
# Read before the autouse fixture scrubs AUTOTUNE_*: the real PostgreSQL that `make pg` / .ci/run start.
PG_URL = os.environ.get("AUTOTUNE_TEST_PG_URL", "")
# Every process this session starts inherits this marker (servers too: the supervisor passes the environment
# on), so the session can prove at its end that none is left, whatever a failing or timed-out test skipped.
SESSION_ENV = "PYTEST_AUTOTUNE_SESSION"
os.environ[SESSION_ENV] = uuid.uuid4().hex


def _ours_still_running() -> list[psutil.Process]:
    marker, me, found = os.environ[SESSION_ENV], os.getpid(), []
    for proc in psutil.process_iter():
        try:
            if proc.pid != me and proc.environ().get(SESSION_ENV) == marker:
                found.append(proc)
        except psutil.Error:  # gone, a zombie, or not ours to read
            continue
    return found


# Under pytest-xdist each worker checks the processes its own tests started (it sets its own marker at import)
# and hands the names of those it had to kill to the controller, whose exit status is the run's.
_LEFT_ON_WORKERS: list[str] = []


@pytest.hookimpl(trylast=True)  # in the controller, after its workers are shut down
def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """No process this session started may outlive it (a CLI killed by a test's timeout leaves its
    server behind; seen in CI: a simulated server still running 20 minutes later). Those still
    running are named, stopped (found by the marker, never by name), and the session fails."""
    names = _stop_ours_still_running()
    workeroutput = getattr(session.config, "workeroutput", None)
    if workeroutput is not None:  # a worker: the controller reports them and fails the run
        workeroutput["left_running"] = names
        return
    names += _LEFT_ON_WORKERS
    if names:
        sys.stderr.write("\nprocesses this test session started were still running at its end (now killed):\n  "
                         + "\n  ".join(names) + "\n")
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


@pytest.hookimpl(optionalhook=True)  # a pytest-xdist hook, in the controller
def pytest_testnodedown(node: Any, error: object) -> None:
    _LEFT_ON_WORKERS.extend(getattr(node, "workeroutput", {}).get("left_running", []))


def _stop_ours_still_running() -> list[str]:
    left = _ours_still_running()
    if left:
        _, left = psutil.wait_procs(left, timeout=5)  # a server a test's teardown is just stopping
    names = []
    for proc in left:
        try:
            names.append(f"pid {proc.pid}: {' '.join(proc.cmdline())[:160]}")
            proc.kill()
        except psutil.Error:
            continue
    psutil.wait_procs(left, timeout=10)
    return names


@pytest.fixture
def pg_url() -> Iterator[str]:
    """The URL of a fresh, empty database on the test PostgreSQL server, dropped after the test.
    Skips (with how to get one) when AUTOTUNE_TEST_PG_URL is not set; under CI that is a failure."""
    if not PG_URL:
        if os.environ.get("CI"):
            pytest.fail("AUTOTUNE_TEST_PG_URL is not set under CI: .ci/run starts PostgreSQL (.ci/pg.sh)")
        pytest.skip("no test PostgreSQL: export AUTOTUNE_TEST_PG_URL=$(make -s pg)")
    import psycopg  # the postgres extra's driver, given the plain URL as .ci/pg.sh prints it

    name = f"autotune_test_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(PG_URL, autocommit=True) as admin:
        admin.execute(f"CREATE DATABASE {name}")
        yield PG_URL.rsplit("/", 1)[0] + "/" + name
        admin.execute(f"DROP DATABASE {name} WITH (FORCE)")


@pytest.fixture(autouse=True)
def _scrubbed_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Tests never see the developer's simulated node, faults or engine settings."""
    for key in list(os.environ):
        if key.startswith(("AUTOTUNE_", "SGLANG_", "CUDA_VISIBLE")):
            monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("AUTOTUNE_SIM_TIME_SCALE", "0.001")


@pytest.fixture
def node(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[SimNode]:
    """A 2 x 48 GiB node (RTX A6000-like), exported in AUTOTUNE_SIM_NODE. After the test:
    no memory may be held on it."""
    sim = SimNode.create(tmp_path / "node", gpus=2, gpu_mem_gib=48, gpu_name="NVIDIA RTX A6000")
    monkeypatch.setenv("AUTOTUNE_SIM_NODE", str(sim.root))
    yield sim
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and any(g.used_bytes for g in sim.snapshot()):
        time.sleep(0.05)
    held = [(g.index, g.used_bytes, [p.pid for p in g.processes]) for g in sim.snapshot() if g.used_bytes]
    assert not held, f"simulated memory still held after the test: {held}"


@dataclass
class Server:
    """A simulated server started by a test, in its own session and tagged."""

    proc: subprocess.Popen[bytes]
    log: Path
    tag: str

    def text(self) -> str:
        return self.log.read_text(errors="replace")

    def wait(self, timeout: float = 30) -> int:
        return self.proc.wait(timeout=timeout)

    def wait_for(self, needle: str, timeout: float = 30) -> None:
        deadline = time.monotonic() + timeout
        while needle not in self.text():
            if time.monotonic() > deadline:
                raise AssertionError(f"{needle!r} not in log after {timeout}s:\n{self.text()[-3000:]}")
            time.sleep(0.02)

    def kill(self) -> None:
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.wait(timeout=10)
        for p in tagged_processes(self.tag):
            p.kill()


@pytest.fixture
def start_server(tmp_path: Path) -> Iterator[object]:
    """Start `python -m autotune.sim.sglang ARGS` as a real process; always cleaned up,
    and after the test no process carrying its tag may survive."""
    servers: list[Server] = []

    def start(args: Sequence[str], env: dict[str, str] | None = None) -> Server:
        tag = uuid.uuid4().hex
        log = tmp_path / f"server-{len(servers)}.log"
        full_env = {**os.environ, **(env or {}), TRIAL_ENV: tag}
        with open(log, "wb") as fh:
            proc = subprocess.Popen([*SIM_SGLANG, *args], stdout=fh, stderr=subprocess.STDOUT, env=full_env,
                                    start_new_session=True, stdin=subprocess.DEVNULL)
        server = Server(proc, log, tag)
        servers.append(server)
        return server

    yield start
    leftovers = []
    for server in servers:
        if server.proc.poll() is None:
            leftovers.append(server.proc.pid)
        server.kill()
    assert not leftovers, f"server(s) still running at the end of the test: {leftovers}"


def free_port() -> int:
    """A port the kernel gives on 127.0.0.1 now (the trial's own draw)."""
    return kernel_port("127.0.0.1")
