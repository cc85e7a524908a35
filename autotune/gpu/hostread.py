"""Host memory read as an engine on host memory reads it: the arithmetic, standard library only.

Shared by both sides so a figure is computed by the same code wherever the server runs:
`autotune.gpu.hostmem` (here, the `HostMemBackend`) imports these functions, and for a target the tool
sends this file's text to the helper's `hostmem ENGINE CGROUP` op, which runs
`host_reading()` inside the target: its /proc, its /sys, its PIDs. So this file imports nothing
outside the standard library, has no `from __future__` line and no annotation a target's older
Python 3 would evaluate and reject (the helper's own rule).

The figures (their sources are in `autotune.gpu.hostmem`'s docstring):
- vLLM's CPU build (`read_nodes`): per NUMA node, total = MemTotal, available = MemFree +
  Active(file) + Inactive(file) + SReclaimable; without per-node meminfo one node from /proc/meminfo
  (MemTotal, MemAvailable); under a cgroup limit below the total, the limit and min(available,
  limit - usage);
- SGLang's CPU path (`read_sglang`): /proc/meminfo's MemTotal and MemAvailable divided by the number of
  NUMA nodes, the same for every node; 0.5.23 also takes the minimum with the cgroup v2 room.
The engine's processes are matched by command line (`server_matcher`, from the adapter's titles and modules) and
hold RssAnon + RssShmem (RSS where /proc/PID/status lacks those lines).

Two facts the trial reads of the host the server runs on, here and in a target alike (`autotune.trial.oomkill`, the
helper's `oomkills` and `workers` ops): the kernel's count of its OOM kills, and a process's resident set.
"""

import os
import re

NODE_ROOT = "/sys/devices/system/node"
PROC_MEMINFO = "/proc/meminfo"
PROC_VMSTAT = "/proc/vmstat"
CGROUP_V2_MAX = "/sys/fs/cgroup/memory.max"
CGROUP_V2_CURRENT = "/sys/fs/cgroup/memory.current"
CGROUP_V1_LIMIT = "/sys/fs/cgroup/memory/memory.limit_in_bytes"
CGROUP_V1_USAGE = "/sys/fs/cgroup/memory/memory.usage_in_bytes"
V1_UNLIMITED = 1 << 62  # cgroup v1 reports a huge sentinel when unlimited
AVAILABLE_PARTS = ("MemFree", "Active(file)", "Inactive(file)", "SReclaimable")


class MeminfoError(Exception):
    """A meminfo file that cannot be read or has no MemTotal: (path, why)."""

    def __init__(self, path, why):
        super().__init__(f"{path}: {why}")
        self.path, self.why = str(path), why


def parse_meminfo(text):
    """`/proc/meminfo` or a node's meminfo ("Node 0 MemFree:  123 kB") as bytes by field name."""
    out = {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) >= 2 and parts[0] == "Node":
            parts = parts[2:]  # drop "Node N"
        if len(parts) >= 2 and parts[0].endswith(":") and parts[1].isdigit():
            scale = 1024 if parts[2:3] == ["kB"] else 1
            out[parts[0][:-1]] = int(parts[1]) * scale
    return out


def read_int(path):
    try:
        with open(path) as fh:
            text = fh.read().strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None


def cgroup_memory(v2_max=CGROUP_V2_MAX, v2_current=CGROUP_V2_CURRENT, v1_limit=CGROUP_V1_LIMIT,
                  v1_usage=CGROUP_V1_USAGE):
    """(limit, usage) of the cgroup memory limit vLLM honours, or None when unlimited."""
    limit = read_int(v2_max)
    if limit is not None:
        return limit, read_int(v2_current) or 0
    limit = read_int(v1_limit)
    if limit is not None and limit < V1_UNLIMITED:
        return limit, read_int(v1_usage) or 0
    return None


def sglang_cgroup(enabled, v2_max=CGROUP_V2_MAX, v2_current=CGROUP_V2_CURRENT):
    """The cgroup v2 room (limit, usage) SGLang 0.5.23 honours, or None (disabled, or no v2 limit)."""
    if not enabled:
        return None
    limit = read_int(v2_max)
    return None if limit is None else (limit, read_int(v2_current) or 0)


