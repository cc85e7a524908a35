"""vLLM logs (0.33 V1 and older forms): outcomes, figures, remedies."""

from __future__ import annotations

import pytest

from autotune.classifier.classify import LogClassifier, classify_text
from autotune.records import FIGURES, Outcome, Phase


def core(message: str, level: str = "INFO") -> str:
    return f"(EngineCore pid=4242) {level} 01-01 10:01:10 [core.py:100] {message}"


def api(message: str, level: str = "INFO") -> str:
    return f"(APIServer pid=4200) {level} 01-01 10:01:53 [api_server.py:1] {message}"


START = [
    api("non-default args: {'model_tag': 'Qwen/Qwen3-8B', 'max_model_len': 32768, 'gpu_memory_utilization': 0.9}"),
    core("Initializing a V1 LLM engine (v0.33.0) with config: model='Qwen/Qwen3-8B'"),
    core("Starting to load model Qwen/Qwen3-8B..."),
]
LOADED = [core("Model loading took 15.27 GiB memory and 30.123456 seconds")]
KV = [
    core("Available KV cache memory: 105.4 GiB"),
    core("GPU KV cache size: 1,234,560 tokens, Maximum concurrency for 32,768 tokens per request: 37.68x"),
]
GRAPHS = [
    core("Capturing CUDA graphs (mixed prefill-decode, PIECEWISE): 100%|##########| 67/67"),
    core("Graph capturing finished in 12 secs, took 0.55 GiB"),
    core("init engine (profile, create kv cache, warmup model) took 45.10 s"),
]
SERVING = [api("Starting vLLM server on http://0.0.0.0:8000"), api("Available routes are:")]
READY = [*START, *LOADED, *KV, *GRAPHS, *SERVING, "(APIServer pid=4200) INFO:     Application startup complete."]
OOM = ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 232.00 MiB. GPU 0 has a total capacity of "
       "23.57 GiB of which 154.25 MiB is free.")
ENGINE_FAILED = api("RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): "
                    "{'EngineCore_DP0': 1}", "ERROR")


def classify(lines: list[str]) -> LogClassifier:
    clf = LogClassifier("vllm")
    for line in lines:
        clf.feed(line)
    return clf


def test_ready_with_figures() -> None:
    got = classify(READY).classification()
    assert (got.outcome, got.phase, got.confidence) == (Outcome.READY, Phase.READY, "high")
    f = got.figures
    assert f["weights_gib"] == 15.27 and f["weights_load_s"] == pytest.approx(30.123456)
    assert f["kv_avail_gib"] == 105.4 and f["kv_tokens"] == 1_234_560 and f["context_len"] == 32768
    assert f["graph_gib"] == 0.55 and f["graph_s"] == 12 and f["gpu_memory_utilization"] == 0.9
    assert set(f) <= set(FIGURES)


def test_server_started_but_not_yet_ready() -> None:
    lines = READY[:-1]
    assert classify(lines).classification().outcome is None
    assert not classify(lines).ready_seen
    got = classify_text("\n".join(lines), "vllm")
    assert (got.outcome, got.confidence) == (Outcome.READY, "low")


@pytest.mark.parametrize(("message", "needle"), [
    ("ValueError: No available memory for the cache blocks. Try increasing `gpu_memory_utilization` when "
     "initializing the engine.", "raise --gpu-memory-utilization (now 0.9)"),
    ("ValueError: To serve at least one request with the models's max seq len (262144), (24.0 GiB KV cache is needed, "
     "which is larger than the available KV cache memory (3.18 GiB). Based on the available memory, the estimated "
     "maximum model length is 34736. Try increasing `gpu_memory_utilization`", "--max-model-len to about 34736"),
    ("ValueError: Cannot auto-fit max_model_len: not enough GPU memory available to serve even a single token.",
     "raise --gpu-memory-utilization"),
    ("Available KV cache memory: -19.92 GiB", "raise --gpu-memory-utilization"),
])
def test_kv_budget_errors_mean_raise_the_utilisation(message: str, needle: str) -> None:
    got = classify([*START, *LOADED, core(message, "ERROR"), ENGINE_FAILED]).classification(1)
    assert (got.outcome, got.phase, got.figures["mfs_direction"]) == (Outcome.OOM_KV_POOL, Phase.KV_POOL, 1)
    assert needle in got.remedy


