"""The upgrade diff (`autotune.regress`), for people (Markdown) and for pipelines (JSON).

It lives beside `regress`, not in `report`: regress builds on the report's frontier, so report
must not import regress back."""

from __future__ import annotations

from typing import Any

from autotune.records import TrialResult
from autotune.regress import COMPARED, RegressReport, Row, box_allowed
from autotune.report.frontier import feature_label
from autotune.search.goal import context_of


def _side(r: TrialResult | None) -> dict[str, Any] | None:
    if r is None:
        return None
    return {"trial_id": r.trial_id, "outcome": r.outcome.value, "phase": r.phase.value, "kv_tokens": r.kv_tokens,
            "evidence": list(r.evidence), "remedy": r.remedy, "log_path": r.log_path, "argv": list(r.argv),
            "peak_exact": bool(r.gpus) and all(g.peak_exact for g in r.gpus)}  # False: sampled, a lower bound


def as_json(report: RegressReport) -> dict[str, Any]:
    return {
        "baseline": report.baseline, "baseline_engine": report.baseline_engine,
        "current_engine": report.current_engine,
        "fingerprints": {"baseline": report.baseline_fingerprint, "current": report.current_fingerprint},
        "rows": [{"role": r.role, "config": r.before.config.to_dict(), "verdict": r.verdict, "flags": r.flags,
                  "before": _side(r.before), "after": _side(r.after),
                  "changes": [{"name": c.name, "before": c.before, "after": c.after, "delta": c.delta,
                               "flagged": c.flagged} for c in r.changes],
                  "pool_box_allowed": _allowed(r)} for r in report.rows],
        "regressions": len(report.regressions), "problems": report.problems, "skipped": report.skipped,
        "exit_code": report.exit_code,
    }


def _allowed(r: Row) -> dict[str, float] | None:
    """Host memory: the baseline's pool at the current launch's memory (`regress.box_allowed`)."""
    found = box_allowed(r.before, r.after) if r.after is not None else None
    if found is None:
        return None
    return {"predicted_at_current_memory": round(found.predicted_allowed), "actual": found.actual,
            "engine_change_pct": round(found.engine_change_pct, 2),
            "available_at_start_moved_gib": round(found.moved_start_gib, 2),
            "weight_load_moved_gib": round(found.moved_load_gib, 2)}


def _fmt(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:.0f}" if abs(value) >= 100 else f"{value:.2f}"


def _row(r: Row) -> str:
    after = r.after.outcome.value if r.after else "not run"
    cfg = f"{feature_label(r.before)} ctx={context_of(r.before)} mfs={r.before.config.mem_fraction_static}"
    cells = []
    for c in r.changes:
        mark = " ⚠" if c.flagged else ""
        delta = f" ({c.delta:+.1%})" if c.delta is not None and c.before != c.after else ""
        cells.append(f"{_fmt(c.before)} → {_fmt(c.after)}{delta}{mark}")
    cells += ["-"] * (len(COMPARED) - len(cells))
    return f"| {r.role} | {cfg} | {r.before.outcome.value} → {after} | **{r.verdict}** | " + " | ".join(cells) + " |"


def markdown(report: RegressReport) -> str:
    fp_b, fp_c = report.baseline_fingerprint, report.current_fingerprint
    lines = [f"# autotune regress: {report.baseline} ({report.baseline_engine}) → {report.current_engine}", "",
             f"- baseline machine: {fp_b.get('gpu_count')} x {fp_b.get('gpu_names')}, driver "
             f"{fp_b.get('driver_version')}, {fp_b.get('engine')} {fp_b.get('engine_version')}",
             f"- current machine:  {fp_c.get('gpu_count')} x {fp_c.get('gpu_names')}, driver "
             f"{fp_c.get('driver_version')}, {fp_c.get('engine')} {fp_c.get('engine_version')}",
             f"- {len(report.rows)} configs re-launched, **{len(report.regressions)} regression(s)**; exit status "
             f"{report.exit_code}", ""]
    for problem in report.problems:
        lines.append(f"- could not finish: {problem}")
    if report.skipped:
        lines.append(f"- beyond the budget, not re-launched: {', '.join(report.skipped)}")
    header = " | ".join(label for _, label, _ in COMPARED)
    lines += ["", f"| role | config | outcome | verdict | {header} |",
              "|" + "---|" * (4 + len(COMPARED))]
    lines += [_row(r) for r in report.rows]
    notes: dict[str, list[str]] = {}
    for r in report.rows:
        if r.flags:
            notes.setdefault(r.flags, []).append(r.role)
    if notes:
        lines += ["", "## Flags the new version rejects or renamed", ""]
        lines += [f"- {note} ({len(roles)} of the baseline's commands: {', '.join(roles)})"
                  for note, roles in notes.items()]
    boxed = [(r, a) for r in report.rows if (a := _allowed(r)) is not None]
    if boxed:
        lines += ["", "## Host memory: the box's moves allowed for", "",
                  "On host memory the pool is `fraction x available - weight load - start-up's rest`, and the box's "
                  "available memory moves with every other tenant. The baseline's pool is re-predicted at each "
                  "current launch's own figures; what is left is the engine's change (flagged at ±2%).", ""]
        lines += [f"- {r.role}: available at start moved {a['available_at_start_moved_gib']:+.2f} GiB, the weight load "
                  f"took {a['weight_load_moved_gib']:+.2f} GiB more; the baseline's arithmetic at this memory: "
                  f"{a['predicted_at_current_memory']} tokens, the engine served {a['actual']:.0f}: "
                  f"**{a['engine_change_pct']:+.1f} %** from the engine" for r, a in boxed]
    if report.regressions:
        lines += ["", "## Regressions, with evidence", ""]
        for r in report.regressions:
            assert r.after is not None
            lines += [f"### {r.role}: {r.before.outcome.value} → {r.after.outcome.value} ({r.after.phase.value})", "",
                      f"{r.after.remedy}", "", "```", *r.after.evidence, "```", f"log: `{r.after.log_path}`", ""]
    lines += ["", "⚠ marks a change past its threshold (KV tokens, weights, peak memory ±2%; graph memory ±10%; "
              "phase times ±25%). A sampled peak (NVML) is a lower bound: it must rise by 2% plus what sampling "
              "can miss (a prefill chunk's activations) to count, and cannot show a fall."]
    return "\n".join(lines) + "\n"
