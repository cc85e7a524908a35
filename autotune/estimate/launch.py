"""The question an estimate answers: one launch config on one machine's GPUs.

`Launch` is a `LaunchConfig` (a subclass: the same fields, names and meanings, so the two
cannot drift apart again) plus what only an estimate needs: the machine (`gpu_mem_gib`,
`gpus`), the engine and release whose rules apply, the goal's `concurrency`, and a few
engine knobs a `LaunchConfig` passes only as `extra_args`. The estimator reads no
`torch_compile` (no memory rule) and no `extra_args`.

Fields left `None` mean "the engine's default", which the engine rules resolve; the
estimate then says which default it assumed. Which rules apply comes from the engine
registry (`engines.registry.memory_rules`), never from the engine's name. Validation raises
`SpecError` naming the offending argument.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass

from autotune.config import LaunchConfig
from autotune.engines import registry, versions
from autotune.engines.base import MemoryRules
from autotune.errors import SpecError


@dataclass(frozen=True)
class Launch(LaunchConfig):
    """A `LaunchConfig` (every field as the config has it) on `gpus` GPUs of `gpu_mem_gib` GiB
    each (capacity, as NVML says), with the engine and release whose rules apply.

    `mem_fraction_static` is the engine's memory fraction (SGLang's --mem-fraction-static, vLLM's
    --gpu-memory-utilization). `model_path` may stay '' (the model is the estimate's own argument).
    `engine_version` '' is the engine's default release. `concurrency` is how many
    full-`context_length` requests must fit in the KV pool at once (the goal's requirement,
    not an engine flag). Speculative decoding uses the model's own MTP/NextN layers as the draft.
    """

    model_path: str = ""
    gpu_mem_gib: float = 0.0
    gpus: int = 1
    engine: str = registry.DEFAULT_ENGINE
    engine_version: str = ""
    concurrency: int = 1
    # -- engine knobs a LaunchConfig carries only in extra_args (flag dests as the engines name them)
    disable_radix_cache: bool = False
    mamba_full_memory_ratio: float = 0.9
    max_mamba_cache_size: int | None = None
    page_size: int = 1
    max_num_batched_tokens: int | None = None

    def __post_init__(self) -> None:
        if not self.engine_version:  # frozen: the default release is filled in once, here
            object.__setattr__(self, "engine_version", registry.default_version(self.engine))
        _check(self)

    @classmethod
    def from_config(cls, config: LaunchConfig, *, gpu_mem_gib: float, gpus: int, engine: str, engine_version: str,
                    concurrency: int = 1) -> Launch:
        """`config` (the shape the spec, search, trial and records use) on `gpus` GPUs of
        `gpu_mem_gib`: every field copied as it is."""
        fields = {f.name: getattr(config, f.name) for f in dataclasses.fields(LaunchConfig)}
        return cls(gpu_mem_gib=gpu_mem_gib, gpus=gpus, engine=engine, engine_version=engine_version,
                   concurrency=concurrency, **fields)

    @property
    def rules(self) -> MemoryRules:
        """The engine's memory rules (the registry's; validated at construction)."""
        return registry.memory_rules(self.engine)

    @property
    def gpu_mem_mib(self) -> int:
        """Capacity in MiB, as `nvidia-smi --query-gpu=memory.total` reports it."""
        return int(round(self.gpu_mem_gib * 1024))


def rules_version(launch: Launch) -> versions.Picked:
    """The release whose memory rules stand in for `launch.engine_version` (SpecError when it is
    older than every release with rules); `warning` says so when it is not that release itself."""
    return versions.pick(launch.engine, launch.engine_version, launch.rules.versions, what="memory rules")


def _check(launch: Launch) -> None:
    rules = registry.memory_rules(launch.engine)  # SpecError naming `engine` if it has none
    rules_version(launch)  # SpecError naming `engine_version` if older than every release we know
    if not launch.gpu_mem_gib > 0:
        raise SpecError("gpu_mem_gib", f"must be positive, got {launch.gpu_mem_gib}")
    if launch.tp < 1 or launch.gpus < 1 or launch.tp > launch.gpus:
        raise SpecError("tp", f"tp={launch.tp} needs 1 <= tp <= gpus ({launch.gpus})")
    if launch.mem_fraction_static is not None and not 0 < launch.mem_fraction_static < 1:
        raise SpecError("mem_fraction_static", f"must be in (0, 1), got {launch.mem_fraction_static}")
    if launch.concurrency < 1:
        raise SpecError("concurrency", f"must be at least 1, got {launch.concurrency}")
    if launch.context_length is not None and launch.context_length < 2:
        raise SpecError("context_length", f"must be at least 2, got {launch.context_length}")
    choices = rules.kv_dtype_choices(launch.engine_version)
    if launch.kv_cache_dtype not in choices:
        raise SpecError("kv_cache_dtype", f"{launch.engine} {launch.engine_version} does not accept "
                        f"--kv-cache-dtype {launch.kv_cache_dtype}", hint="choose one of: " + ", ".join(choices))
    for name in ("speculative_num_draft_tokens", "speculative_num_steps", "speculative_eagle_topk",
                 "max_running_requests", "page_size"):
        value = getattr(launch, name)
        if value is not None and value < 1:
            raise SpecError(name, f"must be at least 1, got {value}")


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
