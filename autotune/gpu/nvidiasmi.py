"""GPU memory through `nvidia-smi`'s query mode, for GPUs the tool does not run next to.

The backend runs `<command> --query-gpu=index,name,memory.total,memory.used --format=csv,noheader,nounits`
and `--query-compute-apps=pid,used_memory,gpu_uuid`, where `command` is whatever reaches the
GPUs' host or container (`ssh root@gpu-box -- pct exec 101 -- nvidia-smi`, built by
`autotune.target`; this module knows nothing of transports). Figures are MiB, as nvidia-smi prints.

Whose memory: inside a container, the PIDs nvidia-smi reports are the host's (or none at all),
not the ones the container sees; this backend passes them on as reported and the trial never
matches them against its own: it judges a trial by device-wide memory against the baseline it
took before the launch (what appeared after our start and went away after our stop).
Sampled only (`peak_bytes` None), by a background thread every `min_interval_s`, since each
reading costs a round trip; `snapshot()` returns the latest (`read()` a fresh one).
"""

from __future__ import annotations

import subprocess
from collections.abc import Sequence

from autotune.errors import GpuError
from autotune.gpu.base import GpuProcess, GpuState
from autotune.gpu.sampled import MAX_STALE_S, SampledBackend

MIB = 1 << 20
GPU_QUERY = "--query-gpu=index,name,memory.total,memory.used,uuid,driver_version"
APPS_QUERY = "--query-compute-apps=pid,used_memory,gpu_uuid,process_name"
CSV = "--format=csv,noheader,nounits"
SEPARATOR = "--autotune-apps--"


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


class NvidiaSmiBackend(SampledBackend):
    """GpuBackend over `nvidia-smi` query mode, run through `command` (an argv prefix); sampled in the
    background (`SampledBackend`)."""

    kind = "nvidia-smi"

    def __init__(self, command: Sequence[str], *, min_interval_s: float = 0.25, timeout_s: float = 30.0,
                 max_stale_s: float = MAX_STALE_S) -> None:
        super().__init__(min_interval_s=min_interval_s, max_stale_s=max_stale_s)
        self.command, self.timeout_s = list(command), timeout_s
        self._driver = ""

    def _query(self) -> tuple[str, str]:
        """Both queries in one round trip: `sh -c` with fixed text, the command as its arguments."""
        argv = ["sh", "-c", f'"$@" {GPU_QUERY} {CSV} && echo {SEPARATOR} && "$@" {APPS_QUERY} {CSV}', "sh",
                *self.command]
        try:
            done = subprocess.run(argv, capture_output=True, timeout=self.timeout_s)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise GpuError(f"nvidia-smi through {self.command[0]!r} failed: {exc}",
                           hint="check the target (target.ssh, target.exec_prefix)") from exc
        if done.returncode != 0:
            raise GpuError(f"nvidia-smi exited {done.returncode}: {done.stderr.decode(errors='replace')[-300:]}",
                           hint="is the NVIDIA driver there? (nvidia-smi inside the target)")
        gpus, _, apps = done.stdout.decode(errors="replace").partition(SEPARATOR + "\n")
        return gpus, apps

    def read(self) -> tuple[GpuState, ...]:
        """One fresh reading (a round trip)."""
        gpu_text, apps_text = self._query()
        gpus, apps = parse_csv(gpu_text, 6), parse_csv(apps_text, 3)
        by_uuid: dict[str, list[GpuProcess]] = {}
        for pid, used, uuid, *name in apps:
            by_uuid.setdefault(uuid, []).append(
                GpuProcess(pid=int(pid) if pid.isdigit() else -1, used_bytes=int(float(used)) * MIB,
                           name=name[0] if name else ""))
        states = tuple(GpuState(index=int(i), name=name, total_bytes=int(float(total)) * MIB,
                                used_bytes=int(float(used)) * MIB, processes=tuple(by_uuid.get(uuid, ())))
                       for i, name, total, used, uuid, _ in gpus)
        self._driver = gpus[0][5] if gpus else ""
        return tuple(sorted(states, key=lambda g: g.index))

    def fingerprint(self) -> dict[str, str]:
        gpus = self.snapshot()
        return {
            "backend": "nvml",  # the same hardware identity as NVML reads: one study either way
            "gpu_count": str(len(gpus)),
            "gpu_names": ",".join(sorted({g.name for g in gpus})),
            "gpu_total_bytes": ",".join(str(g.total_bytes) for g in gpus),
            "driver_version": self._driver,
        }
