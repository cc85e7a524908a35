"""The classifier reads structure, not sentences (issue 13).

Every log here is written for the test in wordings the corpus does not hold (other versions,
forks, devices), so a rule that memorised corpus sentences would not pass: serving
behaviour means up; memory comes from the exception in any wording; the phase comes from
the engine frames a traceback passes through; a start-up OOM the log does not place is
never OOM_RUNTIME; argument-time exceptions are config errors; native aborts are crashes.
"""

from __future__ import annotations

import pytest

from autotune.classifier.classify import LogClassifier, classify_text
from autotune.records import Need, Outcome, Phase

TORCH_OOM = ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB. GPU 0 has a total capacity "
             "of 79.19 GiB of which 3.06 MiB is free.")


def frames(*names: str, path: str = "/venv/lib/python3.12/site-packages/engine/worker.py") -> list[str]:
    out = ["Traceback (most recent call last):"]
    for i, name in enumerate(names):
        out += [f'  File "{path}", line {100 + i}, in {name}', f"    result = self.{name}()"]
    return out


@pytest.mark.parametrize(("engine", "lines"), [
    ("sglang", ["[2026-03-01 09:00:01 TP0] Prefill batch. #new-seq: 1, #new-token: 2048, #cached-token: 0, "
                "token usage: 0.02, #running-req: 7, #queue-req: 0",
                "[2026-03-01 09:00:02 TP0] Decode out of memory happened. #retracted_reqs: 2, #new_token_ratio: "
                "0.7000 -> 0.9000",
                "[2026-03-01 09:00:03] INFO:     127.0.0.1:40000 - \"POST /v1/chat/completions HTTP/1.1\" 200 OK"]),
    ("vllm", ["INFO 03-01 09:00:00 [loggers.py:123] Engine 000: Avg prompt throughput: 812.3 tokens/s, Avg "
              "generation throughput: 95.1 tokens/s, Running: 12 reqs, Waiting: 3 reqs, GPU KV cache usage: 97.4%, "
              "Prefix cache hit rate: 0.0%",
              "WARNING 03-01 09:00:01 [scheduler.py:1500] Sequence group 42 is preempted by PreemptionMode.RECOMPUTE "
              "mode because there is not enough KV cache space."]),
])
def test_a_server_at_work_is_ready_without_its_start_up_lines(engine: str, lines: list[str]) -> None:
    got = classify_text("\n".join(lines), engine)
    assert (got.outcome, got.confidence) == (Outcome.READY, "high")


def test_a_live_log_still_waits_for_the_ready_line() -> None:
    # Warm-up requests are answered before SGLang's ready line: live, that is not READY yet.
    clf = LogClassifier("sglang")
    clf.feed('[2026-03-01 09:00:03] INFO:     127.0.0.1:40000 - "GET /model_info HTTP/1.1" 200 OK')
    assert clf.serving_seen and not clf.ready_seen and clf.classification().outcome is None


def test_an_unknown_exception_while_serving_did_not_stop_the_server() -> None:
    lines = ["[2026-03-01 09:00:01 TP0] Decode batch. #running-req: 4, #token: 900, token usage: 0.01",
             "ValueError: request 17 has an invalid sampling parameter",
             "[2026-03-01 09:00:02 TP0] Decode batch. #running-req: 3, #token: 950, token usage: 0.01"]
    assert classify_text("\n".join(lines), "sglang").outcome is Outcome.READY


@pytest.mark.parametrize("line", [
    "RuntimeError: HIP out of memory. Tried to allocate 2.00 GiB (GPU 0; 63.98 GiB total capacity)",
    "RuntimeError: XPU out of memory. Tried to allocate 512.00 MiB",
    "torch.OutOfMemoryError:",
    "RuntimeError: CUDA error: out of memory",
    "RuntimeError: cuDNN error: CUDNN_STATUS_ALLOC_FAILED",
    "jaxlib.xla_extension.XlaRuntimeError: RESOURCE_EXHAUSTED: Out of memory while trying to allocate 1.0G",
    "[allocator] memory allocation failed with OOM on device 3 while trying to allocate 81920000 bytes",
])
def test_memory_is_read_from_the_exception_in_any_wording(line: str) -> None:
    lines = [*frames("run_scheduler_process", "__init__", "init_memory_pool", "_create_buffers"), line]
    got = classify_text("\n".join(lines), "sglang")
    assert got.outcome is Outcome.OOM_KV_POOL, got


