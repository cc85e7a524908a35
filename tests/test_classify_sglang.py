"""SGLang logs (0.5.23, 0.5.9, 0.4.x formats): outcomes, figures, remedies."""

from __future__ import annotations

import pytest

from autotune.classifier.classify import LogClassifier, classify_text
from autotune.records import FIGURES, Outcome, Phase

TRACEBACK = "Traceback (most recent call last):"
SCHED = '  File "/usr/lib/python3.12/site-packages/sglang/srt/managers/scheduler.py", line 6362, in run_scheduler_process'
LOAD_FRAME = '  File "/usr/lib/python3.12/site-packages/sglang/srt/model_executor/model_runner.py", line 1312, in load_model'
POOL_FRAME = ('  File "/usr/lib/python3.12/site-packages/sglang/srt/mem_cache/kv_cache_configurator.py", line 3050, in '
              "_profile_available_bytes")
SIGQUIT = "[2026-01-01 10:02:00] Received sigquit from a child process. It usually means the child failed."


def tp(rank: int | None, message: str) -> str:
    tag = "" if rank is None else f" TP{rank}"
    return f"[2026-01-01 10:00:00{tag}] {message}"


def oom(tried: str = "2.00 GiB", free: str = "1.02 GiB") -> str:
    return (f"torch.OutOfMemoryError: CUDA out of memory. Tried to allocate {tried}. GPU 0 has a total capacity of "
            f"139.81 GiB of which {free} is free. Including non-PyTorch memory, this process has 138 GiB in use.")


def scheduler_failure(rank: int | None, *lines: str) -> list[str]:
    return [tp(rank, f"Scheduler hit an exception: {TRACEBACK}"), SCHED, *lines]


START_0523 = [
    tp(None, "server_args={'model_path': '/m/Qwen3-32B', 'context_length': 131072, 'mem_fraction_static': 0.85, "
             "'max_running_requests': None, 'chunked_prefill_size': 8192, 'tp_size': 2, 'speculative_algorithm': None}"),
    *(tp(r, "Init parallel begin.") for r in (0, 1)),
    *(tp(r, "Init parallel ends. elapsed=2.91 s") for r in (0, 1)),
    tp(0, "Memory baseline taken. mem usage=0.52 GB"), tp(1, "Memory baseline taken. mem usage=0.53 GB"),
    tp(0, "Load weight begin. avail mem=139.21 GB"), tp(1, "Load weight begin. avail mem=139.10 GB"),
]
WEIGHTS_0523 = [
    tp(0, "Load weight end. elapsed=66.80 s, type=Qwen3ForCausalLM, quant=fp8, fmt=e4m3, avail mem=123.60 GB, "
          "mem usage=15.61 GB."),
    tp(1, "Load weight end. elapsed=66.70 s, type=Qwen3ForCausalLM, quant=fp8, fmt=e4m3, avail mem=123.50 GB, "
          "mem usage=15.60 GB."),
]
POOL_0523 = [
    *(tp(r, "KV Cache is allocated. dtype: torch.bfloat16, #tokens: 841318, K size: 51.35 GB, V size: 51.35 GB")
      for r in (0, 1)),
    tp(0, "Memory pool end. avail mem=20.80 GB"), tp(1, "Memory pool end. avail mem=20.75 GB"),
]
GRAPHS_0523 = [
    *(tp(r, "Capture target prefill CUDA graph begin. backend=breakable, num_tokens=[4, 8], avail mem=20.70 GB")
      for r in (0, 1)),
    *(tp(r, "Capture target prefill CUDA graph end. elapsed=4.64 s, mem usage=0.13 GB, avail mem=20.57 GB.")
      for r in (0, 1)),
    *(tp(r, "Capture target decode CUDA graph begin. backend=full, num_tokens_per_req=1, avail mem=20.57 GB")
      for r in (0, 1)),
    *(tp(r, "Capture target decode CUDA graph end. bs=[1, 2, 4, 8], elapsed=12.60 s, mem usage=0.56 GB, "
            "avail mem=20.01 GB.") for r in (0, 1)),
]
SERVE_0523 = [
    tp(0, "max_total_num_tokens=841318, chunked_prefill_size=8192, max_prefill_tokens=16384, "
          "max_running_requests=3286, context_len=131072, available_gpu_mem=20.01 GB"),
    "INFO:     Started server process [4242]", "INFO:     Waiting for application startup.",
    "INFO:     Application startup complete.",
    "INFO:     Uvicorn running on http://127.0.0.1:30000 (Press CTRL+C to quit)",
    'INFO:     127.0.0.1:57948 - "GET /model_info HTTP/1.1" 200 OK',
    tp(0, "Prefill batch, #new-seq: 1, #new-token: 7, #cached-token: 0, token usage: 0.00, #running-req: 0, "
          "#queue-req: 0, #pending-token: 0, cuda graph: True, input throughput (token/s): 0.00"),
]
FIRED_UP = tp(None, "The server is fired up and ready to roll!")
READY_0523 = [*START_0523, *WEIGHTS_0523, *POOL_0523, *GRAPHS_0523, *SERVE_0523, FIRED_UP]


