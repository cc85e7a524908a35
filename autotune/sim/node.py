"""The simulated GPU node: GPUs with capacities, in a directory that processes share.

A node is a directory (`autotune sim init DIR`) holding `node.json` (the GPUs) and
`state.json` (who holds what), guarded by an exclusive `flock` so that concurrent
processes allocate safely. Processes find it through `AUTOTUNE_SIM_NODE=DIR`.

Memory belongs to a process (pid + start time, so a recycled pid is not mistaken for
the owner). The node also keeps each GPU's true peak (high-water mark of device-wide use since
`reset_peaks`), which a sampler cannot: an allocation freed within a sample period never shows.
When the owner is dead — exited, killed, or a zombie not yet reaped — its
memory is freed, after the owner's `release_delay_s` (the driver's teardown, which can
be slow): the first reader that sees it dead starts that clock.
"""

from __future__ import annotations

import fcntl
import json
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil

from autotune.errors import GpuError
from autotune.gpu.base import GpuProcess, GpuState
from autotune.records import GIB

ENV_NODE = "AUTOTUNE_SIM_NODE"
ENV_RELEASE_DELAY = "AUTOTUNE_SIM_RELEASE_DELAY_S"


class SimOutOfMemory(Exception):
    """An allocation that does not fit. Carries what torch's OOM message reports."""

    def __init__(self, gpu: int, requested: int, free: int, total: int, held_by_self: int) -> None:
        super().__init__(f"GPU {gpu}: requested {requested} B, free {free} B")
        self.gpu, self.requested, self.free, self.total = gpu, requested, free, total
        self.held_by_self = held_by_self


@dataclass(frozen=True)
class SimGpu:
    index: int
    name: str
    total_bytes: int


def _identity(pid: int) -> tuple[int, float] | None:
    try:
        proc = psutil.Process(pid)
        if proc.status() == psutil.STATUS_ZOMBIE:
            return None
        return pid, proc.create_time()
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return None


def _alive(owner: dict[str, Any]) -> bool:
    ident = _identity(int(owner["pid"]))
    return ident is not None and abs(ident[1] - float(owner["ctime"])) < 0.05


