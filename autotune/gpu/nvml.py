"""Real GPUs through NVML (nvidia-ml-py). The only module that imports `pynvml`.

NVML is initialised lazily, on the first call, so `import autotune` never touches the
driver. A missing library or driver becomes a GpuError that says how to fix it.
Quantities are bytes, as NVML reports them: `total_bytes` is `memory.total`,
`used_bytes` is `memory.used` (nvidia-smi --query-gpu=memory.total,memory.used), read
through the v2 memory query, which leaves out what the driver reserves — as nvidia-smi does.
The v1 query counts it as used: on an idle H200 (driver 580.159) v1 read 0.60 GiB used where
nvidia-smi read 0 (tools/device_nvml_check.py), so the two backends disagreed by that much
on every figure. A driver without v2 falls back to v1. Either way compare against a baseline
taken before launch, never against zero.
"""

from __future__ import annotations

from typing import Any

from autotune.errors import GpuError
from autotune.gpu.base import GpuBackend, GpuProcess, GpuState

_HINT = ("install the NVIDIA driver (nvidia-smi must work), or run on the simulated node: "
         "autotune sim init DIR && export AUTOTUNE_SIM_NODE=DIR")


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


class NvmlBackend(GpuBackend):
    kind = "nvml"

    def __init__(self) -> None:
        self._nvml: Any = None
        self._memory_v2: bool | None = None  # None until tried: does the driver answer the v2 query?

    def _lib(self) -> Any:
        if self._nvml is None:
            try:
                import pynvml
            except ImportError as exc:  # pragma: no cover - it is a core dependency
                raise GpuError("nvidia-ml-py is not installed", hint="pip install nvidia-ml-py") from exc
            try:
                pynvml.nvmlInit()
            except pynvml.NVMLError as exc:
                raise GpuError(f"NVML could not be initialised: {_text(exc)}", hint=_HINT) from exc
            self._nvml = pynvml
        return self._nvml

    def _call(self, fn: str, *args: Any) -> Any:
        """Call an NVML function; 'not supported' becomes None, other errors a GpuError."""
        nvml = self._lib()
        try:
            return getattr(nvml, fn)(*args)
        except nvml.NVMLError_NotSupported:
            return None
        except nvml.NVMLError as exc:
            raise GpuError(f"NVML {fn} failed: {_text(exc)}", hint="check nvidia-smi; a GPU may have fallen off the bus") from exc

    def snapshot(self) -> tuple[GpuState, ...]:
        out = []
        for index in range(self._call("nvmlDeviceGetCount")):
            handle = self._call("nvmlDeviceGetHandleByIndex", index)
            mem = self._memory(handle)
            procs = self._call("nvmlDeviceGetComputeRunningProcesses", handle) or []
            out.append(GpuState(
                index=index,
                name=_text(self._call("nvmlDeviceGetName", handle)),
                total_bytes=int(mem.total),
                used_bytes=int(mem.used),
                processes=tuple(GpuProcess(int(p.pid), int(p.usedGpuMemory or 0)) for p in procs),
            ))
        return tuple(out)

    def _memory(self, handle: Any) -> Any:
        """`nvmlDeviceGetMemoryInfo`, v2 where the driver has it (used without the driver's reserve,
        as nvidia-smi shows it), else v1."""
        nvml = self._lib()
        version = getattr(nvml, "nvmlMemory_v2", None)
        if self._memory_v2 is not False and version is not None:
            try:
                mem = nvml.nvmlDeviceGetMemoryInfo(handle, version=version)
                self._memory_v2 = True
                return mem
            except (nvml.NVMLError, TypeError):  # an older driver or binding: no v2 query
                if self._memory_v2:
                    raise
                self._memory_v2 = False
        return self._call("nvmlDeviceGetMemoryInfo", handle)

    def fingerprint(self) -> dict[str, str]:
        gpus = self.snapshot()
        return {
            "backend": self.kind,
            "gpu_count": str(len(gpus)),
            "gpu_names": ",".join(sorted({g.name for g in gpus})),
            "gpu_total_bytes": ",".join(str(g.total_bytes) for g in gpus),
            "driver_version": _text(self._call("nvmlSystemGetDriverVersion")),
            "cuda_driver_version": str(self._call("nvmlSystemGetCudaDriverVersion_v2") or ""),
        }

    def close(self) -> None:
        if self._nvml is not None:
            try:
                self._nvml.nvmlShutdown()
            finally:
                self._nvml = None
