"""The simulated machine's hidden ground truth: costs an engine pays that no formula tells.

On real hardware these are what the estimator has to learn from logs: the CUDA context,
NCCL buffers, allocator overhead on top of the weights, CUDA-graph memory per captured
batch size, torch.compile's workspace, the activation peak of a prefill chunk. The
simulated servers charge them; nothing outside `autotune.sim` may import this module.

Figures are chosen to sit inside what real measurements show (reference/memory-model.md):
weights "mem usage" = params + 0.06–0.15 GiB; Llama-8B decode graphs bs≤8 ≈ 0.11 GB,
a 9B hybrid's decode graphs ≈ 1.3 GB; baseline usage after dist init ≈ 0.5–1.3 GB.

Durations are real-scale seconds (what a launch costs on a real machine).
"""

from __future__ import annotations

import random
from collections.abc import Mapping

from autotune.modelshape import ModelShape
from autotune.records import GIB, MIB

CUDA_CONTEXT_BYTES = int(0.60 * GIB)
WEIGHT_OVERHEAD_FRACTION = 0.004
WEIGHT_OVERHEAD_BYTES = int(0.09 * GIB)
GRAPH_POOL_BASE_BYTES = 96 * MIB
GRAPH_PER_CAPTURE_BYTES = 2 * MIB
COMPILE_WORKSPACE_BYTES = int(0.40 * GIB)
COMPILE_PER_BS_BYTES = 24 * MIB
ACTIVATION_WORKSPACE_BYTES = 160 * MIB

WEIGHT_LOAD_GIB_PER_S = 1.6
GRAPH_CAPTURE_S_PER_BS = 0.35
PREFILL_GRAPH_S_PER_BUCKET = 0.08
COMPILE_BASE_S = 75.0
COMPILE_S_PER_BS = 12.0
PREFILL_TOKENS_PER_S = 12000.0
DECODE_STEP_S = 0.03


def nccl_bytes(tp: int) -> int:
    """Communicator and all-reduce buffers per rank; none without tensor parallelism."""
    return 0 if tp <= 1 else int((0.40 + 0.12 * tp) * GIB)


def weights_resident_bytes(param_bytes: int) -> int:
    """What loading `param_bytes` of weights really takes (allocator rounding, buffers)."""
    return int(param_bytes * (1 + WEIGHT_OVERHEAD_FRACTION)) + WEIGHT_OVERHEAD_BYTES


def _hybrid_factor(shape: ModelShape) -> float:
    return 1.6 if shape.is_hybrid else 1.0


def decode_graph_bytes(shape: ModelShape, tp: int, batch_sizes: list[int], tokens_per_req: int) -> int:
    """Memory a decode (or verify) CUDA-graph pool keeps for the captured batch sizes."""
    if not batch_sizes:
        return 0
    per_token = shape.hidden_size * 2 * len(shape.layer_kinds) * 8 / max(1, tp) ** 0.5
    peak = max(batch_sizes) * tokens_per_req * per_token * _hybrid_factor(shape)
    return int(GRAPH_POOL_BASE_BYTES + GRAPH_PER_CAPTURE_BYTES * len(batch_sizes) + peak)


def prefill_graph_bytes(shape: ModelShape, tp: int, buckets: list[int]) -> int:
    """The breakable prefill graph (SGLang 0.5.23 default on CUDA): ~6 MiB per token bucket (SGLang's own
    reserve assumes 8), so an upgrade from 0.5.9 costs a few hundred MiB of slack."""
    if not buckets:
        return 0
    return int(32 * MIB + 6 * MIB * len(buckets) + max(buckets) * shape.hidden_size * 2 * 2 / tp)


def draft_graph_bytes(shape: ModelShape, batch_sizes: list[int], topk: int) -> int:
    if not batch_sizes:
        return 0
    return int(48 * MIB + GRAPH_PER_CAPTURE_BYTES * len(batch_sizes) + max(batch_sizes) * topk * shape.hidden_size * 64)


def compile_workspace_bytes(compiled_bs: int) -> int:
    return COMPILE_WORKSPACE_BYTES + COMPILE_PER_BS_BYTES * compiled_bs


def activation_bytes(shape: ModelShape, tp: int, tokens: int) -> int:
    """Peak activation memory of one forward pass over `tokens` tokens (a prefill chunk)."""
    inter = shape.intermediate_size
    per_token = shape.hidden_size * 2 * 16 + inter * 2 * 3 / tp + shape.vocab_size * 4 / max(256, tokens)
    return int(ACTIVATION_WORKSPACE_BYTES + tokens * per_token * _hybrid_factor(shape))


def decode_bytes_per_request(shape: ModelShape, tp: int) -> int:
    """What one running request holds while it decodes, on every rank: its token's activations,
    its fp32 logits over the vocabulary and the sampler's softmax and sorted copies of them.

    Charged from admission to finish, on top of the prefill chunk being computed, so a full
    batch of running requests plus a chunked prefill is the serving peak.
    """
    per_token = shape.hidden_size * 2 * 16 + shape.intermediate_size * 2 * 3 / tp
    return int(per_token * _hybrid_factor(shape) + shape.vocab_size * 4 * 3)


def weight_load_seconds(nbytes: int) -> float:
    return 3.0 + nbytes / GIB / WEIGHT_LOAD_GIB_PER_S


def init_seconds(tp: int) -> float:
    return 2.0 + (1.5 if tp > 1 else 0.0)


# Boot-to-boot variation (both simulated servers): off unless set; certification sets it from the spec.
ENV_BOOT_JITTER = "AUTOTUNE_SIM_BOOT_JITTER_MIB"


def boot_jitter_bytes(env: Mapping[str, str]) -> int:
    """This boot's extra context memory: uniform in [0, AUTOTUNE_SIM_BOOT_JITTER_MIB] MiB, drawn
    afresh per launch (cold boots of real GPUs differ so); 0 when unset."""
    raw = env.get(ENV_BOOT_JITTER, "")
    try:
        mib = float(raw) if raw else 0.0
    except ValueError:
        mib = 0.0
    return int(random.SystemRandom().uniform(0, mib) * MIB) if mib > 0 else 0
