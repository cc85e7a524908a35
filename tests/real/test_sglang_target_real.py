"""`autotune trial` of configs/sglang-cpu.yaml through a target, for real: SGLang 0.5.9's CPU path (from
`make sglang-cpu`, ~/.cache/autotune/engines/sglang-0.5.9) started by the helper inside the container
stand-in (nsenter into a persistent PID + mount namespace sharing the host's network) over the real test
sshd. Host memory is read in the target by the helper; the environment (SGLANG_USE_CPU_ENGINE, the
stand-in first on LD_LIBRARY_PATH) follows the target's driver facts. One server, on 127.0.0.1; run with
`make test-real`. It skips while another SGLang or vLLM runs on this host (one real engine at a time)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from autotune.engines.sglang import SglangCpuEngine, cpu
from autotune.gpu.hostmem import engine_processes, processes_of
from autotune.settings import Target
from autotune.target.transport import transport_for
from tests.conftest import REPO
from tests.real.conftest import AUTOTUNE
from tests.sshd import Container, Sshd, container_fixture, sshd_fixture  # noqa: F401 - fixtures

pytestmark = [pytest.mark.real_engine, pytest.mark.timeout(1200)]
VERSION = "0.5.9"


@pytest.fixture
def sglang_python() -> Path:
    python = cpu.install_dir(VERSION) / "bin" / "python"
    if not python.is_file() or cpu.stand_in_dir([str(python)]) is None:
        pytest.skip(f"SGLang {VERSION}'s CPU environment is not installed: run `make sglang-cpu` first")
    others = [*processes_of(SglangCpuEngine), *engine_processes()]
    if others:
        pytest.skip(f"another engine runs on this host (one real engine at a time): {[p.pid for p in others]}")
    return python


def test_a_real_sglang_cpu_trial_through_ssh_and_a_container_is_ready(tmp_path: Path, sshd: Sshd,
                                                                      container: Container,
                                                                      sglang_python: Path) -> None:
    raw = yaml.safe_load((REPO / "configs" / "sglang-cpu.yaml").read_text())
    target = {"ssh": sshd.address, "ssh_options": sshd.options, "exec_prefix": container.prefix}
    raw.update(model=str(REPO / "configs" / raw["model"]), results_dir=str(tmp_path / "results"), target=target,
               launcher=f"{sglang_python} -m sglang.launch_server")
    spec = tmp_path / "sglang-cpu.yaml"
    spec.write_text(yaml.safe_dump(raw))
    shm_before = shm_leftovers()
    done = subprocess.run([str(AUTOTUNE), "trial", str(spec), "--json", "--set", "mem_fraction_static=0.3",
                           "--set", "context_length=4096"], capture_output=True, text=True, timeout=1100)
    assert done.stdout.strip(), f"no result (rc {done.returncode}): {done.stderr[-3000:]}"
    result: dict[str, Any] = json.loads(done.stdout)
    print(json.dumps({k: result.get(k) for k in ("outcome", "evidence", "kv_tokens", "wall_s", "notes", "gpus",
                                                  "probe")}, indent=1))
    log = Path(result["log_path"]).read_text(errors="replace")
    assert result["outcome"] == "READY", (result["outcome"], result["evidence"], log[-3000:])
    assert result["probe"]["ok"] and result["kv_tokens"] > 4096 and result["mismatches"] == []
    assert "The server is fired up and ready to roll!" in log
    # memory was read in the target, as SGLang reads it, and the pool's growth was seen there
    (gpu,) = result["gpus"]
    assert gpu["peak_bytes"] - gpu["baseline_bytes"] > 256 << 20, gpu
    assert result["released"]
    # nothing left: not in the target (by its tag), not on this host
    transport = transport_for(Target(ssh=sshd.address, ssh_options=tuple(sshd.options),
                                     exec_prefix=tuple(container.prefix)))
    assert transport.helper("list", result["trial_id"]) == []
    assert not processes_of(SglangCpuEngine)
    # nor in /dev/shm, which the stand-in shares with this host: its semaphores were swept in the target
    assert shm_leftovers() - shm_before == set(), result["notes"]


def shm_leftovers() -> set[str]:
    """What SGLang is known to leave in /dev/shm (its adapter's patterns), there now."""
    return {p.name for pattern in SglangCpuEngine.shm_leftovers for p in Path("/dev/shm").glob(pattern)}
