"""The question an estimate answers: one launch config on one machine's GPUs.

`Launch` is the estimator's own view of a candidate config — only what changes memory.
Fields left `None` mean "the engine's default", which the engine rules resolve
(`sglang_rules.resolve`, `vllm_rules.resolve`); the estimate then says which default it
assumed. Validation raises `SpecError` naming the offending argument.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from autotune.errors import SpecError

ENGINES: dict[str, tuple[str, ...]] = {
    "sglang": ("0.5.23", "0.5.9"),
    "vllm": ("0.33", "0.33.0"),
}
DEFAULT_VERSION = {"sglang": "0.5.23", "vllm": "0.33"}

# KV element bytes per dtype name, scales included: mxfp8 carries one e8m0 scale per 32
# values, the 4-bit formats one fp8 scale per 16 (engines.md §3.2).
KV_DTYPE_BYTES: dict[str, float] = {
    "float32": 4, "fp32": 4,
    "bfloat16": 2, "bf16": 2, "float16": 2, "fp16": 2, "half": 2,
    "fp8": 1, "fp8_e4m3": 1, "fp8_e5m2": 1, "fp8_inc": 1,
    "mxfp8": 1 + 1 / 32,
    "nvfp4": 0.5 + 1 / 16, "fp4_e2m1": 0.5 + 1 / 16, "fp4_mx_block16": 0.5 + 1 / 16,
}

# What each engine's --kv-cache-dtype accepts (engines.md §4 and §6); anything else is an
# argparse error (CONFIG_ERROR), so the estimate refuses it too.
KV_DTYPE_CHOICES: dict[tuple[str, str], tuple[str, ...]] = {
    ("sglang", "0.5.23"): ("auto", "fp8_e5m2", "fp8_e4m3", "mxfp8", "bf16", "bfloat16", "nvfp4",
                           "fp4_mx_block16"),
    ("sglang", "0.5.9"): ("auto", "fp8_e5m2", "fp8_e4m3", "bf16", "bfloat16", "fp4_e2m1"),
    ("vllm", "0.33"): ("auto", "bfloat16", "float16", "fp8", "fp8_e4m3", "fp8_e5m2", "fp8_inc"),
}


@dataclass(frozen=True)
class Launch:
    """One candidate launch on `gpus` GPUs of `gpu_mem_gib` GiB each (capacity, as NVML says).

    `mem_fraction` is SGLang's --mem-fraction-static or vLLM's --gpu-memory-utilization.
    `concurrency` is how many full-`context_length` requests must fit in the KV pool at
    once (the goal's requirement, not an engine flag). Speculative decoding uses the
    model's own MTP/NextN layers as the draft.
    """

    gpu_mem_gib: float
    gpus: int = 1
    tp: int = 1
    engine: str = "sglang"
    engine_version: str = "0.5.23"
    mem_fraction: float | None = None
    context_length: int | None = None
    speculative: bool = False
    draft_tokens: int | None = None
    draft_steps: int | None = None
    draft_topk: int | None = None
    max_running_requests: int | None = None
    kv_dtype: str = "auto"
    concurrency: int = 1
    chunked_prefill_size: int | None = None
    cuda_graph_max_bs: int | None = None
    cuda_graphs: bool = True
    disable_radix_cache: bool = False
    mamba_full_memory_ratio: float = 0.9
    max_mamba_cache_size: int | None = None
    page_size: int = 1
    max_num_batched_tokens: int | None = None

    def __post_init__(self) -> None:
        _check(self)

    @property
    def version_key(self) -> tuple[str, str]:
        """(engine, version) with vLLM patch releases folded: the key of the rule tables."""
        version = "0.33" if self.engine == "vllm" else self.engine_version
        return self.engine, version

    @property
    def gpu_mem_mib(self) -> int:
        """Capacity in MiB, as `nvidia-smi --query-gpu=memory.total` reports it."""
        return int(round(self.gpu_mem_gib * 1024))


def _check(launch: Launch) -> None:
    if launch.engine not in ENGINES:
        raise SpecError("engine", f"unknown engine {launch.engine!r}", hint="use one of: " + ", ".join(ENGINES))
    if launch.engine_version not in ENGINES[launch.engine]:
        raise SpecError("engine_version", f"{launch.engine} {launch.engine_version} has no memory rules",
                        hint="known versions: " + ", ".join(ENGINES[launch.engine]))
    if not launch.gpu_mem_gib > 0:
        raise SpecError("gpu_mem_gib", f"must be positive, got {launch.gpu_mem_gib}")
    if launch.tp < 1 or launch.gpus < 1 or launch.tp > launch.gpus:
        raise SpecError("tp", f"tp={launch.tp} needs 1 <= tp <= gpus ({launch.gpus})")
    if launch.mem_fraction is not None and not 0 < launch.mem_fraction < 1:
        raise SpecError("mem_fraction", f"must be in (0, 1), got {launch.mem_fraction}")
    if launch.concurrency < 1:
        raise SpecError("concurrency", f"must be at least 1, got {launch.concurrency}")
    if launch.context_length is not None and launch.context_length < 2:
        raise SpecError("context_length", f"must be at least 2, got {launch.context_length}")
    choices = KV_DTYPE_CHOICES[launch.version_key]
    if launch.kv_dtype not in choices:
        raise SpecError("kv_dtype", f"{launch.engine} {launch.engine_version} does not accept "
                        f"--kv-cache-dtype {launch.kv_dtype}", hint="choose one of: " + ", ".join(choices))
    for name in ("draft_tokens", "draft_steps", "draft_topk", "max_running_requests", "page_size"):
        value = getattr(launch, name)
        if value is not None and value < 1:
            raise SpecError(name, f"must be at least 1, got {value}")


def default_version(engine: str) -> str:
    """The release whose rules apply when no version is named ('' for an unknown engine)."""
    return DEFAULT_VERSION.get(engine, "")


def smallest_fraction(fits: Callable[[float], bool]) -> float | None:
    """Smallest fraction (rounded up to 3 decimals) for which `fits` holds, by bisection; None if
    none below 0.999 does. `fits` must be monotone: once true, true for every larger fraction."""
    if not fits(0.999):
        return None
    lo, hi = 0.0, 0.999
    while hi - lo > 1e-5:
        mid = (lo + hi) / 2
        lo, hi = (lo, mid) if fits(mid) else (mid, hi)
    return -int(-hi * 1000 // 1) / 1000
