"""The machine a spec runs on: the GPU backend, and the simulated node when the spec asks for one."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from autotune.errors import GpuError, TransportError
from autotune.gpu.base import GpuBackend
from autotune.spec import Spec


def prepare_backend(spec: Spec) -> GpuBackend:
    """NVML for real launches here; `nvidia-smi` through the target when the GPUs are elsewhere;
    host memory for an engine that budgets it (vLLM's CPU build: engine `vllm-cpu`, whose adapter
    says `device = "host"`); for `launcher: simulated`, the spec's node (created if missing)."""
    from autotune.engines import get_engine

    if not spec.target.local:
        return _target_backend(spec)
    adapter = get_engine(spec.engine)
    if spec.simulated is None and adapter.device == "host":
        from autotune.gpu.hostmem import HostMemBackend, processes_of

        # the engine's own processes are what make the node busy
        host = HostMemBackend(**adapter.host_memory(spec.engine_version), holders=lambda: processes_of(adapter))
        host.snapshot()  # fail now (no /proc, /sys) rather than mid-run
        return host
    if spec.simulated is None:
        from autotune.gpu.nvml import NvmlBackend

        backend = NvmlBackend()
        backend.snapshot()  # fail now, with the driver hint, rather than mid-run
        return backend
    from autotune.sim.backend import SimulatedBackend

    _simulated_node(spec)
    return SimulatedBackend(spec.node_dir())


def _target_backend(spec: Spec) -> GpuBackend:
    """Memory read inside the target, where the server's own view of it is: GPU memory through
    nvidia-smi, or, for an engine on host memory (adapter `device = "host"`), host memory as that
    engine reads it, through the helper (`hostmem`: one round trip per snapshot, the figures
    `HostMemBackend` computes, by the same code, with the target's PIDs).

    The first contact is here unless the launcher check came first (the preflight): an unreachable
    host, a refused key, a stopped container, a missing prefix command or one that cannot keep a server
    alive is a TransportError naming the field, before any launch.
    A simulated node is read by its nvidia-smi stand-in inside the target (its PIDs are the
    target's, like a container's), never from here.
    """
    import sys

    from autotune.engines import get_engine
    from autotune.gpu.nvidiasmi import NvidiaSmiBackend
    from autotune.target.transport import transport_for

    transport = transport_for(spec.target)
    transport.preflight()
    adapter = get_engine(spec.engine)
    if spec.simulated is None and adapter.device == "host":
        from autotune.gpu import hostread
        from autotune.gpu.hostmem import TargetHostMemBackend

        how = adapter.host_memory(spec.engine_version)
        args = (how["reading"], "1" if how.get("psutil_cgroup") else "0", ",".join(adapter.process_titles),
                ",".join(adapter.server_modules))
        source = Path(hostread.__file__).read_text()  # the arithmetic HostMemBackend uses here, run there

        def read() -> dict[str, Any]:
            try:
                answer: dict[str, Any] = transport.helper("hostmem", *args, stdin=source)
            except TransportError as exc:  # the sampler rides these out like a failed nvidia-smi
                raise GpuError(f"host memory in the target: {exc.message}", hint=exc.hint) from exc
            return answer

        host = TargetHostMemBackend(read, reading=how["reading"])
        host.snapshot()  # fail now rather than mid-run
        return host
    command = list(spec.target.nvidia_smi)
    if spec.simulated is not None:
        _simulated_node(spec)
        command = ["env", f"AUTOTUNE_SIM_NODE={spec.node_dir()}", sys.executable, "-m", "autotune.sim.nvidia_smi"]
    backend = NvidiaSmiBackend(transport.command(command))
    backend.snapshot()  # fail now, with the hint, rather than mid-run
    return backend


def _simulated_node(spec: Spec) -> None:
    from autotune.sim.node import SimNode

    sim = spec.simulated
    assert sim is not None
    node_dir = spec.node_dir()
    if not (node_dir / "node.json").is_file():
        SimNode.create(node_dir, gpus=sim.gpus, gpu_mem_gib=sim.gpu_mem_gib, gpu_name=sim.gpu_name,
                       release_delay_s=sim.release_delay_s)


