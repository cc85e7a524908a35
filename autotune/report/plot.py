"""A PNG of the explored space: context length against memory fraction, one panel per
feature combination, each launch marked by how it ended (its marker and colour: records.OUTCOMES)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from autotune.records import TrialResult
from autotune.report.frontier import feature_label
from autotune.search.goal import context_of


def plot(results: Sequence[TrialResult], path: Path, title: str) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    labels = sorted({feature_label(r) for r in results}) or ["base"]
    fig, axes = plt.subplots(1, len(labels), figsize=(4.2 * len(labels), 4.2), squeeze=False, sharey=True)
    for ax, label in zip(axes[0], labels, strict=True):
        shown = set()
        for r in (r for r in results if feature_label(r) == label):
            mfs = r.config.mem_fraction_static or r.resolved.get("mem_fraction_static") or 0
            ax.scatter(mfs, context_of(r), marker=r.outcome.facts.marker, color=r.outcome.facts.color, s=55,
                       label=None if r.outcome in shown else r.outcome.value)
            shown.add(r.outcome)
        ax.set_yscale("log", base=2)
        ax.set_title(label, fontsize=10)
        ax.set_xlabel("mem_fraction_static")
    return finish_panels(fig, axes, "context length (tokens)", title, path)


def finish_panels(fig: Any, axes: Any, ylabel: str, title: str, path: Path) -> Path:
    """A row of panels (one per feature combination) gridded, labelled and saved."""
    for ax in axes[0]:
        ax.grid(alpha=0.3)
        if ax.get_legend_handles_labels()[0]:  # an empty study has nothing to label (matplotlib would warn)
            ax.legend(fontsize=7, loc="lower left")
    axes[0][0].set_ylabel(ylabel)
    fig.suptitle(title, fontsize=11)
    return save(fig, path)


def save(fig: Any, path: Path) -> Path:
    import matplotlib.pyplot as plt

    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
