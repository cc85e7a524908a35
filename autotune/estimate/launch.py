"""The question an estimate answers: one launch config on one machine's GPUs.

`Launch` is the estimator's own view of a candidate config — only what changes memory.
Fields left `None` mean "the engine's default", which the engine rules resolve
(`sglang_rules.resolve`, `vllm_rules.resolve`); the estimate then says which default it
assumed. Validation raises `SpecError` naming the offending argument.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from packaging.version import Version

from autotune.config import LaunchConfig
from autotune.engines.sglang.rules import KV_DTYPES
from autotune.engines.sglang.traits import TRAITS, traits_for
from autotune.errors import SpecError

# vLLM's versions and KV dtypes stay here until the vLLM plug-in's traits carry them; SGLang's
# come from its traits (`engines/sglang/traits.py`), nearest known release for an unseen one.
VLLM_VERSIONS = ("0.33", "0.33.0")
VLLM_KV_DTYPES = ("auto", "bfloat16", "float16", "fp8", "fp8_e4m3", "fp8_e5m2", "fp8_inc")
ENGINES: tuple[str, ...] = ("sglang", "vllm")

# KV element bytes per dtype name, scales included: SGLang's table (its rules) plus the names
# only vLLM or the model config use.
KV_DTYPE_BYTES: dict[str, float] = {
    "float32": 4, "fp32": 4, "float16": 2, "fp16": 2, "half": 2, "fp8": 1, "fp8_inc": 1,
    **{name: elem for name, (_, elem) in KV_DTYPES.items()},
}


def kv_dtype_choices(engine: str, version: str) -> tuple[str, ...]:
    """What the engine's --kv-cache-dtype accepts (anything else is an argparse error)."""
    return traits_for(version).kv_dtype_choices if engine == "sglang" else VLLM_KV_DTYPES


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

    @classmethod
    def from_config(cls, config: LaunchConfig, *, gpu_mem_gib: float, gpus: int, engine: str, engine_version: str,
                    concurrency: int = 1) -> Launch:
        """The estimator's view of a `LaunchConfig` (the one shape the spec, search, trial and
        records use) on `gpus` GPUs of `gpu_mem_gib`: the only place the two are translated."""
        return cls(
            gpu_mem_gib=gpu_mem_gib, gpus=gpus, tp=config.tp, engine=engine, engine_version=engine_version,
            mem_fraction=config.mem_fraction_static, context_length=config.context_length,
            speculative=config.speculative, draft_tokens=config.speculative_num_draft_tokens,
            draft_steps=config.speculative_num_steps, draft_topk=config.speculative_eagle_topk,
            max_running_requests=config.max_running_requests, kv_dtype=config.kv_cache_dtype,
            concurrency=concurrency, chunked_prefill_size=config.chunked_prefill_size,
            cuda_graph_max_bs=config.cuda_graph_max_bs, cuda_graphs=not config.disable_cuda_graph,
        )

    @property
    def gpu_mem_mib(self) -> int:
        """Capacity in MiB, as `nvidia-smi --query-gpu=memory.total` reports it."""
        return int(round(self.gpu_mem_gib * 1024))


def _check(launch: Launch) -> None:
    if launch.engine not in ENGINES:
        raise SpecError("engine", f"unknown engine {launch.engine!r}", hint="use one of: " + ", ".join(ENGINES))
    if launch.engine == "sglang":
        traits_for(launch.engine_version)  # SpecError if older than every release we know
    elif launch.engine_version not in VLLM_VERSIONS:
        raise SpecError("engine_version", f"{launch.engine} {launch.engine_version} has no memory rules",
                        hint="known versions: " + ", ".join(VLLM_VERSIONS))
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
    choices = kv_dtype_choices(launch.engine, launch.engine_version)
    if launch.kv_dtype not in choices:
        raise SpecError("kv_dtype", f"{launch.engine} {launch.engine_version} does not accept "
                        f"--kv-cache-dtype {launch.kv_dtype}", hint="choose one of: " + ", ".join(choices))
    for name in ("draft_tokens", "draft_steps", "draft_topk", "max_running_requests", "page_size"):
        value = getattr(launch, name)
        if value is not None and value < 1:
            raise SpecError(name, f"must be at least 1, got {value}")


def default_version(engine: str) -> str:
    """The release whose rules apply when no version is named ('' for an unknown engine)."""
    if engine == "sglang":
        return max(TRAITS, key=Version)
    return VLLM_VERSIONS[0] if engine == "vllm" else ""


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