def classify(lines: list[str], exit_code: int | None = None) -> LogClassifier:
    clf = LogClassifier("sglang")
    for line in lines:
        clf.feed(line)
    return clf


def test_ready_0523_with_figures() -> None:
    got = classify(READY_0523).classification()
    assert (got.outcome, got.phase, got.confidence) == (Outcome.READY, Phase.READY, "high")
    f = got.figures
    assert f["avail_before_weights_gib"] == 139.10  # min over ranks
    assert f["weights_gib"] == 15.61 and f["weights_load_s"] == 66.80
    assert f["avail_after_weights_gib"] == 123.50
    assert f["kv_tokens"] == 841318 and f["kv_gib"] == pytest.approx(102.70)
    assert f["kv_cell_bytes"] == round(102.70 * 2**30 / 841318)
    assert f["pool_end_avail_gib"] == 20.75
    assert f["graph_gib"] == pytest.approx(0.69) and f["graph_s"] == pytest.approx(17.24)  # per rank, not doubled
    assert f["init_mem_usage_gib"] == 0.53 and f["mem_fraction_static"] == 0.85
    assert (f["max_running_requests"], f["context_len"], f["chunked_prefill_size"]) == (3286, 131072, 8192)
    assert f["available_gpu_mem_gib"] == 20.01
    assert set(f) <= set(FIGURES)
    assert "mfs_direction" not in f


def test_uvicorn_is_not_ready_for_sglang() -> None:
    clf = classify(READY_0523[:-1])
    assert not clf.ready_seen and not clf.decisive
    assert clf.classification().outcome is None  # live: warm-up still runs
    whole = classify_text("\n".join(READY_0523[:-1]), "sglang")  # a finished excerpt: a guess
    assert (whole.outcome, whole.confidence, whole.phase) == (Outcome.READY, "low", Phase.WARMUP)
    assert classify(READY_0523).ready_seen


def test_kv_pool_shorter_than_context_is_surfaced() -> None:
    warning = tp(0, "KV pool holds 30000 tokens, fewer than --context-length 131072. One full-length request cannot "
                    "fit, so long requests will be refused or truncated at serving time.")
    got = classify([*READY_0523[:-1], warning, FIRED_UP]).classification()
    assert got.outcome is Outcome.READY
    assert got.figures["kv_short_of_context_tokens"] == 131072 - 30000
    assert any("KV pool holds 30000 tokens" in line for line in got.evidence)