@pytest.mark.parametrize(("names", "expected"), [
    (("run_engine_core", "__init__", "_initialize_kv_caches", "determine_available_memory", "profile_run",
      "_dummy_run", "forward"), Outcome.OOM_KV_POOL),
    (("main", "initialize", "load_model", "get_model", "create_weights"), Outcome.OOM_WEIGHTS),
    (("run_engine_core", "__init__", "compile_or_warm_up_model", "capture_model", "forward"),
     Outcome.OOM_CUDA_GRAPH),
    (("run_engine_core", "run_busy_loop", "_process_engine_step", "step", "execute_model", "forward"),
     Outcome.OOM_RUNTIME),
])
def test_the_phase_of_an_oom_is_read_from_the_engine_frames(names: tuple[str, ...], expected: Outcome) -> None:
    got = classify_text("\n".join([*frames(*names), TORCH_OOM]), "vllm")
    assert (got.outcome, got.confidence) == (expected, "high")


@pytest.mark.parametrize(("progress", "names", "expected"), [
    # SGLang: the excerpt shows distributed init, then a traceback through the loader (its "Load weight begin" missing)
    ("[2025-06-01 10:00:00 TP0] Init torch distributed begin.",
     ("run_scheduler_process", "__init__", "initialize", "load_model", "_initialize_model"), Outcome.OOM_WEIGHTS),
    ("[2025-06-01 10:00:00 TP0] Load weight end. type=Qwen2ForCausalLM, dtype=torch.bfloat16, avail mem=70.00 GB",
     ("run_scheduler_process", "__init__", "initialize", "init_memory_pool", "_create_buffers"), Outcome.OOM_KV_POOL),
    ("INFO 06-01 10:00:00 [parallel_state.py:1000] rank 0 in world size 1 is assigned as DP rank 0, TP rank 0",
     ("run_engine_core", "__init__", "_initialize_kv_caches", "initialize_from_config", "_allocate_kv_cache_tensors"),
     Outcome.OOM_KV_POOL),
    ("[2025-06-01 10:00:00 TP0] Memory pool end. avail mem=9.00 GB",
     ("run_scheduler_process", "__init__", "initialize", "init_device_graphs", "capture"), Outcome.OOM_CUDA_GRAPH),
])
def test_a_start_up_frame_later_than_the_last_progress_line_places_the_oom(progress: str, names: tuple[str, ...],
                                                                             expected: Outcome) -> None:
    """The frames say where the code was; the phase's own progress line may be cut or not printed."""
    got = classify_text("\n".join([progress, *frames(*names), TORCH_OOM]), "sglang" if "TP0]" in progress else "vllm")
    assert (got.outcome, got.confidence) == (expected, "high"), got


def test_a_frame_earlier_than_the_last_progress_line_does_not_move_it_back() -> None:
    """A weights frame under a launch whose pool is built: a draft model loaded after the target's pool (the pool,
    not the weights, took the room), never a weights failure of the launch."""
    lines = ["[2025-06-01 10:00:00 TP0] KV Cache is allocated. #tokens: 500000, K size: 30.00 GB, V size: 30.00 GB",
             *frames("run_scheduler_process", "__init__", "init_draft_worker", "load_model", "load_weights"), TORCH_OOM]
    assert classify_text("\n".join(lines), "sglang").outcome is not Outcome.OOM_WEIGHTS


def test_an_oom_the_log_does_not_place_is_a_low_guess_that_says_so() -> None:
    got = classify_text(TORCH_OOM, "sglang")
    assert got.confidence == "low" and got.phase is Phase.SPAWN  # no phase claimed
    assert "nothing in view places it" in got.remedy and got.missing.startswith("the phase")


def test_a_capture_failure_that_is_not_memory_is_a_crash() -> None:
    lines = ["[2026-03-01 09:00:00 TP0] Capture cuda graph begin. This can take up to several minutes.",
             "Exception: Capture cuda graph failed: an unsupported kernel variant was selected"]
    got = classify_text("\n".join(lines), "sglang")
    assert got.outcome is Outcome.CRASH and "lowering memory will not help" in got.remedy


def test_a_capture_progress_bar_places_an_oom_worded_otherwise() -> None:
    lines = ["Capturing batches (bs=256 avail_mem=0.31 GB):  12%|#2        | 3/24 [00:02<00:15,  1.40it/s]",
             "torch.OutOfMemoryError:", "out of memory on the device"]
    assert classify_text("\n".join(lines), "sglang").outcome is Outcome.OOM_CUDA_GRAPH


