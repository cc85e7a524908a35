"""CPU engines (vLLM's CPU build, SGLang's CPU path) through a target: a real sshd on 127.0.0.1 and
the PID-namespace container stand-in (tests/sshd.py).

What must hold: host memory is read inside the target by the helper (before, only nvidia-smi was, and a
driverless target refused every CPU engine with "nvidia-smi exited 127"), with the figures this host's
`HostMemBackend` computes and the engine's processes under the target's PIDs; sglang-cpu's environment
follows the target's own driver facts (the stand-in beside the target's launcher first on its
LD_LIBRARY_PATH, a real driver never shadowed, neither one refused before any launch); and a prefix
that cannot keep a server alive is refused, naming it, before the engine's Python is ever run there.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
import yaml

from autotune import spec as spec_mod
from autotune.engines import get_engine
from autotune.engines.sglang import cpu
from autotune.errors import SpecError
from autotune.gpu.hostmem import HostMemBackend, processes_of
from autotune.machine import check_launcher, prepare_backend
from autotune.settings import Target
from autotune.target.transport import RUN_ROOT, Transport, transport_for
from autotune.trial import run as run_mod
from autotune.trial.supervisor import tagged_processes
from tests.conftest import REPO
from tests.sshd import Container, Sshd, container_fixture, sshd_fixture  # noqa: F401 - fixtures

CLI = [sys.executable, "-m", "autotune.cli"]
MIB = 1 << 20
DRIFT = 256 * MIB  # a shared host's memory moves on its own between two readings (HostMemBackend's tolerance)


def cpu_spec(tmp_path: Path, engine: str, target: dict[str, Any], launcher: str | None = None,
             name: str = "spec") -> Path:
    """configs/<engine>.yaml with absolute paths, results under tmp_path and a `target:` block."""
    raw = yaml.safe_load((REPO / "configs" / f"{engine}.yaml").read_text())
    raw.update(model=str(REPO / "configs" / raw["model"]), results_dir=str(tmp_path / "results"), target=target)
    if launcher is not None:
        raw["launcher"] = launcher
    elif raw["launcher"].startswith(".."):
        raw["launcher"] = str(REPO / "configs" / raw["launcher"])
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(raw))
    return path


def target_of(sshd: Sshd, container: Container | None, extra_prefix: tuple[str, ...] = ()) -> dict[str, Any]:
    doc: dict[str, Any] = {"ssh": sshd.address, "ssh_options": sshd.options}
    if container is not None or extra_prefix:
        doc["exec_prefix"] = [*(container.prefix if container else []), *extra_prefix]
    return doc


# -- host memory, read inside the target by the helper -----------------------------------------

@pytest.mark.parametrize("engine", ["vllm-cpu", "sglang-cpu"])
def test_a_cpu_engine_through_a_target_reads_host_memory_there_as_here(tmp_path: Path, sshd: Sshd,
                                                                        container: Container, engine: str) -> None:
    """Before: `nvidia-smi exited 127 … failed to execute nvidia-smi` before any launch."""
    spec = spec_mod.load(cpu_spec(tmp_path, engine, target_of(sshd, container)))
    adapter = get_engine(spec.engine)
    local = HostMemBackend(**adapter.host_memory(spec.engine_version))
    before = local.snapshot()
    backend = prepare_backend(spec)
    assert backend.kind == "hostmem" and not isinstance(backend, HostMemBackend)  # read there, not here
    assert getattr(backend, "reading", None) == adapter.host_memory(spec.engine_version)["reading"]
    there = backend.fresh_snapshot()
    after = local.snapshot()
    assert [g.name for g in there] == [g.name for g in before] and len(there) >= 1
    for mine_before, theirs, mine_after in zip(before, there, after, strict=True):
        # the same host seen from inside the container: the engine's own figures, within a shared host's drift
        assert abs(theirs.total_bytes - mine_before.total_bytes) <= DRIFT, (theirs, mine_before)
        low = min(mine_before.used_bytes, mine_after.used_bytes) - DRIFT
        high = max(mine_before.used_bytes, mine_after.used_bytes) + DRIFT
        assert low <= theirs.used_bytes <= high, (theirs.used_bytes, mine_before.used_bytes, mine_after.used_bytes)
        assert theirs.peak_bytes is None  # sampled, like nvidia-smi through a target
    theirs_fp, mine_fp = backend.fingerprint(), local.fingerprint()
    for key in ("backend", "gpu_count", "gpu_names", "driver_version", "cpu_count"):
        assert theirs_fp[key] == mine_fp[key], key
    # the sampler serves the watcher without a round trip per call
    t0 = time.monotonic()
    for _ in range(20):
        backend.snapshot()
    assert time.monotonic() - t0 < 0.5
    backend.close()


def test_the_targets_engine_processes_are_listed_under_the_targets_pids(tmp_path: Path, sshd: Sshd,
                                                                         container: Container) -> None:
    """A process titled as SGLang's scheduler, started in the container: the target's reading lists it
    under the container's PID (what a stop there acts on), with the memory this host's reading gives it
    under its host PID; nothing of the host's own (another SGLang may run beside this test) is listed."""
    spec = spec_mod.load(cpu_spec(tmp_path, "sglang-cpu", target_of(sshd, container)))
    transport = transport_for(spec.target)
    backend = prepare_backend(spec)
    tag = f"hostmem-{uuid.uuid4().hex[:12]}"
    titled = {"argv": ["python3", "-c", "import os; os.execv('/bin/sleep', ['sglang::scheduler', '300'])"],
              "env": {}, "tag": tag}
    started = transport.helper("start", f"{RUN_ROOT}/{tag}", stdin=json.dumps(titled))
    try:
        inner = int(started["pid"])
        deadline = time.monotonic() + 30
        while True:  # the exec chain (a pyenv shim, then python, then sleep) takes a moment
            there = backend.fresh_snapshot()[0]
            if [p.pid for p in there.processes] == [inner] or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        assert [(p.pid, p.name) for p in there.processes] == [(inner, "sglang::scheduler")], there.processes
        outer = [p.pid for p in tagged_processes(tag)]
        assert len(outer) >= 1 and inner not in outer  # the host sees it under another PID
        sglang = get_engine("sglang-cpu")
        here = {p.pid: p for g in HostMemBackend(**sglang.host_memory("0.5.9"),
                                                 holders=lambda: processes_of(sglang)).snapshot()
                for p in g.processes}
        host_pid = next(pid for pid in outer if pid in here)
        assert abs(here[host_pid].used_bytes - there.processes[0].used_bytes) <= MIB
    finally:
        transport.helper("stop", tag, "5", "1")
        transport.helper("clean", f"{RUN_ROOT}/{tag}", tag)
        backend.close()
    assert transport.helper("list", tag) == []


