"""`autotune report`: a Markdown report of a study, with the plot beside it.

Everything comes from the study's record: the spec summary and machine fingerprint it was
made with, and each trial's TrialResult. Text is deterministic for the same record.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from autotune.records import TrialResult
from autotune.report import concurrency
from autotune.report.command import as_shell, command, launcher_of
from autotune.report.frontier import feature_label, rows
from autotune.report.plot import plot
from autotune.report.timeline import Bar, idle_share
from autotune.report.timeline import plot as plot_timeline
from autotune.search import goal as goal_mod
from autotune.search.certify import (
    Certification,
    certified_answer,
    recommended,
    standing,
    summary_lines,
)
from autotune.store import CancelledTrial


def _cfg(r: TrialResult) -> str:
    c = r.config
    mfs = c.mem_fraction_static if c.mem_fraction_static is not None else f"auto({r.resolved.get('mem_fraction_static')})"
    parts = [f"mfs={mfs}", f"ctx={goal_mod.context_of(r)}"]
    if c.max_running_requests is not None:
        parts.append(f"mrr={c.max_running_requests}")
    if c.cuda_graph_max_bs is not None:
        parts.append(f"graph_bs={c.cuda_graph_max_bs}")
    return " ".join(parts)


def _why(r: TrialResult) -> str:
    if r.outcome.fits:
        return f"{r.kv_tokens} KV tokens"
    line = deciding_line(r)
    return (r.remedy + (f" — `{line[:140]}`" if line else "")).replace("|", "\\|")


def deciding_line(r: TrialResult) -> str:
    """The evidence line that decided the outcome, not the context before it.

    Evidence lists context first (the ready line before a runtime OOM, "Load weight end"
    before a KV-pool failure), then the deciding line, then markers. Each line is classified
    alone with the engine's classifier: the first that says this outcome by itself decided
    it (else the first that says a failure: some outcomes need the phase around the line);
    evidence that is not a log line (argv checks, KV sizing) keeps its first line.
    """
    from autotune.classifier.classify import ENGINE_LOGS, LogClassifier

    if r.engine not in ENGINE_LOGS or len(r.evidence) < 2:
        return r.evidence[0] if r.evidence else ""
    said = []
    for line in r.evidence:
        alone = LogClassifier(r.engine)
        alone.feed(line)
        said.append(alone.classification(None, log_complete=True).outcome)
    for wanted in (lambda o: o is r.outcome, lambda o: o is not None and not o.fits):  # this outcome, else a failure
        found = next((line for line, outcome in zip(r.evidence, said, strict=True) if wanted(outcome)), None)
        if found is not None:
            return found
    return r.evidence[0]


def render(study: str, spec: Mapping[str, Any], fingerprint: Mapping[str, Any], results: Sequence[TrialResult],
           plot_name: str | None, cert: Certification | None = None, concurrency_plot: str | None = None,
           hosts: Mapping[str, str] | None = None, cancelled: Sequence[CancelledTrial] = (),
           timeline: Sequence[Bar] = (), timeline_plot: str | None = None) -> str:
    """The report; `hosts` (trial tag -> host) adds a host column when several hosts shared the study;
    `cancelled`: launches stopped early by a fresh result (slots), listed apart from the results."""
    order, required = goal_mod.stored(spec)
    best = recommended(results, order, required, cert)  # the certified answer where there is one, as `best`
    launcher = launcher_of(spec)
    lines = [f"# autotune report: {study}", ""]
    lines += [f"- engine: {spec.get('engine')} {spec.get('engine_version')}"
              + (" (simulated node)" if spec.get("simulated") else ""),
              f"- model: `{spec.get('model_path')}`",
              f"- machine: {fingerprint.get('gpu_count')} x {fingerprint.get('gpu_names')} "
              f"(driver {fingerprint.get('driver_version')}), GPUs used: {fingerprint.get('gpus_used')}",
              f"- goal: {' → '.join(order)}; required features: {', '.join(required) or 'none'}; "
              f"min concurrency {spec.get('goal', {}).get('min_concurrency', 1)}",
              f"- trials: {len(results)} ({sum(r.launched for r in results)} launched), "
              f"GPU time {sum(r.gpu_s for r in results) / 60:.1f} min by the engine's clock"
              + (f"; {len(cancelled)} more launch(es) cancelled (see below)" if cancelled else ""), ""]
    lines += ["## Recommended", ""]
    if best is None:
        lines += ["Nothing fitted. See the failures below for what to change.", ""]
    else:
        argv = command(best, launcher=launcher, host=spec.get("host", "127.0.0.1"), api_key_env=spec.get("api_key_env"))
        lines += [f"{feature_label(best)}: context {goal_mod.context_of(best)}, {best.kv_tokens} KV tokens, "
                  f"trial {best.trial_id}.", "", "```", as_shell(argv), "```", ""]
        if cert is not None and cert.attempts:
            lines += [f"{standing(cert)['note'][0].upper()}{standing(cert)['note'][1:]}.", ""]
    lines += certification_section(cert)
    lines += ["## Context × concurrency (per feature combination)", "",
              "The best config that fitted at each max_running_requests launched"
              + ("" if "max_running_requests" in order else " (the goal does not rank concurrency, so only the "
                 "concurrencies the search needed were launched; put max_running_requests in goal.order to "
                 "search each)") + ". `autotune best --concurrency N` prints its command.", "",
              *concurrency.table(results, {a.source_trial: a.certified for a in cert.attempts} if cert else None,
                                 certified_answer(cert, results)), ""]
    if concurrency_plot:
        lines += [f"![context x concurrency]({concurrency_plot})", ""]
    lines += ["## Frontier (per feature combination)", "",
              "| features | config | KV tokens | peak GiB/GPU | start-up s | launches | GPU-s spent | failures |",
              "|---|---|---|---|---|---|---|---|"]
    for row in rows(results, order, required):
        b = row.best
        lines.append(f"| {row.features} | {_cfg(b) if b else 'nothing fitted'} | {b.kv_tokens if b else '-'} | "
                     f"{row.peak_gib:.2f} | {b.gpu_s:.0f} | {row.launches} | {row.gpu_s:.0f} | {row.failures} |"
                     if b else f"| {row.features} | nothing fitted | - | - | - | {row.launches} | {row.gpu_s:.0f} | "
                               f"{row.failures} |")
    by_host = hosts if hosts and len(set(hosts.values())) > 1 else None
    lines += ["", "## Trials", "", "| # | features | config | outcome | phase | KV tokens | GPU-s | why |"
              + (" host |" if by_host else ""), "|---|---|---|---|---|---|---|---|" + ("---|" if by_host else "")]
    for i, r in enumerate(results):
        lines.append(f"| {i} | {feature_label(r)} | {_cfg(r)} | {r.outcome.value} | {r.phase.value} | "
                     f"{r.kv_tokens or '-'} | {r.gpu_s:.0f} | {_why(r)} |"
                     + (f" {by_host.get(r.trial_id, '?')} |" if by_host else ""))
    lines += cancelled_section(cancelled, by_host)
    lines += timeline_section(timeline, timeline_plot)
    if plot_name:
        lines += ["", "## Explored space", "", f"![explored space]({plot_name})"]
    return "\n".join(lines) + "\n"


def timeline_section(timeline: Sequence[Bar], plot_name: str | None) -> list[str]:
    """Where the time went: launches per slot, certification's boots among them, and the idle share."""
    if not timeline:
        return []
    span = max(b.end_s for b in timeline) - min(b.start_s for b in timeline)
    slots = max(b.slot for b in timeline) + 1
    boots = sum(b.kind.startswith("boot") for b in timeline)
    share = idle_share(timeline, slots)
    lines = ["", "## Timeline", "", f"{len(timeline)} launch(es) on {slots} slot(s) over {span:.1f} s, {boots} of them "
             f"certification boots; the slots sat idle {share or 0:.0%} of that time."]
    if plot_name:
        lines += ["", f"![timeline]({plot_name})"]
    return lines


