"""SGLang's public memory rules as its source states them, for the fidelity check.

`SourceRules.read(src)` pulls from one version's source (by AST and by anchored regexes
over the relevant functions, never by running it): the GPU-memory table (chunked prefill,
decode graph max_bs by tp), the decode graph and prefill bucket lists, the constants of
the default `mem_fraction_static` reserve, whether that default is computed before the
speculative hook sets max_running_requests to 48, the request cap, the req_to_token
width, and the KV scale block sizes. `source_fraction` recomputes SGLang's default from
those facts alone, so the check can compare our two rule sets against it on a grid.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from typing import Any

from tools.fidelity.source import Source, evaluate

PATHS: dict[str, dict[str, Any]] = {
    "0.5.9": {"gpu": ("sglang/srt/server_args.py", "_handle_gpu_memory_settings"),
              "decode_bs": ("sglang/srt/server_args.py", "_generate_cuda_graph_batch_sizes"),
              "buckets": ("sglang/srt/server_args.py", "_generate_piecewise_cuda_graph_tokens"),
              "order": ("sglang/srt/server_args.py", "__post_init__"),
              "spec": "sglang/srt/server_args.py",
              "cap": "sglang/srt/model_executor/model_runner_kv_cache_mixin.py",
              "r2t": "sglang/srt/model_executor/model_runner_kv_cache_mixin.py",
              "slots": "sglang/srt/model_executor/model_runner_kv_cache_mixin.py"},
    "0.5.23": {"gpu": ("sglang/srt/arg_groups/memory_hook.py", "handle_gpu_memory_settings"),
               "graph": ("sglang/srt/arg_groups/memory_hook.py", "reserve_for_graph_mb"),
               "decode_bs": ("sglang/srt/arg_groups/cuda_graph_hook.py", "generate_decode_cuda_graph_batch_sizes"),
               "buckets": ("sglang/srt/arg_groups/cuda_graph_hook.py", "generate_prefill_cuda_graph_batch_sizes"),
               "order": ("sglang/srt/arg_groups/pipeline.py", "run_resolution_pipeline"),
               "spec": "sglang/srt/arg_groups/speculative_hook.py",
               "cap": "sglang/srt/mem_cache/kv_cache_configurator.py",
               "r2t": "sglang/srt/mem_cache/kv_cache_configurator.py",
               "slots": "sglang/srt/mem_cache/kv_cache_configurator.py"},
}


@dataclass(frozen=True)
class SourceRules:
    version: str
    table: tuple[tuple[int | None, int, int, int], ...]  # (below MiB or None, chunk, bs tp<4, bs tp>=4)
    decode_exprs: tuple[ast.expr, ast.expr]  # (normal, speculative) capture lists before the filter
    appends_max_bs: bool
    bucket_expr: ast.expr
    bucket_name: str
    reserve: dict[str, float]
    prefill_graphs_by_default: bool
    caps_default_bs_by_user_mrr: bool
    memory_before_spec: bool
    spec_mrr: int
    cap: tuple[int, int, int]  # (tokens/context * K, floor, ceiling)
    r2t_extra: int
    r2t_adds_draft_tokens: bool
    mxfp8_block: int | None
    fp4_block: int
    slots_rule: str  # how the state pool's slot count follows from its byte budget

    @classmethod
    def read(cls, src: Source) -> SourceRules:
        v, p = src.version, PATHS[src.version]
        gpu_path, gpu_fn = p["gpu"]
        gpu_text = src.function_text(gpu_path, gpu_fn)
        graph_text = src.function_text(*p["graph"]) if "graph" in p else gpu_text
        bs_fn = src.function(*p["decode_bs"])
        order = src.function_text(*p["order"])
        mem_at = order.index("handle_gpu_memory_settings")
        spec_at = order.index("handle_speculative_decoding")
        spec_text = src.text(p["spec"])
        cap_text = src.text(p["cap"])
        return cls(
            version=v, table=_gpu_table(src.function(gpu_path, gpu_fn)),
            decode_exprs=_decode_exprs(bs_fn), appends_max_bs="if max_bs not in capture_bs" in ast.unparse(bs_fn),
            bucket_expr=_assigned(src.function(*p["buckets"]), "capture_sizes"),
            bucket_name="max_bs" if v != "0.5.9" else "piecewise_cuda_graph_max_tokens",
            reserve=_reserve(gpu_text, graph_text, v),
            prefill_graphs_by_default=_prefill_graphs_by_default(src, v),
            caps_default_bs_by_user_mrr=bool(re.search(
                r"decode_max_bs_is_default\s+and cfg\.max_running_requests is not None", gpu_text)),
            memory_before_spec=mem_at < spec_at,
            spec_mrr=int(_one(r"max_running_requests(?: = |=)(\d+),?\s*\n\s*(?:\)\s*\n\s*)?logger\.warning\(\s*"
                              r"\"Max running requests is reset to", spec_text)),
            cap=_cap(cap_text),
            r2t_extra=int(_one(r"extra_max_context_len = (\d+)", src.text(p["r2t"]))),
            r2t_adds_draft_tokens=bool(re.search(r"extra_max_context_len \+= [\w().]*speculative_num_draft_tokens",
                                                 src.text(p["r2t"]))),
            mxfp8_block=_mxfp8_block(src),
            fp4_block=int(_one(r"scale_block_size = (\d+)", src.text("sglang/srt/mem_cache/memory_pool.py"))),
            slots_rule=_slots_rule(src.text(p["slots"])),
        )

    def chunk_and_bs(self, gpu_mem_mib: int, tp: int) -> tuple[int, int]:
        for below, chunk, small, large in self.table:
            if below is None or gpu_mem_mib < below:
                return chunk, small if tp < 4 else large
        raise AssertionError("unreachable: the table ends with its else branch")

    def decode_bs(self, max_bs: int, speculative: bool) -> list[int]:
        sizes = [b for b in evaluate(self.decode_exprs[speculative], {"max_bs": max_bs, "cuda_graph_max_bs": max_bs})
                 if b <= max_bs]
        return sizes + [max_bs] if self.appends_max_bs and max_bs not in sizes else sizes

    def buckets(self, max_tokens: int) -> list[int]:
        return [t for t in evaluate(self.bucket_expr, {self.bucket_name: max_tokens}) if t <= max_tokens]

    def request_cap(self, tokens: int, context: int) -> int:
        k, lo, hi = self.cap
        return min(max(int(tokens / context * k), lo), hi)


def source_fraction(r: SourceRules, *, gpu_mem_mib: int, tp: int, spec: str | None, user_mrr: int | None,
                    mla: bool) -> float:
    """SGLang's default mem_fraction_static from the source's facts (graphs on, no user chunk/bs)."""
    chunk, max_bs = r.chunk_and_bs(gpu_mem_mib, tp)
    mrr = user_mrr if (r.memory_before_spec or not spec) else (user_mrr or r.spec_mrr)
    if mrr is not None and r.caps_default_bs_by_user_mrr:
        max_bs = min(max_bs, mrr)
    c = r.reserve
    reserve = c["base"] + max(chunk, c["act_floor"]) * c["act_per_token"] + tp / c["tp_div"] * c["tp_mib"]
    reserve += max_bs * c["per_bs"]
    if r.prefill_graphs_by_default:
        reserve += c["mla"] if mla else len(r.buckets(min(8192, chunk) if mla else chunk)) * c["per_bucket"]
    if gpu_mem_mib > c["floor_above"]:
        reserve = max(reserve, c["floor"])
    if spec and spec != "NGRAM":
        reserve += c["spec_standalone"] if spec == "STANDALONE" else c["spec_other"]
    return round((gpu_mem_mib - reserve) / gpu_mem_mib, 3)


def _one(pattern: str, text: str) -> str:
    m = re.search(pattern, text)
    if not m:
        raise ValueError(f"source pattern not found: {pattern}")
    return m.group(1)


def _gpu_table(fn: ast.FunctionDef) -> tuple[tuple[int | None, int, int, int], ...]:
    chain = next(n for n in ast.walk(fn) if isinstance(n, ast.If) and "gpu_mem < 20 * 1024" in ast.unparse(n.test))
    rows: list[tuple[int | None, int, int, int]] = []
    node: ast.If | None = chain
    while node is not None:
        below = evaluate(node.test.comparators[0], {}) if isinstance(node.test, ast.Compare) else None
        rows.append((below, *_band(node.body)))
        orelse = node.orelse
        if len(orelse) == 1 and isinstance(orelse[0], ast.If):
            node = orelse[0]
        else:
            rows.append((None, *_band(orelse)))
            node = None
    return tuple(rows)


def _band(body: list[ast.stmt]) -> tuple[int, int, int]:
    chunk: Any = None
    small: Any = None
    large: Any = None
    for stmt in body:
        for n in ast.walk(stmt):
            if isinstance(n, ast.keyword) and n.arg == "chunked_prefill_size" and isinstance(n.value, ast.Constant):
                chunk = n.value.value
            if isinstance(n, ast.Assign) and getattr(n.targets[0], "attr", "") == "chunked_prefill_size":
                chunk = evaluate(n.value, {})
        if isinstance(stmt, ast.If) and "max_bs" in ast.unparse(stmt.test):  # `if ...max_bs is None:`
            inner = stmt.body[0]
            if isinstance(inner, ast.If) and "tp_size < 4" in ast.unparse(inner.test):
                small = evaluate(inner.body[0].value, {})  # type: ignore[attr-defined]
                large = evaluate(inner.orelse[0].value, {})  # type: ignore[attr-defined]
            else:
                small = large = evaluate(inner.value, {})  # type: ignore[attr-defined]
    if chunk is None or small is None or large is None:
        raise ValueError("GPU-memory band without chunk or max_bs")
    return int(chunk), int(small), int(large)


def _decode_exprs(fn: ast.FunctionDef) -> tuple[ast.expr, ast.expr]:
    branch = next(n for n in ast.walk(fn) if isinstance(n, ast.If) and "speculative_algorithm is None" in
                  ast.unparse(n.test))
    normal = branch.body[0].value  # type: ignore[attr-defined]
    spec = branch.orelse[0].value  # type: ignore[attr-defined]
    return normal, spec


def _assigned(fn: ast.FunctionDef, name: str) -> ast.expr:
    return next(n.value for n in ast.walk(fn) if isinstance(n, ast.Assign)
                and getattr(n.targets[0], "id", "") == name)


def _reserve(gpu: str, graph: str, version: str) -> dict[str, float]:
    tp = re.search(r"tp_size \* (?:self|cfg)\.pp_size / (\d+) \* (\d+)", gpu)
    floor = re.search(r"gpu_mem > (\d+) \* 1024:\s*\n\s*reserved_mem = max\(reserved_mem, (\d+) \* 1024\)", gpu)
    if not tp or not floor:
        raise ValueError("reserve constants not found")
    spec_part = gpu[gpu.index("reserved_mem = max(reserved_mem"):]
    standalone = re.search(r'== "STANDALONE":\s*\n(?:\s*#.*\n)*\s*reserved_mem \+= (\d+) \* 1024', spec_part)
    other = re.search(r'!= "NGRAM":\s*\n(?:\s*#.*\n)*\s*reserved_mem \+= (\d+) \* 1024', spec_part)
    return {
        "base": float(_one(r"# Constant meta data.*\n\s*reserved_mem = (\d+)", gpu)),
        "act_floor": float(_one(r"max\((?:self|cfg)\.chunked_prefill_size, (\d+)\)", gpu)),
        "act_per_token": float(_one(r"(?:activation_tokens|max\(self\.chunked_prefill_size, \d+\)) \* ([\d.]+)", gpu)),
        "tp_div": float(tp.group(1)), "tp_mib": float(tp.group(2)),
        "per_bs": float(_one(r"reserved_mem \+= (?:self\.cuda_graph_max_bs|decode_cuda_graph_config\.max_bs) \* "
                             r"([\d.]+)\n", graph)),
        "per_bucket": float(_one(r"reserved_mem \+= len\([\w.]+\) \* (\d+)", graph)),
        "mla": float(_one(r"# MLA backend.*\n\s*reserved_mem \+= ([\d.]+) \* 1024", graph)) * 1024
        if version != "0.5.9" else 0.0,
        "floor_above": float(floor.group(1)) * 1024, "floor": float(floor.group(2)) * 1024,
        "spec_standalone": float(standalone.group(1)) * 1024 if standalone else 0.0,
        "spec_other": float(other.group(1)) * 1024 if other else 0.0,
    }


def _prefill_graphs_by_default(src: Source, version: str) -> bool:
    if version == "0.5.9":  # piecewise graphs are opt-in: `enable_piecewise_cuda_graph: bool = False`
        return not re.search(r"enable_piecewise_cuda_graph: bool = False", src.text("sglang/srt/server_args.py"))
    # 0.5.23: the CUDA platform's default prefill backend is the breakable graph
    return "Backend.BREAKABLE" in src.text("sglang/srt/arg_groups/cuda_graph_hook.py")


def _cap(text: str) -> tuple[int, int, int]:
    m = re.search(r"context_len \* (\d+)\)?\s*\n\s*estimated = max\(min\(estimated, (\d+)\), (\d+)\)", text)
    if m:
        return int(m.group(1)), int(m.group(3)), int(m.group(2))
    m = re.search(r"context_len \* (\d+)\s*\),\s*(\d+),\s*\),\s*(\d+),", text)
    if not m:
        raise ValueError("request cap not found")
    return int(m.group(1)), int(m.group(2)), int(m.group(3))


def _mxfp8_block(src: Source) -> int | None:
    m = re.search(r"MXFP8_SCALE_BLOCK_SIZE = (\d+)", src.text("sglang/srt/mem_cache/memory_pool.py"))
    return int(m.group(1)) if m else None


def _slots_rule(text: str) -> str:
    if re.search(r"max_mamba_cache_size = int\(\s*\(mamba_state_memory_raw \* \(1 << 30\)\)\s*"
                 r"// config\.mamba2_cache_params\.mamba_cache_per_req", text):
        return "budget // per_req"
    if re.search(r"\(mamba_budget_bytes - replayssm_fixed_bytes - per_slot\)\s*// per_slot", text):
        return "(budget - per_req) // per_req"
    raise ValueError("state pool slot rule not found")
