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
import threading
import time
from collections.abc import Sequence

from autotune.errors import GpuError
from autotune.gpu.base import GpuProcess, GpuState

MIB = 1 << 20
GPU_QUERY = "--query-gpu=index,name,memory.total,memory.used,uuid,driver_version"
APPS_QUERY = "--query-compute-apps=pid,used_memory,gpu_uuid,process_name"
CSV = "--format=csv,noheader,nounits"
SEPARATOR = "--autotune-apps--"
MAX_STALE_S = 30.0  # how long failed readings are ridden out on the last good one (as a log stream's reconnect)


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

    def __init__(self, command: Sequence[str], *, min_interval_s: float = 0.25, timeout_s: float = 30.0,
                 max_stale_s: float = MAX_STALE_S) -> None:
        self.command, self.min_interval_s, self.timeout_s = list(command), min_interval_s, timeout_s
        self.max_stale_s = max_stale_s
        self._latest: tuple[GpuState, ...] | None = None
        self._taken = float("-inf")  # when the kept reading's round trip began
        self._error: GpuError | None = None
        self._driver = ""
        self._fresh = threading.Condition()
        self._closed = False
        self._sampler: threading.Thread | None = None

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

    def snapshot(self) -> tuple[GpuState, ...]:
        """The latest reading of a background sampler (a round trip costs up to a second over ssh;
        the watcher must not wait on it). The first call reads synchronously. A failed reading
        (a dropped connection: the next one reconnects) is raised only once no reading has
        succeeded for `max_stale_s`; until then the last good one stands."""
        if self._sampler is None:
            self.fresh_snapshot()
            self._sampler = threading.Thread(target=self._sample, daemon=True)
            self._sampler.start()
        with self._fresh:
            if self._error is not None and time.monotonic() - self._taken > self.max_stale_s:
                raise self._error
            assert self._latest is not None
            return self._latest

    def fresh_snapshot(self) -> tuple[GpuState, ...]:
        """A reading taken now (a round trip), which also becomes the latest for `snapshot()`: for
        the moments a stale one would mislead (the baseline before a launch, the release after a stop)."""
        taken = time.monotonic()
        try:
            states = self.read()
        except GpuError:  # one retry: a dropped connection's next contact opens a new one
            taken = time.monotonic()
            states = self.read()
        self._keep(taken, states, None)
        return states

    def _keep(self, taken: float, states: tuple[GpuState, ...] | None, error: GpuError | None) -> None:
        """Keep a reading unless a newer one (begun later) is already kept: the sampler's and a
        fresh read's round trips overlap."""
        with self._fresh:
            if error is not None:
                self._error = error  # the last good reading and its time stand
            elif taken >= self._taken:
                self._taken, self._latest, self._error = taken, states, None

    def _sample(self) -> None:
        while not self._closed:
            taken = time.monotonic()
            try:
                self._keep(taken, self.read(), None)
            except GpuError as exc:
                self._keep(taken, None, exc)
            time.sleep(self.min_interval_s)

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
        self._closed = True
