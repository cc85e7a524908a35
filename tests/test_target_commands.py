"""Commands through a target: the launcher is checked there before any launch, the study's
fingerprint is the target's GPUs (nvidia-smi through the transport), `regress` runs there.

A real sshd on 127.0.0.1 and the PID-namespace container stand-in (tests/sshd.py).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from autotune import spec as spec_mod
from autotune.errors import SpecError, TransportError
from autotune.machine import check_launcher
from tests.conftest import MODELS, REPO
from tests.sshd import Container, Sshd, container_fixture, sshd_fixture  # noqa: F401 - fixtures

LLAMA8 = str(MODELS / "Meta-Llama-3.1-8B")
CLI = [sys.executable, "-m", "autotune.cli"]


def target_of(sshd: Sshd, container: Container) -> dict[str, Any]:
    return {"ssh": sshd.address, "ssh_options": sshd.options, "exec_prefix": container.prefix}


def write_spec(tmp_path: Path, name: str, **fields: Any) -> Path:
    doc = {"study": "s", "engine_version": "0.5.23", "model": LLAMA8, "results_dir": str(tmp_path / "results"),
           "space": {"tp": 1, "mem_fraction_static": 0.85, "context_length": 32768}, **fields}
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


# -- the launcher is a command inside the target: checked there, before any launch ---------------

@pytest.mark.parametrize("launcher,words", [
    (["python3", "-m", "no_such_engine_pkg.launch_server"], "no_such_engine_pkg is not installed"),
    (["/opt/no-such-venv/bin/python", "-m", "sglang.launch_server"], "is not an executable in the target"),
])
def test_a_launcher_missing_in_the_target_is_refused_naming_launcher(tmp_path: Path, sshd: Sshd,
                                                                     container: Container, launcher: list[str],
                                                                     words: str) -> None:
    path = write_spec(tmp_path, "spec", launcher=launcher, target=target_of(sshd, container))
    with pytest.raises(SpecError) as info:
        check_launcher(spec_mod.load(path))
    assert info.value.field == "launcher" and words in str(info.value), str(info.value)
    done = subprocess.run([*CLI, "run", str(path)], capture_output=True, text=True, cwd=REPO, timeout=120)
    assert done.returncode == 2 and "launcher" in done.stderr and words in done.stderr, done.stderr[-2000:]
    assert "Traceback" not in done.stderr
    assert not list((tmp_path / "results").glob("s/trials/*")), "something was launched"


def test_a_target_python_missing_is_refused_naming_target_python(tmp_path: Path, sshd: Sshd,
                                                                 container: Container) -> None:
    target = {**target_of(sshd, container), "python": "/opt/no-such-python3"}
    path = write_spec(tmp_path, "spec", launcher=["python3", "-m", "sglang.launch_server"], target=target)
    with pytest.raises(TransportError) as info:
        check_launcher(spec_mod.load(path))
    assert info.value.field == "target.python", str(info.value)


# -- the study's fingerprint and `regress`: the target's GPUs, read there ------------------------

def sim_spec(tmp_path: Path, sshd: Sshd, container: Container) -> Path:
    return write_spec(tmp_path, "sim", launcher="simulated", target=target_of(sshd, container),
                      simulated={"gpus": 3, "gpu_mem_gib": 80, "gpu_name": "NVIDIA H100 80GB HBM3",
                                 "time_scale": 0.002},
                      gpus=[0], space={"tp": 1, "mem_fraction_static": 0.85, "context_length": 32768,
                                       "torch_compile": False},
                      probe={"burst": 2, "burst_tokens": 256}, budget={"trials": 1}, certify={"enabled": False})


def test_the_fingerprint_is_the_targets_gpus_through_nvidia_smi(tmp_path: Path, sshd: Sshd,
                                                                container: Container) -> None:
    from autotune.machine import prepare_backend
    from autotune.search.loop import fingerprint

    spec = spec_mod.load(sim_spec(tmp_path, sshd, container))
    backend = prepare_backend(spec)
    try:
        fp = fingerprint(spec, backend)
    finally:
        backend.close()
    # "sim-550.00" is what the nvidia-smi stand-in run in the target prints; read from here, the same
    # node says "simulated"
    assert fp["driver_version"] == "sim-550.00" and backend.kind == "nvidia-smi", fp
    assert fp["gpu_count"] == "3" and fp["gpu_names"] == "NVIDIA H100 80GB HBM3", fp
    assert fp["gpu_total_bytes"] == ",".join([str(80 << 30)] * 3), fp


def remote_entries(sshd: Sshd, container: Container, pattern: str) -> list[str]:
    """Run directories matching `pattern` in the target's RUN_ROOT, listed there."""
    from autotune.settings import Target
    from autotune.target.transport import transport_for
    from autotune.trial.remote import RUN_ROOT

    target = Target(ssh=sshd.address, ssh_options=tuple(sshd.options), exec_prefix=tuple(container.prefix))
    script = "import glob, sys; print('\\n'.join(glob.glob(sys.argv[1])))"
    out = subprocess.run(transport_for(target).command(["python3", "-c", script, f"{RUN_ROOT}/{pattern}"]),
                         capture_output=True, text=True, check=True).stdout
    return out.split()


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_regress_through_the_target_relaunches_there(tmp_path: Path, sshd: Sshd, container: Container) -> None:
    path = sim_spec(tmp_path, sshd, container)
    done = subprocess.run([*CLI, "run", str(path)], capture_output=True, text=True, cwd=REPO, timeout=300)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    done = subprocess.run([*CLI, "regress", str(path), "--baseline", "s", "--budget", "1", "--json"],
                          capture_output=True, text=True, cwd=REPO, timeout=300)
    assert done.returncode in (0, 1), done.stderr[-2000:]
    report = json.loads(done.stdout)
    # both studies' machines are the target's GPUs as its nvidia-smi reports them
    for side in ("baseline", "current"):
        fp = report["fingerprints"][side]
        assert fp["driver_version"] == "sim-550.00" and fp["gpu_count"] == "3", (side, fp)
    recommended = report["rows"][0]
    assert recommended["role"] == "recommended" and recommended["after"]["outcome"] == "READY", recommended
    assert not list((tmp_path / "results").glob("*/trials/*/running.json"))
    assert remote_entries(sshd, container, "s-0.5.23-regress-*") == [], "run directories left in the target"
