"""SGLang's argument resolution, as the simulated server performs it.

From the parsed flags, the model and the GPUs, this computes what SGLang resolves before
launching its schedulers: the default `mem_fraction_static`, chunked prefill size and
CUDA-graph batch sizes (reference/engines.md §3.4), speculative-decoding defaults, KV
dtype, and the checks that fail in the launcher process (context above the model's max).
Version differences (0.5.23 vs 0.5.9) are spelled out where they arise.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field
from typing import Any

from autotune.modelshape import ModelShape

KV_DTYPES: dict[str, tuple[str, float]] = {  # flag value -> (torch dtype shown in logs, bytes)
    "bf16": ("torch.bfloat16", 2),
    "bfloat16": ("torch.bfloat16", 2),
    "fp8_e4m3": ("torch.float8_e4m3fn", 1),
    "fp8_e5m2": ("torch.float8_e5m2", 1),
    "mxfp8": ("torch.float8_e4m3fn", 1 + 1 / 32),
    "nvfp4": ("torch.float4_e2m1fn_x2", 0.5 + 1 / 16),
    "fp4_e2m1": ("torch.float4_e2m1fn_x2", 0.5 + 1 / 16),
    "fp4_mx_block16": ("torch.float4_e2m1fn_x2", 0.5 + 1 / 16),
}


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


def _chunk_and_bs(gpu_mem_mib: int, tp: int, version: str) -> tuple[int, int]:
    """(chunked_prefill_size, decode max_bs) defaults by GPU memory (engines.md §3.4;
    0.5.9's 20-35 GiB row is 2048 / 24 or 80, as its server_args.py says)."""
    gib = gpu_mem_mib / 1024
    if gib < 20:
        return 2048, 8
    if gib < 35:
        if version == "0.5.9":
            return 2048, 24 if tp < 4 else 80
        return 4096, 48 if tp < 4 else 160
    if gib < 60:
        return 4096, 32 if tp < 4 else 160
    if gib < 160:
        return 8192, 256 if tp < 4 else 512
    return 16384, 512


def decode_batch_sizes(max_bs: int, speculative: bool, version: str = "0.5.23") -> list[int]:
    """The decode graph sizes SGLang generates up to `max_bs`; 0.5.23 also adds `max_bs` itself."""
    if speculative:
        sizes = [*range(1, 9), *range(10, 33, 2), *range(40, 65, 4), *range(72, 257, 8), *range(272, max_bs + 1, 16)]
    else:
        sizes = [1, 2, 4, 8, 12, *range(16, 257, 8), *range(272, 512, 16), *range(512, max_bs + 1, 32)]
    sizes = [bs for bs in sizes if bs <= max_bs]
    return sizes + [max_bs] if version != "0.5.9" and max_bs not in sizes else sizes


def captured_bs(sizes: list[int], max_running_requests: int) -> list[int]:
    """What the graph runner captures: sizes up to the request pool, plus the pool size itself."""
    kept = {bs for bs in sizes if bs <= max_running_requests}
    if sizes and max(sizes) > max_running_requests:
        kept.add(max_running_requests)
    return sorted(kept)


def prefill_buckets(max_tokens: int) -> list[int]:
    sizes = [*range(4, 33, 4), *range(48, 257, 16), *range(288, 513, 32), *range(576, 1025, 64),
             *range(1280, 4097, 256), *range(4608, max_tokens + 1, 512)]
    return [t for t in sizes if t <= max_tokens]


def default_mem_fraction(version: str, gpu_mem_mib: int, tp: int, chunked: int, decode_max_bs: int,
                         buckets: int, mla: bool, spec: str | None, graphs: bool) -> float:
    """SGLang's auto `mem_fraction_static` (engines.md §3.4), 0.5.23 or 0.5.9 rule.

    `decode_max_bs` is the graph max_bs as resolved *before* the speculative hook (both
    versions size this default first), so the 48-request speculative cap does not lower it.
    0.5.9 adds 6 GiB for a STANDALONE draft, none for NGRAM, 2 GiB for the others."""
    reserved = 512 + max(chunked, 2048) * 1.5 + tp / 8 * 1024
    if version == "0.5.9":
        reserved += decode_max_bs * 2  # 0.5.9 reserves it even with --disable-cuda-graph
    elif graphs:
        reserved += decode_max_bs * 2 + (1536 if mla else buckets * 8)
    if gpu_mem_mib > 60 * 1024:
        reserved = max(reserved, 10 * 1024)
    if version == "0.5.9" and spec and spec != "NGRAM":
        reserved += 6144 if spec == "STANDALONE" else 2048
    return round((gpu_mem_mib - reserved) / gpu_mem_mib, 3)


def resolve(ns: argparse.Namespace, version: str, shape: ModelShape, gpu_mem_mib: int, env: dict[str, str]) -> Resolved:
    tp = int(getattr(ns, "tp_size", None) or getattr(ns, "tensor_parallel_size", None) or 1)
    warnings: list[str] = []
    context = _context_len(ns, shape, env, warnings)
    spec = _spec_algorithm(ns, version, shape)
    steps = ns.speculative_num_steps or 3
    topk = ns.speculative_eagle_topk or 1
    draft = ns.speculative_num_draft_tokens or 4
    mrr = ns.max_running_requests
    if spec and mrr is None:
        mrr = 48  # both versions log it (0.5.9 from server_args.py, 0.5.23 from the speculative hook)
        warnings.append("Max running requests is reset to 48 for speculative decoding. "
                        "You can override this by explicitly setting --max-running-requests.")
    chunk_default, bs_default = _chunk_and_bs(gpu_mem_mib, tp, version)
    chunked = ns.chunked_prefill_size if ns.chunked_prefill_size is not None else chunk_default
    max_bs = _decode_max_bs(ns, version) or bs_default
    # The GPU-memory defaults run before the speculative hook: only a user's cap lowers a
    # default max_bs, and only on 0.5.23; the captured sizes are cut to the pool later.
    if version != "0.5.9" and _decode_max_bs(ns, version) is None and ns.max_running_requests is not None:
        max_bs = min(max_bs, ns.max_running_requests)
    graphs = not ns.disable_cuda_graph and getattr(ns, "cuda_graph_backend_decode", None) != "disabled"
    explicit = _explicit_bs(ns, version)
    if explicit:
        max_bs = max(explicit)
    decode_bs = explicit or decode_batch_sizes(max_bs, spec is not None, version)
    prefill_graph = version != "0.5.9" and graphs and getattr(ns, "cuda_graph_backend_prefill", None) != "disabled"
    buckets = prefill_buckets(min(chunked if chunked > 0 else 8192, 8192 if shape.is_mla else 1 << 30)) if prefill_graph else []
    mfs = ns.mem_fraction_static
    if mfs is None:
        mfs = default_mem_fraction(version, gpu_mem_mib, tp, chunked, max_bs,
                                   len(buckets), shape.is_mla, spec, graphs)
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


def _context_len(ns: argparse.Namespace, shape: ModelShape, env: dict[str, str], warnings: list[str]) -> int:
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
                                "SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1", (
                'sglang/srt/entrypoints/http_server.py", in launch_server',
                'sglang/srt/configs/model_config.py", in __init__',
            ))
    return asked