def test_weights_oom_0523() -> None:
    lines = [*START_0523, *scheduler_failure(1, LOAD_FRAME, oom("4.13 GiB", "2.66 GiB")), SIGQUIT]
    got = classify(lines).classification(-9)
    assert (got.outcome, got.phase) == (Outcome.OOM_WEIGHTS, Phase.WEIGHTS)
    assert got.figures["mfs_direction"] == 0
    assert got.figures["oom_tried_gib"] == 4.13 and got.figures["oom_free_gib"] == 2.66
    assert "--tp-size" in got.remedy and "139.1 GiB" in got.remedy
    assert any("CUDA out of memory" in line for line in got.evidence)
    assert any("Load weight begin" in line for line in got.evidence)


def test_weights_leave_no_kv_room_0523() -> None:
    error = ("ValueError: Loaded weights leave no GPU memory for the KV cache under --mem-fraction-static=0.3. Raise "
             "--mem-fraction-static above 0.412 (minimum viable = 1 - available/pre = 0.4113). If using speculative "
             "decoding, draft weights are now counted.")
    got = classify([*START_0523, *WEIGHTS_0523, *scheduler_failure(0, error), SIGQUIT]).classification(-9)
    assert (got.outcome, got.phase) == (Outcome.OOM_KV_POOL, Phase.KV_POOL)
    assert got.figures["mfs_direction"] == 1
    assert got.figures["min_mem_fraction_static"] == 0.412 and got.figures["mem_fraction_static"] == 0.3
    assert "raise --mem-fraction-static above 0.412" in got.remedy


def test_oom_inside_pool_allocation_means_lower_the_fraction() -> None:
    lines = [*START_0523, *WEIGHTS_0523, *scheduler_failure(0, POOL_FRAME, oom("0.31 GiB", "0.11 GiB")), SIGQUIT]
    got = classify(lines).classification(-9)
    assert (got.outcome, got.phase, got.figures["mfs_direction"]) == (Outcome.OOM_KV_POOL, Phase.KV_POOL, -1)
    assert got.remedy.startswith("lower --mem-fraction-static (now 0.85)")


def test_graph_capture_oom_0523() -> None:
    failed = ("Exception: Capture cuda graph failed: CUDA out of memory. Tried to allocate 0.03 GiB. GPU 0 has a "
              "total capacity of 48.00 GiB of which 0.02 GiB is free.")
    lines = [*START_0523, *WEIGHTS_0523, *POOL_0523, *GRAPHS_0523[:2], *scheduler_failure(0, failed),
             "Possible solutions:", "1. set --mem-fraction-static to a smaller value (e.g., 0.8 or 0.7)", SIGQUIT]
    got = classify(lines).classification(-9)
    assert (got.outcome, got.phase, got.figures["mfs_direction"]) == (Outcome.OOM_CUDA_GRAPH, Phase.CUDA_GRAPH, -1)
    assert "--cuda-graph-max-bs-decode" in got.remedy and "torch.compile" in got.remedy
    assert got.figures["oom_tried_gib"] == 0.03


def test_breakable_prefill_graph_failure_after_an_oom_line() -> None:
    lines = [*START_0523, *WEIGHTS_0523, *POOL_0523, GRAPHS_0523[0],
             tp(0, "OutOfMemoryError: CUDA out of memory. Tried to allocate 512.00 MiB."),
             "Fail when using backend: breakable for prefill runner.", "Possible suggestions:"]
    got = classify(lines).classification()
    assert (got.outcome, got.figures["mfs_direction"]) == (Outcome.OOM_CUDA_GRAPH, -1)


def test_graph_capture_failure_without_oom_is_not_about_memory() -> None:
    text = ("Exception: Capture cuda graph failed: RuntimeError: Cannot call CUDAGeneratorImpl::current_seed during "
            "CUDA graph capture.")
    got = classify_text(text, "sglang")
    # The label convention (DESIGN): a capture-time failure that is not memory is a CRASH.
    assert (got.outcome, got.figures["mfs_direction"]) == (Outcome.CRASH, 0)
    assert "lowering memory will not help" in got.remedy


