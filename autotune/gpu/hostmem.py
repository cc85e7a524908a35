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
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

import psutil

from autotune.errors import GpuError
from autotune.gpu.base import GpuProcess, GpuState

NODE_ROOT = Path("/sys/devices/system/node")
PROC_MEMINFO = Path("/proc/meminfo")
CGROUP_V2_MAX = Path("/sys/fs/cgroup/memory.max")
CGROUP_V2_CURRENT = Path("/sys/fs/cgroup/memory.current")
CGROUP_V1_LIMIT = Path("/sys/fs/cgroup/memory/memory.limit_in_bytes")
CGROUP_V1_USAGE = Path("/sys/fs/cgroup/memory/memory.usage_in_bytes")
_V1_UNLIMITED = 1 << 62  # cgroup v1 reports a huge sentinel when unlimited
_AVAILABLE_PARTS = ("MemFree", "Active(file)", "Inactive(file)", "SReclaimable")
PSUTIL = "psutil"
READINGS = ("node", PSUTIL)  # vLLM-CPU's per-node meminfo figures; SGLang's psutil figure


@dataclass(frozen=True)
class NodeMemory:
    """One NUMA node's memory as vLLM's CPU worker computes it, in bytes."""

    node: int
    total_bytes: int
    available_bytes: int


def parse_meminfo(text: str) -> dict[str, int]:
    """`/proc/meminfo` or a node's meminfo ("Node 0 MemFree:  123 kB") as bytes by field name."""
    out: dict[str, int] = {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) >= 2 and parts[0] == "Node":
            parts = parts[2:]  # drop "Node N"
        if len(parts) >= 2 and parts[0].endswith(":") and parts[1].isdigit():
            scale = 1024 if parts[2:3] == ["kB"] else 1
            out[parts[0][:-1]] = int(parts[1]) * scale
    return out


def _read_int(path: Path) -> int | None:
    try:
        text = path.read_text().strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None


def cgroup_memory(v2_max: Path = CGROUP_V2_MAX, v2_current: Path = CGROUP_V2_CURRENT,
                  v1_limit: Path = CGROUP_V1_LIMIT, v1_usage: Path = CGROUP_V1_USAGE) -> tuple[int, int] | None:
    """(limit, usage) of the cgroup memory limit vLLM honours, or None when unlimited."""
    limit = _read_int(v2_max)
    if limit is not None:
        return limit, _read_int(v2_current) or 0
    limit = _read_int(v1_limit)
    if limit is not None and limit < _V1_UNLIMITED:
        return limit, _read_int(v1_usage) or 0
    return None


def _meminfo(path: Path) -> dict[str, int]:
    """A meminfo file that has at least MemTotal, or a GpuError naming the file."""
    try:
        info = parse_meminfo(path.read_text())
    except OSError as exc:
        raise GpuError(f"cannot read host memory from {path}: {exc.strerror}",
                       hint="the host-memory backend (vLLM's CPU build) needs Linux /proc and /sys") from exc
    if "MemTotal" not in info:
        raise GpuError(f"{path} has no MemTotal line", hint="is this a Linux meminfo file?")
    return info


def _node_ids(node_root: Path) -> list[int]:
    found = (re.fullmatch(r"node(\d+)", p.name) for p in node_root.glob("node*"))
    return sorted(int(m.group(1)) for m in found if m and (node_root / m.group(0) / "meminfo").is_file())


def read_nodes(node_root: Path = NODE_ROOT, proc_meminfo: Path = PROC_MEMINFO,
               cgroup: tuple[int, int] | None = None) -> list[NodeMemory]:
    """Every NUMA node's memory, as vLLM's `get_memory_node_info` computes it (see module doc)."""
    nodes = []
    for node in _node_ids(node_root):
        info = _meminfo(node_root / f"node{node}" / "meminfo")
        nodes.append(NodeMemory(node, info["MemTotal"], sum(info.get(k, 0) for k in _AVAILABLE_PARTS)))
    if not nodes:
        info = _meminfo(proc_meminfo)
        nodes.append(NodeMemory(0, info["MemTotal"], info.get("MemAvailable", info.get("MemFree", 0))))
    if cgroup is not None and cgroup[0] < nodes[0].total_bytes:
        limit, usage = cgroup
        nodes = [NodeMemory(n.node, limit, max(0, min(n.available_bytes, limit - usage))) for n in nodes]
    return nodes


def refuses_to_start(node: GpuState, utilization: float) -> bool:
    """vLLM-CPU's startup check on `node` (a snapshot of this backend): it asks for
    ceil(total * utilization) bytes and stops with "Available memory on node N ... is less than desired
    CPU memory utilization" when that is more than is available. The CPU twin of GPU_BUSY: what the
    tool can check before a launch, for the utilization it is about to try."""
    return math.ceil(node.total_bytes * utilization) > node.free_bytes