def _spec_algorithm(ns: argparse.Namespace, version: str, shape: ModelShape) -> str | None:
    algo = ns.speculative_algorithm
    if algo is None:
        return None
    algo = str(algo).upper()
    if version != "0.5.9" and algo not in ("EAGLE", "EAGLE3", "NEXTN", "STANDALONE", "NGRAM", "DFLASH", "MTP"):
        raise LaunchFailure(f"ValueError: Unknown speculative algorithm: {ns.speculative_algorithm}")
    if algo in ("NEXTN", "MTP"):
        algo = "EAGLE"
    if algo == "EAGLE" and not ns.speculative_draft_model_path and shape.mtp_layers == 0:
        raise LaunchFailure(
            "ValueError: speculative decoding with NEXTN/EAGLE needs --speculative-draft-model-path "
            f"or a model with MTP layers; {shape.architecture} has none.")
    return algo


def _decode_max_bs(ns: argparse.Namespace, version: str) -> int | None:
    if version == "0.5.9":
        return getattr(ns, "cuda_graph_max_bs", None)
    return getattr(ns, "cuda_graph_max_bs_decode", None)


def _explicit_bs(ns: argparse.Namespace, version: str) -> list[int] | None:
    value: Any = getattr(ns, "cuda_graph_bs" if version == "0.5.9" else "cuda_graph_bs_decode", None)
    return sorted(int(v) for v in value) if value else None


def _kv_dtype(flag: str, shape: ModelShape) -> tuple[str, float]:
    if flag and flag != "auto":
        return KV_DTYPES[flag]
    q = shape.quantization
    scheme = q.get("kv_cache_scheme") or {}
    if str(q.get("kv_cache_quant_algo", "")).upper() == "FP8" or (scheme.get("num_bits") == 8 and scheme.get("type") == "float"):
        return KV_DTYPES["fp8_e4m3"]
    return ("torch.float32", 4) if shape.dtype == "float32" else KV_DTYPES["bf16"]
