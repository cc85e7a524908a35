"""The frontier: for each feature combination, the largest config that truly fit."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from autotune.records import GIB, TrialResult
from autotune.search import goal as goal_mod


@dataclass(frozen=True)
class FrontierRow:
    features: str
    best: TrialResult | None
    launches: int
    gpu_s: float
    failures: int

    @property
    def peak_gib(self) -> float:
        return max((g.peak_bytes for g in self.best.gpus), default=0) / GIB if self.best else 0.0


def feature_label(result: TrialResult) -> str:
    return "+".join(result.config.features()) or "base"


def rows(results: Sequence[TrialResult], order: Sequence[str], required: Sequence[str]) -> list[FrontierRow]:
    by_features: dict[str, list[TrialResult]] = {}
    for r in results:
        by_features.setdefault(feature_label(r), []).append(r)
    out = []
    for label in sorted(by_features, key=lambda s: (s != "base", s)):
        group = by_features[label]
        best = goal_mod.best(group, order, [])
        out.append(FrontierRow(label, best, sum(r.launched for r in group), sum(r.gpu_s for r in group),
                               sum(not r.outcome.fits for r in group)))
    return out