def test_an_invalid_model_id_is_a_config_error() -> None:
    lines = [*frames("main", "__post_init__", "get_config", "validate_repo_id",
                     path="/venv/lib/python3.10/site-packages/huggingface_hub/utils/_validators.py"),
             "huggingface_hub.errors.HFValidationError: Repo id must be in the form 'repo_name' or "
             "'namespace/repo_name': 'org/model:rev'."]
    assert classify_text("\n".join(lines), "vllm").outcome is Outcome.CONFIG_ERROR


def test_a_native_abort_without_a_known_phrase_is_a_crash() -> None:
    lines = ["[2026-03-01 09:00:00 TP2] Capture cuda graph begin. This can take up to several minutes.",
             "terminate called after throwing an instance of 'c10::Error'", "Aborted (core dumped)"]
    got = classify_text("\n".join(lines), "sglang")
    assert (got.outcome, got.confidence) == (Outcome.CRASH, "high")


def test_a_source_line_quoted_under_a_frame_is_not_the_error() -> None:
    lines = [*frames("run_scheduler_process", "event_loop_normal")[:-1],
             '    logger.error("CUDA out of memory. Tried to allocate 1 GiB")',
             "ValueError: token_to_kv_pool_allocator memory leak detected!"]
    got = classify_text("\n".join(lines), "sglang")
    assert got.outcome is Outcome.CRASH


def test_markdown_quoted_logs_are_read() -> None:
    lines = ["> usage: vllm serve [-h] [--model MODEL]", "> vllm: error: unrecognized arguments: --frobnicate"]
    assert classify_text("\n".join(lines), "vllm").outcome is Outcome.CONFIG_ERROR
    assert classify_text("> [2026-03-01 09:00:02 TP0] Decode batch. #running-req: 3, #token: 9, token usage: 0.0",
                         "sglang").phase is Phase.READY


def test_a_hard_wrapped_paste_is_read_whole() -> None:
    # A terminal cut every line at 80 columns, mid-word, mid-number and before capitals.
    lines = ["[2026-03-01 09:00:00 TP0] Load weight begin. avail mem=23.10 GB",
             '  File "/usr/lib/python3/site-packages/engine/model_executor/model_loader/default_loader.py", line 264,'
             " in load_weights",
             "    self.model.load_weights(weights)",
             "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 224.00 MiB. GPU 0 has a total capacity of "
             "23.52 GiB of which 13.00 MiB is free. Including non-PyTorch memory, this process has 23.50 GiB in use."]
    wrapped = "\n".join(piece for line in lines for piece in (line[i:i + 80] for i in range(0, len(line), 80)))
    got = classify_text(wrapped, "sglang")
    assert (got.outcome, got.confidence) == (Outcome.OOM_WEIGHTS, "high")
    assert got.figures["oom_total_gib"] == 23.52  # the figure sat across the cut


def _rows(line: str, width: int) -> list[str]:
    return [line[i:i + width] for i in range(0, len(line), width)]


@pytest.mark.parametrize("width", [80, 96, 120])
@pytest.mark.parametrize(("line", "outcome"), [
    # a capture failure whose cause is a gloo time-out: cut before "Timed out", the piece reads as a capture failure
    ("RuntimeError: Capture cuda graph failed: [/opt/torch/third_party/gloo/transport/tcp/pair.cc:598] Timed out "
     "waiting 600000ms for recv operation to complete", Outcome.TIMEOUT),
    # the KV shortfall: cut before "KV cache", the piece is a bare ValueError
    ("ValueError: To serve at least one request with the model's max seq len (524288), (38.00 GiB KV cache is "
     "needed, which is larger than the available KV cache memory (12.25 GiB).", Outcome.OOM_KV_POOL),
])
def test_a_wrapped_failure_line_is_read_as_the_whole_line_reads(line: str, outcome: Outcome, width: int) -> None:
    assert classify_text(line, "vllm").outcome is outcome
    assert classify_text("\n".join(_rows(line, width)), "vllm").outcome is outcome


