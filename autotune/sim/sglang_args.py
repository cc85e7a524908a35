"""SGLang's argument resolution, as the simulated server performs it.

From the parsed flags, the model and the GPUs, this computes what SGLang resolves before
launching its schedulers: the default `mem_fraction_static`, chunked prefill size and
CUDA-graph batch sizes (reference/engines.md §3.4), speculative-decoding defaults, KV
dtype, and the checks that fail in the launcher process (context above the model's max).
SGLang's public rules come from `engines/sglang/rules.py` (shared with the estimator); what
differs between releases is named in `engines/sglang/traits.py`.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field
from typing import Any

from autotune.engines.sglang import rules
from autotune.engines.sglang.rules import KV_DTYPES, captured_bs
from autotune.engines.sglang.traits import SglangTraits, traits_for
from autotune.modelshape import ModelShape
from autotune.sim.sglang_frames import frames

__all__ = ["LaunchFailure", "Resolved", "captured_bs", "resolve"]

class LaunchFailure(Exception):
    """An error raised in the launcher process, before any scheduler runs (exit 1)."""

    def __init__(self, exc_line: str, frames: tuple[str, ...] = ()) -> None:
        super().__init__(exc_line)
        self.exc_line = exc_line
        self.frames = frames


@dataclass
class Resolved:
    """Server args after SGLang's own resolution."""

    version: str
    tp: int
    mem_fraction_static: float
    context_len: int
    chunked_prefill_size: int
    max_prefill_tokens: int
    max_running_requests: int | None
    decode_bs: list[int]
    prefill_buckets: list[int]
    graphs_enabled: bool
    torch_compile: bool
    torch_compile_max_bs: int
    spec_algorithm: str | None
    spec_steps: int
    spec_topk: int
    spec_draft_tokens: int
    kv_dtype_name: str
    kv_elem_bytes: float
    page_size: int
    mamba_full_memory_ratio: float
    max_mamba_cache_size: int | None
    disable_radix_cache: bool
    max_total_tokens: int | None
    gpu_mem_mib: int
    swa_ratio: float | None = None  # hybrid sliding-window pool: SWA tokens per full token (None: no split)
    warnings: list[str] = field(default_factory=list)

    @property
    def traits(self) -> SglangTraits:
        return traits_for(self.version)


def resolve(ns: argparse.Namespace, version: str, shape: ModelShape, gpu_mem_mib: int, env: dict[str, str]) -> Resolved:
    t = traits_for(version)
    tp = int(getattr(ns, "tp_size", None) or getattr(ns, "tensor_parallel_size", None) or 1)
    warnings: list[str] = []
    context = _context_len(ns, version, shape, env, warnings)
    spec = _spec_algorithm(ns, t, shape)
    steps, topk, draft, mrr, reset = rules.speculative_settings(
        ns.speculative_num_steps, ns.speculative_eagle_topk, ns.speculative_num_draft_tokens, ns.max_running_requests,
        spec is not None)
    if reset:  # both versions log it (0.5.9 from server_args.py, 0.5.23 from the hook)
        warnings.append("Max running requests is reset to 48 for speculative decoding. "
                        "You can override this by explicitly setting --max-running-requests.")
    chunk_default, bs_default = rules.chunk_and_decode_max_bs(gpu_mem_mib, tp, t)
    chunked = ns.chunked_prefill_size if ns.chunked_prefill_size is not None else chunk_default
    # The GPU-memory defaults run before the speculative hook; the captured sizes are cut to the pool later.
    max_bs = rules.default_graph_max_bs(bs_default, getattr(ns, t.graph_max_bs_dest, None), ns.max_running_requests, t)
    graphs = not ns.disable_cuda_graph and getattr(ns, "cuda_graph_backend_decode", None) != "disabled"
    explicit = _explicit_bs(ns, t)
    if explicit:
        max_bs = max(explicit)
    decode_bs = explicit or rules.decode_batch_sizes(max_bs, spec is not None, t)
    prefill_graph = t.default_prefill_graphs and graphs and getattr(ns, "cuda_graph_backend_prefill", None) != "disabled"
    buckets = rules.prefill_buckets(rules.prefill_graph_max_tokens(chunked, shape.is_mla)) if prefill_graph else []
    mfs = ns.mem_fraction_static
    if mfs is None:
        mfs = rules.default_mem_fraction(t, gpu_mem_mib, tp, chunked, max_bs, len(buckets), shape.is_mla, spec, graphs)
    kv_name, kv_bytes = _kv_dtype(ns.kv_cache_dtype, shape)
    return Resolved(
        version=version, tp=tp, mem_fraction_static=float(mfs), context_len=context,
        chunked_prefill_size=chunked, max_prefill_tokens=int(ns.max_prefill_tokens), max_running_requests=mrr,
        decode_bs=decode_bs if graphs else [], prefill_buckets=buckets, graphs_enabled=graphs,
        torch_compile=bool(ns.enable_torch_compile), torch_compile_max_bs=int(ns.torch_compile_max_bs),
        spec_algorithm=spec, spec_steps=steps, spec_topk=topk, spec_draft_tokens=draft if spec else 0,
        kv_dtype_name=kv_name, kv_elem_bytes=kv_bytes, page_size=int(ns.page_size or 1),
        mamba_full_memory_ratio=float(getattr(ns, "mamba_full_memory_ratio", None) or 0.9),
        max_mamba_cache_size=getattr(ns, "max_mamba_cache_size", None),
        disable_radix_cache=bool(ns.disable_radix_cache), max_total_tokens=ns.max_total_tokens,
        gpu_mem_mib=gpu_mem_mib, warnings=warnings, swa_ratio=_swa_ratio(ns, shape),
    )


