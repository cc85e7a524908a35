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
from autotune.search import goal as goal_mod

ORDER = ("features", "context_length", "kv_tokens")


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
        groups.setdefault((feature_label(r), goal_mod.concurrency_of(r)), []).append(r)
    out = [Cell(label, conc, goal_mod.best(group, ORDER, []), sum(r.launched for r in group))
           for (label, conc), group in groups.items()]
    return sorted(out, key=lambda c: (c.features != "base", c.features, c.concurrency))


def table(results: Sequence[TrialResult], verdicts: dict[str, bool] | None = None) -> list[str]:
    """`verdicts`: source trial id → certified, for the configs certification tried."""
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
        peak = max((g.peak_bytes for g in b.gpus), default=0) / GIB
        lines.append(f"| {c.features} | {conc} | {c.context} | {b.kv_tokens} | {b.config.mem_fraction_static} | "
                     f"{peak:.2f} | {status} | {c.launches} |")
    return lines


def plot(results: Sequence[TrialResult], path: Path, title: str, certified_trial: str | None = None) -> Path:
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
            if certified_trial and c.best.trial_id == certified_trial:
                ax.scatter([c.concurrency], [c.context], marker="*", s=220, color="tab:orange", zorder=3,
                           label="certified")
        if xs:
            ax.set_xscale("log", base=2)
            ax.set_yscale("log", base=2)
        ax.set_title(label, fontsize=10)
        ax.set_xlabel("max_running_requests")
        ax.grid(alpha=0.3)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=7, loc="lower left")
    axes[0][0].set_ylabel("longest context that fits (tokens)")
    fig.suptitle(title, fontsize=11)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