def meminfo(path):
    """A meminfo file that has at least MemTotal; MeminfoError naming the file otherwise."""
    try:
        with open(path) as fh:
            info = parse_meminfo(fh.read())
    except OSError as exc:
        raise MeminfoError(path, exc.strerror or str(exc)) from exc
    if "MemTotal" not in info:
        raise MeminfoError(path, "no MemTotal line")
    return info


def node_ids(node_root=NODE_ROOT):
    """The NUMA nodes that have a meminfo file under `node_root`, in order."""
    try:
        names = os.listdir(node_root)
    except OSError:
        return []
    found = (re.fullmatch(r"node(\d+)", name) for name in names)
    return sorted(int(m.group(1)) for m in found
                  if m and os.path.isfile(os.path.join(node_root, m.group(0), "meminfo")))


def read_nodes(node_root=NODE_ROOT, proc_meminfo=PROC_MEMINFO, cgroup=None):
    """[(node, total, available)] as vLLM's CPU worker computes them (module doc)."""
    nodes = []
    for node in node_ids(node_root):
        info = meminfo(os.path.join(node_root, f"node{node}", "meminfo"))
        nodes.append((node, info["MemTotal"], sum(info.get(k, 0) for k in AVAILABLE_PARTS)))
    if not nodes:
        info = meminfo(proc_meminfo)
        nodes.append((0, info["MemTotal"], info.get("MemAvailable", info.get("MemFree", 0))))
    if cgroup is not None and cgroup[0] < nodes[0][1]:
        limit, usage = cgroup
        nodes = [(n, limit, max(0, min(avail, limit - usage))) for n, _, avail in nodes]
    return nodes


def read_sglang(proc_meminfo=PROC_MEMINFO, node_root=NODE_ROOT, cgroup=None):
    """[(node, total, available)] as SGLang's CPU path computes them (module doc)."""
    info = meminfo(proc_meminfo)
    ids = node_ids(node_root)
    count = max(1, len(ids))
    total = info["MemTotal"] // count
    available = info.get("MemAvailable", info.get("MemFree", 0)) // count
    if cgroup is not None:
        limit, usage = cgroup
        available = max(0, min(available, limit - usage))
    return [(n, total, available) for n in (ids or [0])]


def server_matcher(titles, modules):
    """A command-line test for one engine's processes, from its adapter's data: a process titled with one
    of `titles` (setproctitle: `VLLM::EngineCore`, `sglang::scheduler`), or `python -m` one of `modules`
    (the server itself keeps its command line). The simulated servers title theirs alike but are run as
    `-m autotune.sim.*` and hold no host memory: never matched."""
    titles, modules = tuple(titles), tuple(modules)

    def match(cmdline):
        if not cmdline:
            return False
        if titles and cmdline[0].startswith(titles):
            return not (len(cmdline) >= 3 and cmdline[1] == "-m" and cmdline[2].startswith("autotune.sim."))
        return bool(modules) and (os.path.basename(cmdline[0]).startswith("python") and cmdline[1:2] == ["-m"]
                                  and cmdline[2:3] != [] and cmdline[2].startswith(modules))
    return match


# vLLM's CPU build (the default holders of `HostMemBackend`, kept for its callers and tests).
is_vllm_process = server_matcher(("VLLM::",), ("vllm.entrypoints",))