def test_a_line_wrapped_into_many_rows_is_joined_through_every_row() -> None:
    # Rows that start mid-word and rows that start at a quote alternate; the architecture the message rejects is
    # listed six rows down, so only the whole line says the engine knew it.
    supported = ", ".join(f"'{name}ForCausalLM'" for name in ("Aquila", "Arctic", "Baichuan", "Bloom", "Cohere", "Dbrx",
                                                              "Falcon", "Gemma", "Gemma2", "Granite", "Jais", "Mamba",
                                                              "Mixtral", "Mistral", "Olmo", "Qwen2", "Yi"))
    line = (f"ValueError: Model architectures ['MistralForCausalLM'] are not supported for now. Supported "
            f"architectures: [{supported}]")
    assert classify_text(line, "vllm").outcome is Outcome.CRASH
    for width in (80, 97, 120):
        assert classify_text("\n".join(_rows(line, width)), "vllm").outcome is Outcome.CRASH, width


def test_an_oom_placed_by_its_workers_method_stays_placed_when_its_rows_run_into_a_traceback() -> None:
    line = ("(VllmWorkerProcess pid=4242) ERROR 03-02 11:00:00 multiproc_worker_utils.py:226] Exception in worker "
            "VllmWorkerProcess while processing method load_model: CUDA out of memory. Tried to allocate 64.00 MiB. "
            "GPU  has a total capacity of 23.68 GiB of which 19.81 MiB is free. Including non-PyTorch memory, this "
            "process has 23.60 GiB memory in use. Of the allocated memory 23.21 GiB is allocated by PyTorch, and 2.10 MiB "
            "is reserved by PyTorch but unallocated. If reserved but unallocated memory is large try setting "
            "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.  See documentation for Memory "
            "Management  (https://pytorch.org/docs/stable/notes/cuda.html#environment-variables), Traceback (most "
            "recent call last):")
    for width in (None, 80, 120, 133, 147, 163, 185):
        got = classify_text(line if width is None else "\n".join(_rows(line, width)), "vllm")
        assert got.outcome is Outcome.OOM_WEIGHTS, width


def test_a_failure_line_falsely_joined_to_the_next_keeps_its_own_reading() -> None:
    # indentation lost: the frame under the error starts in column 0 and reads as the error's wrapped tail
    lines = ["ValueError: Loaded weights leave no GPU memory for the KV cache under --mem-fraction-static=0.55. "
             "Lower the context length or raise the fraction.",
             "at model_runner_kv_cache_mixin.py:_profile_available_bytes"]
    assert classify_text("\n".join(lines), "sglang").outcome is Outcome.OOM_KV_POOL


def test_the_same_log_without_its_start_up_line_is_placed_by_its_wrapped_frames() -> None:
    frame = '  File "/usr/lib/python3/site-packages/engine/worker/gpu_model_runner.py", line 1838, in profile_run'
    lines = ["Traceback (most recent call last):", frame[:80], frame[80:], "    self._dummy_run()",
             "RuntimeError: CUDA error: out of memory"]
    assert classify_text("\n".join(lines), "vllm").outcome is Outcome.OOM_KV_POOL


def test_every_figure_read_from_an_oom_is_a_known_figure() -> None:
    from autotune.records import FIGURES
    got = classify_text("RuntimeError: NPU out of memory. Tried to allocate 2.00 GiB (NPU 0; 60.96 GiB total capacity; "
                        "55.91 GiB already allocated; 1.80 GiB free; 58.73 GiB reserved in total by PyTorch)", "vllm")
    assert got.figures["oom_total_gib"] == 60.96 and got.figures["oom_free_gib"] == 1.8
    assert got.figures["oom_allocated_gib"] == 55.91
    new = classify_text(TORCH_OOM + " Of the allocated memory 77.10 GiB is allocated by PyTorch, and 1.2 GiB is "
                        "reserved by PyTorch but unallocated.", "vllm")
    assert (new.figures["oom_allocated_gib"], new.figures["oom_total_gib"]) == (77.1, 79.19)
    assert set(got.figures) <= set(FIGURES)


@pytest.mark.parametrize("line", [
    "RuntimeError: cudaMalloc failed: out of memory",
    "RuntimeError: [enforce fail at alloc_cpu.cpp:117] data. DefaultCPUAllocator: can't allocate memory: you tried "
    "to allocate 4294967296 bytes. Error code 12 (Cannot allocate memory)",
])
def test_allocator_failures_are_memory(line: str) -> None:
    lines = [*frames("main", "load_model", "load_weights",
                     path="/venv/lib/python3.12/site-packages/safetensors/torch.py"), line]
    assert classify_text("\n".join(lines), "vllm").outcome is Outcome.OOM_WEIGHTS