# -- sglang-cpu's environment: the target's own driver facts ------------------------------------

NOT_OURS_C = """
/* A libcuda.so.1 that is not autotune's stand-in: the test's "real driver". */
int cuInit(unsigned int flags) { (void)flags; return 0; }
"""
LOADS = ("import ctypes\n"
         "try:\n    lib = ctypes.CDLL('libcuda.so.1')\nexcept OSError:\n    print('no libcuda.so.1')\nelse:\n"
         "    f = getattr(lib, 'cuGetErrorString', None)\n"
         "    if f is None:\n        print('a real driver')\n    else:\n"
         "        f.argtypes = [ctypes.c_int, ctypes.POINTER(ctypes.c_char_p)]\n"
         "        t = ctypes.c_char_p(); f(100, ctypes.byref(t)); print(t.value.decode())\n")


@pytest.fixture(scope="module")
def driver_dirs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Two engine environments (a Python whose `sglang` package is findable), one with the tool's own
    stand-in built beside it from nodriver.c, one without; and a folder holding a libcuda.so.1 that is
    not ours (the test's real driver)."""
    if not shutil.which("cc"):
        pytest.skip("no C compiler (cc) to build the stand-in")
    root = tmp_path_factory.mktemp("drivers")
    envs = {}
    for name in ("with-stand-in", "without"):
        env = root / name
        subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(env)], check=True)
        site = next(env.glob("lib/python*/site-packages"))
        (site / "sglang").mkdir()
        (site / "sglang" / "__init__.py").write_text("")  # the launcher check asks only that it is findable
        envs[name] = env
    (envs["with-stand-in"] / cpu.STAND_IN_DIR).mkdir()
    subprocess.run(["cc", "-shared", "-fPIC", "-Wl,-soname,libcuda.so.1", "-o",
                    str(envs["with-stand-in"] / cpu.STAND_IN_DIR / cpu.STAND_IN), str(cpu.SOURCE)], check=True)
    real = root / "real-driver"
    real.mkdir()
    (real / "fake.c").write_text(NOT_OURS_C)
    subprocess.run(["cc", "-shared", "-fPIC", "-Wl,-soname,libcuda.so.1", "-o", str(real / "libcuda.so.1"),
                    str(real / "fake.c")], check=True)
    return {**envs, "real": real}