def test_runtime_oom_during_warmup() -> None:
    frames = ['  File "/sglang/srt/managers/scheduler.py", line 1466, in event_loop_overlap', oom("1.50 GiB")]
    lines = [*READY_0523[:-2], *scheduler_failure(0, *frames),
             tp(None, "SIGQUIT received. signum=3, frame=None. It usually means one child failed.")]
    got = classify(lines).classification(-9)
    assert (got.outcome, got.phase, got.figures["mfs_direction"]) == (Outcome.OOM_RUNTIME, Phase.WARMUP, -1)


def test_oom_after_ready_is_runtime() -> None:
    lines = [*READY_0523, *scheduler_failure(0, oom()), tp(None, "SIGQUIT received. signum=3, frame=None.")]
    clf = classify(lines)
    assert clf.ready_seen and clf.decisive
    assert clf.classification(-9).outcome is Outcome.OOM_RUNTIME


def test_request_errors_after_ready_are_not_crashes() -> None:
    lines = [*READY_0523, "ValueError: The input (140000 tokens) is longer than the model's context length (131072)."]
    clf = classify(lines)
    assert not clf.decisive
    assert clf.classification(-15).outcome is Outcome.READY


def test_memory_capacity_unbalanced_is_gpu_busy() -> None:
    error = ("RuntimeError: The memory capacity is unbalanced. Some GPUs may be occupied by other processes. "
             "pre_model_load_memory=40.1, local_gpu_memory=139.2, local_gpu_memory * 0.9=125.3")
    got = classify([*START_0523[:5], *scheduler_failure(1, error), SIGQUIT]).classification(-9)
    assert (got.outcome, got.figures["mfs_direction"]) == (Outcome.GPU_BUSY, 0)
    assert "says nothing about the config" in got.remedy


def test_oom_before_weights_means_a_busy_gpu() -> None:
    got = classify([*START_0523[:5], *scheduler_failure(0, oom()), SIGQUIT]).classification(-9)
    assert (got.outcome, got.phase) == (Outcome.GPU_BUSY, Phase.INIT)


@pytest.mark.parametrize(("text", "exit_code", "needle"), [
    ("usage: sglang serve [-h] --model-path MODEL_PATH\nsglang serve: error: ambiguous option: --cuda-graph-max-bs "
     "could match --cuda-graph-max-bs-decode, --cuda-graph-max-bs-prefill", 2, "ambiguous option"),
    ("launch_server.py: error: unrecognized arguments: --reasoning_parser kimi_k2", 2, "unrecognized arguments"),
    ("error: argument --kv-cache-dtype: invalid choice: 'fp8' (choose from 'auto', 'fp8_e5m2')", 2, "invalid choice"),
    ("Traceback (most recent call last):\nValueError: User-specified context_length (1000000) is greater than the "
     "derived context_length (40960). This may lead to incorrect model outputs or CUDA errors.", 1, "at most 40960"),
    ("ValueError: Model architectures ['FooForCausalLM'] are not supported for now.", 1, "architecture"),
])
def test_config_errors(text: str, exit_code: int, needle: str) -> None:
    got = classify_text(text, "sglang", exit_code)
    assert got.outcome is Outcome.CONFIG_ERROR
    assert needle in got.remedy + " ".join(got.evidence)


def test_a_context_warning_of_old_versions_is_not_an_error() -> None:
    warning = tp(None, "Warning: User-specified context_length (262144) is greater than the derived context_length "
                       "(131072). This may lead to incorrect model outputs or CUDA errors.")
    clf = classify([warning, *READY_0523])
    assert clf.classification().outcome is Outcome.READY


def test_import_error_makes_unsupported_architecture_a_crash() -> None:
    lines = [tp(6, "Ignore import error when loading sglang.srt.models.deepseek_v2. Command '['/usr/bin/gcc']' "
                   "returned non-zero exit status 1."),
             *scheduler_failure(1, "ValueError: Model architectures ['DeepseekV3ForCausalLM'] are not supported for now.")]
    got = classify(lines).classification(-9)
    assert got.outcome is Outcome.CRASH and "environment" in got.remedy


