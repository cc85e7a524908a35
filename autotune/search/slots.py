"""A run's slots, lent one launch at a time, and certification's boots run at once on them.

A slot is a group of the spec's GPUs (`Spec.slots`; one slot of all of them with `parallel: 1`).
`SlotPool` lends each to one holder at a time: a search trial, or a certification boot. The search
asks first (`priority`): a boot takes a slot the search has nothing to launch on. Once the answer is
settled, what the search has left are chains of dependent launches in the other feature
combinations (a result, then the point it calls for), the run's longest pole; three independent
boots fit around them (the demo's model on 4 slots: 15 s against 17 s with boots first).

`boot_at_once` launches N cold boots of one config, each on a slot of its own (the same GPU kind
and count: every slot has the spec's `tp` GPUs), each with its own port, baseline and release
wait (one `run_trial` each, as every launch). A boot whose slot turns out busy (GPU_BUSY: someone
else's memory, nothing launched) is no boot: it moves to another slot, or waits while every slot
is busy, and never counts as a failure. When a boot dies, the others still running are stopped
(one death is enough to step down; the rest would cost GPU time for nothing), and those not yet
started never start; what was stopped is returned apart, for the timeline, and is no boot.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from autotune.config import LaunchConfig
from autotune.errors import GpuBusyError
from autotune.gpu.base import GpuBackend
from autotune.records import Outcome, TrialResult
from autotune.trial.run import new_trial_id, run_trial, stop_tagged

POLL_S = 0.5  # how often a waiting holder looks again (stop flags, deadlines)


@dataclass(frozen=True)
class Launched:
    """One launch on a slot: its result, which slot, and when it held it (epoch seconds)."""

    result: TrialResult
    slot: int
    start_s: float
    end_s: float


class SlotPool:
    """The GPU groups of one run, each lent to one holder at a time. `live` maps a slot to the trial
    tag running on it (for an interrupt to stop everything this run started)."""

    def __init__(self, gpus: Sequence[tuple[int, ...]]) -> None:
        self.gpus = [tuple(g) for g in gpus]
        self._free = set(range(len(self.gpus)))
        self._waiting_priority = 0
        self._cond = threading.Condition()
        self.live: dict[int, str] = {}

    def __len__(self) -> int:
        return len(self.gpus)

    def acquire(self, *, priority: bool = False, avoid: frozenset[int] = frozenset(),
                timeout: float | None = None) -> int | None:
        """A free slot (not in `avoid` while another is free), or None after `timeout` seconds."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._cond:
            if priority:
                self._waiting_priority += 1
            try:
                while True:
                    if priority or not self._waiting_priority:
                        pick = min(self._free - avoid, default=None)
                        if pick is not None:
                            self._free.discard(pick)
                            return pick
                    left = None if deadline is None else deadline - time.monotonic()
                    if left is not None and left <= 0:
                        return None
                    self._cond.wait(left)
            finally:
                if priority:
                    self._waiting_priority -= 1
                    self._cond.notify_all()

    def release(self, slot: int) -> None:
        with self._cond:
            self.live.pop(slot, None)
            self._free.add(slot)
            self._cond.notify_all()

    def idle(self) -> bool:
        with self._cond:
            return len(self._free) == len(self.gpus)


@dataclass
class _Batch:
    """The boots of one `boot_at_once` call, as they come back."""

    done: list[Launched]
    stopped: list[Launched]
    failed: threading.Event
    tags: set[str] = field(default_factory=set)  # this batch's boots now running
    error: BaseException | None = None


def boot_at_once(pool: SlotPool, config: LaunchConfig, settings: Any, backend: GpuBackend, n: int, *,
                 target: dict[str, Any] | None = None, busy_wait_s: float = 60.0,
                 stop: threading.Event | None = None) -> tuple[list[Launched], list[Launched]]:
    """`n` cold boots of `config`, at once on free slots (those the search leaves). Returns
    (boots in the order they started, stopped ones); a boot that died stops the rest. Raises
    GpuBusyError when every slot stays busy with someone else's memory for `busy_wait_s`;
    re-raises an interrupt after stopping every boot it started."""
    batch = _Batch([], [], threading.Event())
    lock = threading.Lock()
    threads = [threading.Thread(target=_one_boot, name=f"boot-{i}", daemon=True,
                                args=(pool, config, settings, backend, batch, lock, target, busy_wait_s, stop))
               for i in range(n)]
    for t in threads:
        t.start()
    try:
        for t in threads:
            while t.is_alive():
                t.join(POLL_S)
    except BaseException:  # Ctrl-C in this thread: every boot's server is stopped before it goes on
        batch.failed.set()
        for tag in list(batch.tags):
            stop_tagged(tag, target)
        for t in threads:
            t.join(60)
        raise
    if batch.error is not None:
        raise batch.error
    return sorted(batch.done, key=lambda b: b.start_s), batch.stopped


def _one_boot(pool: SlotPool, config: LaunchConfig, settings: Any, backend: GpuBackend, batch: _Batch,
              lock: threading.Lock, target: dict[str, Any] | None, busy_wait_s: float,
              stop: threading.Event | None) -> None:
    avoid: set[int] = set()
    busy_since: float | None = None  # the first time a slot turned out busy (waiting for a free one is no busy)
    try:
        while not batch.failed.is_set() and not (stop is not None and stop.is_set()):
            slot = pool.acquire(avoid=frozenset(avoid), timeout=POLL_S)
            if slot is None:
                continue
            tag = ""
            try:
                if batch.failed.is_set():
                    return  # a sibling died while this one waited for a slot: it never starts
                tag = new_trial_id()
                with lock:
                    pool.live[slot] = tag
                    batch.tags.add(tag)
                start = time.time()
                result = run_trial(config, replace(settings, gpus=pool.gpus[slot]), backend, tag)
                launched = Launched(result, slot, start, time.time())
            finally:
                with lock:
                    batch.tags.discard(tag)
                pool.release(slot)
            if result.outcome is Outcome.GPU_BUSY:  # no boot: someone else's memory on this slot
                busy_since = busy_since or time.monotonic()
                if time.monotonic() - busy_since > busy_wait_s:
                    raise GpuBusyError(
                        f"certification could not boot {config.key()}: every slot's GPUs held someone else's memory "
                        f"for {busy_wait_s:.0f} s ({'; '.join(result.evidence)})",
                        hint="free the GPUs (`nvidia-smi` names the process), then `autotune certify SPEC`")
                avoid.add(slot)
                if avoid >= set(range(len(pool))):
                    avoid.clear()  # every slot is busy: wait for one to come free, then try again
                    time.sleep(POLL_S)
                continue
            with lock:
                if batch.failed.is_set():
                    batch.stopped.append(launched)
                    return
                batch.done.append(launched)
                if not served(result):
                    batch.failed.set()  # one death is enough: the others are stopped, and are no boots
                    for other in batch.tags - {tag}:
                        stop_tagged(other, target)
            return
    except BaseException as exc:  # noqa: BLE001 - handed to the caller's thread
        batch.error = exc
        batch.failed.set()


def served(result: TrialResult) -> bool:
    """A boot that served its worst case (certify.boot_of says why one did not)."""
    return result.outcome is Outcome.READY and bool(result.probe and result.probe.ok)


def of_spec(spec: Any) -> list[tuple[int, ...]]:
    """The GPUs of each slot: `Spec.slots` with several; all the spec's GPUs with one (as the search uses them)."""
    return [tuple(g) for g in spec.slots()] if spec.parallel > 1 else [tuple(spec.gpus)]
