"""GPU memory through `nvidia-smi`'s query mode, for GPUs the tool does not run next to.

The backend runs `<command> --query-gpu=index,name,memory.total,memory.used --format=csv,noheader,nounits`
and `--query-compute-apps=pid,used_memory,gpu_uuid`, where `command` is whatever reaches the
GPUs' host or container (`ssh root@gpu-box -- pct exec 101 -- nvidia-smi`, built by
`autotune.target`; this module knows nothing of transports). Figures are MiB, as nvidia-smi prints.

Whose memory: inside a container, the PIDs nvidia-smi reports are the host's (or none at all),
not the ones the container sees; this backend passes them on as reported and the trial never
matches them against its own: it judges a trial by device-wide memory against the baseline it
took before the launch (what appeared after our start and went away after our stop).
Sampled only (`peak_bytes` None); a snapshot is cached for `min_interval_s`, since each costs a
round trip.
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Sequence

from autotune.errors import GpuError
from autotune.gpu.base import GpuProcess, GpuState

MIB = 1 << 20
GPU_QUERY = "--query-gpu=index,name,memory.total,memory.used,uuid,driver_version"
APPS_QUERY = "--query-compute-apps=pid,used_memory,gpu_uuid,process_name"
CSV = "--format=csv,noheader,nounits"


def parse_csv(text: str, width: int) -> list[list[str]]:
    """nvidia-smi's CSV rows (comma + space separated; GPU names hold no commas)."""
    rows = []
    for line in text.splitlines():
        if line.strip():
            cells = [c.strip() for c in line.split(",")]
            if len(cells) < width:
                raise GpuError(f"nvidia-smi printed an unexpected row: {line!r}",
                               hint="is the command in target.nvidia_smi really nvidia-smi?")
            rows.append(cells)
    return rows


class NvidiaSmiBackend:
    """GpuBackend over `nvidia-smi` query mode, run through `command` (an argv prefix)."""

    kind = "nvidia-smi"

    def __init__(self, command: Sequence[str], *, min_interval_s: float = 0.25, timeout_s: float = 30.0) -> None:
        self.command, self.min_interval_s, self.timeout_s = list(command), min_interval_s, timeout_s
        self._cached: tuple[float, tuple[GpuState, ...]] | None = None
        self._driver = ""

    def _query(self, query: str) -> str:
        try:
            done = subprocess.run([*self.command, query, CSV], capture_output=True, timeout=self.timeout_s)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise GpuError(f"nvidia-smi through {self.command[0]!r} failed: {exc}",
                           hint="check the target (target.ssh, target.exec_prefix)") from exc
        if done.returncode != 0:
            raise GpuError(f"nvidia-smi exited {done.returncode}: {done.stderr.decode(errors='replace')[-300:]}",
                           hint="is the NVIDIA driver there? (nvidia-smi inside the target)")
        return done.stdout.decode(errors="replace")

    def snapshot(self) -> tuple[GpuState, ...]:
        now = time.monotonic()
        if self._cached is not None and now - self._cached[0] < self.min_interval_s:
            return self._cached[1]
        gpus = parse_csv(self._query(GPU_QUERY), 6)
        apps = parse_csv(self._query(APPS_QUERY), 3)
        by_uuid: dict[str, list[GpuProcess]] = {}
        for pid, used, uuid, *name in apps:
            by_uuid.setdefault(uuid, []).append(
                GpuProcess(pid=int(pid) if pid.isdigit() else -1, used_bytes=int(float(used)) * MIB,
                           name=name[0] if name else ""))
        states = tuple(GpuState(index=int(i), name=name, total_bytes=int(float(total)) * MIB,
                                used_bytes=int(float(used)) * MIB, processes=tuple(by_uuid.get(uuid, ())))
                       for i, name, total, used, uuid, _ in gpus)
        self._driver = gpus[0][5] if gpus else ""
        self._cached = (now, tuple(sorted(states, key=lambda g: g.index)))
        return self._cached[1]

    def fingerprint(self) -> dict[str, str]:
        gpus = self.snapshot()
        return {
            "backend": "nvml",  # the same hardware identity as NVML reads: one study either way
            "gpu_count": str(len(gpus)),
            "gpu_names": ",".join(sorted({g.name for g in gpus})),
            "gpu_total_bytes": ",".join(str(g.total_bytes) for g in gpus),
            "driver_version": self._driver,
        }

    def close(self) -> None:
        pass