def test_port_in_use_is_a_crash_naming_the_port() -> None:
    lines = [*READY_0523[:-3], "ERROR:    [Errno 98] error while attempting to bind on address ('127.0.0.1', 30000): "
             "address already in use", "INFO:     Waiting for application shutdown."]
    got = classify(lines).classification(3)
    assert got.outcome is Outcome.CRASH
    assert "port" in got.remedy and "30000" in got.remedy


def test_host_oom_killer() -> None:
    text = ("RuntimeError: Rank 0 scheduler died during initialization (exit code: -9). If exit code is -9 (SIGKILL), "
            "a common cause is the OS OOM killer. Run `dmesg -T | grep -i oom` to check.")
    got = classify([*START_0523, text]).classification(1)
    assert (got.outcome, got.confidence) == (Outcome.CRASH, "high")
    assert "host OOM killer" in got.remedy


@pytest.mark.parametrize(("lines", "exit_code", "needle"), [
    ([*START_0523, *scheduler_failure(0, "RuntimeError: CUDA error: an illegal memory access was encountered"),
      SIGQUIT], -9, "illegal memory access"),
    ([*START_0523, *scheduler_failure(0, "RuntimeError: NCCL error: unhandled system error"), SIGQUIT], -9, "NCCL"),
    (START_0523, 0, "status 0"),
    (START_0523, -9, "SIGKILL"),
    ([*START_0523, *scheduler_failure(0, "NameError: name 'sgl_build_tree_kernel' is not defined"), SIGQUIT], -9,
     "NameError"),
])
def test_crashes(lines: list[str], exit_code: int, needle: str) -> None:
    got = classify(lines).classification(exit_code)
    assert got.outcome is Outcome.CRASH
    assert needle in got.remedy
    assert got.figures["mfs_direction"] == 0


def test_generic_lines_alone_decide_a_crash_of_unknown_cause() -> None:
    clf = classify([*START_0523, SIGQUIT])
    assert clf.decisive
    got = clf.classification(-9)
    assert (got.outcome, got.confidence) == (Outcome.CRASH, "low")


def test_the_cause_may_come_just_below_the_generic_line() -> None:
    lines = [*START_0523, SIGQUIT, *scheduler_failure(3, LOAD_FRAME, oom())]
    assert classify(lines).classification(-9).outcome is Outcome.OOM_WEIGHTS


# -- SGLang 0.5.9 ---------------------------------------------------------------------------

START_059 = [
    tp(None, "server_args=ServerArgs(model_path='/m/Qwen3.6-27B', context_length=262144, mem_fraction_static=0.85, "
             "max_running_requests=48, tp_size=2, speculative_algorithm='EAGLE')"),
    tp(None, "Max running requests is reset to 48 for speculative decoding. You can override this by explicitly "
             "setting --max-running-requests."),
    *(tp(r, "Init torch distributed begin.") for r in (0, 1)),
    *(tp(r, "Init torch distributed ends. elapsed=3.50 s, mem usage=1.24 GB") for r in (0, 1)),
    *(tp(r, "Load weight begin. avail mem=46.76 GB") for r in (0, 1)),
    *(tp(r, "Load weight end. elapsed=19.19 s, type=Qwen3_5ForConditionalGeneration, dtype=torch.bfloat16, "
            "avail mem=20.66 GB, mem usage=26.10 GB.") for r in (0, 1)),
]
POOL_059 = [
    *(tp(r, "Mamba Cache is allocated. max_mamba_cache_size: 177, conv_state size: 0.24GB, ssm_state size: 12.52GB "
            "intermediate_ssm_state_cache size: 1.76GB intermediate_conv_window_cache size: 0.00GB ") for r in (0, 1)),
    *(tp(r, "KV Cache is allocated. #tokens: 46930, K size: 0.72 GB, V size: 0.72 GB") for r in (0, 1)),
    *(tp(r, "Memory pool end. avail mem=3.90 GB") for r in (0, 1)),
    *(tp(r, "Capture cuda graph begin. This can take up to several minutes. avail mem=3.90 GB") for r in (0, 1)),
    *(tp(r, "Capture cuda graph bs [1, 2, 4, 8, 16, 24, 32, 40, 48]") for r in (0, 1)),
    *(tp(r, "Capture cuda graph end. Time elapsed: 8.05 s. mem usage=1.20 GB. avail mem=2.70 GB.") for r in (0, 1)),
]
DRAFT_059 = [
    *(tp(r, "Load weight begin. avail mem=2.70 GB") for r in (0, 1)),
    *(tp(r, "Load weight end. elapsed=4.73 s, type=Qwen3_5ForCausalLMMTP, dtype=torch.bfloat16, avail mem=1.84 GB, "
            "mem usage=0.86 GB.") for r in (0, 1)),
]


