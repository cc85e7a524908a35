"""SGLang's KV pool on host memory (engine `sglang-cpu`) from one launch's logged figures.

SGLang sizes its pool from the memory it sees free: `fraction x A` where `A` is what was available
when the server started (`Load weight begin. avail mem=A GB`), less what start-up took before the
pool was sized, weights first (`Load weight end. ... avail mem=B GB, mem usage=U GB`). On a GPU that
use is the weights. On a host it is whatever the box's available memory lost meanwhile, the other
tenants included: four launches of one config here gave pools of 9,709 to 11,340 tokens
(reference/sglang-cpu.md). So one launch anchors the pool at any fraction,

    tokens(f', A', U') = (f' x A' - U' - R) / cell,

with the anchor's residual `R = f x A - U - tokens x cell` (what start-up took between the weight
load and the pool's sizing) and its cell bytes, and `A'`, `U'` the new launch's. Before the launch
`A'` is the box's available memory now and `U'` the anchor's (the best guess); after it, both are
logged, and `compare` says how far each moved and how close the arithmetic is once they are allowed
for (measured: docs/real-sglang.md).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

GIB = float(1 << 30)


@dataclass(frozen=True)
class PoolAnchor:
    """One launch's pool and the figures it was sized from (GiB, bytes per token)."""

    fraction: float
    avail_gib: float  # A: available when the server started
    load_use_gib: float  # U: what the weight load took of it
    tokens: float
    cell_bytes: float

    @property
    def residual_gib(self) -> float:
        """R: what start-up took beyond the weight load before the pool was sized."""
        return self.fraction * self.avail_gib - self.load_use_gib - self.tokens * self.cell_bytes / GIB

    def tokens_at(self, fraction: float, avail_gib: float | None = None, load_use_gib: float | None = None) -> float:
        """The pool at `fraction`, on a box with `avail_gib` available at start (default: the anchor's) and a
        weight load taking `load_use_gib` (default: the anchor's)."""
        a = self.avail_gib if avail_gib is None else avail_gib
        u = self.load_use_gib if load_use_gib is None else load_use_gib
        return max(0.0, (fraction * a - u - self.residual_gib) * GIB / self.cell_bytes)


def anchor_of(figures: Mapping[str, float], fraction: float | None) -> PoolAnchor | None:
    """The anchor a launch's logged figures give, or None when it did not log them all."""
    frac = figures.get("mem_fraction_static") or fraction
    avail, after = figures.get("avail_before_weights_gib"), figures.get("avail_after_weights_gib")
    tokens = figures.get("kv_tokens")
    cell = figures.get("kv_cell_bytes")
    if cell is None and tokens and figures.get("kv_gib"):
        cell = figures["kv_gib"] * GIB / tokens
    if not (frac and avail and after is not None and tokens and cell):
        return None
    return PoolAnchor(float(frac), float(avail), float(avail - after), float(tokens), float(cell))


@dataclass(frozen=True)
class Comparison:
    """A launch's pool against the anchor's prediction."""

    predicted: float  # at the anchor's box: same available memory, same weight-load use
    predicted_start: float  # allowing for the available memory at this launch's start
    predicted_allowed: float  # and for what its weight load took
    actual: float
    moved_start_gib: float  # available at start, this launch minus the anchor's
    moved_load_gib: float  # what the weight load took, this launch minus the anchor's

    @property
    def error_pct(self) -> float:
        """The arithmetic's error once both movements are allowed for, in % of the actual pool."""
        return 100.0 * (self.predicted_allowed - self.actual) / self.actual if self.actual else 0.0

    @property
    def engine_change_pct(self) -> float:
        """What the engine served against what the anchor's arithmetic predicts at this launch's own
        memory, in % of the prediction: the change the box's moves do not explain."""
        return 100.0 * (self.actual - self.predicted_allowed) / self.predicted_allowed if self.predicted_allowed else 0.0

    def sentence(self) -> str:
        return (f"pool {self.actual:.0f} tokens; predicted {self.predicted_allowed:.0f} ({self.error_pct:+.1f} %) "
                f"once the box's memory is allowed for: available at start moved {self.moved_start_gib:+.2f} GiB "
                f"and the weight load took {self.moved_load_gib:+.2f} GiB more than at the anchor "
                f"(without allowing for them: {self.predicted:.0f})")


def compare(anchor: PoolAnchor, figures: Mapping[str, float], fraction: float | None) -> Comparison | None:
    """How a launch's logged pool compares with `anchor`'s prediction at its fraction; None when the
    launch did not log what it takes."""
    other = anchor_of(figures, fraction)
    if other is None:
        return None
    return Comparison(
        predicted=anchor.tokens_at(other.fraction),
        predicted_start=anchor.tokens_at(other.fraction, other.avail_gib),
        predicted_allowed=anchor.tokens_at(other.fraction, other.avail_gib, other.load_use_gib),
        actual=other.tokens,
        moved_start_gib=other.avail_gib - anchor.avail_gib,
        moved_load_gib=other.load_use_gib - anchor.load_use_gib,
    )
