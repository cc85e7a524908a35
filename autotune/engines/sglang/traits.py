"""What differs between SGLang releases, as named facts (engines.md §3-§4, checked against the
real source by `make fidelity`). Pure data: imports only the base layer and `versions`.

A release we have no traits for runs with the nearest older set (`traits_for`).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from autotune.engines.versions import Picked, pick


@dataclass(frozen=True)
class SglangTraits:
    version: str
    # flags and names
    graph_max_bs_flag: str  # --cuda-graph-max-bs (0.5.9) / --cuda-graph-max-bs-decode (0.5.23)
    graph_max_bs_dest: str  # its argparse dest
    graph_bs_dest: str  # the explicit list of decode graph sizes
    disable_graph_flags: tuple[str, ...]  # how to turn CUDA graphs off without a deprecation
    fp4_kv_name: str  # fp4_e2m1 (0.5.9) / nvfp4 (0.5.23)
    kv_dtype_choices: tuple[str, ...]  # what --kv-cache-dtype accepts
    checks_spec_algorithm_name: bool  # 0.5.23 refuses an unknown --speculative-algorithm itself
    # the default mem_fraction_static and graph sizes
    mid_gpu_chunk_and_bs: tuple[int, int, int]  # 20-35 GiB row: (chunk, max_bs tp<4, max_bs tp>=4)
    default_prefill_graphs: bool  # breakable prefill graphs on by default (their buckets reserved)
    decode_bs_includes_max: bool  # the captured decode sizes end with max_bs itself
    graph_reserve_without_graphs: bool  # the decode-graph reserve is counted even with graphs off
    spec_reserve_in_default_fraction: bool  # 2 GiB (EAGLE/NEXTN) or 6 GiB (STANDALONE) off the default
    request_cap_lowers_default_graph_bs: bool  # --max-running-requests caps the default max_bs
    # the memory procedure
    draft_weights_before_pool: bool  # the draft is loaded (and its KV folded in) before the pool
    spec_state_reserved_before_split: bool  # verification states come off before the pool split
    radix_cache_ratio: int  # request slots per running request with the radix cache on
    fails_early_without_slots: bool  # 0.5.23 stops at the pool split; 0.5.9 fails later
    keeps_asked_request_cap: bool  # the request pool is sized by the asked cap, which stays
    padding_slot_from_slack: bool  # slots = budget // per_req; the padding slot comes out of the slack
    checks_swa_pool_fits_request: bool  # a sliding-window pool too small for one request is refused
    # what it logs and serves
    logs_kv_smaller_than_context_warning: bool
    logs_kv_dtype_and_pool_label: bool
    logs_kill_process_tree: bool
    logs_request_cap_reductions: bool  # says why max_running_requests came out lower than asked
    legacy_log_wording: bool  # 0.5.9's wordings ("Init torch distributed", capture begin/end, ...)
    server_info_graph_config: bool  # /server_info has cuda_graph_config (decode/prefill)


TRAITS: dict[str, SglangTraits] = {
    "0.5.9": SglangTraits(
        version="0.5.9", graph_max_bs_flag="--cuda-graph-max-bs", graph_max_bs_dest="cuda_graph_max_bs",
        graph_bs_dest="cuda_graph_bs", disable_graph_flags=("--disable-cuda-graph",), fp4_kv_name="fp4_e2m1",
        kv_dtype_choices=("auto", "fp8_e5m2", "fp8_e4m3", "bf16", "bfloat16", "fp4_e2m1"),
        checks_spec_algorithm_name=False, mid_gpu_chunk_and_bs=(2048, 24, 80), default_prefill_graphs=False,
        decode_bs_includes_max=False, graph_reserve_without_graphs=True, spec_reserve_in_default_fraction=True,
        request_cap_lowers_default_graph_bs=False, draft_weights_before_pool=False,
        spec_state_reserved_before_split=True, radix_cache_ratio=1, fails_early_without_slots=False,
        keeps_asked_request_cap=True, logs_kv_smaller_than_context_warning=False,
        logs_kv_dtype_and_pool_label=False, logs_kill_process_tree=False, server_info_graph_config=False,
        padding_slot_from_slack=True, checks_swa_pool_fits_request=False, logs_request_cap_reductions=False,
        legacy_log_wording=True),
    "0.5.23": SglangTraits(
        version="0.5.23", graph_max_bs_flag="--cuda-graph-max-bs-decode", graph_max_bs_dest="cuda_graph_max_bs_decode",
        graph_bs_dest="cuda_graph_bs_decode",
        disable_graph_flags=("--cuda-graph-backend-decode", "disabled", "--cuda-graph-backend-prefill", "disabled"),
        fp4_kv_name="nvfp4",
        kv_dtype_choices=("auto", "fp8_e5m2", "fp8_e4m3", "mxfp8", "bf16", "bfloat16", "nvfp4", "fp4_mx_block16"),
        checks_spec_algorithm_name=True, mid_gpu_chunk_and_bs=(4096, 48, 160), default_prefill_graphs=True,
        decode_bs_includes_max=True, graph_reserve_without_graphs=False, spec_reserve_in_default_fraction=False,
        request_cap_lowers_default_graph_bs=True, draft_weights_before_pool=True,
        spec_state_reserved_before_split=False, radix_cache_ratio=3, fails_early_without_slots=True,
        keeps_asked_request_cap=False, logs_kv_smaller_than_context_warning=True,
        logs_kv_dtype_and_pool_label=True, logs_kill_process_tree=True, server_info_graph_config=True,
        padding_slot_from_slack=False, checks_swa_pool_fits_request=True, logs_request_cap_reductions=True,
        legacy_log_wording=False),
}


@lru_cache(maxsize=64)  # the estimator asks ~40 times per estimate; TRAITS never changes
def picked(version: str) -> Picked:
    return pick("sglang", version, TRAITS)


def traits_for(version: str) -> SglangTraits:
    """The traits of `version`, or of the nearest older release we know (SpecError if none)."""
    return TRAITS[picked(version).known]
