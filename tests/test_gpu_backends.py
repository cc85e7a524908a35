"""The GpuBackend contract, for every implementation: the simulated node, NVML through a
stubbed pynvml (three fake GPUs, a lost GPU, unsupported fields — gpustat's way of testing
without a GPU), and real NVML where it initialises."""

from __future__ import annotations

import sys
import types
from collections.abc import Iterator
from pathlib import Path

import pytest

from autotune.errors import GpuError
from autotune.gpu.base import GpuBackend, GpuState
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

    def __init__(self) -> None:
        super().__init__("pynvml")
        self.lost = False
        self.no_process_info = False
        self.init_calls = 0
        self.mem = [(80 * GIB, 1 * GIB), (80 * GIB, 30 * GIB), (80 * GIB, 0)]

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

    def nvmlDeviceGetMemoryInfo(self, h: int) -> types.SimpleNamespace:  # noqa: N802
        total, used = self.mem[h]
        return types.SimpleNamespace(total=total, used=used, free=total - used)

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


@pytest.fixture(params=["simulated", "nvml-stub", "nvml-real"])
def backend(request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[GpuBackend]:
    if request.param == "simulated":
        node = SimNode.create(tmp_path / "node", gpus=3, gpu_mem_gib=80)
        monkeypatch.setenv("AUTOTUNE_SIM_NODE", str(node.root))
        node.allocate(1, 30 * GIB)
        yield SimulatedBackend(node.root)
        node.release_all()
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
