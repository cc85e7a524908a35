"""The flag and default-rule checks of the SGLang fidelity check (see __main__.py).

Each check compares SGLang's source (`SourceRules`, `Source.flags`) with SGLang's public
rules as we write them once (`autotune/engines/sglang/rules.py`, traits.py) and with the two
procedures that use them, the simulator's (`autotune/sim/sglang_args.py`, `sglang_engine.py`)
and the estimator's (`autotune/estimate/sglang_defaults.py`, `sglang_pool.py`), on a grid of
inputs, and records one row per comparison (mismatches always; agreements summarized).
"""

from __future__ import annotations

import json
from types import SimpleNamespace
from typing import Any

from autotune import flagtable
from autotune.config import LaunchConfig
from autotune.engines import kvdtype
from autotune.engines.sglang import SglangEngine as Adapter
from autotune.engines.sglang import rules
from autotune.engines.sglang.traits import traits_for
from autotune.estimate import launch as est_launch
from autotune.estimate import sglang_defaults as est
from autotune.estimate import sglang_pool
from autotune.modelshape import load as load_shape
from autotune.records import GIB
from autotune.sim import sglang_args as sim
from autotune.sim.sglang_engine import SglangEngine
from autotune.sim.truth import VirtualIO
from tools import REPO
from tools.fidelity.rules import SourceRules, source_fraction
from tools.fidelity.section import Section
from tools.fidelity.source import Source

MODELS = REPO / "configs" / "models"
GPU_MIB = (15360, 24564, 46068, 81559, 143771, 183359)  # T4-class, 4090, A6000, H100, H200, B200


def check_flags(src: Source) -> Section:
    sec = Section("flags")
    v = src.version
    for argv in _adapter_argvs(v):
        for flag in [a for a in argv if a.startswith("--")]:
            sec.add(f"adapter emits {flag}", flag in src.flags, src.flags.get(flag, "not registered by ServerArgs"))
        try:
            flagtable.parse("sglang", v, argv)
            sec.add(f"adapter argv parses: {' '.join(argv[4:])}", True, "values accepted (choices/types)")
        except SystemExit:
            sec.add(f"adapter argv parses: {' '.join(argv[4:])}", False, "the shipped parser rejects it")
    table = json.loads((REPO / "autotune/data/flags" / f"sglang-{v}.json").read_text())
    shipped = {opt for arg in table["arguments"] for opt in arg[0]}
    missing = sorted(shipped - set(src.flags))
    extra = sorted(set(src.flags) - shipped)
    sec.add(f"shipped table's {len(shipped)} option strings registered by ServerArgs", not missing,
            f"missing in source: {missing[:8]}" if missing else "all found")
    sec.add(f"ServerArgs's {len(src.flags)} option strings in the shipped table", not extra,
            f"missing in table: {extra[:8]}" if extra else "all found")
    return sec


def _adapter_argvs(version: str) -> list[list[str]]:
    full = LaunchConfig(model_path="/m", tp=2, mem_fraction_static=0.8, context_length=4096, speculative=True,
                        speculative_num_steps=3, speculative_eagle_topk=1, speculative_num_draft_tokens=4,
                        torch_compile=True, cuda_graph_max_bs=64, max_running_requests=8, chunked_prefill_size=4096,
                        kv_cache_dtype="nvfp4")
    off = LaunchConfig(model_path="/m", disable_cuda_graph=True, kv_cache_dtype="fp8_e4m3")
    return [Adapter().argv(c, version=version, launcher=(), host="127.0.0.1", port=30000) for c in (full, off)]


def check_defaults(src: Source) -> Section:
    r = SourceRules.read(src)
    sec = Section("defaults")
    _gpu_table(r, sec)
    _batch_sizes(r, sec)
    _fractions(r, sec)
    _requests(r, sec)
    _kv_bytes(r, sec)
    _state_pool(r, sec)
    return sec


def _three(sec: Section, item: str, source: Any, ours: dict[str, Any]) -> None:
    bad = {k: v for k, v in ours.items() if v != source}
    sec.add(item, not bad, f"source {source}" + (f"; differs: {bad}" if bad else f" = {', '.join(ours)}"))


def _gpu_table(r: SourceRules, sec: Section) -> None:
    for below, *_ in r.table:
        mib = (below - 1024) if below else 200 * 1024
        for tp in (1, 4):
            _three(sec, f"chunked prefill, graph max_bs @ {mib} MiB tp{tp}", r.chunk_and_bs(mib, tp),
                   {"rules": rules.chunk_and_decode_max_bs(mib, tp, traits_for(r.version))})


