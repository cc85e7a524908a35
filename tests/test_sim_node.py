"""The simulated node: allocation, OOM, release on death, concurrency, foreign holders."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from autotune.errors import GpuError
from autotune.records import GIB
from autotune.sim.node import SimNode, SimOutOfMemory

HOLD = [sys.executable, "-m", "autotune.sim.hold"]


def wait_until(predicate, timeout: float = 10.0) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "condition not reached"
        time.sleep(0.02)


def start_holder(gpu: int, gib: float, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    """A foreign process holding memory; returns once it holds it."""
    proc = subprocess.Popen([*HOLD, "--gpu", str(gpu), "--gib", str(gib)], stdout=subprocess.PIPE, text=True,
                            env={**os.environ, **(env or {})})
    assert proc.stdout is not None
    line = proc.stdout.readline()
    proc.stdout.close()
    assert line.startswith("holding"), line
    return proc


def test_allocate_release_and_oom(node: SimNode) -> None:
    node.allocate(0, 10 * GIB)
    node.allocate(0, 5 * GIB)
    state = node.snapshot()
    assert state[0].used_bytes == 15 * GIB and state[1].used_bytes == 0
    assert [p.pid for p in state[0].processes] == [os.getpid()]
    with pytest.raises(SimOutOfMemory) as err:
        node.allocate(0, 40 * GIB)
    assert err.value.free == 33 * GIB and err.value.held_by_self == 15 * GIB
    node.release(0, 5 * GIB)
    assert node.free_bytes(0) == 38 * GIB
    node.release_all()
    assert node.snapshot()[0].used_bytes == 0


def test_dead_process_memory_is_freed(node: SimNode) -> None:
    proc = start_holder(1, 20)
    assert node.snapshot()[1].used_bytes == 20 * GIB
    proc.send_signal(signal.SIGKILL)  # no chance to clean up: the node must notice the death
    proc.wait()
    assert node.snapshot()[1].used_bytes == 0


def test_release_delay_keeps_memory_for_a_while(node: SimNode) -> None:
    proc = start_holder(0, 8, env={"AUTOTUNE_SIM_RELEASE_DELAY_S": "0.5"})
    proc.kill()
    proc.wait()
    t0 = time.monotonic()
    assert node.snapshot()[0].used_bytes == 8 * GIB  # dead, but the driver has not let go yet
    wait_until(lambda: node.snapshot()[0].used_bytes == 0)
    assert time.monotonic() - t0 >= 0.4


def test_concurrent_allocations_never_exceed_capacity(node: SimNode, tmp_path: Path) -> None:
    script = (
        "import sys, time; from autotune.sim.node import SimNode, SimOutOfMemory\n"
        "from autotune.records import GIB\n"
        "n = SimNode.from_env()\n"
        "try:\n    n.allocate(0, 10 * GIB); print('ok', flush=True)\n"
        "except SimOutOfMemory:\n    print('oom', flush=True)\n"
        "time.sleep(3)\n"
    )
    procs = [subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True) for _ in range(8)]
    try:
        answers = sorted(p.stdout.readline().strip() for p in procs)  # type: ignore[union-attr]
        for p in procs:
            p.stdout.close()  # type: ignore[union-attr]
        assert answers.count("ok") == 4 and answers.count("oom") == 4  # 48 GiB holds four 10 GiB
        assert node.snapshot()[0].used_bytes == 40 * GIB
    finally:
        for p in procs:
            p.kill()
            p.wait()


def test_status_json_shape(node: SimNode) -> None:
    proc = start_holder(0, 3)
    try:
        out = subprocess.run([sys.executable, "-m", "autotune.cli", "sim", "status", str(node.root), "--json"],
                             capture_output=True, text=True, check=True).stdout
    finally:
        proc.terminate()
        proc.wait()
    data = json.loads(out)
    gpu0 = data["gpus"][0]
    assert set(gpu0) == {"index", "name", "total_bytes", "used_bytes", "processes"}
    assert gpu0["name"] == "NVIDIA RTX A6000" and gpu0["total_bytes"] == 48 * GIB
    assert gpu0["used_bytes"] == 3 * GIB and gpu0["processes"][0]["pid"] == proc.pid


def test_missing_node_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(GpuError) as err:
        SimNode(tmp_path / "nowhere")
    assert "autotune sim init" in err.value.hint