def test_0_5_9_hybrid_speculative_not_enough_memory() -> None:
    error = ("RuntimeError: Not enough memory. Please try to increase --mem-fraction-static. Current value: "
             "self.server_args.mem_fraction_static=0.85")
    got = classify([*START_059, *scheduler_failure(0, error), SIGQUIT]).classification(-9)
    assert (got.outcome, got.phase) == (Outcome.OOM_KV_POOL, Phase.KV_POOL)
    assert got.figures["mem_fraction_static"] == 0.85
    assert "--max-running-requests" in got.remedy and "--speculative-num-draft-tokens" in got.remedy
    assert "far more than raising --mem-fraction-static" in got.remedy


def test_0_5_9_plain_not_enough_memory_says_raise() -> None:
    error = ("RuntimeError: Not enough memory. Please try to increase --mem-fraction-static. Current value: "
             "self.server_args.mem_fraction_static=0.2")
    got = classify_text(error, "sglang")
    assert (got.outcome, got.figures["mfs_direction"]) == (Outcome.OOM_KV_POOL, 1)
    assert got.remedy.startswith("raise --mem-fraction-static (now 0.2)")


def test_0_5_9_figures_with_a_late_draft() -> None:
    lines = [*START_059, *POOL_059, *DRAFT_059,
             *(tp(r, "KV Cache is allocated. #tokens: 46930, K size: 0.05 GB, V size: 0.05 GB") for r in (0, 1)),
             *(tp(r, "Memory pool end. avail mem=1.74 GB") for r in (0, 1)),
             tp(0, "max_total_num_tokens=46930, chunked_prefill_size=4096, max_prefill_tokens=16384, "
                   "max_running_requests=48, context_len=262144, available_gpu_mem=1.60 GB"), FIRED_UP]
    f = classify(lines).classification().figures
    assert f["weights_gib"] == 26.10 and f["draft_weights_gib"] == 0.86
    assert f["avail_after_weights_gib"] == 20.66  # the late draft does not shrink the KV budget
    assert f["kv_gib"] == pytest.approx(1.44) and f["kv_tokens"] == 46930  # the target pool only
    assert f["mamba_slots"] == 177 and f["mamba_gib"] == pytest.approx(14.52)
    assert f["pool_end_avail_gib"] == 3.90 and f["graph_gib"] == 1.20 and f["graph_s"] == 8.05
    assert f["init_mem_usage_gib"] == 1.24


def test_0_5_9_draft_oom_after_the_target_pool_means_lower_the_fraction() -> None:
    lines = [*START_059, *POOL_059, *DRAFT_059[:2], *scheduler_failure(0, LOAD_FRAME, oom()), SIGQUIT]
    got = classify(lines).classification(-9)
    assert (got.outcome, got.figures["mfs_direction"]) == (Outcome.OOM_KV_POOL, -1)
    assert "draft" in got.remedy and got.remedy.startswith("lower --mem-fraction-static")