def _engine_env(spec: spec_mod.Spec) -> dict[str, str]:
    """What a trial of `spec` would put in its server's environment (the trial's own method)."""
    trial = run_mod._Trial(spec.config({}), spec.trial_settings(None), HostMemBackend(), "env-check")
    try:
        return trial.engine_env()
    finally:
        trial.lease.release()


def _loads_in_target(transport: Transport, env: dict[str, str]) -> str:
    """Start a process in the target with `env` (as a server is started) and say which libcuda.so.1 it loads."""
    tag = f"driver-{uuid.uuid4().hex[:12]}"
    run_dir = f"{RUN_ROOT}/{tag}"
    transport.helper("start", run_dir, stdin=json.dumps({"argv": ["python3", "-c", LOADS], "env": env, "tag": tag}))
    deadline = time.monotonic() + 30
    while transport.helper("status", run_dir)["running"] and time.monotonic() < deadline:
        time.sleep(0.05)
    raw, _ = transport.helper_output("logcopy", run_dir, "100000", "100000")
    transport.helper("clean", run_dir, tag)
    return raw.decode().strip()


def test_the_stand_in_beside_the_targets_launcher_goes_first_on_its_library_path(
        tmp_path: Path, sshd: Sshd, container: Container, driver_dirs: dict[str, Path]) -> None:
    """No driver in the target, the stand-in built beside the target's launcher: its folder goes ahead of
    the LD_LIBRARY_PATH the target gives its processes, and a process started there with that
    environment loads it. Before: only SGLANG_USE_CPU_ENGINE=1 (the import then fails on the missing driver)."""
    assert not cpu.real_driver_loads()  # no driver here either: what follows is the target's answer
    env_dir = driver_dirs["with-stand-in"]
    target = target_of(sshd, container, ("env", "LD_LIBRARY_PATH=/opt/target-libs"))
    spec = spec_mod.load(cpu_spec(tmp_path, "sglang-cpu", target, f"{env_dir}/bin/python -m sglang.launch_server"))
    check_launcher(spec)
    env = _engine_env(spec)
    assert env == {"SGLANG_USE_CPU_ENGINE": "1",
                   "LD_LIBRARY_PATH": f"{env_dir / cpu.STAND_IN_DIR}:/opt/target-libs"}, env
    assert "autotune's no-driver stand-in" in _loads_in_target(transport_for(spec.target), env)


def test_a_real_driver_in_the_target_is_never_shadowed(tmp_path: Path, sshd: Sshd, container: Container,
                                                       driver_dirs: dict[str, Path]) -> None:
    """A libcuda.so.1 that is not ours loads in the target: the stand-in, though built beside the
    launcher, stays off the server's LD_LIBRARY_PATH, and the server there loads the real one."""
    env_dir = driver_dirs["with-stand-in"]
    target = target_of(sshd, container, ("env", f"LD_LIBRARY_PATH={driver_dirs['real']}"))
    spec = spec_mod.load(cpu_spec(tmp_path, "sglang-cpu", target, f"{env_dir}/bin/python -m sglang.launch_server"))
    check_launcher(spec)
    env = _engine_env(spec)
    assert env == {"SGLANG_USE_CPU_ENGINE": "1"}, env
    assert _loads_in_target(transport_for(spec.target), env) == "a real driver"


def test_neither_driver_nor_stand_in_in_the_target_is_refused_naming_launcher(
        tmp_path: Path, sshd: Sshd, container: Container, driver_dirs: dict[str, Path]) -> None:
    """Before any launch, naming the field and the target (before: launched, to die at import)."""
    env_dir = driver_dirs["without"]
    path = cpu_spec(tmp_path, "sglang-cpu", target_of(sshd, container), f"{env_dir}/bin/python -m sglang.launch_server")
    with pytest.raises(SpecError) as info:
        check_launcher(spec_mod.load(path))
    text = str(info.value)
    assert info.value.field == "launcher" and "no GPU driver in the target" in text and "nodriver" in text, text
    done = subprocess.run([*CLI, "trial", str(path)], capture_output=True, text=True, cwd=REPO, timeout=120)
    assert done.returncode != 0 and "no GPU driver in the target" in done.stderr, done.stderr[-2000:]
    assert not list((tmp_path / "results").glob("*/trials/*/server.log")), "something was launched"


# -- a prefix that cannot keep a server alive: refused before the engine's Python runs there --------