def test_v0_negative_kv_budget_and_figures() -> None:
    text = "\n".join([
        "INFO 02-26 09:54:02 model_runner.py:1115] Loading model weights took 5.2032 GB",
        "INFO 02-26 09:54:05 worker.py:267] the current vLLM instance can use total_gpu_memory (8.00GiB) x "
        "gpu_memory_utilization (0.70) = 5.60GiB",
        "INFO 02-26 09:54:05 worker.py:267] model weights take 5.20GiB; non_torch_memory takes 0.03GiB; PyTorch "
        "activation peak memory takes 1.42GiB; the rest of the memory reserved for KV Cache is -1.05GiB.",
        "INFO 02-26 09:54:05 executor_base.py:111] # cuda blocks: 0, # CPU blocks: 4681",
    ])
    got = classify_text(text, "vllm")
    assert got.outcome is Outcome.OOM_KV_POOL
    assert (got.figures["weights_gib"], got.figures["kv_avail_gib"], got.figures["gpu_memory_utilization"]) == \
        (5.2032, -1.05, 0.70)


def test_free_memory_below_utilisation_is_gpu_busy() -> None:
    error = ("ValueError: Free memory on device cuda:0 (22.35/23.56 GiB) on startup is less than desired GPU memory "
             "utilization (0.95, 22.38 GiB). Decrease GPU memory utilization or reduce GPU memory used by other processes.")
    got = classify([*START, core(error, "ERROR"), ENGINE_FAILED]).classification(1)
    assert (got.outcome, got.figures["mfs_direction"]) == (Outcome.GPU_BUSY, 0)
    assert got.figures["gpu_memory_utilization"] == 0.95 and "22.35 of 23.56 GiB" in got.remedy


def test_weights_oom() -> None:
    error = ("Failed to load model - not enough GPU memory. Try lowering --gpu-memory-utilization to free memory for "
             "weights, increasing --tensor-parallel-size, or using --quantization. (original error: CUDA out of memory."
             " Tried to allocate 1.00 GiB)")
    got = classify([*START, core(error, "ERROR"), ENGINE_FAILED]).classification(1)
    assert (got.outcome, got.figures["mfs_direction"]) == (Outcome.OOM_WEIGHTS, 0)
    assert "--tensor-parallel-size" in got.remedy
    got = classify([*START, core(OOM, "ERROR"), ENGINE_FAILED]).classification(1)
    assert (got.outcome, got.phase) == (Outcome.OOM_WEIGHTS, Phase.WEIGHTS)


def test_profile_oom_means_lower_the_utilisation() -> None:
    got = classify([*START, *LOADED, core(OOM, "ERROR"), ENGINE_FAILED]).classification(1)
    assert (got.outcome, got.figures["mfs_direction"]) == (Outcome.OOM_KV_POOL, -1)
    assert got.remedy.startswith("lower --gpu-memory-utilization (now 0.9)")


def test_graph_capture_oom() -> None:
    lines = [*START, *LOADED, *KV, GRAPHS[0], core("RuntimeError: CUDA error: out of memory", "ERROR"), ENGINE_FAILED]
    got = classify(lines).classification(1)
    assert (got.outcome, got.phase, got.figures["mfs_direction"]) == (Outcome.OOM_CUDA_GRAPH, Phase.CUDA_GRAPH, -1)
    assert "--enforce-eager" in got.remedy