def proc_cmdline(pid):
    """The argv of `pid` as psutil reads it (a title rewritten with spaces and no NULs is split on
    spaces), or None when it is gone or a kernel thread."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            data = fh.read().decode(errors="surrogateescape")
    except OSError:
        return None
    if not data:
        return None
    sep = "\x00" if data.endswith("\x00") else " "
    if data.endswith(sep):
        data = data[:-1]
    argv = data.split(sep)
    if sep == "\x00" and len(argv) == 1 and " " in data:  # setproctitle's title with spaces
        argv = data.split(" ")
    return argv


def resident_unreclaimable_bytes(pid):
    """RssAnon + RssShmem of `pid` (/proc/PID/status): the part of its resident set that the node
    counts as used (RssFile is page cache, which the engines count as available); None without them."""
    fields = _status(pid)
    if fields is None or "RssAnon" not in fields:
        return None
    return fields["RssAnon"] + fields.get("RssShmem", 0)


def resident_bytes(pid):
    """The resident set of `pid` (VmRSS, as psutil's `rss`); None when it is gone or a zombie."""
    fields = _status(pid)
    return None if fields is None else fields.get("VmRSS")


def oom_kills(path=PROC_VMSTAT):
    """The kernel's count of processes its OOM killer ended since boot (`oom_kill`, Linux 4.13 on); None where it
    cannot be read. It is the kernel's, not a namespace's: a container reads its host's count."""
    try:
        with open(path) as fh:
            for line in fh:
                if line.startswith("oom_kill "):
                    return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        return None
    return None


def _status(pid):
    try:
        with open(f"/proc/{pid}/status") as fh:
            return parse_meminfo(fh.read())
    except OSError:
        return None


def proc_processes(match):
    """[(pid, bytes held, name)] of this side's processes whose command line `match` accepts, read
    from /proc as `engine_processes` reads them through psutil; in pid order."""
    out = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        pid = int(name)
        argv = proc_cmdline(pid)
        if not argv or not match(argv):
            continue
        held = resident_unreclaimable_bytes(pid)
        if held is None:
            fields = _status(pid)
            if fields is None or "VmRSS" not in fields:
                continue  # gone meanwhile, or a zombie (no memory)
            held = fields["VmRSS"]
        out.append((pid, held, argv[0]))
    return sorted(out)


def cpu_list(text):
    """`0-3,8,10-11` as a set of CPU ids."""
    cpus = set()  # type: set[int]
    for part in text.strip().split(","):
        if part:
            lo, _, hi = part.partition("-")
            cpus.update(range(int(lo), int(hi or lo) + 1))
    return cpus


def on_node(pid, node, node_root=NODE_ROOT):
    """Whether `pid` may run on NUMA node `node` (its CPU affinity covers one of the node's CPUs);
    where that cannot be read, node 0 only."""
    try:
        with open(os.path.join(node_root, f"node{node}", "cpulist")) as fh:
            cpus = cpu_list(fh.read())
        return bool(cpus & set(os.sched_getaffinity(pid)))
    except (OSError, ValueError):
        return node == 0


NODE = "node"  # vLLM-CPU's per-node meminfo figures
PSUTIL = "psutil"  # SGLang's CPU path: psutil's figure over the nodes
READINGS = (NODE, PSUTIL)


def read_as(reading, psutil_cgroup, node_root=NODE_ROOT, proc_meminfo=PROC_MEMINFO):
    """The nodes as the `reading` an engine's adapter names reads them: [(node, total, available)]."""
    if reading == PSUTIL:
        return read_sglang(proc_meminfo, node_root, sglang_cgroup(psutil_cgroup))
    if reading == NODE:
        return read_nodes(node_root, proc_meminfo, cgroup_memory())
    raise ValueError(f"unknown host-memory reading {reading!r} (one of {', '.join(READINGS)})")


def host_reading(reading, psutil_cgroup, titles=(), modules=()):
    """One snapshot of this side, as JSON-ready data: the nodes as `reading` reads them, each with the
    pids of the engine's processes (`server_matcher(titles, modules)`) on it, every such process with the
    memory it holds, and what identifies the machine (kernel release, CPU count). The helper's `hostmem`
    op prints it."""
    nodes = read_as(reading, psutil_cgroup)
    procs = proc_processes(server_matcher(titles, modules))
    return {
        "nodes": [{"node": n, "total_bytes": total, "available_bytes": avail,
                   "pids": [p[0] for p in procs if len(nodes) == 1 or on_node(p[0], n)]}
                  for n, total, avail in nodes],
        "processes": [{"pid": pid, "used_bytes": held, "name": name} for pid, held, name in procs],
        "release": os.uname().release,
        "cpu_count": os.cpu_count() or 0,
    }