def is_vllm_process(cmdline: list[str]) -> bool:
    """vLLM's server or one of its renamed children (setproctitle `VLLM::EngineCore`, `VLLM::Worker…`)."""
    if not cmdline:
        return False
    if cmdline[0].startswith("VLLM::"):  # the simulated vLLM titles its processes so too, but holds no host memory
        return not (len(cmdline) >= 3 and cmdline[1] == "-m" and cmdline[2].startswith("autotune.sim."))
    # `python -m vllm.entrypoints…`: the API server keeps its command line (only its children rename)
    return (os.path.basename(cmdline[0]).startswith("python") and cmdline[1:2] == ["-m"]
            and cmdline[2:3] != [] and cmdline[2].startswith("vllm.entrypoints"))


def resident_unreclaimable_bytes(pid: int) -> int | None:
    """RssAnon + RssShmem of `pid` (/proc/PID/status): the part of its resident set that the node
    counts as used. RssFile (mapped libraries: ~0.5 GB of torch per vLLM process) is page cache, which
    vLLM counts as available, so a plain RSS would make the holders add up to more than `used`."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return None
    fields = parse_meminfo(status)
    if "RssAnon" not in fields:
        return None
    return fields["RssAnon"] + fields.get("RssShmem", 0)


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


def read_sglang(proc_meminfo: Path = PROC_MEMINFO, node_root: Path = NODE_ROOT,
                cgroup: tuple[int, int] | None = None) -> list[NodeMemory]:
    """Host memory as SGLang's CPU path measures it (0.5.9 and 0.5.23 `get_available_gpu_memory` and
    `get_total_memory` on device "cpu"): psutil's `available` (MemAvailable) and `total` (MemTotal)
    divided by the number of NUMA nodes, the same figure for every node; 0.5.23 also takes the minimum
    of that available figure and the cgroup v2 room (`memory.max - memory.current`), passed as `cgroup`.
    This is the figure `--mem-fraction-static` multiplies, logged as `avail mem=` before the weights."""
    info = _meminfo(proc_meminfo)
    count = max(1, len(_node_ids(node_root)))
    total = info["MemTotal"] // count
    available = info.get("MemAvailable", info.get("MemFree", 0)) // count
    if cgroup is not None:
        limit, usage = cgroup
        available = max(0, min(available, limit - usage))
    return [NodeMemory(n, total, available) for n in (_node_ids(node_root) or [0])]


class HostMemBackend:
    """NUMA nodes of this host as GPUs: host memory read as the engine reads it (its adapter's
    `host_memory(version)` gives these keywords). `reading="node"`: vLLM-CPU's node figures (module doc),
    with its start-up refusal; `reading="psutil"`: SGLang's CPU path (`read_sglang`), which refuses
    nothing beforehand; `psutil_cgroup`: the release honours the cgroup v2 room too. `holders` lists the
    engine's processes (`engine_processes` with the engine's matcher)."""

    kind = "hostmem"
    # On a host every process holds memory: only engines listed in `processes` make a node busy
    # (and vLLM's own start-up check, `refuses_to_start`, for a given utilization).
    busy_threshold_bytes: int | None = None
    # A shared host's used memory drifts by more than a GPU's 64 MiB; a tiny-model launch adds
    # ~1.5-3 GiB, so 256 MiB still tells "released" from "held".
    release_tolerance_bytes = 256 * 1024 * 1024

    def __init__(self, node_root: str | Path = NODE_ROOT, proc_meminfo: str | Path = PROC_MEMINFO,
                 holders: Callable[[], Iterable[GpuProcess]] = engine_processes,
                 cgroup: Callable[[], tuple[int, int] | None] = cgroup_memory, reading: str = READINGS[0],
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
            room = _read_int(CGROUP_V2_MAX), _read_int(CGROUP_V2_CURRENT)
            cgroup = (room[0], room[1] or 0) if self.psutil_cgroup and room[0] is not None else None
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
        if self.reading == PSUTIL or not refuses_to_start(state, fraction):
            return None
        return (f"Available memory on node {state.index} ({state.free_bytes / 2**30:.2f}/"
                f"{state.total_bytes / 2**30:.2f} GiB) on startup is less than desired CPU memory utilization "
                f"({fraction:g}, {math.ceil(state.total_bytes * fraction) / 2**30:.2f} GiB)")

    def _on_node(self, pid: int, node: int) -> bool:
        try:
            cpus = _cpu_list((self.node_root / f"node{node}" / "cpulist").read_text())
            return bool(cpus & set(os.sched_getaffinity(pid)))
        except (OSError, ValueError):
            return node == 0

    def fingerprint(self) -> dict[str, str]:
        nodes = self.nodes()
        return {
            "backend": self.kind if self.reading == READINGS[0] else f"{self.kind}-{self.reading}",
            "gpu_count": str(len(nodes)),
            "gpu_names": "host memory (NUMA nodes)",
            "gpu_total_bytes": ",".join(str(n.total_bytes) for n in nodes),
            "driver_version": os.uname().release,
            "cpu_count": str(os.cpu_count() or 0),
        }

    def close(self) -> None:
        pass


def _cpu_list(text: str) -> set[int]:
    """`0-3,8,10-11` as a set of CPU ids."""
    cpus: set[int] = set()
    for part in text.strip().split(","):
        if part:
            lo, _, hi = part.partition("-")
            cpus.update(range(int(lo), int(hi or lo) + 1))
    return cpus