def test_sampler_warmup_oom_is_runtime() -> None:
    error = ("RuntimeError: CUDA out of memory occurred when warming up sampler with 1024 dummy requests. Please try "
             "lowering `max_num_seqs` or `gpu_memory_utilization` when initializing the engine.")
    got = classify([*START, *LOADED, *KV, *GRAPHS[:2], core(OOM, "ERROR"), core(error, "ERROR")]).classification(1)
    assert (got.outcome, got.figures["mfs_direction"]) == (Outcome.OOM_RUNTIME, -1)
    assert "--max-num-seqs" in got.remedy


def test_oom_while_serving() -> None:
    busy = '  File "/usr/lib/python3.12/site-packages/vllm/v1/engine/core.py", line 1170, in run_busy_loop'
    lines = [*READY, core("Traceback (most recent call last):", "ERROR"), core(busy, "ERROR"), core(OOM, "ERROR"),
             api("vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue.", "ERROR")]
    got = classify(lines).classification(1)
    assert (got.outcome, got.phase) == (Outcome.OOM_RUNTIME, Phase.READY)


@pytest.mark.parametrize(("message", "needle"), [
    ("ValueError: User-specified max_model_len (262144) is greater than the derived max_model_len "
     "(max_position_embeddings=131072 or model_max_length=None in model's config.json).", "at most 131072"),
    ("ValueError: Bfloat16 is only supported on GPUs with compute capability of at least 8.0. Your Tesla T4 GPU has "
     "compute capability 7.5.", "--dtype half"),
    ("ValueError: Hybrid KV cache manager is disabled but failed to convert the KV cache specs to one unified type.",
     "hybrid KV cache manager"),
    ("vllm serve: error: argument --max-model-len: invalid human_readable_int_or_auto value: 'x'", "argument"),
])
def test_config_errors(message: str, needle: str) -> None:
    got = classify([*START, core(message, "ERROR"), ENGINE_FAILED]).classification(1)
    assert got.outcome is Outcome.CONFIG_ERROR
    assert needle in got.remedy


def test_worker_killed_by_the_host_oom_killer() -> None:
    lines = [*START, "Worker proc VllmWorker-1 died unexpectedly (exit code: -9), shutting down executor."]
    got = classify(lines).classification(1)
    assert (got.outcome, got.confidence) == (Outcome.CRASH, "high")
    assert "host OOM killer" in got.remedy


def test_a_failed_engine_alone_is_a_crash_of_unknown_cause() -> None:
    clf = classify([*START, core("EngineCore failed to start.", "ERROR"), ENGINE_FAILED])
    assert clf.decisive
    got = clf.classification(1)
    assert (got.outcome, got.confidence) == (Outcome.CRASH, "low")


def test_interleaved_workers_keep_their_own_tracebacks() -> None:
    def worker(rank: int, text: str) -> str:
        return f"(VllmWorker TP{rank} pid={100 + rank}) ERROR 06-05 06:18:13 [multiproc_executor.py:470] {text}"
    lines = [  # an excerpt without progress lines: only each worker's own frames place its error
        worker(0, "Traceback (most recent call last):"),
        worker(1, "Traceback (most recent call last):"),
        worker(0, '  File "/torch/cuda/graphs.py", line 84, in capture_end'),
        worker(1, '  File "/vllm/model_executor/model_loader/utils.py", line 40, in process_weights_after_loading'),
        worker(0, "RuntimeError: some unrelated failure"),
        worker(1, "RuntimeError: CUDA error: out of memory"),
    ]
    verdict = classify(lines).classification(1)
    assert (verdict.outcome, verdict.phase) == (Outcome.OOM_WEIGHTS, Phase.WEIGHTS)