def test_a_bare_killed_from_the_shell_is_a_crash_that_names_the_host_oom_killer() -> None:
    got = classify_text("[2026-03-01 09:00:00 TP0] Load weight begin. avail mem=70.10 GB\nKilled", "sglang")
    assert (got.outcome, got.confidence) == (Outcome.CRASH, "high") and "dmesg" in got.remedy


_WORKER = "(Worker_TP0 pid=30) ERROR 09-04 10:00:02 [multiproc_executor.py:650] "


def _worker_trace(*frames_: tuple[str, str]) -> str:
    lines = ["WorkerProc hit an exception.", "Traceback (most recent call last):"]
    for path, name in (("vllm/v1/executor/multiproc_executor.py", "worker_busy_loop"), *frames_):
        lines += [f'  File "/venv/lib/python3.12/site-packages/{path}", line 100, in {name}', "    result = run()"]
    return "\n".join(_WORKER + line for line in [*lines, TORCH_OOM])


@pytest.mark.parametrize(("frames_", "expected"), [
    # the start-up steps the engine core sends its workers as calls, run by the same loop as requests
    ((("vllm/v1/worker/gpu_worker.py", "initialize_from_config"), ("vllm/v1/worker/gpu_model_runner.py",
      "initialize_kv_cache"), ("vllm/v1/worker/gpu_model_runner.py", "_allocate_kv_cache_tensors")), Outcome.OOM_KV_POOL),
    ((("vllm/v1/worker/gpu_worker.py", "compile_or_warm_up_model"), ("vllm/v1/worker/gpu_model_runner.py",
      "capture_model"), ("vllm/v1/worker/gpu_model_runner.py", "_dummy_run")), Outcome.OOM_CUDA_GRAPH),
    # a request: the loop's own reading, whatever runs inside the forward pass (torch.compile's frames included)
    ((("vllm/v1/worker/gpu_worker.py", "execute_model"), ("torch/_dynamo/eval_frame.py", "_fn"),
      ("vllm/model_executor/models/llama.py", "forward")), Outcome.OOM_RUNTIME),
])
def test_a_loop_that_runs_whatever_it_is_sent_yields_to_the_start_up_step_named_under_it(
        frames_: tuple[tuple[str, str], ...], expected: Outcome) -> None:
    got = classify_text(_worker_trace(*frames_), "vllm")
    assert (got.outcome, got.confidence) == (expected, "high"), got


def test_the_draft_models_set_up_after_the_targets_pool_is_the_slack_not_a_busy_gpu() -> None:
    """SGLang 0.5.x sets up an EAGLE draft after the target's pool and graphs: its distributed init comes again
    (read from its source: the start-up progress census). An OOM there is the slack the pool left, not another's."""
    lines = ["[2026-03-31 10:00:16] KV Cache is allocated. #tokens: 413764, K size: 25.25 GB, V size: 25.25 GB",
             "[2026-03-31 10:00:16] Memory pool end. avail mem=12.10 GB",
             "[2026-03-31 10:00:39] Capture cuda graph end. Time elapsed: 22.1 s. mem usage=0.71 GB. avail mem=11.29 GB.",
             "[2026-03-31 10:00:40] Init torch distributed begin.", TORCH_OOM]
    got = classify_text("\n".join(lines), "sglang")
    assert (got.outcome, got.needs) == (Outcome.OOM_KV_POOL, Need.LESS_FRACTION)
    # with no pool built yet, the same init and OOM is memory someone else holds
    assert classify_text("\n".join(lines[3:]), "sglang").outcome is Outcome.GPU_BUSY


def test_a_key_that_starts_inside_another_keys_match_still_finds_its_rule() -> None:
    """The prefilter scans each line once for every rule's keys: a key found must not hide one that starts inside it
    ("Timed out" holds the start of "imed out after"), or that key's rule is never tried on the line."""
    from autotune.classifier.index import RuleIndex
    from autotune.classifier.rules import RuleKind, rule

    outer = rule("outer", "Timed out", r"Timed out", RuleKind.FAILURE, outcome=Outcome.TIMEOUT)
    inner = rule("inner", "imed out after", r"imed out after \d+", RuleKind.FAILURE, outcome=Outcome.TIMEOUT)
    index = RuleIndex((outer, inner))
    assert [r.name for r in index.rules_for("DistStoreError: Timed out after 601 seconds")] == ["outer", "inner"]
    assert [r.name for r in index.rules_for("it timed out")] == []
