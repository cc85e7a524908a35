"""After an engine (or driver, or model) upgrade: which configs that used to fit no longer do.

The baseline study's recommended config, its frontier, and the boundary pairs that pinned
the frontier (the largest fraction that fit and the smallest that failed above it; the
smallest that fit and the largest that failed below it; the failure at the next longer
context) are launched again on the current engine. Each comes back before → after, with
the figures side by side; fit → fail is a regression, fail → fit an improvement. A
baseline command that the new version's own parser rejects is reported with the spelling
the adapter now uses.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from autotune import flagtable, store
from autotune.engines import get_engine
from autotune.engines.registry import flag_table
from autotune.estimate.host_pool import Comparison, anchor_of
from autotune.estimate.host_pool import compare as compare_pool
from autotune.gpu.base import GpuBackend
from autotune.records import GIB, TrialResult
from autotune.report.frontier import feature_label, rows
from autotune.search import goal as goal_mod
from autotune.search.model import same_group
from autotune.settings import TrialSettings
from autotune.spec import Spec
from autotune.trial.run import run_trial

COMPARED = (("kv_tokens", "KV tokens", 0.02), ("weights_gib", "weights GiB", 0.02), ("graph_gib", "graph GiB", 0.10),
            ("weights_load_s", "weights load s", 0.25), ("graph_s", "graph capture s", 0.25),
            ("gpu_s", "start-up s", 0.25), ("peak_gib", "peak GiB/GPU", 0.02))


@dataclass(frozen=True)
class Change:
    name: str
    before: float | None
    after: float | None
    flagged: bool

    @property
    def delta(self) -> float | None:
        if self.before in (None, 0) or self.after is None:
            return None
        return self.after / self.before - 1  # type: ignore[operator]


@dataclass
class Row:
    role: str
    before: TrialResult
    after: TrialResult | None = None
    flags: str = ""
    changes: list[Change] = field(default_factory=list)

    @property
    def verdict(self) -> str:
        if self.after is None:
            return "not run"
        if not self.after.outcome.judges_config:
            return f"inconclusive ({self.after.outcome.value})"
        was, now = self.before.outcome.fits, self.after.outcome.fits
        if was and not now:
            return "REGRESSION"
        if now and not was:
            return "improvement"
        return "changed" if any(c.flagged for c in self.changes) or self.before.outcome != self.after.outcome \
            else "unchanged"


@dataclass
class RegressReport:
    baseline: str
    baseline_engine: str
    current_engine: str
    baseline_fingerprint: dict[str, Any]
    current_fingerprint: dict[str, Any]
    rows: list[Row]
    problems: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)  # selected but beyond the budget

    @property
    def regressions(self) -> list[Row]:
        return [r for r in self.rows if r.verdict == "REGRESSION"]

    @property
    def exit_code(self) -> int:
        if self.problems or any(r.after is None for r in self.rows):
            return 2
        return 1 if self.regressions else 0


def select(results: Sequence[TrialResult], order: Sequence[str], required: Sequence[str]) -> list[tuple[str, TrialResult]]:
    """The baseline launches worth repeating, with why (recommended, frontier, boundary)."""
    picked: list[tuple[str, TrialResult]] = []
    seen: set[str] = set()

    def add(role: str, result: TrialResult | None) -> None:
        if result is not None and result.launched and result.config.key() not in seen:
            seen.add(result.config.key())
            picked.append((role, result))

    add("recommended", goal_mod.best(results, order, required))
    for row in rows(results, order, required):
        if row.best is not None:
            add(f"frontier {row.features}", row.best)
    for row in rows(results, order, required):
        if row.best is not None:
            for role, result in _boundary(row.best, results):
                add(role, result)
    return picked


def _boundary(best: TrialResult, results: Sequence[TrialResult]) -> list[tuple[str, TrialResult | None]]:
    ctx, mfs = goal_mod.context_of(best), best.config.mem_fraction_static or 0.0
    group = [r for r in results if r.launched and same_group(r.config, best.config) and r.outcome.judges_config]
    here = [r for r in group if goal_mod.context_of(r) == ctx]
    frac = [(r.config.mem_fraction_static or 0.0, r) for r in here]
    above = min(((m, r) for m, r in frac if m > mfs and not r.outcome.fits), default=None, key=lambda t: t[0])
    lowest_fit = min(((m, r) for m, r in frac if r.outcome.fits), default=None, key=lambda t: t[0])
    below = max(((m, r) for m, r in frac if lowest_fit and m < lowest_fit[0] and not r.outcome.fits),
                default=None, key=lambda t: t[0])
    longer = [r for r in group if goal_mod.context_of(r) > ctx]
    next_ctx = min(longer, default=None, key=lambda r: (goal_mod.context_of(r), r.config.mem_fraction_static or 0))
    label = feature_label(best)
    return [(f"boundary {label}: first failure above", above[1] if above else None),
            (f"boundary {label}: lowest fit", lowest_fit[1] if lowest_fit else None),
            (f"boundary {label}: failure below", below[1] if below else None),
            (f"boundary {label}: next longer context", next_ctx)]


def flag_note(before: TrialResult, engine_name: str, version: str, launcher: Sequence[str]) -> str:
    """'' when the baseline command still parses on `version`; else what changed and the new spelling."""
    engine = get_engine(engine_name)
    try:
        flagtable.parse(*flag_table(engine_name, version), engine.flags_of(before.argv))
        return ""
    except flagtable.FlagError as exc:
        new = engine.argv(before.config, version=version, launcher=list(launcher), host="127.0.0.1", port=30000)
        old_flags = set(engine.flags_of(before.argv))
        spelled = [f for f in engine.flags_of(new) if f.startswith("--") and f not in old_flags]
        return f"{exc} — the adapter now spells it: {' '.join(spelled) or '(same flags)'}"


def _figure(result: TrialResult | None, name: str) -> float | None:
    if result is None:
        return None
    if name == "kv_tokens":
        return float(result.kv_tokens) if result.kv_tokens is not None else result.figures.get("kv_tokens")
    if name == "gpu_s":
        return result.gpu_s if result.launched else None
    if name == "peak_gib":
        return max((g.peak_bytes for g in result.gpus), default=0) / GIB or None
    return result.figures.get(name)


def box_allowed(before: TrialResult, after: TrialResult) -> Comparison | None:
    """On host memory (SGLang's CPU path) the pool follows the box: what was available at start and
    what the weight load took of it, other tenants included (`estimate.host_pool`). The baseline's pool
    re-predicted at the current launch's memory, or None where the launches did not log what it takes."""
    anchor = anchor_of(before.figures, before.config.mem_fraction_static)
    if anchor is None or get_engine(after.engine).device != "host":
        return None
    return compare_pool(anchor, after.figures, after.config.mem_fraction_static)


def compare(before: TrialResult, after: TrialResult) -> list[Change]:
    out = []
    allowed = box_allowed(before, after)
    for name, _, threshold in COMPARED:
        b, a = _figure(before, name), _figure(after, name)
        if name == "peak_gib" and b is not None and a is not None:
            flagged = peak_moved(before, after, b, a, threshold)
        elif name == "kv_tokens" and allowed is not None:  # what the engine changed, the box's moves allowed for
            flagged = abs(allowed.error_pct) >= 100 * threshold
        else:
            flagged = b is not None and a is not None and b != 0 and abs(a / b - 1) >= threshold
        out.append(Change(name, b, a, flagged))
    return out


# What a ~10 Hz sampler can miss: an allocation freed within one sample period. In SGLang the
# largest is a prefill chunk's activations, 0.25 GiB per 1k chunked tokens (the memory model's
# prior, ../shared/reference/memory-model.md; SGLang never logs it), at least one 8192-token chunk:
# 2 GiB. Identical simulated launches sampled 46.06 and 47.54 GiB (1.48 GiB apart), inside it.
MISSABLE_GIB_PER_1K_TOKENS = 0.25
MISSABLE_MIN_CHUNK_TOKENS = 8192


def _peak_exact(result: TrialResult) -> bool:
    return bool(result.gpus) and all(g.peak_exact for g in result.gpus)


def sampling_slack_gib(result: TrialResult) -> float:
    """How far above a sampled peak the true peak of `result` may lie (0 for an exact peak)."""
    if _peak_exact(result):
        return 0.0
    chunk = max(result.config.chunked_prefill_size or 0, MISSABLE_MIN_CHUNK_TOKENS)
    return MISSABLE_GIB_PER_1K_TOKENS * chunk / 1000


def peak_moved(before: TrialResult, after: TrialResult, b: float, a: float, threshold: float) -> bool:
    """Whether the peak (GiB/GPU) moved past `threshold` beyond what sampling can explain.

    An exact peak is the true one; a sampled peak is a lower bound, at most the sampling slack below
    the truth. So a rise counts only past the threshold plus the baseline's slack, and a fall only
    when the new peak is exact: a lower bound cannot show that the true peak went down.
    """
    if a >= b:
        return a - b >= threshold * b + sampling_slack_gib(before)
    return _peak_exact(after) and b - a >= threshold * b


def run_regress(spec: Spec, baseline: str, baseline_storage: str, backend: GpuBackend, settings: TrialSettings,
                fingerprint: dict[str, Any], budget: int | None = None,
                on_row: Callable[[Row], None] | None = None) -> RegressReport:
    study = store.load_study(baseline, baseline_storage)
    base_spec = dict(study.user_attrs.get("spec", {}))
    results = store.results(study)
    picked = select(results, *goal_mod.stored(base_spec))
    report = RegressReport(baseline, f"{base_spec.get('engine')} {base_spec.get('engine_version')}",
                           f"{spec.engine} {spec.engine_version}", dict(study.user_attrs.get("fingerprint", {})),
                           fingerprint, [])
    if not picked:
        report.problems.append(f"baseline study {baseline!r} has no finished launch to repeat")
    limit = budget or len(picked)
    report.skipped = [role for role, _ in picked[limit:]]
    for i, (role, before) in enumerate(picked[:limit]):
        row = Row(role, before, flags=flag_note(before, spec.engine, spec.engine_version, spec.launcher))
        config = before.config.replace(model_path=spec.model_path)
        row.after = run_trial(config, settings, backend, f"{spec.study}-regress-{i:03d}")
        row.changes = compare(before, row.after)
        report.rows.append(row)
        if on_row:
            on_row(row)
        if not row.after.released or row.after.outcome.value == "GPU_BUSY":
            report.problems.append(f"stopped after {role}: GPUs busy or memory not released")
            report.rows += [Row(r, b) for r, b in picked[i + 1:limit]]
            break
    return report
