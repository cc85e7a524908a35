"""The trade-off between context length and concurrency on the frontier, per feature combination.

For each feature combination and each `max_running_requests` that was launched: the best
config that fitted at that concurrency (the goal's order without concurrency: the longest
context, then the most KV). A table for report.md and a plot beside it, so a user can pick
"131072 tokens × 16 requests" over "262144 × 8" knowingly, and `best --concurrency N` prints it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from autotune.records import GIB, TrialResult
from autotune.report.frontier import feature_label
from autotune.report.plot import finish_panels
from autotune.search import goal as goal_mod
from autotune.settings import GOAL_ORDER


@dataclass(frozen=True)
class Cell:
    features: str
    concurrency: int  # 0: the engine's own default (no flag, not resolved)
    best: TrialResult | None
    launches: int

    @property
    def context(self) -> int:
        return goal_mod.context_of(self.best) if self.best else 0


def cells(results: Sequence[TrialResult]) -> list[Cell]:
    groups: dict[tuple[str, int], list[TrialResult]] = {}
    for r in results:
        groups.setdefault(_cell_of(r), []).append(r)
    out = [Cell(label, conc, goal_mod.best(group, GOAL_ORDER, []), sum(r.launched for r in group))
           for (label, conc), group in groups.items()]
    return sorted(out, key=lambda c: (c.features != "base", c.features, c.concurrency))


def table(results: Sequence[TrialResult], verdicts: dict[str, bool] | None = None,
          certified: TrialResult | None = None) -> list[str]:
    """`verdicts`: source trial id → certified, for the configs certification tried. `certified`:
    the certified answer; where it is not its cell's best (a step down, mostly one no search trial
    ran) it gets its own row under that cell, so the table names what `best` recommends."""
    verdicts = verdicts or {}
    lines = ["| features | max_running_requests | longest context that fits | KV tokens | mfs | peak GiB/GPU | "
             "certification | launches |", "|---|---|---|---|---|---|---|---|"]
    for c in cells(results):
        b = c.best
        conc = str(c.concurrency or "default")
        if b is None:
            lines.append(f"| {c.features} | {conc} | nothing fitted | - | - | - | - | {c.launches} |")
            continue
        status = "not tried" if b.trial_id not in verdicts else \
            "certified" if verdicts[b.trial_id] else "failed its worst case"
        lines.append(_row(c.features, conc, b, status, str(c.launches)))
        if certified is not None and certified.trial_id != b.trial_id and _cell_of(certified) == (c.features, c.concurrency):
            lines.append(_row(c.features, conc, certified, "certified (stepped down to it)", "-"))
    return lines


def _cell_of(result: TrialResult) -> tuple[str, int]:
    return feature_label(result), goal_mod.concurrency_of(result)


def _row(features: str, conc: str, r: TrialResult, status: str, launches: str) -> str:
    peak = max((g.peak_bytes for g in r.gpus), default=0) / GIB
    return (f"| {features} | {conc} | {goal_mod.context_of(r)} | {r.kv_tokens} | {r.config.mem_fraction_static} | "
            f"{peak:.2f} | {status} | {launches} |")


def plot(results: Sequence[TrialResult], path: Path, title: str, certified: TrialResult | None = None) -> Path:
    """Per feature combination, the longest context that fits by concurrency; the certified answer
    starred where it is (a step down below its cell's best included)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    found = [c for c in cells(results) if c.best is not None and c.concurrency]
    labels = sorted({c.features for c in found}) or ["base"]
    fig, axes = plt.subplots(1, len(labels), figsize=(max(6.0, 4.4 * len(labels)), 4.0), squeeze=False, sharey=True)
    for ax, label in zip(axes[0], labels, strict=True):
        mine = sorted((c for c in found if c.features == label), key=lambda c: c.concurrency)
        xs, ys = [c.concurrency for c in mine], [c.context for c in mine]
        ax.plot(xs, ys, "-o", color="tab:blue")
        for c in mine:
            assert c.best is not None
            ax.annotate(f"{c.best.kv_tokens} KV", (c.concurrency, c.context), textcoords="offset points",
                        xytext=(4, 6), fontsize=7)
        if certified is not None and feature_label(certified) == label and goal_mod.concurrency_of(certified):
            ax.scatter([goal_mod.concurrency_of(certified)], [goal_mod.context_of(certified)], marker="*", s=220,
                       color="tab:orange", zorder=3, label=f"certified ({certified.kv_tokens} KV)")
        if xs:
            ax.set_xscale("log", base=2)
            ax.set_yscale("log", base=2)
        ax.set_title(label, fontsize=10)
        ax.set_xlabel("max_running_requests")
    return finish_panels(fig, axes, "longest context that fits (tokens)", title, path)