def check_launcher(spec: Spec) -> None:
    """Fail before anything starts when the engine cannot be started at all."""
    import shutil
    import subprocess

    from autotune.engines import get_engine
    from autotune.errors import SpecError

    argv = list(spec.launcher)
    if not argv:
        raise SpecError("launcher", "empty", "e.g. python -m sglang.launch_server")
    if not spec.target.local:
        from autotune.target.transport import transport_for

        # The target's own checks first (reachable, the prefix runs, what it starts outlives the
        # command): a prefix that cannot keep a server alive makes every later answer moot, and the
        # launcher's check runs the engine's Python in it (seconds to minutes for a real engine).
        transport_for(spec.target).preflight()
        _check_launcher_in_target(spec, argv)
        return
    exe = shutil.which(argv[0])
    if exe is None:
        raise SpecError("launcher", f"{argv[0]!r} is not an executable on this machine",
                        "install the engine, or give the full path of its Python in `launcher`")
    if len(argv) >= 3 and argv[1] == "-m":
        package = argv[2].split(".")[0]
        dist = get_engine(spec.engine).distribution
        probe = f"import importlib.util, importlib.metadata as m, sys\nif not importlib.util.find_spec({package!r}): sys.exit(1)\n"
        if dist:  # and the version installed there, if it is installed as that distribution
            probe += f"try: print(m.version({dist!r}))\nexcept m.PackageNotFoundError: pass\n"
        done = subprocess.run([exe, "-c", probe], capture_output=True, text=True, timeout=60)
        if done.returncode != 0:
            raise SpecError("launcher", f"{package} is not installed for {exe}",
                            f"pip install {package} in that environment, or point `launcher` at the Python that "
                            f"has it (or use launcher: simulated)")
        _check_installed_version(spec, dist, done.stdout.strip(), exe)


def _check_launcher_in_target(spec: Spec, argv: list[str]) -> None:
    """The same check inside the target (one contact): `launcher` is a command there, not here.
    An unreachable target is a TransportError naming its field, as the preflight's would be."""
    from autotune.engines import get_engine
    from autotune.engines.base import DriverFacts
    from autotune.errors import SpecError
    from autotune.target.transport import transport_for

    package = argv[2].split(".")[0] if len(argv) >= 3 and argv[1] == "-m" else ""
    adapter = get_engine(spec.engine)
    wants_driver = adapter.needs_driver_facts
    answer = transport_for(spec.target).launcher(argv[0], package, driver=wants_driver)
    where = spec.target.describe()
    if answer.get("exe") is None:
        raise SpecError("launcher", f"{argv[0]!r} is not an executable in the target ({where}): {answer.get('detail')}",
                        "install the engine there, or give the full path of the target's Python in `launcher`")
    if package and not answer.get("module"):
        raise SpecError("launcher", f"{package} is not installed for {answer['exe']} in the target ({where}): "
                        f"{answer.get('detail', '')[-200:]}".rstrip(": "),
                        f"pip install {package} in that environment inside the target, or point `launcher` at "
                        "the target's Python that has it")
    if wants_driver:  # SGLang's CPU path: a driver, or the stand-in beside the launcher, there (SpecError if neither)
        adapter.launch_env(argv, local=False, driver=DriverFacts.from_answer(answer["driver"], f"in the target ({where})"))


def _check_installed_version(spec: Spec, dist: str | None, installed: str, exe: str) -> None:
    """The launcher's environment must hold the engine version the spec names: flags, traits and
    every record follow `engine_version`, while what starts is whatever `launcher` has installed
    (a regress with `--set engine_version=...` and the old launcher compared a version with itself)."""
    from packaging.version import InvalidVersion, Version

    from autotune.errors import SpecError

    if not dist or not installed:
        return  # not installed as a distribution (a source checkout): nothing to compare
    try:
        same = Version(installed) == Version(spec.engine_version)
    except InvalidVersion:
        return
    if not same:
        raise SpecError("engine_version", f"{spec.engine_version} is not what the launcher runs: {exe} has "
                        f"{dist} {installed}", f"set engine_version: \"{installed}\", or point `launcher` at the "
                        f"environment that has {dist} {spec.engine_version}")