def test_a_per_command_pid_namespace_is_refused_before_a_real_engines_launcher_is_run(tmp_path: Path,
                                                                                     sshd: Sshd) -> None:
    """The demo's spec was refused in ~2 s naming target.exec_prefix; a real engine's ended after 61 s with
    "no answer from ssh … within 60 s / check the connection to the target": its launcher check came
    first and ran the engine's own Python inside the broken prefix, where the transport waited 60 s for an
    import check the helper allowed 120. Here that Python takes longer than the transport waited (as a
    big engine environment on a cold or busy target can) and notes that it ran: the target's own checks
    now come first, so it is never run and the refusal names the prefix at once."""
    prefix = ["unshare", "--pid", "--fork", "--mount-proc"]
    if subprocess.run([*prefix, "true"], capture_output=True).returncode != 0:
        pytest.skip("unshare --pid --fork --mount-proc does not work here (it needs CAP_SYS_ADMIN)")
    env = tmp_path / "engine-env"
    (env / "bin").mkdir(parents=True)
    ran = tmp_path / "the-engine-python-ran"
    slow = env / "bin" / "python"
    slow.write_text(f'#!/bin/sh\ntouch "{ran}"\nsleep 100\nexec python3 "$@"\n')
    slow.chmod(0o755)
    path = cpu_spec(tmp_path, "sglang-cpu", {"ssh": sshd.address, "ssh_options": sshd.options, "exec_prefix": prefix},
                    f"{slow} -m sglang.launch_server")
    t0 = time.monotonic()
    done = subprocess.run([*CLI, "trial", str(path)], capture_output=True, text=True, cwd=REPO, timeout=110)
    took = time.monotonic() - t0
    assert "target.exec_prefix" in done.stderr and "PID namespace of its own" in done.stderr, done.stderr[-2000:]
    assert done.returncode != 0 and "Traceback" not in done.stderr
    assert not ran.exists(), "the engine's Python was run in a target that cannot keep a server alive"
    assert took < 20, f"refused after {took:.0f} s"
    assert not list((tmp_path / "results").glob("*/trials/*/server.log")), "something was launched"


def test_the_transport_waits_longer_than_the_helpers_import_check() -> None:
    """A slow import check is the launcher's answer (the helper's own bound), never a lost connection."""
    from autotune.target import helper, transport

    assert transport.LAUNCHER_WAIT_S > helper.PROBE_TIMEOUT_S
    assert (helper.STAND_IN, helper.STAND_IN_DIR) == (cpu.STAND_IN, cpu.STAND_IN_DIR)


def test_the_helper_computes_host_memory_with_the_same_code_as_here() -> None:
    """The helper's `hostmem` op, run as the target runs it (`python3 -c HELPER_TEXT`, hostread's text on
    stdin), against the same functions imported here: the same nodes, the same machine."""
    from autotune.gpu import hostread
    from autotune.target.transport import HELPER_TEXT

    for reading in hostread.READINGS:
        done = subprocess.run(["python3", "-c", HELPER_TEXT, "hostmem", reading, "0", "sglang::", "sglang.launch_server"],
                              input=Path(hostread.__file__).read_text(), capture_output=True, text=True, timeout=60,
                              check=True)
        there = json.loads(done.stdout)
        here = hostread.host_reading(reading, False, ["sglang::"], ["sglang.launch_server"])
        assert [n["node"] for n in there["nodes"]] == [n["node"] for n in here["nodes"]]
        for a, b in zip(there["nodes"], here["nodes"], strict=True):
            assert a["total_bytes"] == b["total_bytes"] or abs(a["total_bytes"] - b["total_bytes"]) <= DRIFT
            assert abs(a["available_bytes"] - b["available_bytes"]) <= DRIFT
        assert there["release"] == here["release"] and there["cpu_count"] == here["cpu_count"]


def test_a_target_as_a_plain_prefix_reads_host_memory_without_ssh(tmp_path: Path, container: Container) -> None:
    """`target: {exec_prefix: [...]}` alone (a container on this host): the same reading, no ssh."""
    spec = spec_mod.load(cpu_spec(tmp_path, "sglang-cpu", {"exec_prefix": container.prefix}))
    assert Target(exec_prefix=tuple(container.prefix)) == spec.target
    backend = prepare_backend(spec)
    assert backend.kind == "hostmem" and not isinstance(backend, HostMemBackend)
    assert backend.fresh_snapshot()[0].total_bytes > 0
    backend.close()
