"""Analytical weight bytes per GPU: config.json's parameters, quantised, split by TP.

`modelshape` counts every tensor and how TP splits it (K/V replicated past TP = KV
heads, norms/routers/vision tower replicated). On top of that this module applies what
the engines do at load time and what the checkpoint index says:
- `model.safetensors.index.json` `metadata.total_size`, when present, rescales the
  analytical count (it is what is on disk, draft and vision tower included);
- MXFP4 experts are padded to a multiple of 256 along the intermediate dimension by the
  MoE kernels (gpt-oss: 2880 -> 3072; memory-model.md §3 hypothesis, -0.2 % after it).
Allocator overhead on top ("mem usage" − params) is a machine unknown, see `machine.py`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from autotune.modelshape import ModelShape
from autotune.records import GIB

MXFP4_PAD = 256  # MoE kernels pad the expert intermediate dim to this multiple


@dataclass(frozen=True)
class AnalyticWeights:
    """Parameter bytes one GPU holds, GiB, before any allocator overhead."""

    target_gib: float
    draft_gib: float
    notes: tuple[str, ...]


def analytic_weights(shape: ModelShape, tp: int) -> AnalyticWeights:
    """Target and draft (MTP/NextN) parameter GiB per GPU at tensor parallelism `tp`."""
    notes: list[str] = []
    scale = _checkpoint_scale(shape, notes)
    pad = _expert_pad(shape, notes)
    totals = {False: 0.0, True: 0.0}
    for g in shape.groups:
        nbytes = shape.group_bytes_per_rank(g, tp) * scale
        if g.kind == "expert":
            nbytes *= pad
        totals[g.draft] += nbytes
    if shape.quantization and not notes:
        method = str(shape.quantization.get("quant_method", "?"))
        notes.append(f"weights quantised ({method}): bytes per parameter from the quant config, scales included")
    return AnalyticWeights(totals[False] / GIB, totals[True] / GIB, tuple(notes))


def _checkpoint_scale(shape: ModelShape, notes: list[str]) -> float:
    """Ratio of the checkpoint's stated size to the analytical count (1 when unknown)."""
    if not shape.checkpoint_bytes:
        return 1.0
    counted = sum(shape.group_bytes_per_rank(g, 1) for g in shape.groups)
    ratio = shape.checkpoint_bytes / counted if counted else 1.0
    if not 0.5 < ratio < 2.0:
        # far off means the index describes something else (e.g. other shards): ignore it
        notes.append(f"checkpoint total_size is {ratio:.2f}x the analytical count; ignored")
        return 1.0
    notes.append(f"weights scaled by the checkpoint's total_size ({ratio:.4f}x the analytical count)")
    return ratio


def _expert_pad(shape: ModelShape, notes: list[str]) -> float:
    """Load-time growth of MXFP4 expert weights from kernel padding."""
    method = str((shape.quantization or {}).get("quant_method", "")).lower()
    inter = shape.intermediate_size
    if method != "mxfp4" or not shape.is_moe or inter <= 0:
        return 1.0
    padded = math.ceil(inter / MXFP4_PAD) * MXFP4_PAD
    if padded != inter:
        notes.append(f"MXFP4 experts padded {inter} -> {padded} along the intermediate dim "
                     "(kernel layout; memory-model.md hypothesis)")
    return padded / inter
