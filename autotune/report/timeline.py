"""Where the night went: one row per slot, each launch a bar from when it took its slot to when it
gave it back, coloured by how it ended; certification's boots hatched, launches stopped early
(a fresh result made their point pointless, or a sibling boot died) pale. The gaps are what sat
idle, and `idle_share` says how much.

Bars come from the record: a search trial's `clock` user attribute (search/loop.py: slot and
epoch seconds) and each certification boot's slot and times (search/certify.py `Boot`). A run
recorded before either was kept has no bars for it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import optuna

from autotune import store
from autotune.records import Outcome
from autotune.report.plot import save
from autotune.search import certify
from autotune.search.loop import CLOCK_ATTR

KINDS = ("search", "cancelled", "boot", "boot stopped")


@dataclass(frozen=True)
class Bar:
    """One launch on one slot, from `start_s` to `end_s` (epoch seconds)."""

    slot: int
    start_s: float
    end_s: float
    outcome: str  # an Outcome's value
    kind: str  # one of KINDS
    label: str


def bars(study: optuna.Study) -> list[Bar]:
    """Every launch of the study that recorded its slot, search trials and certification boots."""
    out = []
    for trial in study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,
                                                          optuna.trial.TrialState.FAIL)):
        clock = trial.user_attrs.get(CLOCK_ATTR)
        if not clock:
            continue
        kind = "cancelled" if trial.user_attrs.get(store.CANCELLED_ATTR) else "search"
        out.append(Bar(int(clock["slot"]), float(clock["start_s"]), float(clock["end_s"]),
                       str(trial.user_attrs.get("outcome", "")), kind, f"#{trial.number}"))
    cert = certify.load(dict(study.user_attrs))
    seen: set[str] = set()
    for attempt in cert.attempts if cert else ():
        for boot, kind in [*((b, "boot") for b in attempt.boots), *((b, "boot stopped") for b in attempt.stopped)]:
            if boot.trial_id in seen or boot.slot is None or boot.start_s is None or boot.end_s is None:
                continue  # a step down's first boot is listed again with its others; old records lack the clock
            seen.add(boot.trial_id)
            out.append(Bar(boot.slot, boot.start_s, boot.end_s, boot.outcome, kind, "cert"))
    return sorted(out, key=lambda b: (b.start_s, b.slot))


def slot_count(found: Sequence[Bar]) -> int:
    return max((b.slot for b in found), default=-1) + 1


def idle_share(found: Sequence[Bar], slots: int | None = None) -> float | None:
    """The share of slot time with nothing running, from the first launch's start to the last's
    end, over `slots` slots (default: as many as the bars use). None without bars."""
    if not found:
        return None
    n = slots or slot_count(found)
    t0, t1 = min(b.start_s for b in found), max(b.end_s for b in found)
    if t1 <= t0:
        return 0.0
    busy = 0.0
    for s in range(n):  # a slot's bars never overlap, but merge anyway: the share cannot go below 0
        end = t0
        for b in sorted((b for b in found if b.slot == s), key=lambda b: b.start_s):
            busy += max(0.0, b.end_s - max(b.start_s, end))
            end = max(end, b.end_s)
    return max(0.0, 1.0 - busy / (n * (t1 - t0)))


def plot(found: Sequence[Bar], path: Path, title: str, slots: int | None = None) -> Path:
    """The PNG: time (seconds from the first launch) across, one row per slot."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    n = max(slots or slot_count(found), 1)
    t0 = min((b.start_s for b in found), default=0.0)
    fig, ax = plt.subplots(figsize=(10, 1.2 + 0.6 * n))
    for b in found:
        color = _color(b.outcome)
        pale = b.kind in ("cancelled", "boot stopped")
        ax.barh(b.slot, b.end_s - b.start_s, left=b.start_s - t0, height=0.7, color=color,
                alpha=0.35 if pale else 0.9, edgecolor="black", linewidth=0.6,
                hatch="///" if b.kind.startswith("boot") else None)
    share = idle_share(found, n)
    ax.set_yticks(range(n), [f"slot {i}" for i in range(n)])
    ax.set_ylim(n - 0.5, -0.5)
    ax.set_xlabel("seconds from the first launch")
    ax.grid(axis="x", alpha=0.3)
    outcomes = sorted({b.outcome for b in found})
    handles = [Patch(facecolor=_color(o), label=o) for o in outcomes]
    handles += [Patch(facecolor="white", edgecolor="black", hatch="///", label="certification boot"),
                Patch(facecolor="tab:gray", alpha=0.35, label="stopped early (no verdict)")]
    ax.legend(handles=handles, fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    ax.set_title(title + (f" (idle {share:.0%} of slot time)" if share is not None else ""), fontsize=10)
    return save(fig, path)


def _color(outcome: str) -> str:
    """The explored-space plot's colour for the outcome (gray for none known)."""
    known = {o.value: o for o in Outcome}
    return known[outcome].facts.color if outcome in known else "tab:gray"
