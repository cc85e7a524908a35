"""SGLang's serving lines, `Prefill batch, ...` and `Decode batch, ...`, per release.

Both releases build them field by field (0.5.9 `scheduler_metrics_mixin.py`
log_prefill_stats / log_decode_stats; 0.5.23 `scheduler_components/metrics_reporter.py`
report_prefill_stats / report_decode_stats, usage fields from `pool_stats_observer.py`).
They differ in the prefill line: 0.5.23 adds `#pending-token` and prints the graph flag
before the input throughput, 0.5.9 after it. The usage fields depend on the pool: one KV
pool; full + sliding-window pools; full KV + mamba state pools.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from autotune.sim.sglang_engine import SglangEngine


def _pool(engine: SglangEngine) -> str:
    if engine.args.swa_ratio is not None:
        return "swa"
    return "mamba" if engine.shape.is_hybrid else "kv"


def _usage(engine: SglangEngine, kv_used: int, running: int, *, decode: bool) -> list[str]:
    """The pool fields. The simulator keeps one token count: the SWA pool is shown at the full
    pool's usage, the mamba pool at one state slot per running request."""
    usage = kv_used / max(1, engine.state.kv_tokens)
    kind = _pool(engine)
    if kind == "kv":
        return [f"#token: {kv_used}", f"token usage: {usage:.2f}"] if decode else [f"token usage: {usage:.2f}"]
    full = [f"#full token: {kv_used}", f"full token usage: {usage:.2f}"] if decode else \
        [f"full token usage: {usage:.2f}"]
    if kind == "swa":
        return full + ([f"#swa token: {kv_used}"] if decode else []) + [f"swa token usage: {usage:.2f}"]
    mamba = running / max(1, engine.state.mamba_slots)
    return full + ([f"mamba num: {running}"] if decode else []) + [f"mamba usage: {mamba:.2f}"]


def _graphs(engine: SglangEngine, prefill: bool) -> bool:
    """Whether the forward ran as a captured graph: prefill graphs only where they were captured."""
    roles = engine.state.graph_bytes
    return any(r.endswith("prefill") == prefill and not r.startswith("draft") for r in roles)


def prefill_line(engine: SglangEngine, *, seqs: int, tokens: int, kv_used: int, running: int, queued: int,
                 pending: int, throughput: float) -> str:
    fields = [f"#new-seq: {seqs}", f"#new-token: {tokens}", "#cached-token: 0",
              *_usage(engine, kv_used, running, decode=False), f"#running-req: {running}", f"#queue-req: {queued}"]
    graph = f"cuda graph: {_graphs(engine, prefill=True)}"
    if engine.t.legacy_log_wording:
        fields += [f"input throughput (token/s): {throughput:.2f}", graph]
    else:
        fields += [f"#pending-token: {pending}", graph, f"input throughput (token/s): {throughput:.2f}"]
    return "Prefill batch, " + ", ".join(fields)


def decode_line(engine: SglangEngine, *, running: int, kv_used: int, queued: int, throughput: float) -> str:
    fields = [f"#running-req: {running}", *_usage(engine, kv_used, running, decode=True)]
    if engine.args.spec_algorithm:  # the simulator decodes one token per step: no draft is accepted
        fields += ["accept len: 1.00", "accept rate: 0.00"]
    fields += [f"cuda graph: {_graphs(engine, prefill=False)}", f"gen throughput (token/s): {throughput:.2f}",
               f"#queue-req: {queued}"]
    return "Decode batch, " + ", ".join(fields)
