"""vLLM 0.33's KV budget and block arithmetic (engines.md §6, memory-model.md §3–4).

    available_kv = ceil(capacity · util) − weights − activation peak − non-torch − graph estimate

`num_blocks = available_kv // (block bytes)`. Plain models use 16-token blocks and report
`num_blocks · 16` tokens. Hybrid (GDN/Mamba) models share one block pool between
attention and state groups of `g` layers each: the attention block grows until its page
covers a state page, `B = 16 · ceil(state_page_per_layer / (16 · attn_page_per_token_per_layer))`,
a request needs `ceil(len/B)` blocks per attention group plus 2 per state group (prefix
caching on), and the logged "GPU KV cache size" is concurrency × max_model_len — a derived
figure, not a per-token capacity.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from autotune.engines.vllm import rules
from autotune.estimate.launch import Launch, smallest_fraction
from autotune.records import GIB

DEFAULT_UTIL = 0.92
BLOCK = rules.BLOCK_TOKENS
STATE_BLOCKS_PER_GROUP = 2  # prefix caching on (the default); 1 without it


def default_batched_tokens(gpu_mem_gib: float) -> int:
    """max_num_batched_tokens default of the API server by GPU capacity."""
    return 16384 if gpu_mem_gib >= 160 else 8192 if gpu_mem_gib >= 70 else 2048


def default_max_num_seqs(gpu_mem_gib: float) -> int:
    """max_num_seqs default (1024 on >= 70 GiB non-A100 cards; A100 assumed not to be one)."""
    return 1024 if gpu_mem_gib >= 70 else 256


@dataclass(frozen=True)
class VllmInputs:
    """Per-GPU quantities of one vLLM launch."""

    launch: Launch
    context_len: int
    capacity_gib: float
    free_gib: float  # free at start-up: the pre-flight check needs ceil(capacity·util) of it
    weights_gib: float  # target + draft
    other_gib: float  # activation peak + non-torch + CUDA-graph estimate
    attn_per_layer_bytes: float  # per token per attention layer
    attn_layers: int
    cell_bytes: int  # per token, all attention layers
    state_layers: int
    state_bytes: int  # per request, all state layers
    max_num_seqs: int


@dataclass(frozen=True)
class VllmPool:
    util: float
    kv_avail_gib: float
    num_blocks: int
    block_tokens: int
    kv_tokens: int
    max_concurrency: float
    failure: str | None


def available_kv_bytes(capacity_gib: float, util: float, non_kv_gib: float) -> float:
    """vLLM's KV budget: ceil(capacity · util) − everything else it measured (bytes)."""
    return rules.requested_bytes(int(capacity_gib * GIB), util) - non_kv_gib * GIB


def size_pool(inp: VllmInputs, util: float) -> VllmPool:
    """vLLM's KV cache at `util` (its arithmetic; nothing is allocated)."""
    avail = available_kv_bytes(inp.capacity_gib, util, inp.weights_gib + inp.other_gib)
    return pool_from_available(inp, avail, util)


def pool_from_available(inp: VllmInputs, avail: float, util: float) -> VllmPool:
    """Blocks and tokens vLLM makes of `avail` bytes of KV memory."""
    block, per_block, fixed = _blocks(inp)
    num_blocks = max(0, int(avail // per_block)) if avail > 0 else 0
    need = math.ceil(inp.context_len / block) * _attn_groups(inp) + fixed
    concurrency = num_blocks / need
    tokens = int(concurrency * inp.context_len) if inp.state_bytes else num_blocks * block
    failure = None
    if avail <= 0:
        failure = "no available memory for the cache blocks"
    elif num_blocks < need:
        failure = "one request of max_model_len needs more KV cache than is available"
    return VllmPool(util, avail / GIB, num_blocks, block, tokens, concurrency, failure)


def _attn_groups(inp: VllmInputs) -> int:
    if not inp.state_bytes:
        return 1
    return math.ceil(inp.attn_layers / _group_size(inp))


def _group_size(inp: VllmInputs) -> int:
    return max(1, min(inp.attn_layers, inp.state_layers))


def _blocks(inp: VllmInputs) -> tuple[int, float, int]:
    """(tokens per block, bytes per block id, blocks every request needs beyond its tokens)."""
    if not inp.state_bytes:
        return BLOCK, BLOCK * inp.cell_bytes, 0
    attn_page = inp.attn_per_layer_bytes
    state_page = inp.state_bytes / inp.state_layers
    block = BLOCK * math.ceil(state_page / (BLOCK * attn_page))
    g = _group_size(inp)
    state_groups = math.ceil(inp.state_layers / g)
    return block, g * block * attn_page, state_groups * STATE_BLOCKS_PER_GROUP


def fits_goal(inp: VllmInputs, pool: VllmPool) -> bool:
    """True when `concurrency` full-length requests fit in the blocks at once."""
    c = inp.launch.concurrency
    return pool.failure is None and pool.max_concurrency >= c and inp.max_num_seqs >= c


def max_context(inp: VllmInputs, pool: VllmPool) -> int:
    """Largest max_model_len with room for `concurrency` requests (block-exact)."""
    if pool.num_blocks <= 0:
        return 0
    _, _, fixed = _blocks(inp)
    per_req = pool.num_blocks // inp.launch.concurrency - fixed
    if per_req <= 0:
        return 0
    return per_req // _attn_groups(inp) * pool.block_tokens


def min_util(inp: VllmInputs) -> float | None:
    """Smallest utilisation (3 decimals) that meets the goal; None if none below 0.999 does."""
    return smallest_fraction(lambda util: fits_goal(inp, size_pool(inp, util)))


def max_util(inp: VllmInputs) -> float:
    """Largest utilisation the start-up check accepts: free ≥ ceil(capacity · util)."""
    return int(inp.free_gib / inp.capacity_gib * 1000) / 1000