def cancelled_section(cancelled: Sequence[CancelledTrial], hosts: Mapping[str, str] | None) -> list[str]:
    """Launches a fresh result made pointless while they ran (slots): stopped, no verdict, not in the
    tables above; their GPU time was still spent."""
    if not cancelled:
        return []
    spent = sum(c.result.gpu_s for c in cancelled if c.result)
    lines = ["", "## Cancelled", "", f"{len(cancelled)} launch(es) stopped early because a result that came in "
             f"while they ran made their point pointless; no verdict on these configs ({spent:.0f} GPU-s spent).", "",
             "| study trial | config | stopped at | GPU-s | why cancelled |" + (" host |" if hosts else ""),
             "|---|---|---|---|---|" + ("---|" if hosts else "")]
    for c in cancelled:
        r = c.result
        config = _cfg(r) if r else " ".join(f"{k}={v}" for k, v in sorted(c.point.items()))
        lines.append(f"| {c.number} (cancelled) | {config} | {r.phase.value if r else '-'} | "
                     f"{f'{r.gpu_s:.0f}' if r else '-'} | {c.why.replace('|', '/')} |"
                     + (f" {hosts.get(c.trial_id, '?')} |" if hosts else ""))
    return lines


def certification_section(cert: Certification | None) -> list[str]:
    """Each certified (or not) config: its cold boots, their variance, and why it stepped down."""
    if cert is None:
        return ["## Certification", "", "Not certified yet: `autotune certify SPEC` relaunches the answer cold under "
                "the worst case its flags permit.", ""]
    lines = ["## Certification", "",
             f"{cert.boots} cold boot(s) per config, each driven with the worst case its flags permit "
             "(max_running_requests requests at once filling the KV pool, the last at the full context, prefilled "
             "while the others decode); certified only if every boot served it"
             + (f" with at least {cert.safety_margin_gib} GiB of headroom per GPU" if cert.safety_margin_gib else "")
             + f" within {cert.deadline_s:g} s. One still running at that deadline on a server that stayed up is "
             "inconclusive (the machine's speed, not its memory): no step down.", "", "```", *summary_lines(cert), "```", ""]
    return lines


def write(study: str, spec: Mapping[str, Any], fingerprint: Mapping[str, Any], results: Sequence[TrialResult],
          out_dir: Path, cert: Certification | None = None, hosts: Mapping[str, str] | None = None,
          cancelled: Sequence[CancelledTrial] = (), timeline: Sequence[Bar] = ()) -> tuple[Path, Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    clock = plot_timeline(timeline, out_dir / "timeline.png", f"{study}: launches per slot") if timeline else None
    png = plot(results, out_dir / "explored.png", f"{study}: launches by outcome")
    tradeoff = concurrency.plot(results, out_dir / "context-concurrency.png",
                                f"{study}: longest context that fits, by concurrency", certified_answer(cert, results))
    md = out_dir / "report.md"
    md.write_text(render(study, spec, fingerprint, results, png.name, cert, tradeoff.name, hosts, cancelled,
                         timeline, clock.name if clock else None))
    return md, png