@pytest.mark.parametrize("line", [
    "[W1105 10:00:00.000 socket.cpp:697] [c10d] The server socket has failed to bind to [::]:29500 (errno: 98 - "
    "Address already in use).",
    api("User-specified max_model_len (262144) is greater than the derived max_model_len (max_position_embeddings="
        "131072 or model_max_length=None in model's config.json). VLLM_ALLOW_LONG_MAX_MODEL_LEN must be used with "
        "extreme caution.", "WARNING"),
    api("Failed to import from vllm._C with ImportError('/x/_C.abi3.so: undefined symbol: _ZN3c10')", "WARNING"),
    core("CUDA graphs can take additional 1~3 GiB memory per GPU. If you are running out of memory, consider "
         "decreasing `gpu_memory_utilization` or enforcing eager mode."),
])
def test_benign_warnings_do_not_decide(line: str) -> None:
    clf = classify([*START, line, *LOADED, *KV, *GRAPHS])
    assert not clf.decisive
    assert classify([*READY[:3], line, *READY[3:]]).classification().outcome is Outcome.READY


def test_the_cpu_builds_memory_held_by_others_is_gpu_busy() -> None:
    # Label convention (DESIGN): "Available memory on node ..." is the CPU twin of "Free memory on device".
    line = ("ValueError: Available memory on node 0 (3.10/8.46 GiB) on startup is less than desired CPU memory "
            "utilization (0.95, 8.04 GiB). Decrease CPU memory utilization or reduce CPU memory used by other processes.")
    got = classify_text(line, "vllm")
    assert (got.outcome, got.confidence) == (Outcome.GPU_BUSY, "high")


def test_an_exception_named_in_a_warning_is_not_raised() -> None:
    """vLLM's start-up warning on a low open-file limit quotes an exception in inline code: every start on such a host
    logs it (tests/data/launch-census). A record below ERROR names an error; the same words in an ERROR record raise."""
    warning = api("Found ulimit of 20000 and failed to automatically increase with error current limit exceeds maximum "
                  "limit. This can cause fd limit errors like `OSError: [Errno 24] Too many open files`. Consider "
                  "increasing with ulimit -n", "WARNING")
    assert classify([*START, warning, *LOADED]).classification(None).outcome is None
    got = classify([*START, warning, core("ValueError: Load format `dummyy` is not supported", "ERROR"),
                    ENGINE_FAILED]).classification(1)
    assert got.outcome is Outcome.CONFIG_ERROR and "Errno 24" not in " ".join(got.evidence)
    raised = core("Worker failed: `OSError: [Errno 24] Too many open files`", "ERROR")
    assert classify([*START, raised, ENGINE_FAILED]).classification(1).outcome is Outcome.CRASH


@pytest.mark.parametrize("op", ["_C::static_scaled_fp8_quant", "_C::cutlass_scaled_mm"])
def test_an_op_the_build_registered_as_a_stub_is_a_setting_it_cannot_run(op: str) -> None:
    line = core(f"RuntimeError: {op}() expected at most 0 argument(s) but received 4 argument(s). Declaration: "
                f"{op}() -> ()", "ERROR")
    got = classify([*START, line, ENGINE_FAILED]).classification(1)
    assert got.outcome is Outcome.CONFIG_ERROR and op in got.remedy and got.figures["mfs_direction"] == 0
    # a real signature mismatch (arguments declared) is the code's, not the build's
    other = core(f"RuntimeError: {op}() expected at most 2 argument(s) but received 4 argument(s). Declaration: "
                 f"{op}(Tensor a, Tensor b) -> ()", "ERROR")
    assert classify([*START, other, ENGINE_FAILED]).classification(1).outcome is not Outcome.CONFIG_ERROR


@pytest.mark.parametrize(("dtype", "config"), [("Half", True), ("BFloat16", True), ("Float8_e5m2", True),
                                               ("Float4_e2m1fn_x2", True), ("Long", False), ("Bool", False)])
def test_an_op_without_a_kernel_for_a_low_precision_dtype_is_that_dtype_refused(dtype: str, config: bool) -> None:
    line = core(f'NotImplementedError: "addmm_impl_cpu_" not implemented for \'{dtype}\'', "ERROR")
    got = classify([*START, *LOADED, line, ENGINE_FAILED]).classification(1)
    assert (got.outcome is Outcome.CONFIG_ERROR) is config, got
    assert not got.outcome or not got.outcome.is_oom