def test_0_5_9_graph_oom_names_the_old_flag() -> None:
    failed = "Exception: Capture cuda graph failed: CUDA out of memory. Tried to allocate 448.00 MiB."
    got = classify([*START_059, *POOL_059[:8], *scheduler_failure(0, failed)]).classification(-9)
    assert got.outcome is Outcome.OOM_CUDA_GRAPH
    assert "--cuda-graph-max-bs," in got.remedy and got.figures["oom_tried_gib"] == pytest.approx(0.4375)


def test_0_5_23_speculative_draft_figures() -> None:
    draft = [*(tp(r, "Load weight begin. avail mem=123.50 GB") for r in (0, 1)),
             *(tp(r, "Load weight end. elapsed=5.00 s, type=Qwen3ForCausalLMMTP, avail mem=121.40 GB, "
                     "mem usage=2.10 GB.") for r in (0, 1))]
    draft_pool = [*(tp(r, "KV Cache is allocated. dtype: torch.bfloat16, #tokens: 841318, K size: 1.60 GB, V size: "
                          "1.60 GB") for r in (0, 1)), *(tp(r, "Memory pool end. avail mem=17.50 GB") for r in (0, 1))]
    lines = [*START_0523, *WEIGHTS_0523, *draft, *POOL_0523, *draft_pool]
    f = classify(lines).classification().figures
    assert f["weights_gib"] == 15.61 and f["draft_weights_gib"] == 2.10
    assert f["avail_after_weights_gib"] == 121.40 and f["kv_gib"] == pytest.approx(102.70)
    assert f["pool_end_avail_gib"] == 20.75


def test_0_5_23_hybrid_state_pool_too_small() -> None:
    error = ("RuntimeError: Not enough GPU memory for hybrid (mamba/linear-attention) state cache. Computed "
             "max_mamba_cache_size=0 (total_rest_memory=0.10 GB, mamba_cache_per_req=77.30 MB). Try: (1) reduce "
             "--max-running-requests, (2) increase --mem-fraction-static")
    got = classify_text(error, "sglang")
    assert (got.outcome, got.figures["mfs_direction"]) == (Outcome.OOM_KV_POOL, 1)
    assert "--max-running-requests" in got.remedy


def test_0_4_format() -> None:
    lines = ["[2025-06-01 10:00:00 TP0] Init torch distributed ends. mem usage=0.52 GB",
             "[2025-06-01 10:00:00 TP0] Load weight begin. avail mem=78.50 GB",
             "[2025-06-01 10:00:30 TP0] Load weight end. type=LlamaForCausalLM, dtype=torch.bfloat16, avail mem=63.40 "
             "GB, mem usage=15.10 GB.",
             "[2025-06-01 10:00:31 TP0] Use Sliding window memory pool. full_layer_tokens=100, swa_layer_tokens=80",
             "[2025-06-01 10:00:31 TP0] KV Cache is allocated. #tokens: 402000, K size: 24.53 GB, V size: 24.53 GB",
             "[2025-06-01 10:00:31 TP0] Memory pool end. avail mem=14.30 GB", FIRED_UP]
    got = classify(lines).classification()
    assert got.outcome is Outcome.READY
    assert (got.figures["weights_gib"], got.figures["kv_tokens"], got.figures["init_mem_usage_gib"]) == \
        (15.10, 402000, 0.52)


def _refused(arch: str, *failed: str) -> LogClassifier:
    imports = [tp(None, f"Ignore import error when loading sglang.srt.models.{module}: {why}") for module, why in failed]
    return classify([*imports, *scheduler_failure(0, f"ValueError: Model architectures ['{arch}'] are not supported "
                                                     "for now.")])


