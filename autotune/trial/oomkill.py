"""The kernel's OOM killer, as a launch meets it.

When host memory runs out, the kernel ends a process with SIGKILL and the process writes nothing: the
engine's log shows only what its other processes say of a child that vanished (SGLang's "Rank 0 scheduler
is dead" after an EOFError, vLLM's worker that "failed to start"). On SGLang's and vLLM's CPU paths host
memory is the device, so this is their out-of-memory; on a GPU box it is the host's RAM running out, while
the weights load through it above all: a crash that names host RAM, which says nothing of the GPU's memory
(as the classifier reads the kernel's own "Out of memory: Killed process" line). The log cannot tell it from a
kill by anyone else; the kernel's count of its kills (`oom_kill` in /proc/vmstat, Linux 4.13 on) can: it grew
during the launch.

The count is the whole host's: a kill elsewhere while a launch dies unexplained is read as this launch's.
Both are then one host short of memory, which is what the reading says. (Measured on real kills:
tests/data/launch-census, the `oom-weights` and `oom-kv` faults, run in a memory cgroup.)
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from autotune.classifier.rules import resolve_oom
from autotune.gpu import hostread
from autotune.records import Classification, Need, Outcome

VMSTAT = Path(hostread.PROC_VMSTAT)


def kills(vmstat: Path = VMSTAT) -> int | None:
    """The kernel's count of processes its OOM killer ended since boot; None where it cannot be read. A target's
    is read there by the same code (`place.InTarget.oom_kills`, the helper's `oomkills` op)."""
    count: int | None = hostread.oom_kills(str(vmstat))
    return count


def reading(cls: Classification, before: int | None, after: int | None, *, host_device: bool = True
            ) -> Classification | None:
    """`cls`, a launch that died as a crash (or with no outcome), read again when the kernel's OOM killer ended a process
    during it. What the log then says is the other processes' echo of the kill (a child "is dead", an EOFError, a
    worker that "failed to start"), so a crash the log explains yields too; an outcome the engine itself decided (a
    refused setting, its own out-of-memory) does not. None when the count did not grow or could not be read.

    Where host memory is the engine's device (`host_device`: SGLang's and vLLM's CPU paths), it is the out-of-memory
    of the phase it died in: weights, KV pool with a smaller fraction, graphs, runtime (None where the phase says
    nothing: before the engine began). On a GPU engine it stays a crash that names host RAM: the search reads
    OOM_WEIGHTS as "the weights do not fit this group whatever the fraction", which a host short of RAM (several
    launches loading at once, a small host) does not show."""
    if before is None or after is None or after <= before or cls.outcome not in (None, Outcome.CRASH):
        return None
    said = (f"the kernel's OOM killer ended a process of the server in phase {cls.phase.value} (its kill count went "
            f"from {before} to {after} during the launch; the log has no error, as a SIGKILL leaves none): host "
            "memory ran out. ")
    evidence = (*cls.evidence, f"/proc/vmstat oom_kill {before} -> {after}")
    if not host_device:
        remedy = said + ("That is the host's RAM, not the GPU's memory, so no GPU memory setting changes it: fewer "
                         "launches or other processes at once on this host, or more host RAM")
        return replace(cls, outcome=Outcome.CRASH, remedy=remedy, confidence="high", evidence=evidence,
                       figures={**cls.figures, "mfs_direction": 0.0})
    placed = resolve_oom(cls.phase, frozenset())
    if placed is None:
        return None
    outcome, direction = placed
    remedy = said
    if outcome is Outcome.OOM_WEIGHTS:
        remedy += "No fraction helps: a smaller model or quantization, more host memory, or fewer launches at once"
    elif outcome is Outcome.GPU_BUSY:
        remedy += "It was short before the weights: other processes hold the host's memory; free it or wait"
    else:
        remedy += "Lower the memory fraction: it asked for more than the host could give"
    figures = {**cls.figures, "mfs_direction": float(direction)}
    return replace(cls, outcome=outcome, remedy=remedy, figures=figures, confidence="high",
                   needs=Need.LESS_FRACTION if outcome is Outcome.OOM_KV_POOL else cls.needs, evidence=evidence)