def _swa_ratio(ns: argparse.Namespace, shape: ModelShape) -> float | None:
    """SGLang sizes sliding-window layers' pool at `--swa-full-tokens-ratio` (0.8) of the full one."""
    if shape.count("sliding") == 0 or shape.count("full") == 0 or getattr(ns, "disable_hybrid_swa_memory", False):
        return None
    return float(getattr(ns, "swa_full_tokens_ratio", None) or 0.8)


def _context_len(ns: argparse.Namespace, version: str, shape: ModelShape, env: dict[str, str],
                 warnings: list[str]) -> int:
    derived = shape.max_context
    if ns.context_length is None:
        return derived
    asked = int(ns.context_length)
    if asked > derived:
        # SGLang's message starts with "Warning: " even when it is raised as the ValueError
        msg = (f"Warning: User-specified context_length ({asked}) is greater than the derived context_length "
               f"({derived}). This may lead to incorrect model outputs or CUDA errors. Note that the derived "
               "context_length may differ from max_position_embeddings in the model's config.")
        if env.get("SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN") in ("1", "true", "True"):
            warnings.append(msg)
        else:
            raise LaunchFailure(f"ValueError: {msg} To allow overriding this maximum, set the env var "
                                "SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1", frames(version, "context_length"))
    return asked


def _spec_algorithm(ns: argparse.Namespace, traits: SglangTraits, shape: ModelShape) -> str | None:
    algo = ns.speculative_algorithm
    if algo is None:
        return None
    algo = str(algo).upper()
    if traits.checks_spec_algorithm_name and algo not in ("EAGLE", "EAGLE3", "NEXTN", "STANDALONE", "NGRAM", "DFLASH", "MTP"):
        raise LaunchFailure(f"ValueError: Unknown speculative algorithm: {ns.speculative_algorithm}")
    if algo in ("NEXTN", "MTP"):
        algo = "EAGLE"
    if algo == "EAGLE" and not ns.speculative_draft_model_path and shape.mtp_layers == 0:
        raise LaunchFailure(
            "ValueError: speculative decoding with NEXTN/EAGLE needs --speculative-draft-model-path "
            f"or a model with MTP layers; {shape.architecture} has none.")
    return algo


def _explicit_bs(ns: argparse.Namespace, traits: SglangTraits) -> list[int] | None:
    value: Any = getattr(ns, traits.graph_bs_dest, None)
    return sorted(int(v) for v in value) if value else None


def _kv_dtype(flag: str, shape: ModelShape) -> tuple[str, float]:
    if flag and flag != "auto":
        return KV_DTYPES[flag]
    q = shape.quantization
    scheme = q.get("kv_cache_scheme") or {}
    if str(q.get("kv_cache_quant_algo", "")).upper() == "FP8" or (scheme.get("num_bits") == 8 and scheme.get("type") == "float"):
        return KV_DTYPES["fp8_e4m3"]
    return ("torch.float32", 4) if shape.dtype == "float32" else KV_DTYPES["bf16"]