def test_an_architecture_refused_is_a_broken_environment_only_where_its_own_module_failed_to_import() -> None:
    """A healthy install logs several import errors (optional libraries, kernels this device lacks: every SGLang start
    on a CPU, tests/data/launch-census). The refusal is the environment's only where the failed module is the model's."""
    unrelated = (("glm_ocr", "No module named 'transformers.models.glm_ocr'"),
                 ("grok", "'_OpNamespace' 'sgl_kernel' object has no attribute 'fused_moe_router_cpu'"))
    assert _refused("NoSuchModelForCausalLM", *unrelated).classification(-9).outcome is Outcome.CONFIG_ERROR
    own = ("qwen3_next", "cannot import name 'fused_gdn_gating' from 'sgl_kernel'")
    assert _refused("Qwen3NextForCausalLM", *unrelated, own).classification(-9).outcome is Outcome.CRASH
    # the device lacks what the module needs: a model this device does not run, not a broken install
    amx = ("nemotron_h", "CPU requires AMX support for hybrid linear attn backend")
    assert _refused("NemotronHForCausalLM", amx).classification(-9).outcome is Outcome.CONFIG_ERROR


@pytest.mark.parametrize(("message", "knob"), [
    ("ValueError: CPU FP8 KV cache requires Intel AMX support.", "--kv-cache-dtype auto"),
    ("AssertionError: Fp8LinearMethod on CPU requires that CPU has AMX support", "no --quantization"),
    ("ValueError: Ngram speculative decoding only supports CUDA device.", "no --speculative-algorithm"),
])
def test_a_setting_that_needs_what_the_device_lacks_names_the_knob(message: str, knob: str) -> None:
    got = classify(scheduler_failure(0, message)).classification(-9)
    assert got.outcome is Outcome.CONFIG_ERROR and knob in got.remedy, got.remedy


def test_a_triton_kernel_without_a_driver_is_the_setting_that_brought_it_where_one_did() -> None:
    no_driver = "RuntimeError: 0 active drivers ([]). There should only be one."
    args = "server_args=ServerArgs(model_path='/m', quantization={q}, kv_cache_dtype='{kv}', speculative_algorithm=None)"
    for quant, kv, outcome in (("'fp8'", "auto", Outcome.CONFIG_ERROR), ("None", "fp8_e4m3", Outcome.CONFIG_ERROR),
                               ("None", "auto", Outcome.CRASH)):
        got = classify([tp(None, args.format(q=quant, kv=kv)), *scheduler_failure(0, no_driver)]).classification(-9)
        assert got.outcome is outcome, (quant, kv, got.remedy)


def test_no_request_slot_is_the_flag_where_it_asked_for_none_else_the_pool() -> None:
    zero = "AssertionError: max_running_request is zero"
    for asked, outcome in (("0", Outcome.CONFIG_ERROR), ("None", Outcome.OOM_KV_POOL)):
        args = tp(None, f"server_args=ServerArgs(model_path='/m', max_running_requests={asked}, chunked_prefill_size=8192)")
        got = classify([args, *scheduler_failure(0, zero)]).classification(-9)
        assert got.outcome is outcome, got
        assert got.figures["mfs_direction"] == (0 if outcome is Outcome.CONFIG_ERROR else 1)


def test_a_query_the_warm_up_answers_is_not_a_server_at_work() -> None:
    """SGLang's HTTP server is up before its warm-up: the launcher's own GET /model_info answered then is no sign that
    the server serves, and a refused setting read after it still decides the launch (tests/data/launch-census)."""
    lines = [tp(None, "INFO:     Uvicorn running on http://127.0.0.1:30000 (Press CTRL+C to quit)"),
             tp(None, 'INFO:     127.0.0.1:41876 - "GET /model_info HTTP/1.1" 200 OK'),
             *scheduler_failure(0, 'NotImplementedError: "index_cpu" not implemented for \'Float8_e4m3fn\'')]
    clf = classify(lines)
    assert not clf.serving_seen and clf.classification(-9).outcome is Outcome.CONFIG_ERROR