class SimNode:
    """Handle on a simulated node directory. Cheap to create; every call re-reads the state."""

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)
        node_file = self.root / "node.json"
        if not node_file.is_file():
            raise GpuError(
                f"{self.root} is not a simulated node (no node.json)",
                hint=f"create one with: autotune sim init {self.root} --gpus 2 --gpu-mem-gib 48",
            )
        meta = json.loads(node_file.read_text())
        self.gpus = tuple(SimGpu(g["index"], g["name"], int(g["total_bytes"])) for g in meta["gpus"])
        self.default_release_delay_s = float(meta.get("release_delay_s", 0.0))

    # -- creation ---------------------------------------------------------------------

    @classmethod
    def create(
        cls, root: str | Path, *, gpus: int, gpu_mem_gib: float, gpu_name: str = "NVIDIA Simulated GPU",
        release_delay_s: float = 0.0,
    ) -> SimNode:
        if gpus < 1 or gpu_mem_gib <= 0:
            raise GpuError("a node needs at least one GPU with positive memory", hint="--gpus 2 --gpu-mem-gib 48")
        root = Path(root)
        root.mkdir(parents=True, exist_ok=True)
        meta = {
            "gpus": [
                {"index": i, "name": gpu_name, "total_bytes": int(gpu_mem_gib * GIB)} for i in range(gpus)
            ],
            "release_delay_s": release_delay_s,
        }
        (root / "node.json").write_text(json.dumps(meta, indent=1) + "\n")
        with _locked(root):
            _write_state(root, {"owners": {}})
        return cls(root)

    @classmethod
    def from_env(cls) -> SimNode:
        root = os.environ.get(ENV_NODE)
        if not root:
            raise GpuError(
                f"{ENV_NODE} is not set: no simulated node to use",
                hint=f"autotune sim init DIR ... then export {ENV_NODE}=DIR",
            )
        return cls(root)

    # -- allocation -------------------------------------------------------------------

    def allocate(self, gpu: int, nbytes: int, *, pid: int | None = None, release_delay_s: float | None = None) -> None:
        """Take `nbytes` on `gpu` for process `pid` (default: this process). Raises SimOutOfMemory."""
        self._check_gpu(gpu)
        pid = os.getpid() if pid is None else pid
        with self._state() as state:
            used = self._used(state)
            free = self.gpus[gpu].total_bytes - used[gpu]
            owner = self._owner(state, pid, release_delay_s)
            if nbytes > free:
                mine = int(owner["gpus"].get(str(gpu), 0))
                raise SimOutOfMemory(gpu, nbytes, max(0, free), self.gpus[gpu].total_bytes, mine)
            owner["gpus"][str(gpu)] = int(owner["gpus"].get(str(gpu), 0)) + int(nbytes)
            peaks = state.setdefault("peaks", {})
            peaks[str(gpu)] = max(int(peaks.get(str(gpu), 0)), used[gpu] + int(nbytes))

    def release(self, gpu: int, nbytes: int, *, pid: int | None = None) -> None:
        """Give back up to `nbytes` of what `pid` holds on `gpu`."""
        pid = os.getpid() if pid is None else pid
        with self._state() as state:
            for owner in state["owners"].values():
                if owner["pid"] == pid and owner["dead_since"] is None:
                    held = int(owner["gpus"].get(str(gpu), 0))
                    owner["gpus"][str(gpu)] = max(0, held - int(nbytes))

    def release_all(self, *, pid: int | None = None) -> None:
        pid = os.getpid() if pid is None else pid
        with self._state() as state:
            state["owners"] = {k: o for k, o in state["owners"].items() if o["pid"] != pid}

    def reset_peaks(self, gpus: list[int]) -> None:
        """Start a new high-water mark on `gpus`, at what they hold now (a trial's start)."""
        with self._state() as state:
            used = self._used(state)
            peaks = state.setdefault("peaks", {})
            for gpu in gpus:
                self._check_gpu(gpu)
                peaks[str(gpu)] = used[gpu]

    # -- reading ----------------------------------------------------------------------

    def snapshot(self) -> tuple[GpuState, ...]:
        """Every GPU now; `peak_bytes` is its true high-water mark since `reset_peaks` (or creation)."""
        with self._state() as state:
            owners = list(state["owners"].values())
            peaks = {int(k): int(v) for k, v in state.get("peaks", {}).items()}
        out = []
        for gpu in self.gpus:
            procs = tuple(
                GpuProcess(int(o["pid"]), int(o["gpus"][str(gpu.index)]), str(o.get("name", "")))
                for o in owners
                if int(o["gpus"].get(str(gpu.index), 0)) > 0
            )
            used = sum(p.used_bytes for p in procs)
            out.append(GpuState(gpu.index, gpu.name, gpu.total_bytes, used, procs, max(used, peaks.get(gpu.index, 0))))
        return tuple(out)

    def free_bytes(self, gpu: int) -> int:
        return self.snapshot()[gpu].free_bytes

    # -- internals --------------------------------------------------------------------

    def _check_gpu(self, gpu: int) -> None:
        if not 0 <= gpu < len(self.gpus):
            raise GpuError(f"no GPU {gpu} on simulated node {self.root} ({len(self.gpus)} GPUs)")

    def _owner(self, state: dict[str, Any], pid: int, release_delay_s: float | None) -> dict[str, Any]:
        ident = _identity(pid)
        if ident is None:
            raise GpuError(f"process {pid} is not running; it cannot hold GPU memory")
        key = f"{ident[0]}:{ident[1]:.3f}"
        if key not in state["owners"]:
            if release_delay_s is None:
                env = os.environ.get(ENV_RELEASE_DELAY) if pid == os.getpid() else None
                release_delay_s = float(env) if env else self.default_release_delay_s
            try:
                name = " ".join(psutil.Process(pid).cmdline()[:4])[:80]
            except psutil.Error:
                name = ""
            state["owners"][key] = {
                "pid": pid, "ctime": ident[1], "name": name, "release_delay_s": release_delay_s,
                "dead_since": None, "gpus": {},
            }
        owner: dict[str, Any] = state["owners"][key]
        return owner

    def _used(self, state: dict[str, Any]) -> list[int]:
        used = [0] * len(self.gpus)
        for owner in state["owners"].values():
            for gpu, nbytes in owner["gpus"].items():
                used[int(gpu)] += int(nbytes)
        return used

    @contextmanager
    def _state(self) -> Iterator[dict[str, Any]]:
        """Locked read-modify-write of state.json, reaping dead owners on the way."""
        with _locked(self.root):
            state = _read_state(self.root)
            before = json.dumps(state, sort_keys=True)
            _reap(state, time.time())
            yield state
            if json.dumps(state, sort_keys=True) != before:
                _write_state(self.root, state)


def _reap(state: dict[str, Any], now: float) -> None:
    keep = {}
    for key, owner in state["owners"].items():
        if owner["dead_since"] is None and not _alive(owner):
            owner["dead_since"] = now
        if owner["dead_since"] is not None and now - owner["dead_since"] >= owner["release_delay_s"]:
            continue
        if not any(int(v) for v in owner["gpus"].values()) and owner["dead_since"] is not None:
            continue
        keep[key] = owner
    state["owners"] = keep


@contextmanager
def _locked(root: Path) -> Iterator[None]:
    with open(root / "lock", "a+") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _read_state(root: Path) -> dict[str, Any]:
    try:
        state: dict[str, Any] = json.loads((root / "state.json").read_text())
        return state
    except FileNotFoundError:
        return {"owners": {}}


def _write_state(root: Path, state: dict[str, Any]) -> None:
    tmp = root / f".state.{os.getpid()}.tmp"
    tmp.write_text(json.dumps(state))
    os.replace(tmp, root / "state.json")