def _batch_sizes(r: SourceRules, sec: Section) -> None:
    for spec in (False, True):
        bad = [m for m in (8, 24, 48, 80, 100, 160, 256, 300, 512, 600)
               if not r.decode_bs(m, spec) == rules.decode_batch_sizes(m, spec, traits_for(r.version))]
        sec.add(f"decode graph sizes ({'speculative' if spec else 'normal'}), max_bs 8..600", not bad,
                f"differ at max_bs {bad}" if bad else "the shared rules equal the source's lists")
    bad = [t for t in (512, 2048, 4096, 8192, 16384) if not r.buckets(t) == rules.prefill_buckets(t)]
    sec.add("prefill graph buckets, 512..16384 tokens", not bad,
            f"differ at {bad}" if bad else "the shared rules equal the source's lists")
    ours = traits_for(r.version).default_prefill_graphs
    sec.add("prefill graphs on by default", r.prefill_graphs_by_default == ours,
            f"source: {r.prefill_graphs_by_default}; ours: {ours}")


def _fractions(r: SourceRules, sec: Section) -> None:
    """The default mem_fraction_static end to end: our resolutions vs the source's formula."""
    cases = [("Qwen3-8B", None), ("Qwen3.6-27B", None), ("Qwen3.6-27B", "NEXTN"), ("DeepSeek-V3", None),
             ("DeepSeek-V3", "NEXTN")]
    if r.version == "0.5.9":  # algorithms the estimator cannot describe: the simulator only
        cases += [("Qwen3-8B", "STANDALONE"), ("Qwen3-8B", "NGRAM")]
    n = 0
    for model, spec in cases:
        shape = load_shape(MODELS / model)
        for mib in GPU_MIB:
            for tp in (1, 4):
                for mrr in (None, 100):
                    n += 1
                    want = source_fraction(r, gpu_mem_mib=mib, tp=tp, spec=_canon(spec), user_mrr=mrr,
                                           mla=shape.is_mla)
                    ours = {"sim": _sim_fraction(r.version, model, mib, tp, spec, mrr)}
                    if spec in (None, "NEXTN"):
                        ours["estimator"] = est.resolve(shape, est_launch.Launch(
                            gpu_mem_gib=mib / 1024, gpus=tp, tp=tp, engine_version=r.version,
                            speculative=spec is not None, max_running_requests=mrr)).default_mem_fraction
                    bad = {k: v for k, v in ours.items() if v != want}
                    if bad:
                        sec.add(f"default mem_fraction_static {model} spec={spec} {mib} MiB tp{tp} mrr={mrr}",
                                False, f"source {want}; differs: {bad}")
    sec.add(f"default mem_fraction_static over {n} cases (models x GPU sizes x tp x spec x mrr)",
            not any(row[0].startswith("default mem_fraction_static ") for row in sec.mismatches),
            f"reserve constants {r.reserve}; sized before the speculative hook: {r.memory_before_spec}")


def _canon(spec: str | None) -> str | None:
    return "EAGLE" if spec in ("NEXTN", "MTP") else spec


def _sim_fraction(version: str, model: str, mib: int, tp: int, spec: str | None, mrr: int | None) -> float:
    argv = ["--model-path", str(MODELS / model), "--tp-size", str(tp)]
    if spec:
        argv += ["--speculative-algorithm", spec]
        if spec == "STANDALONE":
            argv += ["--speculative-draft-model-path", str(MODELS / "Qwen3-8B")]
    if mrr is not None:
        argv += ["--max-running-requests", str(mrr)]
    ns = flagtable.parse("sglang", version, argv)
    return sim.resolve(ns, version, load_shape(MODELS / model), mib, {}).mem_fraction_static


def _requests(r: SourceRules, sec: Section) -> None:
    ns = flagtable.parse("sglang", r.version, ["--model-path", str(MODELS / "Qwen3.6-27B"), "--tp-size", "2",
                                                "--speculative-algorithm", "NEXTN"])
    resolved = sim.resolve(ns, r.version, load_shape(MODELS / "Qwen3.6-27B"), 48 * 1024, {})
    _three(sec, "max_running_requests with speculative decoding", r.spec_mrr,
           {"sim": resolved.max_running_requests, "rules": rules.SPEC_DEFAULT_MRR})
    shape = load_shape(MODELS / "Qwen3-8B")
    bad: list[str] = []
    for asked in (None, 100):
        for tokens in (1000, 150_000, 1_500_000, 20_000_000):
            context = 32768
            cap = r.request_cap(tokens, context)
            want = min(cap, tokens // 2) if asked is None else (asked if r.version == "0.5.9" else min(asked, tokens // 2))
            args = _resolved(r.version, shape, context, asked)
            engine = SglangEngine(shape, args, VirtualIO([48 * GIB]))
            inp = SimpleNamespace(args=SimpleNamespace(max_running_requests=asked, context_len=context),
                                  state_bytes=0, traits=traits_for(r.version), ratio=1)
            got = {"sim": engine.running_requests(tokens),
                   "estimator": sglang_pool._running_requests(inp, tokens, 0)}  # type: ignore[arg-type]
            if any(v != want for v in got.values()):
                bad.append(f"tokens={tokens} asked={asked}: source {want}, ours {got}")
            engine.state.max_running_requests = got["sim"]
            r2t = (got["sim"] + 1) * (context + r.r2t_extra) * 4  # no draft: speculative_num_draft_tokens is None
            if engine.req_to_token_bytes() != r2t:
                bad.append(f"req_to_token at mrr={got['sim']}: source {r2t}, sim {engine.req_to_token_bytes()}")
    sec.add(f"request cap clamp(tokens/context*{r.cap[0]}, {r.cap[1]}, {r.cap[2]}) and tokens//2; "
            f"req_to_token (mrr+1) x (context+{r.r2t_extra}+draft) int32", not bad, "; ".join(bad) or "agree")


def _resolved(version: str, shape: Any, context: int, asked: int | None) -> sim.Resolved:
    argv = ["--model-path", str(MODELS / "Qwen3-8B"), "--context-length", str(context)]
    if asked is not None:
        argv += ["--max-running-requests", str(asked)]
    return sim.resolve(flagtable.parse("sglang", version, argv), version, shape, 48 * 1024, {})


def _kv_bytes(r: SourceRules, sec: Section) -> None:
    rows = {"nvfp4" if r.version != "0.5.9" else "fp4_e2m1": 0.5 + 1 / r.fp4_block}
    if r.mxfp8_block:
        rows["mxfp8"] = 1 + 1 / r.mxfp8_block
    for name, want in rows.items():
        _three(sec, f"KV bytes per element, {name} (scales included)", round(want, 6),
               {"table (estimator)": round(kvdtype.ELEMENT_BYTES[name], 6),
                "rules (simulator)": round(rules.KV_DTYPES[name][1], 6)})


def _state_pool(r: SourceRules, sec: Section) -> None:
    """Hybrid models: state slots from the budget, and the radix-cache branch (mrr slots)."""
    shape = load_shape(MODELS / "Qwen3.6-27B")
    per_req, rest = 50 * 1024 * 1024, 20 * GIB
    budget = rest * 0.9 / 1.9  # --mamba-full-memory-ratio 0.9
    want = int(budget // per_req) if r.slots_rule == "budget // per_req" else int((budget - per_req) // per_req)
    plain = sim.resolve(flagtable.parse("sglang", r.version, ["--model-path", str(MODELS / "Qwen3.6-27B"),
                                                               "--tp-size", "2"]), r.version, shape, 48 * 1024, {})
    engine = SglangEngine(shape, plain, VirtualIO([48 * GIB] * 2))
    engine.mamba_pool(rest, per_req)
    sec.add(f"state pool slots = {r.slots_rule} (no speculative decoding)", engine.state.mamba_slots == want,
            f"source {want}; sim {engine.state.mamba_slots}")
    ns = flagtable.parse("sglang", r.version, ["--model-path", str(MODELS / "Qwen3.6-27B"), "--tp-size", "2",
                                                "--disable-radix-cache", "--max-running-requests", "20"])
    args = sim.resolve(ns, r.version, shape, 48 * 1024, {})
    engine = SglangEngine(shape, args, VirtualIO([48 * GIB] * 2))
    engine.mamba_pool(20 * GIB, 50 * 1024 * 1024)
    sec.add("state pool: --disable-radix-cache with --max-running-requests gives one slot per request",
            engine.state.mamba_slots == 20, f"source: slots = max_running_requests (20); sim {engine.state.mamba_slots}")
