"""Issue 33, after batch F5: facts a log states are read as facts, whatever their wording.

Each group is one structural gap F5's misses showed (docs/corpus-protocol.md, "Round after F5"): memory
held by others read from the message's own figures (809), pydantic's form of an argument-time error (806),
the weights phase placed by any loading bar, and a terminal's padded rows pasted back as one line (807),
a non-memory CUDA fault weighing against a memory guess for a traceback cut after it (819). The lines
are invented variants in the engines' and libraries' shapes, not the F5 logs; each group also holds the
cases where the rule must not fire.
"""

from __future__ import annotations

import pytest

from autotune.classifier import text as logtext
from autotune.classifier.classify import LogClassifier, classify_text
from autotune.classifier.rules import others_disproved
from autotune.records import Outcome, Phase

# -- memory held by others, from the message's figures -----------------------------------------------------

_PROFILE_CHECK = ("(EngineCore_DP0 pid=7) ERROR 12-05 10:00:02 [core.py:700] AssertionError: Error in memory profiling. "
                  "Initial free memory {before} GiB, current free memory {after} GiB. This happens when other processes "
                  "sharing the same container release GPU memory while vLLM is profiling during initialization.")


@pytest.mark.parametrize("text", [
    _PROFILE_CHECK.format(before="71.2", after="71.2"),
    # another engine's words, the same fact: free memory did not move, so no one took or released any
    "RuntimeError: GPU memory changed while profiling (free before: 20.00 GiB, free after: 20.0 GiB): other processes "
    "may hold GPU memory on this device.",
    # free of the device's total no more than a CUDA context: no one holds any (a utilisation near 1 asked)
    "ValueError: Free memory on device (79.10/79.60 GiB) on startup is less than desired GPU memory utilization "
    "(0.995, 79.2 GiB). Decrease GPU memory utilization or reduce GPU memory used by other processes.",
])
def test_a_held_by_others_sentence_its_own_figures_disprove_is_a_crash(text: str) -> None:
    got = classify_text(text, "vllm")
    assert got.outcome is Outcome.CRASH
    assert "its own figures show none" in got.remedy


@pytest.mark.parametrize("text", [
    _PROFILE_CHECK.format(before="31.4", after="34.2"),  # free memory rose: another process released some
    "RuntimeError: GPU memory changed while profiling (free before: 20.00 GiB, free after: 26.5 GiB): other processes "
    "may hold GPU memory on this device.",
    # a 4 GiB desktop card with 0.78 GiB taken by the desktop (F2 501's shape), and a 48 GiB card 16 GiB taken
    "ValueError: Free memory on device (3.22/4.0 GiB) on startup is less than desired GPU memory utilization (0.9, "
    "3.6 GiB). Decrease GPU memory utilization or reduce GPU memory used by other processes.",
    "ValueError: Free memory on device (31.44/47.38 GiB) on startup is less than desired GPU memory utilization "
    "(0.9, 42.64 GiB). Decrease GPU memory utilization or reduce GPU memory used by other processes.",
    # no figures at all: the engine's word stands
    "RuntimeError: Not enough GPU memory: please release GPU memory held by other processes and retry.",
])
def test_figures_that_show_others_or_no_figures_keep_gpu_busy(text: str) -> None:
    assert classify_text(text, "vllm").outcome is Outcome.GPU_BUSY


def test_others_disproved_reads_only_the_figures() -> None:
    assert others_disproved("free memory 12.0 GiB ... free memory 12.04 GiB")
    assert not others_disproved("free memory 12.0 GiB ... free memory 12.5 GiB")
    assert not others_disproved("only one figure: free memory 12.0 GiB")
    assert others_disproved("Free memory on device (47.0/47.38 GiB)")
    assert not others_disproved("Free memory on device (40.0/47.38 GiB)")


# -- pydantic's form of an argument-time error -----------------------------------------------------------------

@pytest.mark.parametrize("log", [
    # the error line alone, as a thread quotes it
    "Value error, Total number of attention heads (40) must be divisible by tensor parallel size (6).",
    # the header, then the error line in pydantic's layout, under an engine's log header
    "(APIServer pid=9) ERROR 12-05 10:00:01 [api_server.py:1] 1 validation error for ModelConfig\n"
    "  Value error, max_model_len (262144) is larger than the model's context (131072) [type=value_error, "
    "input_value=ArgsKwargs((), {...}), input_type=ArgsKwargs]",
    "2 validation errors for ParallelConfig\n  Assertion failed, data_parallel_size must be positive "
    "[type=assertion_error, input_value=-1, input_type=int]",
])
def test_pydantic_validation_errors_are_config_errors(log: str) -> None:
    got = classify_text(log, "vllm")
    assert (got.outcome, got.confidence) == (Outcome.CONFIG_ERROR, "high")
    assert got.phase is Phase.ARGS


def test_pydantic_lines_in_sglang_too() -> None:
    got = classify_text("[2026-12-05 10:00:01] 1 validation error for ServerArgs\n"
                        "  Value error, --tp-size 3 does not divide the 64 attention heads", "sglang")
    assert got.outcome is Outcome.CONFIG_ERROR


def test_a_requests_validation_error_after_start_up_is_not_the_launchs() -> None:
    # A server at work validates requests with pydantic too: their errors are the client's, not the arguments'.
    log = ("INFO:     Application startup complete.\n"
           'INFO:     127.0.0.1:5000 - "POST /v1/chat/completions HTTP/1.1" 200 OK\n'
           "ERROR 12-05 10:00:09 [serving_chat.py:200] 1 validation error for ChatCompletionRequest\n"
           "ERROR 12-05 10:00:09 [serving_chat.py:200]   Value error, temperature must be non-negative "
           "[type=value_error, input_value=-1, input_type=float]")
    assert classify_text(log, "vllm").outcome is Outcome.READY


@pytest.mark.parametrize("text", [
    "Skipping the validation error check for this model",  # prose that names validation errors
    "Caught a Value error, retrying with the defaults",  # not at the start of the message
])
def test_validation_words_in_prose_are_not_an_error(text: str) -> None:
    assert classify_text(text, "vllm").outcome is None


# -- the weights phase from any loading bar; a terminal's padded rows -----------------------------------------

_OOM = ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 64.00 MiB. GPU 0 has a total capacity of "
        "79.19 GiB of which 12.00 MiB is free. Including non-PyTorch memory, this process has 79.16 GiB memory in use.")


@pytest.mark.parametrize("bar", [
    "Multi-thread loading shards: 100% Completed | 96/96 [00:31<00:00,  3.05it/s]",
    "Loading checkpoint shards: 100%|██████████| 4/4 [00:03<00:00,  1.11it/s]",  # transformers' bar
    "Loading pt checkpoint shards:  50% Completed | 1/2 [00:04<00:04,  4.20s/it]",
    "Loading weights: 37%|███▋      | 120/324 [00:10<00:17, 11.9it/s]",
    "[2026-12-05 10:00:01 TP0] Parallel loading safetensors: 80% | 8/10",
])
@pytest.mark.parametrize("engine", ["sglang", "vllm"])
def test_any_loading_bar_places_a_following_oom_in_the_weights(bar: str, engine: str) -> None:
    got = classify_text(bar + "\n" + _OOM, engine)
    assert (got.outcome, got.phase) == (Outcome.OOM_WEIGHTS, Phase.WEIGHTS)


@pytest.mark.parametrize("line", [
    "Capturing batches (bs=8 avail_mem=3.20 GB): 100%|██████████| 4/4",  # a bar, but not of loading
    "Loading tokenizer files: 100%",  # loading, but not weights
    "Loading weights took 14.2 seconds",  # no bar
])
def test_other_bars_and_loading_words_are_not_the_weights_bar(line: str) -> None:
    assert classify_text(line + "\n" + _OOM, "sglang").outcome is not Outcome.OOM_WEIGHTS


def test_a_bar_logged_frame_by_frame_reads_as_one_line_while_its_phase_lasts() -> None:
    frames = [f"[2026-12-05 10:00:01 TP0] Loading safetensors checkpoint shards: {i}% Completed | {i}/100"
              for i in range(100)]
    assert classify_text("\n".join([*frames, _OOM]), "sglang").outcome is Outcome.OOM_WEIGHTS
    # the pool came, then a second model's bar (the same shape): the weights phase again, not the pool's
    log = [*frames, "[2026-12-05 10:00:09 TP0] Load weight end. type=Qwen3ForCausalLM, dtype=torch.bfloat16, "
                    "avail mem=40.00 GB, mem usage=30.00 GB.", *frames, _OOM]
    assert classify_text("\n".join(log), "sglang").phase is Phase.WEIGHTS


_TORCH_TEXT = ("[2026-12-05 10:00:01 TP3] Failed to initialize experts: CUDA out of memory. Tried to allocate 48.00 MiB. "
               "GPU 3 has a total capacity of 79.19 GiB of which 6.50 MiB is free. Including non-PyTorch memory, this "
               "process has 79.17 GiB memory in use. Of the allocated memory 77.01 GiB is allocated by PyTorch, and "
               "1.52 GiB is reserved by PyTorch but unallocated. See documentation for Memory Management  (https://x)")


def _padded_rows(text: str, content: int, width: int) -> str:
    """`text` as a terminal `width` wide that wraps at `content` characters shows it, each row padded with
    spaces to the width, pasted back as one line."""
    rows = [text[i:i + content] for i in range(0, len(text), content)]
    return "".join(row.ljust(width) for row in rows[:-1]) + rows[-1]


@pytest.mark.parametrize(("content", "width"), [(147, 176), (100, 120), (80, 84)])
def test_a_terminals_padded_rows_are_joined_back(content: int, width: int) -> None:
    padded = _padded_rows(_TORCH_TEXT, content, width)
    assert padded != _TORCH_TEXT
    assert logtext.unpad(padded) == _TORCH_TEXT
    assert classify_text(padded, "sglang").figures == classify_text(_TORCH_TEXT, "sglang").figures


@pytest.mark.parametrize("line", [
    "|   0  NVIDIA H100 80GB HBM3          On  |   00000000:18:00.0 Off |                    0 |",  # a table
    "GPU0     X      NV18    NV18    0-47    0               N/A",
    "ERROR 12-05 10:00:01 [core.py:1]     assert self.free_memory > free,    (free, self.free_memory)",  # code
    "a line with one run of spaces                              in the middle",
])
def test_aligned_text_is_left_as_it_is(line: str) -> None:
    assert logtext.unpad(line) == line


# -- a non-memory CUDA fault before a cut traceback ----------------------------------------------------------

_CAPTURE = "(VllmWorker rank=0 pid=5) INFO 12-05 10:00:01 [gpu_model_runner.py:2000] Capturing CUDA graphs (mixed prefill-decode, PIECEWISE): 40%"
_CUT_IN_CAPTURE = ('Traceback (most recent call last):\n'
                   '  File "/x/vllm/v1/worker/gpu_model_runner.py", line 1618, in capture_model\n'
                   '    self._dummy_run(num_tokens)')
# The KV pool is a phase whose cut tracebacks stay a memory guess (verdict._CUT_MOSTLY_NOT_MEMORY): there a fault
# stated before the cut is what turns the guess into a crash.
_POOL = ("(VllmWorker rank=0 pid=5) INFO 12-05 10:00:01 [worker.py:267] model weights take 14.99GiB; non_torch_memory "
         "takes 0.13GiB; PyTorch activation peak memory takes 1.24GiB; the rest of the memory reserved for KV Cache is "
         "54.93GiB.")
_CUT_IN_POOL = ('Traceback (most recent call last):\n'
                '  File "/x/vllm/v1/worker/gpu_model_runner.py", line 2890, in initialize_kv_cache\n'
                '    kv_caches = self.initialize_kv_cache_tensors(kv_cache_config)')


@pytest.mark.parametrize("fault", [
    "node-3:811:811 [0] enqueue.cc:300 NCCL WARN Cuda failure 'invalid resource handle'",
    "node-3:811:811 [0] NCCL WARN Cuda failure 700 'an illegal memory access was encountered'",
    "[rank0]: custom_all_reduce.cuh:368 CUDA error: invalid argument",
    "driver: call failed with CUDA_ERROR_ILLEGAL_ADDRESS",
])
def test_a_non_memory_cuda_fault_weighs_against_a_memory_guess(fault: str) -> None:
    got = classify_text("\n".join([_POOL, fault, _CUT_IN_POOL]), "vllm")
    assert (got.outcome, got.confidence) == (Outcome.CRASH, "low")
    assert [o for o, _ in got.alternatives] == [Outcome.OOM_KV_POOL]
    assert any(line in fault for line in got.evidence)
    assert got.missing


def test_a_cut_traceback_with_no_fault_before_it_keeps_its_memory_guess() -> None:
    got = classify_text(_POOL + "\n" + _CUT_IN_POOL, "vllm")
    assert (got.outcome, got.alternatives) == (Outcome.OOM_KV_POOL, ())


def test_a_memory_fault_is_not_a_non_memory_one() -> None:
    fault = "node-3:811:811 [0] NCCL WARN Cuda failure 2 'out of memory'"
    assert classify_text("\n".join([_POOL, fault, _CUT_IN_POOL]), "vllm").outcome is not Outcome.CRASH


def test_a_traceback_cut_in_capture_is_guessed_a_crash_with_the_graphs_oom_the_alternative() -> None:
    """Most tracebacks cut inside capture frames were not memory (the fresh corpus's F1-F40: 13 crashes, 4 graph OOMs):
    the guess is a crash, low, the graphs' OOM its alternative, so the search learns no side from it."""
    got = classify_text(_CAPTURE + "\n" + _CUT_IN_CAPTURE, "vllm")
    assert (got.outcome, got.confidence, got.phase) == (Outcome.CRASH, "low", Phase.CUDA_GRAPH)
    assert [o for o, _ in got.alternatives] == [Outcome.OOM_CUDA_GRAPH] and got.missing
    assert got.needs is None


def test_a_fault_the_launch_moved_on_from_does_not_count() -> None:
    # NCCL warned while the ranks connected, then weights and the KV cache came: it did not stop the launch.
    log = "\n".join(["INFO 12-05 10:00:00 [core.py:1] Initializing a V1 LLM engine (v0.11.0) with config: x",
                     "node-3:811:811 [0] NCCL WARN Cuda failure 'peer access is not supported between these two devices'",
                     "INFO 12-05 10:00:05 [gpu_model_runner.py:1] Starting to load model /m...",
                     "INFO 12-05 10:00:30 [gpu_worker.py:1] Available KV cache memory: 30.1 GiB",
                     _CUT_IN_POOL])
    assert classify_text(log, "vllm").outcome is Outcome.OOM_KV_POOL


# == After batch F6 (docs/corpus-protocol.md, "Round after F6") ===========================================
# -- an engine's own allocators: the scheduler's slots run out only while serving ----------------------------


@pytest.mark.parametrize("line", [
    "RuntimeError: alloc_req_slots runs out of memory. Please set a smaller number for `--max-running-requests`. "
    "self.req_to_token_pool.available_size()=0, num_reqs=3,",
    "[2026-03-01 09:00:00 TP0] Out of memory. Try to lower your batch size.",
    "[2026-03-01 09:00:00 TP0] Decode out of memory. Try to lower your batch size.",
])
def test_sglangs_scheduler_allocators_running_out_is_a_runtime_oom(line: str) -> None:
    got = classify_text(line, "sglang")
    assert (got.outcome, got.confidence) == (Outcome.OOM_RUNTIME, "high")


def test_advice_about_the_batch_size_is_not_an_allocator_failure() -> None:
    got = classify_text("[2026-03-01 09:00:00 TP0] If you run out of memory, try to lower your batch size.", "sglang")
    assert got.outcome is None


# -- a traceback cut while serving, or after a start-up phase, with no frame that places it -----------------

_SERVING_V0 = ["INFO 02-14 08:44:26 engine.py:275] Added request chatcmpl-1.",
               'INFO:     10.0.0.2:52036 - "POST /v1/chat/completions HTTP/1.1" 200 OK']
_TRACE_START = ["Traceback (most recent call last):", '  File "/usr/lib/python3.10/threading.py", line 1016, in _bootstrap']


@pytest.mark.parametrize("marker", [
    "CRITICAL 02-14 08:44:33 launcher.py:101] MQLLMEngine is already dead, terminating server process",
    "ERROR 02-14 08:44:33 worker.py:12] Exception in worker VllmWorkerProcess while processing method x.",
])
def test_a_traceback_cut_while_serving_reads_as_the_serving_phases_failure(marker: str) -> None:
    """Serving placed, the exception unread: a crash most likely (the fresh corpus's F1-F40: 26 crashes, 17 runtime
    OOMs), the runtime OOM the alternative."""
    got = classify_text("\n".join([*_SERVING_V0, marker, *_TRACE_START]), "vllm")
    assert (got.outcome, got.confidence, got.phase) == (Outcome.CRASH, "low", Phase.READY)
    assert [o for o, _ in got.alternatives] == [Outcome.OOM_RUNTIME] and got.missing


def test_sglangs_old_model_server_exception_after_batches_is_not_ready() -> None:
    log = ["[gpu_id=0] Prefill batch. #new-seq: 3, #new-token: 6417, #cached-token: 0, #running-req: 1, #queue-req: 0",
           "Exception in ModelTpServer:", "Traceback (most recent call last):"]
    got = classify_text("\n".join(log), "sglang")
    assert (got.outcome, got.confidence) == (Outcome.CRASH, "low")
    assert [o for o, _ in got.alternatives] == [Outcome.OOM_RUNTIME]


def test_an_engine_reported_dead_while_serving_is_not_ready() -> None:
    marker = "CRITICAL 02-14 08:44:33 launcher.py:101] MQLLMEngine is already dead, terminating server process"
    got = classify_text("\n".join([*_SERVING_V0, marker]), "vllm")
    assert got.outcome is not Outcome.READY


def test_a_traceback_after_the_ready_line_is_a_requests_and_the_server_stays_ready() -> None:
    log = ["INFO:     Application startup complete.", *_SERVING_V0, *_TRACE_START]
    assert classify_text("\n".join(log), "vllm").outcome is Outcome.READY


_V1 = "(EngineCore_DP0 pid=7) INFO 12-05 10:00:{:02d} [{}] {}"
_LOADING = [_V1.format(1, "core.py:1", "Initializing a V1 LLM engine (v0.11.0) with config: x"),
            _V1.format(2, "gpu_model_runner.py:1", "Starting to load model /m...")]
_LOADED = [*_LOADING, _V1.format(30, "gpu_model_runner.py:2", "Model loading took 15.6 GiB and 28.4 seconds")]
_CUT_NO_PHASE = ["ERROR 12-05 10:00:40 [core.py:396] EngineCore failed to start.",
                 "ERROR 12-05 10:00:40 [core.py:396] Traceback (most recent call last):",
                 'ERROR 12-05 10:00:40 [core.py:396]   File "/x/vllm/v1/engine/core.py", line 387, in run_engine_core']


@pytest.mark.parametrize(("before", "expected"), [(_LOADING, Outcome.OOM_WEIGHTS), (_LOADED, Outcome.OOM_KV_POOL)])
def test_a_cut_traceback_no_frame_places_is_the_phase_the_start_up_reached(before: list[str], expected: Outcome) -> None:
    got = classify_text("\n".join([*before, *_CUT_NO_PHASE]), "vllm")
    assert (got.outcome, got.confidence) == (expected, "low") and got.missing


def test_a_cut_traceback_before_any_start_up_phase_stays_undecided_or_generic() -> None:
    got = classify_text("\n".join(_CUT_NO_PHASE), "vllm")
    assert got.outcome in (None, Outcome.CRASH) and got.confidence == "low"


@pytest.mark.parametrize("fault", [
    "CUDA error (/__w/xformers/third_party/flash-attention/hopper/flash_fwd_launch_template.h:188): invalid argument",
    "/usr/bin/ld: cannot find -lcuda: No such file or directory",
    "collect2: error: ld returned 1 exit status",
    "/tmp/tmpx/main.c:5:10: fatal error: cuda.h: No such file or directory",
])
def test_a_kernel_or_build_fault_before_a_cut_traceback_makes_it_a_crash(fault: str) -> None:
    got = classify_text("\n".join([*_LOADED, fault, *_CUT_NO_PHASE]), "vllm")
    assert (got.outcome, got.confidence) == (Outcome.CRASH, "low")
    assert [o for o, _ in got.alternatives] == [Outcome.OOM_KV_POOL]


# -- an unplaced OOM's likeliest class, from what failed --------------------------------------------------


def test_the_sleep_mode_allocators_oom_is_a_wake_ups_unless_something_places_it() -> None:
    line = "RuntimeError: CUDA Error: out of memory at /workspace/csrc/cumem_allocator.cpp:62"
    got = classify_text(line, "vllm")
    assert (got.outcome, got.confidence) == (Outcome.OOM_RUNTIME, "low") and got.missing.startswith("the phase")
    assert {o for o, _ in got.alternatives} == {Outcome.OOM_WEIGHTS, Outcome.OOM_KV_POOL, Outcome.OOM_CUDA_GRAPH}
    placed = classify_text("\n".join([*_LOADING, line]), "vllm")  # start-up with sleep mode on: the weights
    assert (placed.outcome, placed.confidence) == (Outcome.OOM_WEIGHTS, "high")


def test_the_caching_allocators_warning_gives_its_figures_in_bytes_even_wrapped() -> None:
    log = ["[rank5]:[W906 07:46:05.0 CUDACachingAllocator.cpp:3933] memory allocation failed with OOM on device 5",
           "  while trying to allocate 671088640 bytes (free: 513736704, total: 85095874560)."]
    got = classify_text("\n".join(log), "vllm")
    assert got.figures["oom_tried_gib"] == 0.625 and got.figures["oom_total_gib"] == 79.2517
    large = classify_text(log[0] + " while trying to allocate 4334813184 bytes (free: 3779919872, total: "
                          "287431131136).", "vllm")
    assert large.figures["oom_tried_gib"] == 4.0371 and large.figures["oom_total_gib"] == 267.6911


# -- lines run together ------------------------------------------------------------------------------


def test_a_quoted_raise_run_together_with_its_exception_line_is_read() -> None:
    line = (' raise ValueError("No available memory for the cache blocks. " ValueError: No available memory for '
            "the cache blocks. Try increasing `gpu_memory_utilization` when initializing the engine.")
    assert classify_text(line, "vllm").outcome is Outcome.OOM_KV_POOL


def test_a_quoted_raise_alone_is_source_not_the_error() -> None:
    line = '    raise ValueError("No available memory for the cache blocks. "'
    assert classify_text(line, "vllm").outcome is None


# -- engine facts no corpus log holds yet: free memory that moved while profiling, a busy device, a watchdog ---

_PROFILING = ("AssertionError: Error in memory profiling. Initial free memory {} GiB, current free memory {} GiB. This "
              "happens when the GPU memory was not properly cleaned up before initializing the vLLM instance.")


def test_free_memory_that_rose_while_profiling_is_memory_held_by_others() -> None:
    assert classify_text(_PROFILING.format("30.3", "34.2"), "vllm").outcome is Outcome.GPU_BUSY


def test_free_memory_that_did_not_move_while_profiling_disproves_others() -> None:
    got = classify_text(_PROFILING.format("30.3", "30.3"), "vllm")
    assert got.outcome is Outcome.CRASH and "its own figures show none" in got.remedy


def test_a_device_cuda_calls_busy_or_unavailable_is_taken() -> None:
    got = classify_text("RuntimeError: CUDA error: CUDA-capable device(s) is/are busy or unavailable", "sglang")
    assert got.outcome is Outcome.GPU_BUSY and "exclusive-process" in got.remedy


@pytest.mark.parametrize(("line", "engine"), [
    ("[rank0]:[E1218 20:27:21.426 ProcessGroupNCCL.cpp:629] [Rank 0] Watchdog caught collective operation timeout: "
     "WorkNCCL(SeqNum=1, OpType=BROADCAST, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600081 milliseconds "
     "before timing out.", "vllm"),
    ("[2026-01-01 10:00:00 TP3] Scheduler watchdog timeout (self.watchdog_timeout=300, self.soft=False)", "sglang"),
])
def test_an_engines_own_watchdog_giving_up_is_a_timeout(line: str, engine: str) -> None:
    got = classify_text(line, engine)
    assert (got.outcome, got.confidence) == (Outcome.TIMEOUT, "high") and "hang" in got.remedy


def test_a_watchdog_setting_in_the_arguments_is_not_a_timeout() -> None:
    line = "[2026-01-01 10:00:00] server_args=ServerArgs(model_path='m', watchdog_timeout=300, soft_watchdog_timeout=None)"
    assert classify_text(line, "sglang").outcome is None


# == After batch F7 (docs/corpus-protocol.md, "Round after F7") ===========================================


def test_a_capitalised_cuda_error_is_a_non_memory_fault_too() -> None:
    fault = "CUDA Error: device-side assert triggered (710) /x/include/attention/decode.cuh: line 749 at function f"
    got = classify_text("\n".join([_CAPTURE, fault, _CUT_IN_CAPTURE]), "vllm")
    assert got.outcome is Outcome.CRASH and any("device-side assert" in line for line in got.evidence)
    # a fault the rules do not name as fatal is still a fault: it weighs against the memory guess
    other = fault.replace("device-side assert triggered (710)", "operation not supported")
    got = classify_text("\n".join([_CAPTURE, other, _CUT_IN_CAPTURE]), "vllm")
    assert (got.outcome, [o for o, _ in got.alternatives]) == (Outcome.CRASH, [Outcome.OOM_CUDA_GRAPH])


_SMALL = ("CUDA out of memory. Tried to allocate 32.00 MiB. GPU 0 has a total capacity of 23.68 GiB of which 29.81 MiB is "
          "free. Including non-PyTorch memory, this process has 23.63 GiB memory in use.")


@pytest.mark.parametrize(("line", "expected"), [
    (f"(VllmWorkerProcess pid=7) ERROR 03-01 10:00:00 multiproc_worker_utils.py:233] Exception in worker "
     f"VllmWorkerProcess while processing method load_model: {_SMALL}", Outcome.OOM_WEIGHTS),
    (f"ERROR 03-01 10:00:00 worker_base.py:467] Error executing method 'determine_num_available_blocks'. This might "
     f"cause deadlock in distributed execution.\ntorch.OutOfMemoryError: {_SMALL}", Outcome.OOM_KV_POOL),
    (f"ERROR 03-01 10:00:00 worker_base.py:467] Error executing method capture_model.\nRuntimeError: {_SMALL}",
     Outcome.OOM_CUDA_GRAPH),
])
def test_the_method_a_worker_names_places_an_oom_as_a_frame_would(line: str, expected: Outcome) -> None:
    got = classify_text(line, "vllm")
    assert (got.outcome, got.confidence) == (expected, "high")


def test_a_method_name_no_phase_knows_places_nothing() -> None:
    line = f"ERROR 03-01 10:00:00 worker_base.py:467] Error executing method 'get_node_ip'.\ntorch.OutOfMemoryError: {_SMALL}"
    got = classify_text(line, "vllm")
    assert got.confidence == "low" and got.missing.startswith("the phase")


@pytest.mark.parametrize(("frames", "expected"), [
    (["gpu_model_runner.py:3471, in _bookkeeping_sync", "    x = self._get_prompt_logprobs_dict(", "..."],
     Outcome.OOM_RUNTIME),
    (["  /srv/venv/lib/python3.12/site-packages/vllm/model_executor/model_loader/loader.py:400, in load_model"],
     Outcome.OOM_WEIGHTS),
    (["worker.py:12, in determine_available_memory", "    self.model_runner.profile_run()"], Outcome.OOM_KV_POOL),
])
def test_frames_rendered_short_place_an_oom(frames: list[str], expected: Outcome) -> None:
    got = classify_text("\n".join([*frames, "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 3.82 GiB."]),
                        "vllm")
    assert (got.outcome, got.confidence) == (expected, "high")


def test_the_max_len_sentence_cut_before_its_figure_still_says_the_kv_cache_is_short() -> None:
    line = ("ValueError: The model's max seq len (32768) is larger than the maximum number of tokens that can be stored "
            "in KV cache (")
    assert classify_text(line, "vllm").outcome is Outcome.OOM_KV_POOL


def test_a_value_error_with_nothing_before_it_reads_as_a_bad_value_given() -> None:
    got = classify_text("ValueError: expected a positive integer for the rope factor, got -3", "vllm")
    assert (got.outcome, got.confidence) == (Outcome.CONFIG_ERROR, "low")
    assert [o for o, _ in got.alternatives] == [Outcome.CRASH]
    # one that names the setting and the rule it broke is not hedged with a bug of the engine's
    got = classify_text("ValueError: Total number of attention heads (28) must be divisible by tensor parallel size (8)",
                        "vllm")
    assert got.outcome is Outcome.CONFIG_ERROR and not got.alternatives


@pytest.mark.parametrize("log", [
    # raised after the start-up made progress: the arguments were accepted
    "INFO 12-05 10:00:05 [gpu_model_runner.py:1] Starting to load model /m...\nValueError: could not broadcast shapes",
    # another type: a bug more often than a bad argument
    "TypeError: forward() got an unexpected keyword argument 'positions'",
])
def test_other_exceptions_with_nothing_before_them_stay_crashes(log: str) -> None:
    assert classify_text(log, "vllm").outcome is Outcome.CRASH


def test_an_oom_past_capture_is_the_servings_even_with_other_processes_named() -> None:
    line = ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 5.97 GiB. GPU 0 has a total capacity of 79.18 "
            "GiB of which 3.01 GiB is free. Process 14071 has 43.66 GiB memory in use. Including non-PyTorch memory, "
            "this process has 28.91 GiB memory in use. Of the allocated memory 20.35 GiB is allocated by PyTorch, with "
            "2.90 GiB allocated in private pools (e.g., CUDA Graphs), and 1.0 GiB is reserved by PyTorch but unallocated.")
    got = classify_text(line, "vllm")
    assert (got.outcome, got.confidence) == (Outcome.OOM_RUNTIME, "low")
    assert [o for o, _ in got.alternatives] == [Outcome.OOM_CUDA_GRAPH, Outcome.GPU_BUSY]
    without_graphs = classify_text(line.replace("with 2.90 GiB allocated in private pools (e.g., CUDA Graphs), ", ""),
                                   "vllm")
    assert without_graphs.outcome is Outcome.GPU_BUSY


# == After batch F8 (docs/corpus-protocol.md, "Round after F8") ===========================================


def test_a_faulthandler_dump_quotes_no_source_line_under_its_frames() -> None:
    log = ['  File "/usr/lib/python3.10/multiprocessing/spawn.py", line 116 in spawn_main',
           '  File "<string>", line 1 in <module>',
           "[rank2]:[E210 02:06:33.39 ProcessGroupNCCL.cpp:1595] [Rank 2] Watchdog caught collective operation timeout: "
           "WorkNCCL(SeqNum=15, OpType=ALLGATHER) ran for 600094 milliseconds before timing out."]
    assert classify_text("\n".join(log), "sglang").outcome is Outcome.TIMEOUT


def test_pythons_frames_still_quote_their_source_line() -> None:
    log = ['  File "/x/app.py", line 3, in main',
           '    raise RuntimeError("Watchdog caught collective operation timeout")']  # the code, not the event
    got = classify_text("\n".join(log), "sglang")
    # the code, not the event: a traceback cut before its exception line, whose innermost frame raises a timeout (since
    # the census's second part; before, read as a crash from F58's round): a hang at low confidence, the exception line
    # missing, a crash the alternative (the frame's timeout may echo a process that died first)
    assert (got.outcome, got.confidence) == (Outcome.TIMEOUT, "low") and got.missing
    assert Outcome.CRASH in {o for o, _ in got.alternatives}
    plain = classify_text("\n".join([log[0], '    raise RuntimeError("collective operation failed")']), "sglang")
    assert (plain.outcome, plain.confidence) == (Outcome.CRASH, "low")  # a frame that raises something else


@pytest.mark.parametrize("line", [
    "[rank16]:[E214 06:46:21.34 ProcessGroupNCCL.cpp:1834] [PG ID 2 PG GUID 3 Rank 16] Timeout at NCCL work: 9301, last "
    "enqueued NCCL work: 9301, last completed NCCL work: 9300.",
    "[W305 10:00:00.1 socket.cpp:487] [c10d] waitForInput: socket SocketImpl(fd=43, addr=[node-1]:51234, "
    "remote=[node-0]:5000) timed out after 1800000ms",
    "torch.distributed.DistStoreError: Timed out after 1801 seconds waiting for clients. 1/2 clients joined.",
])
def test_torchs_distributed_time_outs_are_timeouts(line: str) -> None:
    assert classify_text(line, "vllm").outcome is Outcome.TIMEOUT


def test_torchs_backtrace_header_is_never_the_tail_of_the_line_above() -> None:
    # (F66's 19801, after its first score: the header read as a wrap of the message hid its "Socket Timeout")
    message = ("torch.distributed.DistBackendError: [1] is setting up NCCL communicator and retrieving ncclUniqueId from "
               "[0] via c10d key-value store by key '0', but store->get('0') got error: Socket Timeout")
    backtrace = ["Exception raised from doWait at ../torch/csrc/distributed/c10d/TCPStore.cpp:550 (most recent call first):",
                 "frame #0: c10::Error::Error(c10::SourceLocation, std::string) + 0x57 (0x7f63 in libc10.so)"]
    assert classify_text("\n".join([message, *backtrace]), "vllm").outcome is Outcome.TIMEOUT


def test_a_log_that_ends_waiting_for_the_engines_own_processes_is_a_hang() -> None:
    waiting = "(APIServer pid=9) INFO 03-01 10:00:{:02d} [utils.py:1] Waiting for 1 local, 0 remote core engine proc(s) to start."
    got = classify_text("\n".join(waiting.format(s) for s in (10, 20, 30)), "vllm")
    assert (got.outcome, got.confidence) == (Outcome.TIMEOUT, "low") and got.missing
    moved_on = classify_text("\n".join([waiting.format(10), "(EngineCore_DP0 pid=11) INFO 03-01 10:00:15 [core.py:1] "
                                        "Initializing a V1 LLM engine (v0.11.0) with config: x"]), "vllm")
    assert moved_on.outcome is None  # it stopped waiting: the log ends elsewhere


def test_uvicorn_listening_is_vllms_ready_sign() -> None:
    got = classify_text("INFO:     Uvicorn running on http://0.0.0.0:8000 (Press CTRL+C to quit)", "vllm")
    assert (got.outcome, got.confidence) == (Outcome.READY, "high")


def test_sglang_is_not_ready_when_uvicorn_listens_it_warms_up_first() -> None:
    got = classify_text("INFO:     Uvicorn running on http://127.0.0.1:30000 (Press CTRL+C to quit)", "sglang")
    assert got.outcome is not Outcome.READY or got.confidence == "low"


def test_vllms_free_memory_check_cut_after_its_figures_still_says_the_gpu_is_taken() -> None:
    got = classify_text("ValueError: Free memory on device cuda:0 (30.12/31.84 GiB) on startup", "vllm")
    assert got.outcome is Outcome.GPU_BUSY and "30.12 of 31.84 GiB" in got.remedy


# == After batch F9 (docs/corpus-protocol.md, "Round after F9") ===========================================

_ARCH = ("ValueError: Model architectures ['{arch}'] are not supported for now. Supported architectures: "
         "['AquilaForCausalLM', 'GemmaForCausalLM', 'LlamaForCausalLM', 'Qwen2ForCausalLM']")


@pytest.mark.parametrize("engine", ["vllm", "sglang"])
def test_an_architecture_rejected_though_listed_as_supported_failed_to_import(engine: str) -> None:
    assert classify_text(_ARCH.format(arch="LlamaForCausalLM"), engine).outcome is Outcome.CRASH
    assert classify_text(_ARCH.format(arch="FooForCausalLM"), engine).outcome is Outcome.CONFIG_ERROR


def test_a_capture_that_failed_because_a_peer_timed_out_is_a_timeout() -> None:
    line = ("Exception: Capture cuda graph failed: [/pytorch/third_party/gloo/gloo/transport/tcp/unbound_buffer.cc:133] "
            "Timed out waiting 1800000ms for send operation to complete")
    assert classify_text(line, "sglang").outcome is Outcome.TIMEOUT


_DIVISIBILITY = ['  File "/x/sglang/srt/distributed/utils.py", line 23, in ensure_divisibility',
                 '    assert numerator % denominator == 0, "{} is not divisible by {}".format(',
                 "AssertionError: 16 is not divisible by 6",
                 "[2026-03-04 09:11:08] Received sigquit from a child process. It usually means the child failed."]


def test_a_parallel_size_that_does_not_divide_a_model_dimension_is_the_config() -> None:
    got = classify_text("\n".join(_DIVISIBILITY), "sglang")
    assert (got.outcome, got.confidence) == (Outcome.CONFIG_ERROR, "high")


def test_an_assertion_under_a_fatal_marker_without_an_argument_frame_stays_a_crash() -> None:
    log = ['  File "/x/sglang/srt/layers/attention.py", line 23, in forward', *_DIVISIBILITY[1:]]
    assert classify_text("\n".join(log), "sglang").outcome is Outcome.CRASH


def test_sglangs_memory_saver_failing_to_resume_is_a_wake_ups_oom() -> None:
    line = ("[torch_memory_saver.cpp] cudaError error: 2 (out of memory)  file=csrc/core.cpp func=resume line=172")
    got = classify_text(line, "sglang")
    assert (got.outcome, got.confidence) == (Outcome.OOM_RUNTIME, "low")


def test_sglangs_launcher_reporting_a_child_failed_is_a_death_marker() -> None:
    child = "Child process unexpectedly failed with an exit code 256. pid=97721"
    assert classify_text(child, "sglang").outcome is Outcome.CRASH
    stopped = classify_text("\n".join(["SIGTERM received. signum=15 frame=None. Draining requests and shutting down...",
                                       child]), "sglang")
    assert stopped.outcome is None  # the stop's own echo


# == After batch F10 (docs/corpus-protocol.md, "Round after F10") =========================================


def test_vllms_engine_iteration_timing_out_is_a_hang_even_while_serving() -> None:
    log = ["INFO 10-30 11:46:47 async_llm_engine.py:173] Added request 541ca48.",
           "ERROR 10-30 11:47:32 async_llm_engine.py:656] Engine iteration timed out. This should never happen!",
           "ERROR 10-30 11:47:32 async_llm_engine.py:56] Engine background task failed"]
    assert classify_text("\n".join(log), "vllm").outcome is Outcome.TIMEOUT


@pytest.mark.parametrize("line", [
    "TimeoutError",
    "asyncio.exceptions.TimeoutError: ",
    "urllib3.exceptions.ReadTimeoutError: HTTPConnectionPool(host='0.0.0.0', port=37077): Read timed out. (read "
    "timeout=600)",
])
def test_an_exception_whose_type_says_it_timed_out_is_a_timeout(line: str) -> None:
    got = classify_text(line, "sglang")
    assert (got.outcome, got.confidence) == (Outcome.TIMEOUT, "low")


def test_a_fatal_marker_over_a_time_out_is_that_time_out() -> None:
    log = ["requests.exceptions.ReadTimeout: HTTPConnectionPool(host='127.0.0.1', port=30000): Read timed out.",
           "[2026-03-01 10:00:00] Received sigquit from a child process. It usually means the child failed."]
    assert classify_text("\n".join(log), "sglang").outcome is Outcome.TIMEOUT


def test_a_requests_time_out_after_the_ready_line_is_the_clients() -> None:
    log = ["[2026-03-01 10:00:00] The server is fired up and ready to roll!", "TimeoutError: request 7 timed out"]
    assert classify_text("\n".join(log), "sglang").outcome is Outcome.READY


@pytest.mark.parametrize("line", [
    "ValueError: The quantization method fp8 is not supported for the current GPU. Minimum capability: 90. Current "
    "capability: 86.",
    "The quantization method awq is not supported for the current GPU. Minimum capability: 75. Current capability: 70.",
])
def test_a_method_the_gpu_is_too_old_for_is_the_config(line: str) -> None:
    got = classify_text(line, "vllm")
    assert (got.outcome, got.confidence) == (Outcome.CONFIG_ERROR, "high")
    assert "compute capability" in got.remedy and ("(86)" in got.remedy or "(70)" in got.remedy)


def test_a_fatal_cuda_fault_with_its_source_location_is_a_crash() -> None:
    line = "CUDA error (/x/flash_mla/get_mla_metadata.cu:93): no kernel image is available for execution on the device"
    assert classify_text("\n".join([_CAPTURE, line]), "sglang").outcome is Outcome.CRASH


def test_a_cuda_fault_that_is_the_logs_last_word_is_a_crash_unless_the_launch_moved_on() -> None:
    fault = "node-3:811:811 [0] NCCL WARN Cuda failure 'invalid resource handle'"
    got = classify_text("\n".join([_CAPTURE, fault]), "vllm")
    assert (got.outcome, got.confidence) == (Outcome.CRASH, "low") and got.missing
    moved_on = classify_text("\n".join(["INFO 12-05 10:00:00 [core.py:1] Initializing a V1 LLM engine (v0.11.0) with "
                                        "config: x", fault, "INFO 12-05 10:00:05 [gpu_model_runner.py:1] Starting to load "
                                        "model /m..."]), "vllm")
    assert moved_on.outcome is None


def test_a_failed_native_assert_is_a_crash() -> None:
    line = ("python: /project/lib/Analysis/Allocation.cpp:40: std::pair<A, B> mlir::triton::getCvtOrder(X, Y): Assertion "
            "`!(srcMmaLayout && dstMmaLayout) && \"Unexpected mma -> mma layout conversion\"' failed.")
    assert classify_text(line, "sglang").outcome is Outcome.CRASH


# == After batch F11 (docs/corpus-protocol.md, "Round after F11") =========================================


def test_an_unplaced_oom_before_pytorch_held_anything_is_the_weights() -> None:
    line = ("RuntimeError: XPU out of memory. Tried to allocate 1.02 GiB (GPU 0; 15.56 GiB total capacity; 0 bytes already "
            "allocated; 0 bytes reserved in total by PyTorch)")
    got = classify_text(line, "vllm")
    assert (got.outcome, got.confidence) == (Outcome.OOM_WEIGHTS, "low") and got.missing.startswith("the phase")
    held = line.replace("0 bytes already allocated", "12.10 GiB already allocated")
    assert classify_text(held, "vllm").outcome is Outcome.OOM_RUNTIME  # then a request's, the likeliest


def test_sglangs_retract_finding_no_room_for_one_request_is_a_runtime_oom() -> None:
    line = "AssertionError: No space left for only one request, self.token_to_kv_pool_allocator.available_size()=0"
    assert classify_text(line, "sglang").outcome is Outcome.OOM_RUNTIME


# == After batch F12 (docs/corpus-protocol.md, "Round after F12") =========================================


def test_vllms_kv_shortfall_sentence_reads_without_its_opening_parenthesis() -> None:
    line = ("ValueError: To serve at least one request with the model's max seq len (1048576),22.5 GiB KV cache is needed, "
            "which is larger than the available KV cache memory (17.39 GiB).")
    assert classify_text(line, "vllm").outcome is Outcome.OOM_KV_POOL


def test_sglangs_load_barrier_giving_up_on_other_ranks_is_a_timeout() -> None:
    line = "TP rank 1 could finish the model loading, but there are other ranks that didn't finish loading."
    assert classify_text(line, "sglang").outcome is Outcome.TIMEOUT


@pytest.mark.parametrize("fault", [
    "ptxas fatal   : Value 'sm_120a' is not defined for option 'gpu-name'",
    "Command '['/usr/local/cuda/bin/ptxas', '--gpu-name=sm_120a', '/tmp/x.ptx']' returned non-zero exit status 255.",
])
def test_a_failed_ptx_assembly_before_a_cut_capture_traceback_makes_it_a_crash(fault: str) -> None:
    got = classify_text("\n".join([_CAPTURE, fault, _CUT_IN_CAPTURE]), "vllm")
    assert (got.outcome, [o for o, _ in got.alternatives]) == (Outcome.CRASH, [Outcome.OOM_CUDA_GRAPH])


def test_rocms_memory_access_fault_is_a_crash_not_memory() -> None:
    line = "Memory access fault by GPU node-1 (Agent handle: 0x55) on address 0x7a41d2c11000. Reason: Unknown."
    got = classify_text(line, "sglang")
    assert got.outcome is Outcome.CRASH and "not a lack of memory" in got.remedy


def test_torch_moving_the_model_to_the_device_places_an_oom_in_the_weights() -> None:
    log = ['  File "/x/torch/nn/modules/module.py", line 1370, in convert',
           "    return t.to(",
           "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 150.00 MiB."]
    got = classify_text("\n".join(log), "sglang")
    assert (got.outcome, got.confidence) == (Outcome.OOM_WEIGHTS, "high")


def test_xla_running_out_of_hbm_is_an_oom() -> None:
    line = ("RuntimeError: Bad StatusOr access: RESOURCE_EXHAUSTED: XLA:TPU compile permanent error. Ran out of memory in "
            "memory space hbm. Used 20.44G of 15.75G hbm. Exceeded hbm capacity by 4.70G.")
    got = classify_text(line, "vllm")
    assert got.outcome is not None and got.outcome.is_oom


# == After batch F13 (docs/corpus-protocol.md, "Round after F13") =========================================


@pytest.mark.parametrize("log", [
    # a message its writer broke after a comma and after a trailing space (a doc, an issue body), not at a width
    ["(EngineCore_DP0 pid=7) ERROR 03-02 10:00:00 [core.py:708] ValueError: ",
     "To serve at least one request with the model's max seq len (131072), ",
     "(18.00 GiB KV cache is needed, which is larger than the available KV cache memory (7.25 GiB). ",
     "Based on the available memory, the estimated maximum model length is 52736."],
    ["RuntimeError: CUDA out of memory occurred when warming up sampler with 256 ",
     "dummy requests. Please try lowering `max_num_seqs` or `gpu_memory_utilization` when initializing the engine."],
])
def test_a_sentence_its_writer_broke_over_short_lines_is_read_whole(log: list[str]) -> None:
    got = classify_text("\n".join(log), "vllm")
    whole = classify_text(" ".join(line.strip() for line in log), "vllm")
    assert got.outcome is whole.outcome and got.outcome is not None and got.outcome.is_oom


def test_a_line_ending_on_a_colon_is_a_header_not_a_sentence_to_join() -> None:
    log = ["Scheduler hit an exception: Traceback (most recent call last):",
           '  File "/sgl/python/sglang/srt/managers/scheduler.py", line 2828, in run_scheduler_process']
    got = classify_text("\n".join(log), "sglang")
    assert got.evidence[0].endswith("(most recent call last):")


@pytest.mark.parametrize("line", [
    "ERROR 09-01 02:20:44 [engine.py:458] Timed out after 601 seconds waiting for clients. 1/8 clients joined.",
    "torch.distributed.DistStoreError: Timed out after 1801 seconds waiting for clients. 3/4 clients joined.",
])
def test_a_rendezvous_that_gave_up_on_its_peers_is_a_timeout_with_or_without_its_type(line: str) -> None:
    assert classify_text(line, "vllm").outcome is Outcome.TIMEOUT


def test_a_log_ending_while_vllms_message_queue_waits_on_a_hung_process_is_a_timeout() -> None:
    log = ["(Worker_TP0 pid=11) INFO 06-10 11:08:37 [weight_utils.py:879] Loading weights took 303.41 seconds",
           "(EngineCore pid=12) INFO 06-10 11:10:39 [shm_broadcast.py:705] No available shared memory broadcast block "
           "found in 60 seconds. This typically happens when some processes are hanging or doing some time-consuming work"]
    got = classify_text("\n".join(log), "vllm")
    assert (got.outcome, got.confidence) == (Outcome.TIMEOUT, "low")
    # the same wait the log moved on from was no hang
    assert classify_text("\n".join([*log, "(APIServer pid=1) INFO:     Application startup complete."]),
                         "vllm").outcome is Outcome.READY


@pytest.mark.parametrize(("line", "outcome"), [
    ("Failed: Cuda error /workspace/csrc/custom_all_reduce.cuh:455 'invalid argument'", Outcome.CRASH),
    ("Failed: Cuda error /opt/src/kernels/moe_align.cu:88 'an illegal memory access was encountered'", Outcome.CRASH),
])
def test_a_located_cuda_error_quoting_its_cause_is_a_fault_not_memory(line: str, outcome: Outcome) -> None:
    got = classify_text(line, "vllm")
    assert got.outcome is outcome
    memory = classify_text("Failed: Cuda error /workspace/csrc/custom_all_reduce.cuh:301 'out of memory'", "vllm")
    assert memory.outcome is not Outcome.CRASH


@pytest.mark.parametrize("line", [
    "Exception: sglang server did not become ready after waiting.",
    "RuntimeError: Server failed to become ready within 600 seconds",
    "⚠️  vLLM not ready after 30 minutes",
])
def test_a_launcher_giving_up_on_the_server_becoming_ready_is_a_timeout(line: str) -> None:
    assert classify_text(line, "sglang").outcome is Outcome.TIMEOUT


def test_a_waiter_that_retries_decides_nothing_and_a_server_up_after_it_is_ready() -> None:
    from autotune.classifier.classify import LogClassifier
    live = LogClassifier("sglang")
    live.feed("[2026-03-01 09:00:02] Server not ready after 10 seconds, retrying")
    assert not live.decisive  # a live launch is not killed for it
    live.feed("[2026-03-01 09:00:30] The server is fired up and ready to roll!")
    assert live.classification().outcome is Outcome.READY


def test_the_servers_own_failure_beats_a_launcher_giving_up_on_it() -> None:
    log = ["[2026-03-01 09:00:02 TP0] Load weight begin. avail mem=23.10 GB",
           "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 224.00 MiB.",
           "Exception: sglang server did not become ready after waiting."]
    assert classify_text("\n".join(log), "sglang").outcome is Outcome.OOM_WEIGHTS


def test_errors_after_vllm_began_a_shutdown_asked_for_are_its_way_out() -> None:
    log = ["(APIServer pid=3) INFO 08-01 21:06:11 [api_server.py:1901] Starting vLLM API server 0 on http://0.0.0.0:8000",
           "(APIServer pid=3) INFO:     Application startup complete.",
           "(EngineCore pid=4) INFO 08-01 21:34:51 [core.py:1227] [shutdown] EngineCore: exiting busy loop",
           "(APIServer pid=3) ERROR 08-01 21:34:51 [async_llm.py:704] AsyncLLM output_handler failed.",
           "(APIServer pid=3) ERROR 08-01 21:34:51 [async_llm.py:704] vllm.v1.engine.exceptions.EngineDeadError: "
           "EngineCore encountered an issue. See stack trace (above) for the root cause."]
    assert classify_text("\n".join(log), "vllm").outcome is Outcome.READY
    # without the shutdown the dead engine is the server's failure
    assert classify_text("\n".join(log[:2] + log[3:]), "vllm").outcome is not Outcome.READY


def test_an_offline_engines_prompts_processed_say_it_served() -> None:
    log = ["INFO 12-01 10:00:00 model_runner.py:1072] Loading model weights took 0.2389 GB",
           "Processed prompts: 100%|██████████| 4/4 [00:00<00:00, 12.31it/s, est. speed input: 73.9 toks/s, "
           "output: 197.0 toks/s]"]
    assert classify_text("\n".join(log), "vllm").outcome is Outcome.READY
    started = log[1].replace("100%|██████████| 4/4", "  0%|          | 0/4")  # nothing generated yet
    assert classify_text("\n".join([log[0], started]), "vllm").outcome is None


# == After batch F14 (docs/corpus-protocol.md, "Round after F14") =========================================


def test_an_oom_in_the_sampler_is_a_forward_passs_unless_a_start_up_frame_is_above_it() -> None:
    sampler = ['  File "/venv/vllm/v1/sample/ops/topk_topp_sampler.py", line 79, in forward_native',
               "    logits = apply_top_k_top_p(logits, k, p)",
               '  File "/venv/vllm/v1/sample/ops/topk_topp_sampler.py", line 111, in apply_top_k_top_p',
               "    logits_sort, logits_idx = logits.sort(dim=-1, descending=False)",
               "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.74 GiB. GPU 1 has a total capacity of "
               "23.69 GiB of which 1.02 GiB is free."]
    got = classify_text("\n".join(["Traceback (most recent call last):", *sampler]), "vllm")
    assert (got.outcome, got.confidence) == (Outcome.OOM_RUNTIME, "low")
    profiled = ["Traceback (most recent call last):",
                '  File "/venv/vllm/v1/worker/gpu_model_runner.py", line 2010, in profile_run',
                "    self._dummy_sampler_run(hidden_states)", *sampler]
    assert classify_text("\n".join(profiled), "vllm").outcome is Outcome.OOM_KV_POOL


# == After batch F15 (docs/corpus-protocol.md, "Round after F15") =========================================


@pytest.mark.parametrize(("line", "engine"), [
    ("ValueError: torch.bfloat16 is not supported for quantization method awq. Supported dtypes: [torch.float16]",
     "sglang"),
    ("(EngineCore pid=9) ValueError: torch.float32 is not supported for quantization method gptq_marlin. Supported "
     "dtypes: [torch.float16, torch.bfloat16]", "vllm"),
])
def test_a_dtype_the_quantization_method_cannot_run_in_is_the_config(line: str, engine: str) -> None:
    got = classify_text(line, engine)
    assert got.outcome is Outcome.CONFIG_ERROR and "--dtype" in got.remedy


@pytest.mark.parametrize("last", [
    "2025-03-27T19:09:40.101Z  INFO dynamo_llm::engines::sglang::worker: Waiting for sglang0 to signal that it's ready",
    "[launcher] waiting for the inference server to become ready (attempt 3/60)",
    "INFO 03-01 10:00:05 [utils.py:800] Waiting for 1 local, 0 remote core engine proc(s) to start.",
])
def test_a_log_that_ends_while_something_waits_for_the_server_is_a_timeout_low(last: str) -> None:
    log = ["[2026-03-01 09:00:00 TP0] Load weight end. type=Qwen2ForCausalLM, avail mem=60.1 GB, mem usage=14.2 GB.", last]
    got = classify_text("\n".join(log), "sglang")
    assert (got.outcome, got.confidence) == (Outcome.TIMEOUT, "low")
    moved_on = [*log, "[2026-03-01 09:01:10] The server is fired up and ready to roll!"]
    assert classify_text("\n".join(moved_on), "sglang").outcome is Outcome.READY


def test_sglangs_watchdog_dumping_a_stuck_process_is_a_timeout_even_after_serving() -> None:
    log = ['[2025-11-05 10:18:47] INFO:     127.0.0.1:43844 - "GET /v1/models HTTP/1.1" 200 OK',
           "[2025-11-05 10:18:51] self.cur_batch.batch_size()=1",
           "[2025-11-05 10:18:51] Pyspy dump for PID 499:",
           "Process 499: sglang::scheduler",
           'Thread 499 (idle): "MainThread"',
           "    run_batch (scheduler.py:1987)"]
    assert classify_text("\n".join(log), "sglang").outcome is Outcome.TIMEOUT


# == After batch F16 (docs/corpus-protocol.md, "Round after F16") =========================================


@pytest.mark.parametrize("check", ["assert self.total_num_heads % tp_size == 0",
                                   "assert self.num_experts % self.ep_size == 0",
                                   "assert config.num_key_value_heads % attn_tp_size == 0"])
def test_a_bare_assert_that_a_parallel_size_divides_a_dimension_is_the_config(check: str) -> None:
    log = ["[2025-02-14 02:47:45 TP0] Scheduler hit an exception: Traceback (most recent call last):",
           '  File "/sgl/python/sglang/srt/model_executor/model_runner.py", line 310, in load_model',
           "    self.model = get_model(",
           '  File "/sgl/python/sglang/srt/models/qwen2.py", line 105, in __init__',
           f"    {check}",
           "AssertionError"]
    got = classify_text("\n".join(log), "sglang")
    assert got.outcome is Outcome.CONFIG_ERROR and "divide" in got.remedy
    other = [*log[:4], "    assert weight.shape[0] == loaded_weight.shape[0]", "AssertionError"]
    assert classify_text("\n".join(other), "sglang").outcome is Outcome.CRASH


@pytest.mark.parametrize("line", [
    "slurmstepd: error: *** JOB 1422882 ON ac045 CANCELLED AT 2026-01-30T23:14:08 DUE TO TIME LIMIT ***",
    "=>> PBS: job killed: walltime 3605 exceeded limit 3600",
])
def test_a_batch_system_ending_the_job_at_its_time_limit_is_a_timeout(line: str) -> None:
    log = ["Loading safetensors checkpoint shards:  17% Completed | 1/6 [00:42<03:30, 42.11s/it]", line]
    assert classify_text("\n".join(log), "vllm").outcome is Outcome.TIMEOUT
    cancelled = "slurmstepd: error: *** JOB 1422882 ON ac045 CANCELLED AT 2026-01-30T23:14:08 ***"  # scancel: not time
    assert classify_text("\n".join([log[0], cancelled]), "vllm").outcome is not Outcome.TIMEOUT


# == After batch F17 (docs/corpus-protocol.md, "Round after F17") =========================================


def test_the_method_the_driver_names_places_an_oom_any_worker_logged() -> None:
    log = ["(RayWorkerWrapper pid=1189) ERROR 08-14 11:52:46 worker_base.py:581] RuntimeError: NPU out of memory. Tried to "
           "allocate 450.00 MiB (NPU 3; 60.96 GiB total capacity; 60.30 GiB already allocated; 5.78 MiB free)",
           "ERROR 08-14 11:52:47 worker_base.py:581] Error executing method 'load_model'. This might cause deadlock in "
           "distributed execution."]
    assert classify_text("\n".join(log), "vllm").outcome is Outcome.OOM_WEIGHTS
    # a frame is its own writer's: another process's frame does not place it
    frame = '(OtherProc pid=7) ERROR 08-14 11:52:47 worker_base.py:581]   File "/v/worker.py", line 9, in load_model'
    assert classify_text("\n".join([log[0], frame]), "vllm").outcome is not Outcome.OOM_WEIGHTS


@pytest.mark.parametrize("blocks", ["0", "-1"])
def test_no_kv_blocks_at_all_is_the_kv_pool(blocks: str) -> None:
    got = classify_text(f"INFO 06-21 10:00:18 llm_engine.py:128] # GPU blocks: {blocks}, # CPU blocks: 512", "vllm")
    assert got.outcome is Outcome.OOM_KV_POOL
    assert classify_text("INFO 06-21 10:00:18 llm_engine.py:128] # GPU blocks: 10, # CPU blocks: 512",
                         "vllm").outcome is None


def test_an_oom_in_a_dumped_model_execution_is_a_forward_passs() -> None:
    line = ("[rank0]: torch.OutOfMemoryError: Error in model execution (input dumped to /tmp/err_execute_model_input_"
            "20241010-154829.pkl): CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 23.65 "
            "GiB of which 1.21 GiB is free.")
    got = classify_text(line, "vllm")
    assert (got.outcome, got.confidence) == (Outcome.OOM_RUNTIME, "low")


@pytest.mark.parametrize("line", [
    "RuntimeError: Worker failed with error 'LoRA rank 32 is greater than max_lora_rank 16.', please check the stack trace",
    "ValueError: number of speculative tokens 8 is larger than max_spec_tokens 5",
])
def test_a_value_above_the_limit_a_flag_sets_is_the_config(line: str) -> None:
    got = classify_text(line, "vllm")
    assert got.outcome is Outcome.CONFIG_ERROR and "--max_" in got.remedy


def test_a_log_ending_while_ray_places_the_workers_is_a_timeout_low() -> None:
    line = ("INFO 11-02 01:02:03 ray_utils.py:214] Waiting for creating a placement group of specs for 10 seconds. "
            "specs=[{'GPU': 1.0, 'node:10.0.0.5': 0.001}, {'GPU': 1.0}]")
    got = classify_text(line, "vllm")
    assert (got.outcome, got.confidence) == (Outcome.TIMEOUT, "low")


# == After batch F18 (docs/corpus-protocol.md, "Round after F18") =========================================


@pytest.mark.parametrize("line", [
    "ValueError: Cannot provide a placement group of placement_group_specs=[{'GPU': 1.0}, {'GPU': 1.0}] within 1800 "
    "seconds. See `ray status` to make sure the cluster has enough resources.",
    "RuntimeError: Could not connect to the KV transfer peer within 120 s",
])
def test_something_the_launch_waited_for_not_coming_within_its_time_is_a_timeout(line: str) -> None:
    assert classify_text(line, "vllm").outcome is Outcome.TIMEOUT
    # a duration that is not a wait running out
    assert classify_text("ValueError: --request-timeout must be at least 1 second", "vllm").outcome is not Outcome.TIMEOUT


# == Before batch F19: SGLang's start-up raise sites, read from its source (docs/corpus-protocol.md, "The source census") ==

_SCHEDULER_DIES = ("[2026-01-01 10:00:00 TP0] Init torch distributed begin.\n"
                   "[2026-01-01 10:00:01 TP0] Scheduler hit an exception: Traceback (most recent call last):\n"
                   '  File "/opt/sglang/python/sglang/srt/managers/scheduler.py", line 2400, in run_scheduler_process\n'
                   "    scheduler = Scheduler(server_args, port_args, gpu_id, tp_rank)\n"
                   '  File "/opt/sglang/python/sglang/srt/layers/feature.py", line 88, in build\n'
                   "    raise err\n"
                   "{line}\n\n"
                   "[2026-01-01 10:00:02] Received sigquit from a child process. It usually means the child failed.")


@pytest.mark.parametrize("line", [
    "ValueError: Invalid sampling backend: beam_pytorch",
    "AssertionError: Speculative decoding with a draft of another vocabulary is not supported with the paged allocator.",
    "ValueError: tp_size 6 must be divisible by moe_dp_size 4",
    "NotImplementedError: LoRA adapters are not supported for this model family yet",
    "ValueError: The fused MoE kernel is not compatible with --enable-two-batch-overlap. Please use --moe-runner-backend triton.",
    "RuntimeError: FlashMLA requires page_size 64; pass --page-size 64 or use --attention-backend triton",
    "ValueError: kv_cache_dtype fp8_e5m2 can only be used with the triton backend",
])
def test_an_exception_that_rejects_a_named_setting_is_the_config_wherever_it_is_raised(line: str) -> None:
    assert classify_text(line, "sglang").outcome is Outcome.CONFIG_ERROR
    # under the scheduler's fatal marker too: the marker lends the verdict of the exception above it
    got = classify_text(_SCHEDULER_DIES.format(line=line), "sglang")
    assert got.outcome is Outcome.CONFIG_ERROR and "rejected a setting" in got.remedy


@pytest.mark.parametrize("line", [
    # a kernel's own runtime check on shapes it computed: no setting named
    "RuntimeError: Runtime check failed at /opt/kernels/gemm/marlin.cuh:963: size_k = 704, is not divisible by "
    "b_scales.size(1) = 5",
    "ValueError: q.shape[0] (8126) does not match qo_indptr[-1] (8125).",
    "TypeError: '>' not supported between instances of 'NoneType' and 'int'",
    # the hardware alone, no setting to change
    "RuntimeError: SGLang only supports sm75 and above.",
    "RuntimeError: operation not supported on this GPU",
])
def test_an_exception_that_names_no_setting_stays_a_crash(line: str) -> None:
    assert classify_text(_SCHEDULER_DIES.format(line=line), "sglang").outcome is Outcome.CRASH


def test_sglangs_watchdog_reporting_a_dead_subprocess_is_a_crash_that_looks_above() -> None:
    line = "[2026-01-01 10:00:05] Subprocess scheduler_0 (pid=4242) crashed with exit code -6. Triggering SIGQUIT for cleanup..."
    assert classify_text(line, "sglang").outcome is Outcome.CRASH
    # its cause above it gives the verdict
    got = classify_text("ValueError: Invalid attention backend: flashmla_sparse\n" + line, "sglang")
    assert got.outcome is Outcome.CONFIG_ERROR


@pytest.mark.parametrize("engine", ["sglang", "vllm"])
def test_a_model_path_with_no_weight_files_is_the_config(engine: str) -> None:
    got = classify_text("RuntimeError: Cannot find any model weights with `/data/models/Qwen3-8B`", engine)
    assert got.outcome is Outcome.CONFIG_ERROR and "/data/models/Qwen3-8B" in got.remedy


def test_an_argument_check_that_fails_under_the_loader_is_the_config_not_a_crash_of_loading() -> None:
    """`ensure_divisibility` raised while a layer is built under `load_model`: the innermost frame, a check of the
    parallel size the user chose, places it (the loader's frame above it does not make it a loading crash)."""
    head = "(EngineCore_0 pid=100) ERROR 06-01 10:00:00 [core.py:700] "
    lines = ["Traceback (most recent call last):",
             '  File "/venv/vllm/v1/worker/gpu_model_runner.py", line 1800, in load_model',
             "    self.model = model_loader.load_model(",
             '  File "/venv/vllm/model_executor/models/qwen2.py", line 140, in __init__',
             "    self.qkv_proj = QKVParallelLinear(",
             '  File "/venv/vllm/distributed/utils.py", line 22, in ensure_divisibility',
             '    assert numerator % denominator == 0, "{} is not divisible by {}".format(',
             "AssertionError: 28 is not divisible by 3"]
    got = classify_text("\n".join(head + line for line in lines), "vllm")
    assert (got.outcome, got.phase) == (Outcome.CONFIG_ERROR, Phase.ARGS)
    # the same frames over an OOM stay the loader's
    oom = [*lines[:5], "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB."]
    assert classify_text("\n".join(head + line for line in oom), "vllm").outcome is Outcome.OOM_WEIGHTS


# == After batch F19 (docs/corpus-protocol.md, "Round after F19") =========================================


@pytest.mark.parametrize(("line", "engine"), [
    ("/opt/venv/bin/python3.12: Error while finding module specification for 'sglang.launch_server' "
     "(ModuleNotFoundError: No module named 'sglang')", "sglang"),
    ("/usr/bin/python3: No module named vllm", "vllm"),
])
def test_the_interpreter_not_finding_the_engines_module_is_a_crash_of_the_environment(line: str, engine: str) -> None:
    got = classify_text(line, engine)
    assert (got.outcome, got.confidence) == (Outcome.CRASH, "high") and "not installed" in got.remedy
    # a module an engine imports lazily, missing, is its own line (ModuleNotFoundError), not the interpreter's
    assert "not installed in that" not in classify_text("ModuleNotFoundError: No module named 'flash_attn'", engine).remedy


@pytest.mark.parametrize("line", [
    "ValueError: Cannot find model module. 'Phi5VisionForCausalLM' is not a registered model in the Transformers "
    "library (only relevant if the model is meant to be in Transformers)",
    "ValueError: OmniTalkerForConditionalGeneration has no vLLM implementation and the Transformers implementation is "
    "not compatible with vLLM.",
])
def test_no_implementation_of_the_models_architecture_is_the_config(line: str) -> None:
    assert classify_text(line, "vllm").outcome is Outcome.CONFIG_ERROR


def test_a_config_file_that_is_not_text_read_by_transformers_is_the_config() -> None:
    lines = ["Traceback (most recent call last):",
             '  File "/env/lib/python3.11/site-packages/transformers/configuration_utils.py", line 700, in _get_config_dict',
             "    config_dict = cls._dict_from_json_file(resolved_config_file)",
             '  File "/env/lib/python3.11/site-packages/transformers/configuration_utils.py", line 800, in _dict_from_json_file',
             "    text = reader.read()",
             "UnicodeDecodeError: 'utf-8' codec can't decode byte 0x8b in position 1: invalid start byte"]
    assert classify_text("\n".join(lines), "sglang").outcome is Outcome.CONFIG_ERROR
    # the same exception in a request's detokenizer is not the config
    serving = ['  File "/env/lib/python3.11/site-packages/sglang/srt/managers/detokenizer_manager.py", line 90, in '
               "event_loop", "UnicodeDecodeError: 'utf-8' codec can't decode byte 0xe4 in position 3: unexpected end"]
    assert classify_text("\n".join(["Traceback (most recent call last):", *serving]), "sglang").outcome \
        is not Outcome.CONFIG_ERROR


def test_a_kernels_device_side_assertion_is_a_fault_that_is_not_memory() -> None:
    lines = ["[2026-01-01 10:00:00 TP0] Load weight end. type=LlamaForCausalLM, dtype=torch.bfloat16, avail mem=60.00 GB",
             "/pytorch/aten/src/ATen/native/cuda/ScatterGatherKernel.cu:144: operator(): block: [3,0,0], thread: [7,0,0] "
             "Assertion `idx_dim >= 0 && idx_dim < index_size && \"index out of bounds\"` failed.",
             "[2026-01-01 10:00:01 TP0] Scheduler hit an exception: Traceback (most recent call last):",
             '  File "/sgl/python/sglang/srt/model_executor/model_runner.py", line 400, in init_memory_pool']
    got = classify_text("\n".join(lines), "sglang")
    assert got.outcome is Outcome.CRASH and got.confidence == "low"


# == From vLLM's source census (docs/corpus-protocol.md, "The vLLM source census") ==========================


@pytest.mark.parametrize("line", [
    "NotImplementedError: TreeAttention does not support fp8 kv-cache yet",
    "ValueError: The output size is not aligned with the quantized weight shape. This can be caused by too large "
    "tensor parallel size.",
    "ValueError: Sliding windows differ across layers. One fix is to set disable_sliding_window=True",
    "ValueError: Unknown speculative decoding method: medusa_v9",
    "KeyError: 'invalid reasoning parser: r1x (chose from { deepseek_r1,qwen3 })'",
    "TypeError: Error: --enable-auto-tool-choice requires --tool-call-parser to be set",
    "ValueError: Capture size larger than 512 is not supported for full cuda graph.",
])
def test_more_forms_of_an_exception_rejecting_a_named_setting(line: str) -> None:
    assert classify_text(line, "vllm").outcome is Outcome.CONFIG_ERROR


@pytest.mark.parametrize("line", [
    "ValueError: Please set the environment variable `VLLM_LOGGING_LEVEL=DEBUG` to see more",  # an env var, upper case
    "TypeError: unsupported operand type(s) for *: 'int' and 'NoneType'",
    "KeyError: 'model.layers.0.mlp.gate_proj.weight'",
    "RuntimeError: This build does not support the requested operation",  # names no setting
    "TypeError: Unknown image model type: qwen2_5_vl",  # a value the library lacks, not one the user set
    "ValueError: Unsupported compute capability: 12.0",  # the hardware
])
def test_an_exception_without_a_setting_and_a_rule_it_broke_is_not_read_as_a_rejected_setting(line: str) -> None:
    assert "rejected a setting" not in classify_text("Traceback (most recent call last):\n" + line, "vllm").remedy


@pytest.mark.parametrize("line", [
    "argparse.ArgumentTypeError: argument --max-model-len: Value 32kk cannot be converted to <class 'int'>.",
    "argparse.ArgumentError: argument --dtype: invalid choice: 'bf32'",
])
def test_argparses_own_exceptions_are_the_arguments(line: str) -> None:
    assert classify_text(line, "vllm").outcome is Outcome.CONFIG_ERROR


def test_a_quantization_the_checkpoint_has_no_config_of_is_the_config() -> None:
    got = classify_text("ValueError: Cannot find the config file for gptq", "sglang")
    assert got.outcome is Outcome.CONFIG_ERROR and "--quantization gptq" in got.remedy


def test_more_gpus_than_the_placement_group_is_the_config_raised_and_a_wait_warned() -> None:
    raised = ("ValueError: The number of required GPUs exceeds the total number of available GPUs in the placement "
              "group. Required number of devices: 8. Total number of devices: 4.")
    assert classify_text(raised, "vllm").outcome is Outcome.CONFIG_ERROR
    warned = ("WARNING 04-01 02:45:50 ray_utils.py:320] The number of required GPUs exceeds the total number of "
              "available GPUs in the placement group.")
    assert classify_text(warned, "vllm").outcome is not Outcome.CONFIG_ERROR


def test_a_response_that_did_not_come_within_its_time_is_a_timeout() -> None:
    line = "RuntimeError: Did not receive response from front-end process within 5 minutes"
    assert classify_text(line, "vllm").outcome is Outcome.TIMEOUT


def test_the_clients_line_that_the_engine_core_died_is_a_fatal_marker() -> None:
    line = "(APIServer pid=1) ERROR 09-04 10:00:05 [core_client.py:564] Engine core proc EngineCore_0 died unexpectedly, shutting down client."
    assert classify_text(line, "vllm").outcome is Outcome.CRASH


# == After batch F20 (docs/corpus-protocol.md, "Round after F20") =========================================


@pytest.mark.parametrize("line", [
    "triton.runtime.errors.OutOfResources: out of resource: shared memory, Required: 232448, Hardware limit: 232448.",
    'The launch exits with "out of resource: shared memory, Required: 98304, Hardware limit: 65536"',
])
def test_a_triton_kernel_short_of_on_chip_memory_is_a_crash_not_an_oom(line: str) -> None:
    got = classify_text(line, "sglang")
    assert got.outcome is Outcome.CRASH and "not device memory" in got.remedy


def test_vllms_wrapped_failure_to_create_the_weights_is_the_weights_oom() -> None:
    lines = ["RuntimeError: Failed to create unquantized linear weights.",
             "This may be caused by insufficient memory to allocate the weight."]
    assert classify_text("\n".join(lines), "vllm").outcome is Outcome.OOM_WEIGHTS


@pytest.mark.parametrize("line", [
    "(Worker_TP0 pid=7) INFO 03-01 10:00:00 [gpu_worker.py:300] Available KV cache memory: 0.0 GiB",
    "(Worker_TP3 pid=9) INFO 03-01 10:00:00 [worker_v1.py:259] Available memory: 0, total memory: 68719476736",
])
def test_no_memory_left_for_the_kv_cache_is_the_pool(line: str) -> None:
    assert classify_text(line, "vllm").outcome is Outcome.OOM_KV_POOL
    # some left is a figure, not a failure
    assert classify_text(line.replace(": 0", ": 10"), "vllm").outcome is not Outcome.OOM_KV_POOL


@pytest.mark.parametrize("line", [
    "ValueError: Failed to import Ray: No module named 'ray'. Please install Ray with `pip install ray`.",
    "ValueError: FlashInfer sampling module not available, please check flashinfer installation.",
    "ValueError: Transformers version 4.51.0 is not supported for model type glm5. Please upgrade transformers to >= 4.56.",
    "RuntimeError: --attention-backend fa3 needs the flash_attn_3 package, which is not installed",
])
def test_a_missing_or_old_package_is_the_environment_even_where_the_arguments_are_read(line: str) -> None:
    lines = ["Traceback (most recent call last):",
             '  File "/venv/lib/python3.12/site-packages/sglang/srt/server_args.py", line 900, in __post_init__',
             "    self._check()", line]
    got = classify_text("\n".join(lines), "sglang")
    assert got.outcome is Outcome.CRASH and "missing or too old" in got.remedy
    # a setting rejected there stays the arguments
    lines[-1] = "ValueError: Invalid attention backend: fa9"
    assert classify_text("\n".join(lines), "sglang").outcome is Outcome.CONFIG_ERROR


# == After batch F21 (docs/corpus-protocol.md, "Round after F21") =========================================


@pytest.mark.parametrize(("before", "expected"), [
    ("INFO 07-14 12:00:00 model_runner.py:1072] Starting to load model Qwen/Qwen2.5-14B-Instruct...", Outcome.OOM_WEIGHTS),
    ("[2026-01-01 10:00:00 TP0] Capture cuda graph begin. This can take up to several minutes. avail mem=3.10 GB",
     Outcome.OOM_CUDA_GRAPH),
])
def test_torchs_allocator_failing_to_ask_nvml_for_its_oom_message_is_that_oom(before: str, expected: Outcome) -> None:
    line = ('RuntimeError: NVML_SUCCESS == r INTERNAL ASSERT FAILED at "../c10/cuda/CUDACachingAllocator.cpp":838, please '
            "report a bug to PyTorch.")
    engine = "sglang" if before.startswith("[") else "vllm"
    assert classify_text("\n".join([before, line]), engine).outcome is expected
    # another of the allocator's asserts is not memory
    other = 'RuntimeError: captures_underway.empty() INTERNAL ASSERT FAILED at "../c10/cuda/CUDACachingAllocator.cpp":2967'
    assert classify_text("\n".join([before, other]), engine).outcome is Outcome.CRASH


def test_a_header_abridged_by_whoever_pasted_it_is_still_a_header() -> None:
    lines = ["(EngineCore pid=98) ERROR ... assert self.kv_cache_dtype in {\"fp8\", \"fp8_e4m3\"}",
             "(EngineCore pid=98) ERROR ... AssertionError"]
    assert classify_text("\n".join(lines), "vllm").outcome is Outcome.CRASH
    assert logtext.split("WARNING ... Free memory on device is low")[0] == "Free memory on device is low"


# == From the older versions' source censuses (docs/corpus-protocol.md, "The older versions' censuses") ============


@pytest.mark.parametrize("line", [
    "[2025-05-01 10:00:01] DetokenizerManager hit an exception: Traceback (most recent call last):",
    "[2025-05-01 10:00:01 DP0] DataParallelController hit an exception: Traceback (most recent call last):",
    "[2025-05-01 10:00:01 TP1] TokenizerWorker hit an exception: Traceback (most recent call last):",  # invented
])
def test_every_sglang_process_reports_its_failure_alike(line: str) -> None:
    got = classify_text("\n".join([line, '  File "/x/sglang/srt/managers/io.py", line 9, in run', "EOFError"]), "sglang")
    assert got.outcome is Outcome.CRASH and any("hit an exception" in e for e in got.evidence)
    assert classify_text("[2025-05-01 10:00:01] the batch hit an exception handler", "sglang").outcome is None


@pytest.mark.parametrize("line", [
    "Exception: sgl-kernel is installed with version 0.1.2, which is less than the minimum required version 0.1.4.",
    "Exception: flashinfer_python with minimum required version 0.2.5 is not installed. Please reinstall it.",
    "Exception: torchao is installed with version 0.8.0, which is less than the minimum required version 0.9.0",
])
def test_a_bare_exception_naming_a_package_too_old_is_the_environment(line: str) -> None:
    got = classify_text(line, "sglang")
    assert got.outcome is Outcome.CRASH and "missing or too old" in got.remedy


def test_a_bare_exception_is_an_exception() -> None:
    got = classify_text("Traceback (most recent call last):\nException: No corresponding LoRA layer supported", "sglang")
    assert got.outcome is Outcome.CRASH and got.evidence[0].startswith("Exception:")
    assert classify_text("Exceptional throughput: 900 tok/s", "sglang").outcome is None


@pytest.mark.parametrize("line", [
    "AssertionError: please provide --dist-init-addr as host:port of head node",
    "AssertionError: please set tensor_parallel_size (4) to less than max local gpu count (2)",
    "NotImplementedError: Speculative decoding is currently incompatible with pipeline parallelism",
    "ValueError: Invalid attention backend 'FLASH'. Available backends: FLASH_ATTN, XFORMERS",
    "ValueError: Chunked MM input disabled but max_tokens_per_mm_item (16384) is larger than max_num_batched_tokens (8192).",
    "ValueError: ModelOpt currently only supports: FP8, NVFP4 quantizations in sglang.",
    "RuntimeError: Chat template ./t.jinja is not a built-in template name or a valid chat template file.",
    "ValueError: For quantized MoE models, please make sure (moe_intermediate_size=2048 / moe_tp_size=8) % block_n=128 == 0",
    "ValueError: Unexpected extra config keys for load format auto: {'foo'}",
    "ValueError: max_num_seqs (512) is greater than max_num_batched_tokens (256)",  # invented
    # the loader's own check raises AttributeError (the 0.4.10 and 0.8.5 censuses)
    "AttributeError: Model DeepseekV2ForCausalLM does not support BitsAndBytes quantization yet.",
])
def test_more_forms_of_a_setting_rejected_from_the_older_censuses(line: str) -> None:
    assert classify_text(line, "vllm").outcome is Outcome.CONFIG_ERROR


@pytest.mark.parametrize("line", [
    "RuntimeError: The size of tensor a (4096) is larger than the size of tensor b (2048)",  # no setting's name
    "ValueError: Invalid buffer 'x' for the kernel",  # names no setting
    "AssertionError: please make sure the kernel is compiled",  # the rule form, no setting
    "AttributeError: 'Logger' object has no attribute 'warning_one'",  # a code bug (the 0.8.5 census)
])
def test_an_exception_with_a_comparison_but_no_setting_is_not_a_rejected_setting(line: str) -> None:
    assert "rejected a setting" not in classify_text("Traceback (most recent call last):\n" + line, "vllm").remedy


def test_sglangs_old_registry_rejecting_an_architecture_is_the_config() -> None:
    line = "ValueError: Unsupported architectures: Qwen3ForCausalLM. Supported list: ['LlamaForCausalLM']"
    assert classify_text(line, "sglang").outcome is Outcome.CONFIG_ERROR


@pytest.mark.parametrize("line", [
    "RuntimeError: ModelExpress: timed out waiting for seed ready (model=x, worker=0)",
    "torch.distributed.DistStoreError: Timed out after 601 seconds waiting for clients. 1/8 clients joined.",
    "RuntimeError: Connection to the router timed out after 30 s",  # invented
])
def test_an_exception_whose_message_says_it_timed_out_is_a_timeout(line: str) -> None:
    got = classify_text(line, "vllm")
    assert got.outcome is Outcome.TIMEOUT and "see the evidence" not in got.remedy  # a rule's own remedy, not the fallback
    # a line that says it tried again is not one (the layers beneath the engine say a wait timed out in log lines of
    # their own, not only in exceptions: the runtime census, after F63)
    assert classify_text("INFO 01-01 10:00:00 x.py:1] request timed out earlier, retried", "vllm").outcome is None


def test_vllm_v0s_worker_monitor_saying_a_worker_was_killed_is_the_host_oom_killer() -> None:
    got = classify_text("ERROR 12-20 10:00:02 multiproc_worker_utils.py:120] Worker VllmWorkerProcess pid 4123 died, "
                        "exit code: -9", "vllm")
    assert got.outcome is Outcome.CRASH and "host OOM killer" in got.remedy
    # the same monitor at a normal shutdown (SIGTERM) is not a failure
    shutdown = ["INFO:     Application startup complete.", "INFO:     Shutting down",
                "ERROR 12-20 10:09:00 multiproc_worker_utils.py:120] Worker VllmWorkerProcess pid 4123 died, exit code: -15"]
    assert classify_text("\n".join(shutdown), "vllm").outcome is not Outcome.CRASH


def test_an_oom_setting_the_device_up_is_a_device_full_before_the_launch_took_any() -> None:
    lines = ["Traceback (most recent call last):",
             '  File "/venv/lib/python3.10/site-packages/vllm/worker/worker.py", line 140, in init_device',
             "    torch.cuda.set_device(self.device)",
             "RuntimeError: CUDA error: out of memory"]
    assert classify_text("\n".join(lines), "vllm").outcome is Outcome.GPU_BUSY


def test_an_oom_setting_the_attention_backend_up_after_the_pool_is_the_pools_slack() -> None:
    lines = ["[2025-05-01 10:00:01 TP0] Scheduler hit an exception: Traceback (most recent call last):",
             '  File "/sgl/python/sglang/srt/model_executor/model_runner.py", line 220, in initialize',
             "    self.init_attention_backend()",
             '  File "/sgl/python/sglang/srt/model_executor/model_runner.py", line 900, in init_attention_backend',
             "    self.attn_backend = FlashInferAttnBackend(self)",
             "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 512.00 MiB. GPU 0 has a total capacity of "
             "79.19 GiB of which 301.06 MiB is free."]
    assert classify_text("\n".join(lines), "sglang").outcome is Outcome.OOM_KV_POOL


@pytest.mark.parametrize(("before", "after", "expected"), [
    ("41006317568", "43150655488", Outcome.GPU_BUSY),  # vLLM 0.6 prints bytes with no unit
    ("41006317568", "41006317568", Outcome.CRASH),  # the figures did not move: no one else took or released any
])
def test_free_memory_that_moved_while_profiling_in_bare_bytes(before: str, after: str, expected: Outcome) -> None:
    line = (f"AssertionError: Error in memory profiling. Initial free memory {before}, current free memory {after}. "
            "This happens when the GPU memory was not properly cleaned up before initializing the vLLM instance.")
    assert classify_text(line, "vllm").outcome is expected


# == After batch F22 (docs/corpus-protocol.md, "Round after F22") =========================================


@pytest.mark.parametrize("line", [
    "ray.exceptions.RayTaskError(KeyError): ray::RayWorkerWrapper.execute_method() (pid=535, ip=10.0.0.7)",
    "ray.exceptions.RayTaskError(AttributeError): ray::RayWorkerWrapper.execute_method()",  # invented
])
def test_an_exception_re_raised_with_its_cause_in_parentheses_is_an_exception(line: str) -> None:
    got = classify_text("Traceback (most recent call last):\n" + line, "vllm")
    assert got.outcome is Outcome.CRASH and got.evidence == (line,)
    assert classify_text("RayTaskError(KeyError) was mentioned in the docs", "vllm").outcome is None


def test_dynamos_footer_says_torch_compile_failed() -> None:
    lines = ["from user code:", '   File "/x/vllm/model_executor/models/llama.py", line 300, in forward',
             "",
             "Set TORCHDYNAMO_VERBOSE=1 for the internal stack trace (please do this especially if you're reporting a bug "
             "to PyTorch). For even more developer context, set TORCH_LOGS=\"+dynamo\""]
    got = classify_text("\n".join(lines), "vllm")
    assert got.outcome is Outcome.CRASH and "torch.compile" in got.remedy
    # an OOM in the same exception is the OOM's
    oom = ["torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of "
           "79.19 GiB of which 1.10 GiB is free.", *lines]
    assert classify_text("\n".join(oom), "vllm").outcome is not Outcome.CRASH


def test_a_v0_engine_process_traceback_through_its_main_is_the_engine_dying() -> None:
    lines = ["ERROR 05-26 00:17:47 [engine.py:448] 'ColumnParallelLinear' object has no attribute 'input_scale'",
             "ERROR 05-26 00:17:47 [engine.py:448] Traceback (most recent call last):",
             'ERROR 05-26 00:17:47 [engine.py:448]   File "/usr/lib/vllm/engine/multiprocessing/engine.py", line 436, '
             "in run_mp_engine"]
    assert classify_text("\n".join(lines), "vllm").outcome is Outcome.CRASH
    # its SIGTERM handler's "MQLLMEngine terminated" after a server that was up is a stop, not a crash
    stopped = ["INFO:     Application startup complete.", "INFO 04-18 15:05:59 launcher.py:59] Shutting down FastAPI HTTP "
               "server.", "ERROR 04-18 15:05:59 engine.py:389] MQLLMEngine terminated", *lines[1:]]
    assert classify_text("\n".join(stopped), "vllm").outcome is Outcome.READY


def test_ray_serves_ready_line_is_ready() -> None:
    line = "INFO 2025-08-29 18:02:42,869 serve 519120 -- Application 'default' is ready at http://127.0.0.1:8000/."
    assert classify_text(line, "vllm").outcome is Outcome.READY


def test_an_engine_whose_build_does_not_run_here_fails_reading_its_arguments_as_the_environment() -> None:
    trace = ["Traceback (most recent call last):",
             '  File "/venv/lib/python3.12/site-packages/vllm/config/__init__.py", line 900, in __post_init__',
             "    self.device = current_platform.device_type",
             "NotImplementedError"]
    assert classify_text("\n".join(trace), "vllm").outcome is Outcome.CONFIG_ERROR  # read as the arguments
    for line in ("WARNING 01-01 10:00:00 [_custom_ops.py:20] Failed to import from vllm._C with ImportError('libcuda.so.1: "
                 "cannot open shared object file: No such file or directory')",
                 "INFO 01-01 10:00:00 [__init__.py:253] No platform detected, vLLM is running on UnspecifiedPlatform"):
        assert classify_text("\n".join([line, *trace]), "vllm").outcome is Outcome.CRASH


# == After batch F23 (docs/corpus-protocol.md, "Round after F23") =========================================


def test_a_paste_cut_mid_line_in_a_flood_of_one_line_ends_with_that_line() -> None:
    wait = "(APIServer pid=7) DEBUG 07-15 07:11:{:02d} [v1/engine/utils.py:1239] Waiting for 1 local, 0 remote core engine proc(s) to start."
    lines = [wait.format(s) for s in (34, 44, 54)]
    assert classify_text("\n".join(lines), "vllm").outcome is Outcome.TIMEOUT
    assert classify_text("\n".join([*lines, "(APIServer pid=7) DEBUG 07-"]), "vllm").outcome is Outcome.TIMEOUT
    # a last line that is not the start of the one before it is a line of its own
    assert classify_text("\n".join([*lines, "(APIServer pid=7) INFO 07-15 07:12:00 [x.py:1] loading"]),
                         "vllm").outcome is not Outcome.TIMEOUT


@pytest.mark.parametrize("line", [
    "[PID: 749] 2025-12-29-03:16:15.787.356 Get_Socket_Timeout(EI0006): Getting socket times out. Reason: 1.",
    "2026-01-02-10:00:00.001.002 ConnectTimeout(EI0002): The connection to the peer timed out",  # invented
])
def test_cann_timestamps_come_off_and_a_timeout_with_its_code_is_a_timeout(line: str) -> None:
    assert classify_text(line, "vllm").outcome is Outcome.TIMEOUT


# == Before batch F24 (docs/corpus-protocol.md, "Round before F24") =========================================


@pytest.mark.parametrize("frame", [
    '  File "/venv/site-packages/sglang/multimodal_gen/runtime/loader/fsdp_load.py", line 147, in maybe_load_fsdp_model',
    '  File "/venv/site-packages/sglang/multimodal_gen/runtime/loader/fsdp_load.py", line 90, in '
    'load_model_from_full_model_state_dict',
    '  File "/opt/app/engine/loader/shards.py", line 12, in materialise',  # invented: any loader package
])
def test_a_frame_in_a_loader_package_or_a_load_model_function_places_an_oom_in_the_weights(frame: str) -> None:
    oom = ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 50.00 MiB. GPU 0 has a total capacity of "
           "79.11 GiB of which 26.12 MiB is free.")
    got = classify_text("\n".join(["Traceback (most recent call last):", frame, "    x = y()", oom]), "sglang")
    assert (got.outcome, got.phase) == (Outcome.OOM_WEIGHTS, Phase.WEIGHTS)
    # torch's data loader is not a model loader: an OOM under it stays unplaced
    data = '  File "/venv/site-packages/torch/utils/data/dataloader.py", line 631, in __next__'
    assert classify_text("\n".join(["Traceback (most recent call last):", data, "    x = y()", oom]),
                         "sglang").outcome is not Outcome.OOM_WEIGHTS


@pytest.mark.parametrize("line", [
    "2024-07-01 07:28:04.488 1 kserve ERROR [__main__.py:<module>():254] Failed to start model server: integer "
    "division or modulo by zero",
    "2025-03-09 05:46:53,503 myserve.api 1 ERROR    [pid=578] Failed to launch model: boom",  # invented
])
def test_a_wrappers_error_that_the_model_server_failed_to_start_is_a_crash(line: str) -> None:
    got = classify_text(line, "vllm")
    assert got.outcome is Outcome.CRASH
    # its cause, when in view, decides
    oom = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79 GiB"
    assert classify_text("\n".join([oom, line]), "vllm").outcome is not Outcome.CRASH
    # a warning that some other server did not start is not the launch's end
    assert classify_text("WARNING 01-01 10:00:00 Failed to start the metrics server: port busy", "vllm").outcome is None


@pytest.mark.parametrize("text", [
    "jaxlib.xla_extension.XlaRuntimeError: RESOURCE_EXHAUSTED: Error allocating device buffer: Attempting to allocate "
    "2.00G. That was not possible. There are 1.10G free.",
    "RESOURCE_EXHAUSTED: Error loading program 'jit__multi_slice': Attempting to reserve 6.14G at the bottom of memory.",
    "RuntimeError: [Rank 0] Resource exhausted: Out of memory while trying to allocate 1.2G",  # invented
    "RuntimeError: ACL stream synchronize failed, error code:507899\n[ERROR] 2025-01-01-10:00:00 (PID:1, Device:0) "
    "EL0004: FAILED TO ALLOC MEMORY",
    # NCCL relaying CUDA's out of memory, the cause on a line of its own, before or after NCCL's error
    "misc/alloc.h:125 NCCL WARN Cuda failure 2 'out of memory'\nRuntimeError: NCCL error in: ../torch/csrc/distributed/"
    "c10d/ProcessGroupNCCL.cpp:1970, unhandled cuda error (run with NCCL_DEBUG=INFO for details), NCCL version 2.20.5",
    "ncclUnhandledCudaError: Call to CUDA function failed.\nLast error:\nCuda failure 2 'out of memory'",
])
def test_out_of_memory_said_by_xla_cann_or_under_nccl_is_out_of_memory(text: str) -> None:
    got = classify_text(text, "vllm")
    assert got.outcome is not None and got.outcome.is_oom, text


@pytest.mark.parametrize("text", [
    "RuntimeError: NCCL error in: ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1970, unhandled cuda error (run "
    "with NCCL_DEBUG=INFO for details), NCCL version 2.20.5\nncclUnhandledCudaError: Call to CUDA function failed.\n"
    "Last error:\nCuda failure 'invalid device ordinal'",
    "RESOURCE_EXHAUSTED: rate limit for the tokenizer service",  # gRPC's status, no memory named: not an OOM
])
def test_nccl_relaying_another_cuda_failure_is_not_memory(text: str) -> None:
    got = classify_text(text, "vllm")
    assert got.outcome is None or not got.outcome.is_oom


@pytest.mark.parametrize("line", [
    "RuntimeError: CUDA error: all CUDA-capable devices are busy or unavailable",  # CUDA 10-11's words
    "RuntimeError: CUDA error: CUDA-capable device(s) is/are busy or unavailable",
    "RuntimeError: Insufficient free GPU memory: 3.2 GiB free of 80 GiB; another process is using the device",  # invented
    "ValueError: other programs are using the GPUs; stop them first",  # invented
    # the same error by its code's name, the runtime's and the driver's (round before F28)
    "RuntimeError: CUDA error: cudaErrorDevicesUnavailable",
    "CUDA driver error: CUDA_ERROR_DEVICE_UNAVAILABLE",
])
def test_a_device_another_process_holds_is_gpu_busy_in_either_cudas_words(line: str) -> None:
    assert classify_text(line, "vllm").outcome is Outcome.GPU_BUSY
    # advice that names no process using the device is not it
    assert classify_text("RuntimeError: the device is busy compiling; retry", "vllm").outcome is not Outcome.GPU_BUSY


def test_sglang_0_4_10s_scheduler_terminated_line_is_the_launch_dying() -> None:
    line = "[2025-07-30 10:00:02] Scheduler or DataParallelController 48213 terminated with 1"
    assert classify_text(line, "sglang").outcome is Outcome.CRASH
    oom = "RuntimeError: Not enough memory. Please try to increase --mem-fraction-static."
    assert classify_text("\n".join([oom, line]), "sglang").outcome is Outcome.OOM_KV_POOL  # the cause above decides


@pytest.mark.parametrize("line", ["RuntimeError: No model weights found in: `/models/Llama-3.1-8B-Instruct-bnb-4bit`",
                                  "RuntimeError: Cannot find any model weights with `/data/m`"])
def test_no_weight_files_at_the_path_is_the_configs(line: str) -> None:
    assert classify_text(line, "sglang").outcome is Outcome.CONFIG_ERROR


def test_memory_profiling_that_saw_used_memory_move_is_memory_held_by_others() -> None:
    line = ("AssertionError: Error in memory profiling. Initial used memory 42143031296, currently used memory "
            "40021213184. This happens when the GPU memory was not properly cleaned up before initializing the vLLM "
            "instance.")
    assert classify_text(line, "vllm").outcome is Outcome.GPU_BUSY
    # figures that did not move say no one else took or released any
    same = line.replace("40021213184", "42143031296")
    assert classify_text(same.replace("used memory", "free memory"), "vllm").outcome is not Outcome.GPU_BUSY


def test_a_vllm_worker_that_hit_an_exception_is_a_marker_its_cause_decides() -> None:
    marker = "(VllmWorker rank=0 pid=453450) ERROR 07-31 23:33:56 [multiproc_executor.py:594] WorkerProc hit an exception."
    assert classify_text(marker, "vllm").outcome is Outcome.CRASH
    oom = ("(VllmWorker rank=0 pid=453450) ERROR 07-31 23:33:56 [multiproc_executor.py:594] RuntimeError: Not enough "
           "memory; No available memory for the cache blocks. Try increasing `gpu_memory_utilization` when initializing "
           "the engine.")
    assert classify_text("\n".join([marker, oom]), "vllm").outcome is Outcome.OOM_KV_POOL


# == After batch F24 (docs/corpus-protocol.md, "Round after F24") =========================================


def test_v0s_summary_of_free_memory_after_profiling_is_not_the_busy_gpu_check() -> None:
    info = ("INFO 10-28 10:00:00 [worker.py:294] Free memory on device (23.29/23.56 GiB) on startup. Desired GPU memory "
            "utilization is (0.9, 21.2 GiB). Actual usage is 8.52 GiB for weight, 0.94 GiB for peak activation, 0.21 GiB "
            "for non-torch memory, and 0.04 GiB for CUDAGraph memory.")
    assert classify_text(info, "vllm").outcome is None
    check = ("ValueError: Free memory on device (10.5/79.1 GiB) on startup is less than desired GPU memory utilization "
             "(0.9, 71.2 GiB). Decrease GPU memory utilization or reduce GPU memory used by other processes.")
    assert classify_text(check, "vllm").outcome is Outcome.GPU_BUSY


@pytest.mark.parametrize("line", [
    "NotImplementedError: Pipeline parallelism is only supported for the following  architectures: ['AquilaForCausalLM']",
    "ValueError: TRTLLM MLA backend is only supported on Blackwell GPUs (SM100). Please use a different backend.",
    "AssertionError: fp8 kv cache is only supported with the flashinfer backend",  # invented
    "ValueError: triton or flashinfer are the only supported backends on this GPU",  # invented
])
def test_an_error_saying_what_asked_for_is_only_supported_elsewhere_is_the_configs(line: str) -> None:
    assert classify_text(line, "vllm").outcome is Outcome.CONFIG_ERROR
    # said in a warning or prose it is not an error
    assert classify_text("INFO 01-01 10:00:00 [x.py:1] prefix caching is only supported on GPUs", "vllm").outcome is None


def test_an_accelerator_another_process_already_uses_is_busy() -> None:
    line = ("RuntimeError: Unable to initialize backend 'tpu': ABORTED: The TPU is already in use by process with pid "
            "2718466. Not attempting to load libtpu.so in this process.")
    assert classify_text(line, "sglang").outcome is Outcome.GPU_BUSY
    assert classify_text("RuntimeError: GPU 0 is already in use by another process", "vllm").outcome is Outcome.GPU_BUSY
    assert classify_text("OSError: [Errno 98] Address already in use", "vllm").outcome is not Outcome.GPU_BUSY


def test_sglangs_piecewise_graph_failure_is_a_capture_failure_read_by_its_cause() -> None:
    head = "[2026-05-22 04:54:32 TP6] Piecewise CUDA Graph failed with error: "
    kernel = classify_text(head + "Tensor match failed for Tensor<8>[strides=<1>, dtype=int64]", "sglang")
    assert kernel.outcome is Outcome.CRASH and "--disable-piecewise-cuda-graph" in kernel.remedy
    assert classify_text(head + "CUDA out of memory. Tried to allocate 1.00 GiB", "sglang").outcome is Outcome.OOM_CUDA_GRAPH


def test_a_v0_workers_error_line_with_its_message_is_not_guessed_as_memory_when_cut() -> None:
    head = "(VllmWorkerProcess pid=143) ERROR 09-10 10:00:00 multiproc_worker_utils.py:226] "
    lines = [head + "Exception in worker VllmWorkerProcess while processing method load_model: Torch SPDA does not "
             "support logits soft cap., Traceback (most recent call last):",
             head + '  File "/venv/vllm/worker/worker.py", line 183, in load_model',
             head + "    self.model_runner.load_model()"]
    got = classify_text("\n".join(lines), "vllm")
    assert got.outcome is Outcome.CRASH
    oom = lines[0].replace("Torch SPDA does not support logits soft cap.", "CUDA out of memory. Tried to allocate 2.00 GiB")
    assert classify_text("\n".join([oom, *lines[1:]]), "vllm").outcome is Outcome.OOM_WEIGHTS


def test_a_rendezvous_store_that_answers_socket_timeout_is_a_timeout() -> None:
    line = ("torch.distributed.DistBackendError: [1] is setting up NCCL communicator and retrieving ncclUniqueId from [0] "
            "via c10d key-value store by key '0', but store->get('0') got error: Socket Timeout")
    assert classify_text(line, "vllm").outcome is Outcome.TIMEOUT
    assert classify_text(line.replace("Socket Timeout", "Connection reset by peer"), "vllm").outcome is Outcome.CRASH


def test_ray_killing_a_task_for_the_hosts_memory_is_a_crash_not_a_gpu_oom() -> None:
    lines = ["ray.exceptions.OutOfMemoryError: Task was killed due to the node running low on memory.",
             "Memory on the node (IP: 10.0.0.1, ID: abc) where the task (actor ID: def) was running was 245.47GB / "
             "251.53GB (0.975904), which exceeds the memory usage threshold of 0.95."]
    got = classify_text("\n".join(lines), "vllm")
    assert got.outcome is Outcome.CRASH and "RAM" in got.remedy
    gpu = "ray.exceptions.RayTaskError(OutOfMemoryError): CUDA out of memory. Tried to allocate 2.00 GiB"
    assert classify_text(gpu, "vllm").outcome is not Outcome.CRASH


# == After batch F25 (docs/corpus-protocol.md, "Round after F25") =========================================


def test_newer_vllms_shutdown_lines_say_a_stop_was_asked_for() -> None:
    up = ["(APIServer pid=17) INFO:     Application startup complete."]
    stop = ["(APIServer pid=17) INFO 07-06 09:43:07 [launcher.py:100] [shutdown] API server: shutdown triggered",
            "(EngineCore pid=18) INFO 07-06 09:43:07 [core.py:1178] [shutdown] EngineCore: trigger received signal=SIGTERM"]
    dead = ["(APIServer pid=17) ERROR 07-06 09:43:07 [async_llm.py:704] AsyncLLM output_handler failed.",
            "(APIServer pid=17) ERROR 07-06 09:43:07 [async_llm.py:704] vllm.v1.engine.exceptions.EngineDeadError: "
            "EngineCore encountered an issue. See stack trace (above) for the root cause."]
    assert classify_text("\n".join([*up, *stop, *dead]), "vllm").outcome is Outcome.READY
    assert classify_text("\n".join([*up, *dead]), "vllm").outcome is Outcome.CRASH  # no stop asked: it died


@pytest.mark.parametrize("text", [
    "[E1226 15:44:09.437224181 socket.cpp:1011] [c10d] The client socket has timed out after 600000ms while trying to "
    "connect to (sws-8h100grid-05, 8000).",
    "RuntimeError: InnerRunOpApi: OPS function error: HcclAllreduce, error code is 6\n[ERROR] 2025-01-01-10:00:00 "
    "(PID:1, Device:0, RankID:1) ERR02200 DIST call hccl api failed.\nEI0006: Getting socket times out. Reason: Remote "
    "Rank did not send the data in time.",
])
def test_a_peer_that_never_answers_the_distributed_socket_is_a_timeout(text: str) -> None:
    assert classify_text(text, "vllm").outcome is Outcome.TIMEOUT


def test_an_npu_kernel_fault_is_a_crash_not_memory() -> None:
    lines = ["[rank3]:[W1031 21:35:04.838006795 compiler_depend.ts:57] Warning: EZ9999: Inner Error!",
             "       The extend info: errcode:(0, 0x200000000000000, 0) errorStr: The MPU address access is invalid.",
             "       Kernel task happen error, retCode=0x31, [vector core exception].[FUNC:PreCheckTaskErr]"]
    assert classify_text("\n".join(lines), "vllm").outcome is Outcome.CRASH
    assert classify_text("AIC Kernel happen error, retCode=0x26.", "vllm").outcome is Outcome.CRASH  # invented sibling


def test_the_neuron_runtime_failing_to_allocate_a_tensor_is_out_of_memory() -> None:
    line = 'RuntimeError: nrt_tensor_allocate status=4 message="Allocation Failure"'
    got = classify_text(line, "vllm")
    assert got.outcome is not None and got.outcome.is_oom


def test_a_split_that_must_be_aligned_to_a_size_the_parallelism_breaks_is_the_configs() -> None:
    line = "ValueError: EXL3 TP output slice must be 128-aligned, got start=62080, size=31040"
    assert classify_text(line, "vllm").outcome is Outcome.CONFIG_ERROR
    # naming no setting, it is not read as one rejected (a bare ValueError stays the unplaced guess it was)
    assert "rejected a setting" not in classify_text("ValueError: buffer must be 128-aligned", "vllm").remedy


def test_free_memory_figures_in_bytes_that_moved_at_all_are_memory_held_by_others() -> None:
    line = ("[rank0]: AssertionError: Error in memory profiling. Initial free memory 58247258112, current free memory "
            "58247516160. This happens when the NPU memory was not properly cleaned up before initializing the vLLM "
            "instance.")
    assert classify_text(line, "vllm").outcome is Outcome.GPU_BUSY
    same = line.replace("58247516160", "58247258112")
    assert classify_text(same, "vllm").outcome is not Outcome.GPU_BUSY


@pytest.mark.parametrize("last", [
    "(EngineCore_DP0 pid=160843) ERROR 03-05 12:36:31 [core.py:1006] Error: Please provide architecture for which code "
    "is to be generated.",
    "[ERROR] GE(173913,):2025-12-25-17:14:00.938.020 [builder.cc:105]174006 Build: ErrorNo: 4294967295(failed)",
    "2025-01-01 10:00:00,123 - mylauncher - CRITICAL - runtime could not start",  # invented
    "E1226 15:44:09.437224181 runtime.cc:88] device init failed",  # invented, glog's error level
])
def test_a_finished_log_that_ends_on_error_level_lines_no_rule_knows_is_a_crash(last: str) -> None:
    head = "(APIServer pid=1) INFO 03-05 12:36:00 [api_server.py:1] vLLM API server version 0.11.0"
    got = classify_text("\n".join([head, last, "```"]), "vllm")
    assert (got.outcome, got.confidence) == (Outcome.CRASH, "low") and got.missing
    # a live log is still open; a warning is not an error; an error the server went on from is not its end
    live = LogClassifier("vllm")
    for line in (head, last):
        live.feed(line)
    assert live.classification().outcome is None
    assert classify_text("\n".join([head, last.replace("ERROR", "WARNING").replace("CRITICAL", "WARNING")
                                    .replace("E1226", "W1226")]), "vllm").outcome is None
    ready = "(APIServer pid=1) INFO:     Application startup complete."
    assert classify_text("\n".join([head, last, ready]), "vllm").outcome is Outcome.READY


def test_ascends_inner_error_is_a_marker_its_cause_decides() -> None:
    for marker in ("EE9999: Inner Error!", "RuntimeError: The Inner error is reported as above. The process exits for "
                   "this inner error, and the current working operator name is MatMul."):
        assert classify_text(marker, "vllm").outcome is Outcome.CRASH
        oom = "RuntimeError: NPU out of memory. Tried to allocate 1.00 GiB (NPU 0; 60.97 GiB total capacity)"
        assert classify_text("\n".join([oom, marker]), "vllm").outcome is not Outcome.CRASH


def test_intels_out_of_device_memory_status_and_an_npu_other_processes_use() -> None:
    got = classify_text("RuntimeError: level_zero backend failed with error: 39 (UR_RESULT_ERROR_OUT_OF_DEVICE_MEMORY)",
                        "vllm")
    assert got.outcome is not None and got.outcome.is_oom
    resources = "RuntimeError: level_zero backend failed with error: 40 (UR_RESULT_ERROR_OUT_OF_RESOURCES)"
    assert classify_text(resources, "vllm").outcome is Outcome.CRASH  # not said to be memory
    assert classify_text("RuntimeError: The NPU is being used by other processes", "vllm").outcome is Outcome.GPU_BUSY


# == After batch F26 (docs/corpus-protocol.md, "Round after F26") =========================================


def test_spdlogs_bracketed_error_level_and_a_cut_last_line_still_end_on_errors() -> None:
    head = "(APIServer pid=1) INFO 03-05 12:36:00 [api_server.py:1] vLLM API server version 0.9.0"
    habana = ("[19:08:34.165045][PT_BRIDGE       ][error][tid:44F8A] graph.cpp: 599Graph compile failed. synStatus=synStatus "
              "26 [Generic failure].")
    got = classify_text("\n".join([head, habana]), "vllm")
    assert (got.outcome, got.confidence) == (Outcome.CRASH, "low")
    assert classify_text("\n".join([head, habana.replace("[error]", "[info]")]), "vllm").outcome is None
    error = "(EngineCore_DP0 pid=22) ERROR 09-24 20:59:57 [core.py:790] hccl transport init failed on rank 3"
    assert classify_text("\n".join([head, error, "(Engin"]), "vllm").outcome is Outcome.CRASH  # the paste cut it


# == After batch F27 (docs/corpus-protocol.md, "Round after F27") =========================================


def test_a_kernel_ninja_failed_to_build_is_a_crash_unless_the_launch_went_on() -> None:
    head = "[2026-04-01 10:00:00 TP0] Load weight begin. avail mem=78.50 GB"
    for failed in ("FAILED: [code=139] cuda_0.o ", "FAILED: /root/.cache/flashinfer/sampling/sampling.cuda.o",
                   "ninja: build stopped: subcommand failed."):
        got = classify_text("\n".join([head, failed]), "sglang")
        assert (got.outcome, got.confidence) == (Outcome.CRASH, "low"), failed
    ready = "[2026-04-01 10:01:00] The server is fired up and ready to roll!"
    assert classify_text("\n".join([head, "ninja: build stopped: subcommand failed.", ready]), "sglang").outcome \
        is Outcome.READY  # the engine fell back (FlashInfer's all-reduce does) and came up
    assert classify_text("FAILED tests/test_x.py::test_y - AssertionError", "sglang").outcome is None  # pytest's


def test_canns_inner_error_reporter_marks_its_lines() -> None:
    line = "    [Init][Compiler]Init compiler failed[FUNC:ReportInnerError][FILE:log_inner.cpp][LINE:145]"
    assert classify_text(line, "sglang").outcome is Outcome.CRASH
    oom = "RuntimeError: NPU out of memory. Tried to allocate 1.00 GiB (NPU 0; 60.97 GiB total capacity)"
    assert classify_text("\n".join([oom, line]), "vllm").outcome is not Outcome.CRASH  # a marker: the cause decides


def test_gloos_timeout_is_a_hang_wherever_its_source_path_went() -> None:
    for text in ("RuntimeError: [/pytorch/third_party/gloo/gloo/transport/tcp/unbound_buffer.cc:78] Timed out waiting "
                 "1800000ms for recv operation to complete",
                 "RuntimeError: [../third_party/gloo/gloo/transport/tcp/unbound_buffer.cc:81]\n"
                 "Timed out waiting 1800000ms for send operation to complete"):
        assert classify_text(text, "vllm").outcome is Outcome.TIMEOUT, text


# == Round before F28 (written while F28 was gathered, from invented probes of each family) ====================


@pytest.mark.parametrize("line", [
    "RuntimeError: Server failed to start within the timeout period.",
    "RuntimeError: engine start-up timeout exceeded (900 s)",
    "grpc._channel._InactiveRpcError: status = StatusCode.DEADLINE_EXCEEDED details = \"Deadline Exceeded\"",
])
def test_a_time_limit_that_ran_out_is_a_hang_in_any_words(line: str) -> None:
    assert classify_text(line, "vllm").outcome is Outcome.TIMEOUT
    # a message that only names a timeout setting is not a hang
    assert classify_text("ValueError: --dist-timeout must be a positive number of seconds", "vllm").outcome \
        is not Outcome.TIMEOUT


@pytest.mark.parametrize(("line", "outcome"), [
    ("RuntimeError: Failed to allocate memory for KV cache: requested 10.0 GiB, available 4.2 GiB",
     Outcome.OOM_KV_POOL),
    ("RuntimeError: Error: failed to allocate 4294967296 bytes for the model weights on device 0", Outcome.OOM_WEIGHTS),
    ("Exception: insufficient GPU memory to load model: need 40 GiB, have 24 GiB", Outcome.OOM_WEIGHTS),
    ("RuntimeError: CUDA out of memory while capturing CUDA graphs. Tried to allocate 1.00 GiB", Outcome.OOM_CUDA_GRAPH),
])
def test_an_allocation_that_failed_is_out_of_memory_placed_by_what_it_was_for(line: str, outcome: Outcome) -> None:
    got = classify_text(line, "vllm")
    assert (got.outcome, got.confidence) == (outcome, "low")  # the message's words place it, nothing else: a guess
    # the host's memory, or shared memory, is not the device's
    for host in ("ERROR failed to allocate pinned host memory: 2 GiB",
                 "RuntimeError: Failed to allocate shared memory segment /psm_1234"):
        assert classify_text(host, "vllm").outcome is Outcome.CRASH, host
    # a warning that an optional buffer could not be had is no failure
    assert classify_text("WARNING: failed to allocate memory for custom allreduce buffer, falling back to NCCL",
                         "vllm").outcome is None
    # a start-up line that places the OOM outranks the message's words
    weights = "INFO 01-01 10:00:00 [gpu_model_runner.py:1] Loading model weights took 14.9 GiB"
    pool = "INFO 01-01 10:00:01 [kv_cache_utils.py:1] GPU KV cache size: 100,000 tokens"
    oom = "torch.OutOfMemoryError: CUDA out of memory while loading the model. Tried to allocate 2.00 GiB"
    assert classify_text("\n".join([weights, pool, oom]), "vllm").outcome is not Outcome.OOM_WEIGHTS


def test_a_setting_called_invalid_by_its_flag_is_the_configs() -> None:
    line = "RuntimeError: Invalid value for --mem-fraction-static: 1.2 (must be in (0, 1))"
    assert classify_text(line, "sglang").outcome is Outcome.CONFIG_ERROR
    assert classify_text("RuntimeError: invalid value encountered in the kernel's output", "sglang").outcome \
        is Outcome.CRASH  # no setting named



# == After batch F28 (docs/corpus-protocol.md, "Round after F28") =========================================


def test_a_server_that_served_then_waits_on_its_own_processes_hung() -> None:
    served = ('(APIServer pid=605) INFO 07-15 15:32:47 [loggers.py:273] Engine 000: Avg prompt throughput: 532.2 tokens/s, '
              'Avg generation throughput: 20.5 tokens/s, Running: 3 reqs, Waiting: 0 reqs')
    wait = ("(EngineCore pid=1154) INFO 07-15 15:33:47 [shm_broadcast.py:705] No available shared memory broadcast block "
            "found in 60 seconds. This typically happens when some processes are hanging or doing some time-consuming work")
    got = classify_text("\n".join([served, wait]), "vllm")
    assert (got.outcome, got.confidence) == (Outcome.TIMEOUT, "low")
    # a paste cut inside the next such line's header says nothing new
    assert classify_text("\n".join([served, wait, "(EngineCore pid=1154) INFO 07-15 15:34:47 [shm_broa"]),
                         "vllm").outcome is Outcome.TIMEOUT
    # the same wait, then more requests served: it came back
    completion = '(APIServer pid=605) INFO:     127.0.0.1:39984 - "POST /v1/completions HTTP/1.1" 200 OK'
    assert classify_text("\n".join([served, wait, completion]), "vllm").outcome is Outcome.READY
    # but the front end answering a query is not the engine at work: it answers while the engine waits (17719)
    metrics = '(APIServer pid=605) INFO:     127.0.0.1:39984 - "GET /metrics HTTP/1.1" 200 OK'
    assert classify_text("\n".join([served, wait, metrics]), "vllm").outcome is Outcome.TIMEOUT


def test_an_out_of_memory_after_the_graphs_were_captured_is_the_warm_ups() -> None:
    done = "INFO 11-01 23:47:29 [gpu_model_runner.py:3118] Graph capturing finished in 23 secs, took 2.28 GiB"
    oom = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.50 GiB. GPU 0 has a total capacity of 23.51 GiB"
    assert classify_text("\n".join([done, oom]), "vllm").outcome is Outcome.OOM_RUNTIME
    capturing = "Capturing CUDA graphs (decode, FULL):  34%|███▍      | 12/35 [00:19<00:37,  1.60s/it]"
    assert classify_text("\n".join([capturing, oom]), "vllm").outcome is Outcome.OOM_CUDA_GRAPH  # still capturing


@pytest.mark.parametrize(("engine", "text"), [
    ("vllm", "To serve at least one request with the model's max seq len (262144), 9.29 GiB KV cache is needed,\n"
             "which is larger than the available KV cache memory (9.28 GiB). Based on the available memory, the"),
    ("sglang", "Loaded weights leave no GPU memory for the KV cache under\n--mem-fraction-static=0.5. Raise above 0.627"),
    ("vllm", "ValueError: max_num_seqs (1024) exceeds available Mamba cache blocks (969)."),
    ("vllm", "ValueError: max_num_batched_seqs (512) exceeds the available cache blocks (300)"),  # invented
])
def test_the_pools_own_message_decides_when_wrapped_after_its_first_clause(engine: str, text: str) -> None:
    assert classify_text(text, engine).outcome is Outcome.OOM_KV_POOL
    # what is asked above a model's own limit is the config's, not the pool's
    assert classify_text("ValueError: max_num_seqs (1024) exceeds the model's limit (256)", engine).outcome \
        is not Outcome.OOM_KV_POOL


@pytest.mark.parametrize("prose", ["It hangs at this point.", "Vllm is stuck on this message:",
                                   "> the server just freezes here, nothing more is printed"])  # (the last invented)
def test_a_posters_words_that_it_hangs_decide_where_no_line_of_the_log_does(prose: str) -> None:
    log = ["[2025-09-01 05:58:12 TP0] Init torch distributed begin.", "[2025-09-01 05:58:19 TP0] sglang is using nccl==2.27.3"]
    got = classify_text("\n".join([*log, "", prose]), "sglang")
    assert (got.outcome, got.confidence) == (Outcome.TIMEOUT, "low")
    assert classify_text("\n".join(log), "sglang").outcome is None  # without them nothing decides
    # a line of the log that decides outranks them
    oom = "RuntimeError: Not enough memory. Please try to increase --mem-fraction-static."
    assert classify_text("\n".join([*log, prose, oom]), "sglang").outcome is Outcome.OOM_KV_POOL
    # the engine's own words about hanging processes are not the poster's
    assert classify_text("\n".join([*log, "INFO 07-28 01:58:51 [x.py:1] some processes are hanging or stuck"]),
                         "sglang").outcome is None


def test_what_a_setting_may_be_then_the_value_it_got_is_the_configs() -> None:
    line = ("AssertionError: Only {'trtllm_mha', 'triton', 'fa4'} backends are supported on Blackwell GPUs for hybrid GDN "
            "models. Got attention_backend=flashinfer.")
    assert classify_text(line, "sglang").outcome is Outcome.CONFIG_ERROR
    # a hardware check that names no setting is not
    assert classify_text("AssertionError: Only Hopper and Blackwell GPUs are supported for FlashMLA Sparse", "sglang"
                         ).outcome is Outcome.CRASH


def test_a_launcher_that_saw_the_output_end_before_ready_saw_it_die() -> None:
    for line in ("Stdout stream ended before readiness message detected.",
                 "RuntimeError: server process exited before it became ready (code 1)"):  # (the second invented)
        got = classify_text(line, "vllm")
        assert (got.outcome, got.confidence) == (Outcome.CRASH, "low"), line
    assert classify_text("INFO: the stream ended before the last token was sent", "vllm").outcome is None


@pytest.mark.parametrize("line", [
    "问题:运行vllm-ascend遇到报错: multiproc_worker_utils.py:242] RuntimeError: Cannot re-initialize NPU in forked subprocess.",
    'I get this error even though max_model_len=4096 : "RuntimeError: start (0) + length (1280) exceeds dimension size."',
])
def test_an_exception_after_a_cut_header_or_opening_a_posters_quote_is_raised(line: str) -> None:
    assert classify_text(line, "vllm").outcome is Outcome.CRASH
    assert classify_text("I think a RuntimeError is possible here", "vllm").outcome is None


def test_the_checkpoints_quantization_against_the_flags_is_the_configs() -> None:
    line = ("Quantization method specified in the model config (compressed-tensors) does not match the quantization "
            "method specified in the `quantization` argument (fp8)")
    got = classify_text(line, "vllm")
    assert got.outcome is Outcome.CONFIG_ERROR and "compressed-tensors" in got.remedy


# == The labelling rule of CONFIG_ERROR and CRASH (before F29; docs/corpus-protocol.md, "The labelling rule") =========


@pytest.mark.parametrize(("lines", "outcome"), [
    # a line that states a rule about the launch's choices is the config's, whatever root cause is found later
    (["ValueError(\"type fp8e4nv not supported in this architecture. The supported fp8 dtypes are ('fp8e4b15', "
      "'fp8e5')\")"], Outcome.CONFIG_ERROR),
    (["pydantic_core._pydantic_core.ValidationError: 1 validation error for ModelConfig",
      "  Value error, Unknown quantization method: foo. Must be one of ['awq', 'fp8'] [type=value_error]"],
     Outcome.CONFIG_ERROR),
    # a raw error is a crash, though it is carried as a validation error or raised as a ValueError
    (["pydantic_core._pydantic_core.ValidationError: 1 validation error for ModelConfig",
      "  Value error, Model architectures ['FooForCausalLM'] failed to be inspected. Please check the logs for more "
      "details. [type=value_error]"], Outcome.CRASH),
    (["ValueError: There is no module or parameter named 'vision_tower.proj' in FooForConditionalGeneration"],
     Outcome.CRASH),
    (["ValueError: Using the sync engine with --max-num-seqs 8, but the scheduler is async. This should not happen. "
      "Please report this issue on GitHub."], Outcome.CRASH),
])
def test_the_config_crash_boundary_is_the_deciding_lines_form(lines: list[str], outcome: Outcome) -> None:
    assert classify_text("\n".join(lines), "vllm").outcome is outcome


def test_a_validation_header_alone_is_still_the_configs_and_its_reason_line_speaks_for_it() -> None:
    header = "pydantic_core._pydantic_core.ValidationError: 1 validation error for ModelConfig"
    assert classify_text(header, "vllm").outcome is Outcome.CONFIG_ERROR
    reason = "  Value error, max_model_len (300000) is greater than the derived max_model_len (131072) [type=value_error]"
    got = classify_text("\n".join([header, reason]), "vllm")
    assert got.outcome is Outcome.CONFIG_ERROR
    assert any("max_model_len (300000)" in e for e in got.evidence)  # the reason is the evidence, not the header


# == Round after F29 (written from F29's misses, after its score) ====================================================


@pytest.mark.parametrize(("line", "outcome"), [
    # an exception's repr on a line of its own, as a worker re-logs what it caught
    ("AssertionError('Only FlashAttention backend is supported for now.')", Outcome.CONFIG_ERROR),
    ("ERROR 01-01 10:00:00 [core.py:1] RuntimeError(\"NCCL error: unhandled cuda error\")", Outcome.CRASH),
    # an exception raised inside a poster's inline code, in a sentence
    ("With a short list it fails as expected, e.g. `ValueError: --max-model-len (300000) is greater than the model's "
     "max (131072)` and exits.", Outcome.CONFIG_ERROR),
])
def test_an_exception_written_other_than_python_prints_it_is_read_as_raised(line: str, outcome: Outcome) -> None:
    assert classify_text(line, "vllm").outcome is outcome
    # prose that names an exception type without raising one is not a failure
    assert classify_text("If this raises `ValueError` for you, check the flags first.", "vllm").outcome is None


def test_native_code_reporting_its_failure_by_source_location_is_a_crash() -> None:
    line = "/opt/src/host/init/init.cu:812: non-zero status: 7 transport setup failed"
    got = classify_text(line, "vllm")
    assert got.outcome is Outcome.CRASH and "init.cu" in got.remedy
    # a compiler's diagnostic and a memory text are the rules' of faults and of memory, not this one's
    assert "init.cu" not in classify_text("/tmp/x/main.c:5:10: fatal error: cuda.h: No such file or directory",
                                          "vllm").remedy
    assert classify_text("alloc.cc:51: allocation failed: CUDA out of memory", "vllm").outcome is not Outcome.CRASH


def test_a_broken_installation_said_by_transformers_or_by_vllms_ops_is_a_crash() -> None:
    clash = "ValueError: '<class 'engine.configs.FooConfig'>' is already used by a Transformers config, pick another name."
    assert classify_text(clash, "sglang").outcome is Outcome.CRASH
    ops = ("ERROR 08-31 15:52:59 _custom_ops.py:37] Error in calling custom op rms_norm: '_OpNamespace' '_C' object has "
           "no attribute 'rms_norm'\nERROR 08-31 15:52:59 _custom_ops.py:37] Possibly you have built or installed an "
           "obsolete version of vllm.")
    assert classify_text(ops, "vllm").outcome is Outcome.CRASH


# == Round after F30 (written from F30's misses, after its score) ====================================================


@pytest.mark.parametrize(("line", "outcome"), [
    # a markdown list item that is an exception
    ("* ImportError: libfoo.so.12: cannot open shared object file: No such file or directory", Outcome.CRASH),
    # an exception run on from prose in Chinese
    ("部署模型失败报错ValueError: max_model_len (300000) is greater than the model's max (131072)", Outcome.CONFIG_ERROR),
])
def test_an_exception_inside_a_posters_markup_or_prose_is_read(line: str, outcome: Outcome) -> None:
    assert classify_text(line, "vllm").outcome is outcome
    # a list item or a sentence that only names an exception raises nothing
    assert classify_text("- ValueError is raised when the flag is wrong", "vllm").outcome is None
    assert classify_text("我们看到了ValueError，但服务正常启动", "vllm").outcome is None


def test_ranks_that_never_joined_the_store_and_a_typed_exception_with_arguments_that_timed_out_are_hangs() -> None:
    assert classify_text('error: "torch.distributed.DistStoreError: 16/32 clients joined', "vllm").outcome \
        is Outcome.TIMEOUT
    line = "KVTransferError(bootstrap_room=1234): Request 1234 timed out after 300.0s in KVPoll.Bootstrapping"
    assert classify_text(line, "sglang").outcome is Outcome.TIMEOUT


def test_interleaved_fatal_python_error_and_hip_error_codes_are_crashes() -> None:
    dump = 'File "/x/_contextlib.pyFatal Python error: "Aborted, line \n120Thread 0x in 00007f3e05ffe640decorate'
    assert classify_text(dump, "sglang").outcome is Outcome.CRASH
    hip = ("hipMemGetInfo: Returned hipErrorInvalidValue\nTraceback (most recent call last):\n"
           '  File "/opt/vllm/engine/llm_engine.py", line 120, in __init__\n    self._init_workers()')
    assert classify_text(hip, "vllm").outcome is Outcome.CRASH


def test_a_marker_with_its_own_words_still_lends_its_verdict_to_a_rejected_setting_above_it() -> None:
    log = ("ValueError: Attention backend 'foo' is not supported by this attention layer; supported backends: ['fa']\n"
           "[2026-01-01 10:00:00] Rank 0 scheduler is dead")
    assert classify_text(log, "sglang").outcome is Outcome.CONFIG_ERROR
    # a crash above it stays a crash
    crash = "KeyError: 'lm_head.weight'\n[2026-01-01 10:00:00] Rank 0 scheduler is dead"
    assert classify_text(crash, "sglang").outcome is Outcome.CRASH


# == Round after F32 (written from F32's misses, after its score) ====================================================


def test_libcxx_abort_on_an_uncaught_exception_is_a_crash_as_gnus_is() -> None:
    for line in ("libc++abi: terminating due to uncaught exception of type std::runtime_error: TT_THROW @ x.hpp:50",
                 "terminate called after throwing an instance of 'c10::Error'"):
        assert classify_text(line, "vllm").outcome is Outcome.CRASH, line
    assert classify_text("we are terminating due to the weekend", "vllm").outcome is None


_GDN = ('(Worker_TP0 pid=357) ERROR 03-05 05:40:33 [multiproc_executor.py:880] Traceback (most recent call last):\n'
        '(Worker_TP0 pid=357) ERROR 03-05 05:40:33 [multiproc_executor.py:880]   File "/v/vllm/v1/worker/'
        'gpu_model_runner.py", line 1946, in execute_model\n'
        '(Worker_TP0 pid=357) ERROR 03-05 05:40:33 [multiproc_executor.py:880]     out = self._model_forward(x)\n'
        '(Worker_TP0 pid=357) ERROR 03-05 05:40:33 [multiproc_executor.py:880]   File "/v/vllm/v1/attention/backends/'
        'gdn_attn.py", line 310, in build\n'
        '(Worker_TP0 pid=357) ERROR 03-05 05:40:33 [multiproc_executor.py:880]     {statement}\n'
        '(Worker_TP0 pid=3')


def test_a_log_cut_on_a_quoted_assert_statement_is_an_assertion_not_the_phases_memory() -> None:
    """A traceback cut after the innermost frame's quoted statement: an `assert` there raises an AssertionError, a
    crash (the phase's memory failure the alternative); any other statement leaves the phase's usual guess (in warm-up,
    since the round after F56, a crash too, for the phase's reason)."""
    cut = classify_text(_GDN.format(statement="assert not (num_decodes > 0 and num_spec_decodes > 0), ("), "vllm")
    assert cut.outcome is Outcome.CRASH and cut.confidence == "low" and "assert" in cut.missing
    assert [a[0] for a in cut.alternatives] == [Outcome.OOM_RUNTIME]
    other = classify_text(_GDN.format(statement="out = self.kernel(q, k, v)"), "vllm")
    assert other.outcome is Outcome.CRASH and other.confidence == "low" and "assert" not in other.missing


def test_an_exception_a_memory_check_raises_is_its_shortage_however_its_message_is_cut() -> None:
    frames = ('ERROR [core.py:1349]   File "/v/vllm/v1/engine/core.py", line 304, in _initialize_kv_caches\n'
              'ERROR [core.py:1349]     kv_cache_configs = get_kv_cache_configs(\n'
              'ERROR [core.py:1349]   File "/v/vllm/v1/core/kv_cache_utils.py", line 778, in {function}\n'
              'ERROR [core.py:1349]     raise ValueError(\n'
              'ERROR [core.py:1349] ValueError: To')
    assert classify_text(frames.format(function="_check_enough_kv_cache_memory"), "vllm").outcome is Outcome.OOM_KV_POOL
    # the same exception raised by a function that checks something else stays what it is
    assert classify_text(frames.format(function="_check_kv_cache_layout"), "vllm").outcome is Outcome.CRASH


# == Round after F33b and F34 (written from their misses, after their scores) =========================================


def test_a_context_warning_is_not_a_refusal_wherever_it_sits_on_the_line() -> None:
    """SGLang only warns of a context above the model's own when the override is set; a progress bar can leave the
    warning mid-line. The raised text stays a refused context."""
    warning = ("Loading shards:  20% Completed | 1/5 [00:00<00:00,  8.17it/s][2026-07-12 21:07:09 DP0] Warning: Target "
               "model's context_length (262144) is greater than the derived context_length (65536). This may lead to "
               "incorrect model outputs or CUDA errors.")
    assert classify_text(warning, "sglang").outcome is None
    raised = ("ValueError: User-specified context_length (262144) is greater than the derived context_length (65536). "
              "Please use a smaller context_length.")
    refused = classify_text(raised, "sglang")
    assert refused.outcome is Outcome.CONFIG_ERROR and refused.needs is not None


def test_a_model_type_transformers_does_not_know_is_a_refusal_whatever_it_is_chained_to() -> None:
    """transformers' ValueError naming the model type it does not know is what the launch died of, not the KeyError of
    its own lookup that the log shows first."""
    log = ("Traceback (most recent call last):\n"
           '  File "/x/transformers/models/auto/configuration_auto.py", line 1360, in from_pretrained\n'
           "    config_class = CONFIG_MAPPING[config_dict[\"model_type\"]]\n"
           "KeyError: 'gemma4_unified'\n\n"
           "During handling of the above exception, another exception occurred:\n\n"
           "Traceback (most recent call last):\n"
           '  File "/x/sglang/srt/server_args.py", line 888, in __post_init__\n'
           "    raise ValueError(\n"
           "ValueError: The checkpoint you are trying to load has model type `gemma4_unified` but Transformers does "
           "not recognize this architecture. This could be because of an issue with the checkpoint, or because your "
           "version of Transformers is out of date.\n")
    got = classify_text(log, "sglang")
    assert got.outcome is Outcome.CONFIG_ERROR and got.confidence == "high" and "gemma4_unified" in got.remedy
    older = classify_text("ValueError: Unrecognized model in /m/Qwen3-235B-A22B. Should have a `model_type` key in "
                          "its config.json, or contain one of the following strings in its name: albert, bart", "vllm")
    assert older.outcome is Outcome.CONFIG_ERROR and "/m/Qwen3-235B-A22B" in older.remedy


def test_no_attention_backend_for_the_launchs_settings_is_a_refusal_in_any_phase() -> None:
    """Met when a draft model is set up after the weights: not read by the phase (an exception at start-up), but by
    what it says."""
    line = ("(Worker_TP1 pid=9) INFO 07-25 11:23:40 [default_loader.py:291] Loading weights took 981.21 seconds\n"
            "(Worker_TP1 pid=9) ERROR 07-25 11:23:45 [multiproc_executor.py:751] ValueError: No valid attention backend "
            "found for cuda with AttentionSelectorConfig(head_size=64, dtype=torch.bfloat16, kv_cache_dtype=fp8_ds_mla, "
            "block_size=64, use_mla=False). Reasons: {FLASH_ATTN: [kv_cache_dtype not supported], TRITON_ATTN: "
            "[kv_cache_dtype not supported]}.")
    got = classify_text(line, "vllm")
    assert got.outcome is Outcome.CONFIG_ERROR and got.confidence == "high" and "--kv-cache-dtype" in got.remedy
    assert classify_text("INFO Using FLASH_ATTN attention backend out of potential backends: ['FLASH_ATTN']",
                         "vllm").outcome is None


# == Round after F35-F37 (written from their misses, after their scores) ==============================================

_UP = ("(APIServer pid=1) INFO:     Application startup complete.\n"
       '(APIServer pid=1) INFO:     172.17.0.1:44086 - "POST /v1/completions HTTP/1.1" 200 OK\n')
_ENGINE = "(EngineCore_DP5 pid=3824137) ERROR 05-01 20:57:41 [core.py:1138] "


def _engine_died_of(*exception: str) -> str:
    """vLLM V1's engine core dying while it serves: its marker, then the traceback its busy loop raised."""
    frames = ['Traceback (most recent call last):',
              '  File "/v/vllm/v1/executor/multiproc_executor.py", line 388, in get_response',
              '    raise TimeoutError(f"RPC call to {method} timed out.") from e']
    return "".join(_ENGINE + line + "\n" for line in ("EngineCore encountered a fatal error.", *frames, *exception))


def test_an_engine_that_died_of_an_exception_while_serving_died_of_that_exception() -> None:
    """After the ready line an unknown exception is a request's, and the server lives on; but when the engine says it
    died of one (vLLM's "EngineCore encountered a fatal error.", SGLang's "Scheduler hit an exception:"), the exception
    its traceback ends with is what killed the server: here a hang, its workers never answering."""
    hung = classify_text(_UP + _engine_died_of("TimeoutError: RPC call to sample_tokens timed out."), "vllm")
    assert (hung.outcome, hung.phase, hung.confidence) == (Outcome.TIMEOUT, Phase.READY, "high")
    crashed = classify_text(_UP + _engine_died_of("RuntimeError: shape '[8, 128]' is invalid for input of size 512"),
                            "vllm")
    assert (crashed.outcome, crashed.confidence) == (Outcome.CRASH, "high")
    assert any("is invalid for input of size" in line for line in crashed.evidence)
    sglang = ("[2026-01-05 10:00:00] INFO:     Application startup complete.\n"
              "[2026-01-05 10:00:01] The server is fired up and ready to roll!\n"
              "[2026-01-05 10:05:00 TP0] Scheduler hit an exception: Traceback (most recent call last):\n"
              '  File "/s/sglang/srt/managers/scheduler.py", line 2100, in run_scheduler_process\n'
              "    scheduler.event_loop_overlap()\n"
              "torch.distributed.DistBackendError: [Rank 0] Watchdog timed out after 600000 ms\n")
    assert classify_text(sglang, "sglang").outcome is Outcome.TIMEOUT
    # the same exception with no engine saying it died of it: a request's, the server served on
    assert classify_text(_UP + _ENGINE + "TimeoutError: RPC call to sample_tokens timed out.\n"
                         + '(APIServer pid=1) INFO:     172.17.0.1:44090 - "POST /v1/completions HTTP/1.1" 200 OK',
                         "vllm").outcome is Outcome.READY



def test_a_v0_engine_whose_log_ends_on_its_last_start_up_step_came_up() -> None:
    """V0 logs nothing of its own after its graphs are captured (or, on its CPU build, its blocks counted): a finished
    log that ends there, with no error, ends on an engine that came up (an offline engine's is all there is), as V1's
    ending on its own "took N GiB" form of that line already read. A capture that never said it finished may have hung."""
    start = ("INFO 05-24 06:24:08 model_runner.py:175] Loading model weights took 9.3440 GB\n"
             "INFO 05-24 06:24:16 gpu_executor.py:114] # GPU blocks: 1724, # CPU blocks: 7281\n"
             "INFO 05-24 06:24:19 model_runner.py:937] Capturing the model for CUDA graphs. This may lead to unexpected "
             "consequences if the model is not static.\n")
    built = classify_text(start + "INFO 05-24 06:24:29 model_runner.py:1017] Graph capturing finished in 11 secs.",
                          "vllm")
    assert (built.outcome, built.confidence) == (Outcome.READY, "low")
    assert classify_text(start, "vllm").outcome is None
    cpu = ("INFO 05-26 07:40:18 weight_utils.py:207] Using model weights format ['*.bin']\n"
           "INFO 05-26 07:40:25 cpu_executor.py:72] # CPU blocks: 7281")
    assert classify_text(cpu, "vllm").outcome is Outcome.READY
    assert classify_text(start.splitlines()[1], "vllm").outcome is None  # the GPU build counts both, then captures


def test_a_route_table_or_a_forks_named_api_server_says_every_gpu_step_is_done() -> None:
    """vLLM logs its routes one a line ("Route: /v1/completions, Methods: POST") once the engine is up, and vllm-omni
    names its server ("Starting vLLM Diffusion API server on"): a finished log ending there came up (low: the ready line
    is not in view); the port can still be refused after them."""
    routes = ("(APIServer pid=443) INFO 06-26 18:12:56 [launcher.py:46] Route: /v1/chat/completions, Methods: POST\n"
              "(APIServer pid=443) INFO 06-26 18:12:56 [launcher.py:46] Route: /v1/completions, Methods: POST")
    diffusion = ("(APIServer pid=21256) INFO 12-18 09:55:27 [api_server.py:95] Starting vLLM Diffusion API server on "
                 "http://0.0.0.0:80")
    for text in (routes, diffusion):
        got = classify_text(text, "vllm")
        assert (got.outcome, got.phase, got.confidence) == (Outcome.READY, Phase.HTTP, "low")
    refused = classify_text(routes + "\nOSError: [Errno 98] Address already in use", "vllm")
    assert refused.outcome is Outcome.CRASH and "port" in refused.remedy


# == Round after F38 (written from its misses, after its score) =======================================================


def test_vllm_08s_kv_shortfall_in_gb_is_the_pools() -> None:
    line = ("ERROR 03-27 16:43:19 [core.py:343] ValueError: To serve at least one request with the models's max seq len "
            "(116160), (4.43 GB KV cache is needed, which is larger than the available KV cache memory (3.48 GB). Try "
            "increasing `gpu_memory_utilization` or decreasing `max_model_len` when initializing the engine.")
    got = classify_text(line, "vllm")
    assert (got.outcome, got.confidence) == (Outcome.OOM_KV_POOL, "high")
    assert (got.figures["context_len"], got.figures["kv_avail_gib"]) == (116160, 3.48) and got.needs is not None


def test_a_device_or_engine_watchdog_that_stopped_a_task_is_a_hang() -> None:
    """Ascend's runtime stops a task that never finished and says so in several forms, then its "Inner Error!" marker;
    vLLM V0's engine loop says the same of a step that never returned."""
    for line in ("[Error]: Vector core execution timed out.", "[Error]: The aicore execution times out.",
                 "[Error]: The execution of the internal task times out.",
                 "hccl fftsplus task timeout occurred during task execution,",
                 "rtStreamSynchronizeWithTimeout execute failed, reason=[fftsplus timeout][FUNC:FuncErrorReason]",
                 "ERROR 11-07 23:24:51 async_llm_engine.py:865] Engine iteration timed out. This should never happen!"):
        assert classify_text(line + "\nEE9999: Inner Error!", "vllm").outcome is Outcome.TIMEOUT, line
    assert classify_text("EE9999: Inner Error!", "vllm").outcome is Outcome.CRASH


def test_a_markdown_fence_after_the_last_line_is_not_the_last_line() -> None:
    waiting = ("(APIServer pid=300606) DEBUG 09-02 17:29:16 [utils.py:777] Waiting for 1 local, 0 remote core engine "
               "proc(s) to start.")
    for text in (waiting, f"```\n{waiting}\n```", f"{waiting}\n\n```\n"):
        assert classify_text(text, "vllm").outcome is Outcome.TIMEOUT, text


def test_a_line_broken_after_its_comma_is_read_whole_with_its_space() -> None:
    """A paste or a renderer that breaks a line after a comma drops the space that stood there: a frame broken after its
    file still places the OOM under it (the pool's `_init_mamba_pool`), and prose broken after a comma still reads."""
    frame = ('File "/home/n/env/lib/python3.10/site-packages/sglang/srt/mem_cache/memory_pool.py",\n'
             "line 499, in _init_mamba_pool\n"
             "torch.OutOfMemoryError: CUDA out of memory.\n")
    assert classify_text(frame, "sglang").outcome is Outcome.OOM_KV_POOL
    prose = ("AssertionError: Error in memory profiling. Initial free memory 82.94 GiB,\n"
             "current free memory 90.17 GiB. This happens when other processes sharing the\n"
             "same container release GPU memory while vLLM is profiling during initialization.")
    assert classify_text(prose, "vllm").outcome is Outcome.GPU_BUSY


# == Round after F39 (written from its misses, after its score) =======================================================


def test_the_attention_backend_the_launch_chose_refusing_its_settings_is_a_refusal() -> None:
    line = ("(EngineCore pid=5273) ValueError: Selected backend AttentionBackendEnum.TRITON_ATTN is not valid for this "
            "configuration. Reason: ['kv_cache_dtype not supported']")
    got = classify_text(line, "vllm")
    assert got.outcome is Outcome.CONFIG_ERROR and "TRITON_ATTN" in got.remedy and "--kv-cache-dtype" in got.remedy


def test_an_ascend_runtime_failure_that_names_no_memory_is_what_a_cut_traceback_died_of() -> None:
    """A traceback cut inside the device's set-up is guessed a crash (another process's memory the alternative), and a
    fault that is not memory stated before it is then its evidence: Ascend's runtime states its own so."""
    cut = ("(VllmWorker rank=0 pid=1274) ERROR 08-28 07:44:50 [multiproc_executor.py:492] WorkerProc failed to start.\n"
           "(VllmWorker rank=0 pid=1274) ERROR 08-28 07:44:50 [multiproc_executor.py:492] Traceback (most recent call "
           "last):\n"
           '(VllmWorker rank=0 pid=1274) ERROR 08-28 07:44:50 [multiproc_executor.py:492]   File "/v/vllm/worker/'
           'worker_base.py", line 606, in init_device\n')
    fault = ("(VllmWorker rank=0 pid=1273) ERROR 08-28 07:44:50 [multiproc_executor.py:492]         The argument is "
             "invalid.Reason: rtGetDevMsg execute failed, reason=[context pointer null]\n")
    alone = classify_text(cut, "vllm")
    assert (alone.outcome, [o for o, _ in alone.alternatives]) == (Outcome.CRASH, [Outcome.GPU_BUSY])
    got = classify_text(fault + cut, "vllm")
    assert got.outcome is Outcome.CRASH and any("context pointer null" in line for line in got.evidence)
    hung = fault.replace("rtGetDevMsg execute failed, reason=[context pointer null]",
                         "rtStreamSynchronize execute failed, reason=[fftsplus timeout]")
    assert classify_text(hung + cut, "vllm").outcome is Outcome.TIMEOUT


# == Round after F40 (written from its misses, after its score) =======================================================


def test_a_requests_own_end_to_end_time_is_a_server_at_work() -> None:
    """vllm-omni logs each finished request's timing ("[OmniTiming] req=chatcmpl-... total=27.55s", a metrics dict's
    "'e2e_time_ms': 2498.3"): only a server that served logs it. A start-up step's own total is not one."""
    for line in ("(APIServer pid=10017) INFO 04-23 21:44:20 [omni_base.py:253] [OmniTiming] req=chatcmpl-a1a0742ab3ad9655 "
                 "total=27.55s preprocess=2.69s engine=24.86s stages=[0:ar=19.01s,1:diffusion=5.85s]",
                 "(APIServer pid=1568) INFO 01-04 14:28:29 [log_utils.py:529]  'e2e_time_ms': 2498.3325004577637,"):
        got = classify_text(line, "vllm")
        assert (got.outcome, got.phase) == (Outcome.READY, Phase.READY), line
    assert classify_text("INFO 04-23 21:40:01 [loader.py:12] Loading weights total=5.83s", "vllm").outcome is None


# == Round after F41 (written from its misses, after its score) =======================================================


def test_a_hip_kernels_device_side_assertion_is_a_crash() -> None:
    """HIP's kernels word a failed device assert in lower case ("...: Device-side assertion `false' failed."), where
    C's assert and CUDA's say "Assertion `...` failed": either is an abort in native code."""
    log = ("INFO 04-28 05:02:50 [api_server.py:1043] vLLM API server version 0.8.5\n"
           "/app/vllm/csrc/rocm/skinny_gemms.hip:497: void wvSplitK_hf_sml_(const int, const int) [scalar_t = "
           "__hip_bfloat16, THRDS = 64]: Device-side assertion `false' failed.\n")
    assert classify_text(log, "vllm").outcome is Outcome.CRASH


def test_vllms_supported_tasks_line_opens_the_api_servers_set_up() -> None:
    """Since 0.10 vLLM writes "Supported tasks: ['generate']" (up to 0.9 "Supported_tasks: [...]") once the engine is
    built, as the API server sets up its handlers: a finished log that ends there got past every memory step. Prose
    that only names the line is not it."""
    up = ("(EngineCore_DP0 pid=4599) INFO 01-06 23:26:32 [vllm.py:640] Asynchronous scheduling is enabled.\n"
          "(APIServer pid=4548) INFO 01-06 23:26:32 [api_server.py:1020] Supported tasks: ['generate']\n")
    got = classify_text(up, "vllm")
    assert (got.outcome, got.phase, got.confidence) == (Outcome.READY, Phase.HTTP, "low")
    assert classify_text("the Supported_tasks, then the note\n", "vllm").outcome is None


def test_only_a_configs_own_validate_frame_places_an_exception_at_the_arguments() -> None:
    """`_validate_*` frames in a config or argument module (vllm/config/, arg_utils.py, server_args.py) are the checks
    of the launch's settings; the same name elsewhere checks a request or a tensor (serving_engine.py's
    `_validate_input`, tensor_schema.py's `_validate_tensor_shape_expected`): its exception is not a refused setting."""
    def raised_in(path: str, func: str) -> Outcome | None:
        log = ("Traceback (most recent call last):\n"
               f'  File "/usr/lib/python3.12/site-packages/vllm/{path}", line 880, in {func}\n'
               "    assert value in supported\n"
               "AssertionError\n")
        return classify_text(log, "vllm").outcome

    assert raised_in("config/model.py", "_validate_quantization") is Outcome.CONFIG_ERROR
    assert raised_in("engine/arg_utils.py", "_validate_args") is Outcome.CONFIG_ERROR
    assert raised_in("entrypoints/openai/serving_engine.py", "_validate_input") is Outcome.CRASH
    assert raised_in("utils/tensor_schema.py", "_validate_tensor_shape_expected") is Outcome.CRASH


# == Round after F44 (written from its misses, after its score; each checked on the logs read before F44) ==========


def test_a_rust_panic_is_an_abort_in_native_code() -> None:
    """Rust's runtime reports a panic as "thread 'NAME' panicked at FILE:LINE:COL:" (before 1.73: "panicked at 'MSG',
    FILE"): a launcher or library written in Rust died there, as a C++ abort or a segfault would; not memory."""
    log = ("(venv) $ RUST_BACKTRACE=1 dynamo run out=vllm /models/Llama-8B/\n"
           "thread 'tokio-runtime-worker' panicked at lib/llm/src/engines/vllm/worker.rs:247:17:\n"
           "Failed to import python 'vllm' module. Are we running in the correct venv? AttributeError: class must "
           "define a '_type_' attribute\n"
           "stack backtrace:\n"
           "   0: rust_begin_unwind\n")
    got = classify_text(log, "vllm")
    assert got.outcome is Outcome.CRASH and "panicked at" in got.remedy
    assert classify_text("thread 'main' panicked at 'index out of bounds', src/main.rs:2:5\n", "sglang").outcome \
        is Outcome.CRASH


def test_a_capture_bar_at_its_total_means_every_gpu_phase_is_done() -> None:
    """Graph capture is the last GPU step of both engines; its progress bar at its total ("4/4", 100 %) says it
    finished. A finished excerpt that goes on past it with nothing failing got as far as a ready line would
    (READY, low); a bar short of its total, or a failure after it, does not."""
    head = ("[2026-04-19 07:59:32 TP0] Load weight end. type=DeepseekV3ForCausalLM, dtype=torch.bfloat16, "
            "avail mem=30.10 GB, mem usage=12.30 GB.\n")
    done = head + ("Capturing batches (bs=1 avail_mem=24.91 GB):  75%|███████▌  | 3/4 [00:04<00:01,  1.13s/it]\n"
                   "Capturing batches (bs=1 avail_mem=24.91 GB): 100%|██████████| 4/4 [00:05<00:00,  1.36s/it]\n"
                   "(AReaL) INFO: Callback server started on 10.0.0.2:4311\n")
    got = classify_text(done, "sglang")
    assert (got.outcome, got.confidence) == (Outcome.READY, "low")
    short = head + "Capturing batches (bs=2 avail_mem=24.93 GB):  50%|█████     | 2/4 [00:04<00:03,  1.93s/it]\n"
    assert classify_text(short, "sglang").outcome is None
    vllm_done = ("INFO 12-19 19:19:50 [gpu_model_runner.py:2602] Model loading took 7.6 GiB\n"
                 "Capturing CUDA graphs (decode, FULL): 100%|██████████| 67/67 [00:06<00:00, 10.04it/s]\n"
                 "wandb: Syncing run algoevolve\n")
    assert classify_text(vllm_done, "vllm").outcome is Outcome.READY
    failed = done + "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.\n"
    assert classify_text(failed, "sglang").outcome is not Outcome.READY


def test_a_traceback_nothing_places_before_the_weights_reads_as_a_crash_or_a_refusal() -> None:
    """An excerpt cut inside a traceback whose frames name no phase, before any weights were loaded: an exception
    ended the launch. Most such excerpts were crashes, some a refused setting: CRASH at low confidence, CONFIG_ERROR
    its alternative (so the search learns nothing from it), and `missing` names the exception line. A live launch,
    whose exit status is known, is not read this way."""
    log = ("WARNING 09-26 00:17:30 [arg_utils.py:1770] Compute Capability < 8.0 is not supported by the V1 Engine.\n"
           "2025-09-26 00:17:31.369 | ERROR    | mineru.cli.gradio_app:main:277 - Using V1 AsyncLLMEngine, but "
           "envs.VLLM_USE_V1=False.\n"
           "Traceback (most recent call last):\n"
           '  File "/usr/local/bin/mineru-gradio", line 7, in <module>\n'
           "    sys.exit(main())\n")
    got = classify_text(log, "vllm")
    assert (got.outcome, got.confidence) == (Outcome.CRASH, "low")
    assert [a for a, _ in got.alternatives] == [Outcome.CONFIG_ERROR] and "exception line" in got.missing
    assert classify_text(log, "vllm", exit_code=1).missing != got.missing


# == Round after F47 (written from its misses, after its score; each checked on the logs read before F47) ==========


def test_an_old_v0_block_count_places_what_follows_in_the_kv_pool() -> None:
    """vLLM before 0.6 logs nothing between its engine header and "# GPU blocks: N, # CPU blocks: M": the weights are
    in and the profile run is done. An OOM right after it is the pool's allocation, not a GPU full before the weights;
    a count of none is the pool failing by itself."""
    head = ("INFO 10-26 12:34:54 llm_engine.py:72] Initializing an LLM engine with config: model='../CodeLlama-7B-AWQ', "
            "dtype=torch.float16, max_seq_len=512, tensor_parallel_size=1, quantization=awq, seed=0)\n")
    oom = "torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 100.00 MiB (GPU 0; 12.00 GiB total\n"
    assert classify_text(head + oom, "vllm").outcome is Outcome.GPU_BUSY  # nothing past the header: taken before
    got = classify_text(head + "INFO 10-26 12:39:51 llm_engine.py:207] # GPU blocks: 793, # CPU blocks: 512\n" + oom,
                        "vllm")
    assert got.outcome is Outcome.OOM_KV_POOL and got.phase is Phase.KV_POOL
    none_left = classify_text(head + "INFO 10-26 12:39:51 llm_engine.py:207] # GPU blocks: 0, # CPU blocks: 512\n",
                              "vllm")
    assert none_left.outcome is Outcome.OOM_KV_POOL


def test_a_model_missing_a_file_it_needs_is_a_refused_model_but_a_missing_generation_config_is_not() -> None:
    """transformers raises "OSError: <path> does not appear to have a file named X" when the model given lacks a file
    loading it needs (its remote code's configuration module, config.json): the model path is wrong, whatever memory
    is set. SGLang logs the same words for a missing generation_config.json as a warning and goes on: no failure."""
    raised = ("OSError: neuralmagic/Phi-3.5-mini-instruct-FP8-KV does not appear to have a file named "
              "configuration_phi3.py. Checkout 'https://huggingface.co/neuralmagic/Phi-3.5-mini-instruct-FP8-KV/tree/main' "
              "for available files.\n")
    got = classify_text(raised, "vllm")
    assert got.outcome is Outcome.CONFIG_ERROR and "configuration_phi3.py" in got.remedy
    warned = ("[2026-08-01 21:40:38] Failed to load generation config for org/m: org/m does not appear to have a file "
              "named generation_config.json. Checkout 'https://huggingface.co/org/m/tree/main' for available files.\n")
    assert classify_text(warned, "sglang").outcome is None


def test_the_kernels_oom_killer_and_a_dead_ray_worker_are_crashes_not_gpu_memory() -> None:
    """The kernel's "Out of memory: Killed process N (vLLM::EngineCor)" is host RAM running out, which no GPU memory
    setting changes (as a bare "Killed" is); Ray's "A worker died or was killed while executing a task" says the
    engine's worker is gone. Both end the launch as a crash; a stronger failure above Ray's line still decides."""
    killer = ("[ 9794.850361] Out of memory: Killed process 108229 (vLLM::EngineCor) total-vm:249406116kB, "
              "anon-rss:1175116kB, file-rss:57080kB, shmem-rss:258048kB, UID:1000 pgtables:9336kB oom_score_adj:200\n")
    got = classify_text(killer, "vllm")
    assert got.outcome is Outcome.CRASH and "host" in got.remedy
    ray = ("2023-09-21 09:59:54,619\tWARNING worker.py:2058 -- A worker died or was killed while executing a task by an "
           "unexpected system error. To troubleshoot the problem, check the logs for the dead worker.\n")
    assert classify_text(ray, "vllm").outcome is Outcome.CRASH
    oom = ("INFO 10-26 12:39:51 llm_engine.py:207] # GPU blocks: 793, # CPU blocks: 512\n"
           "torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 100.00 MiB (GPU 0; 12.00 GiB total\n")
    assert classify_text(oom + ray, "vllm").outcome is Outcome.OOM_KV_POOL


def test_an_exception_a_sentence_names_as_the_error_it_got_is_read() -> None:
    """A poster who writes the error into a sentence (`I get the error ValueError: Architecture deepseek2 not
    supported and ...`) says the launch raised it: read as the exception line it quotes. A sentence that only talks
    about an exception type, or an error it did not get, raises nothing."""
    said = ("Finally when I run it as vllm serve DeepSeek-V2.5-Q6_K.gguf --tokenizer deepseek-ai/DeepSeek-V2.5, I get the "
            "error ValueError: Architecture deepseek2 not supported and it seems to originate from "
            "'transformers/modeling_gguf_pytorch_utils.py'.")
    assert logtext.clean(said).text.startswith("ValueError: Architecture deepseek2 not supported")
    assert classify_text(said, "vllm").outcome is Outcome.CONFIG_ERROR
    assert classify_text("The error is not a ValueError at all, the server started.", "vllm").outcome is None
    assert classify_text("We fixed the error ValueError handling in the parser last week.", "vllm").outcome is None


# == Round after F48 (written from its misses, after its score; each checked on the logs read before F48) ==========


@pytest.mark.parametrize(("line", "outcome"), [
    # a sentence that says the launch got the exception
    ("When running with tensor parallelism (--tensor-parallel-size 2), I get a KeyError: "
     "'transformer.h.0.mlp.gate_up_proj.qweight', which appears to be a known issue", Outcome.CRASH),
    ("With the above command facing runtime problem ModuleNotFoundError: No module named 'transformers_modules.x'",
     Outcome.CRASH),
    # an exception line in quotation marks
    ('"ValueError: No supported config format found in nvidia/Llama-3.1-Nemotron-70B-Instruct"', Outcome.CONFIG_ERROR),
    # a bare "Error:" that names a package to install
    ("Error: No module named 'outlines.fsm.regex'. Please install a new version of outlines by "
     '`pip install "outlines>=0.0.44"`', Outcome.CRASH),
])
def test_an_exception_a_poster_quoted_or_told_is_read(line: str, outcome: Outcome) -> None:
    assert classify_text(line, "vllm").outcome is outcome


def test_prose_about_an_exception_it_did_not_get_raises_nothing() -> None:
    for line in ("I get that a KeyError is raised when the weight is missing, but the server came up.",
                 "'ValueError' is what the parser raises for a bad flag",
                 "Error handling: see the docs for the server's options"):
        assert classify_text(line, "vllm").outcome is None, line


# == Round after F49 (written from its misses, after its score; each checked on the logs read before F49) ==========


@pytest.mark.parametrize(("line", "outcome"), [
    # inside triple backticks, as a list item's code or a flattened fence with its language word
    ("  ```ValueError: The number of required GPUs exceeds the total number of available GPUs in the placement "
     "group.```", Outcome.CONFIG_ERROR),
    ("- Key error message: ```text RuntimeError: Call aclnnNonzeroV2 failed, detail:E39999: Inner Error ``` Check "
     "whether the CANN and MindSpore versions are correctly matched.", Outcome.CRASH),
    # after a Chinese lead-in and a colon, and with the space after the type lost in transcription
    ("使用llama3.1系模型进行推理时报错:ValueError: 'rope_scaling' must be a dictionary with two fields, 'type' and "
     "'factor', got {'factor': 8.0}", Outcome.CONFIG_ERROR),
    ("问题2:在推理预测过程中遇到ValueError:User-specified max_model_len is greater than the drived max_model_len",
     Outcome.CONFIG_ERROR),
])
def test_an_exception_in_a_fence_or_after_a_chinese_lead_in_is_read(line: str, outcome: Outcome) -> None:
    assert classify_text(line, "vllm").outcome is outcome


def test_colour_codes_rsyslog_escaped_are_stripped_like_raw_ones() -> None:
    """rsyslog writes the escape character of a colour code as `#033`: `#033[2m#033[33m(raylet)#033[0m` is `(raylet)`
    in colour, and the line reads as the same line uncoloured."""
    escaped = "#033[2m#033[36m(RayWorkerVllm pid=308)#033[0m INFO 10-27 20:44:35 llm_engine.py:207] # GPU blocks: 793"
    plain = "(RayWorkerVllm pid=308) INFO 10-27 20:44:35 llm_engine.py:207] # GPU blocks: 793"
    assert logtext.clean(escaped) == logtext.clean(plain)
    assert "#033" not in logtext.clean(escaped).text


# == Round after F50 (written from its misses, after its score; each checked on the logs read before F50) ==========


def test_torchs_heartbeat_monitor_on_a_stuck_nccl_watchdog_is_a_hang() -> None:
    """When the NCCL watchdog itself stops, torch's heartbeat monitor says so ("ProcessGroupNCCL's watchdog got stuck for
    600 seconds without making progress in monitoring enqueued collectives") and aborts: a NCCL or CUDA call that never
    returned, a hang, whatever the abort looks like after it."""
    log = ("[rank1]:[E ProcessGroupNCCL.cpp:1153] [PG 2 Rank 1] ProcessGroupNCCL preparing to dump debug info.\n"
           "[rank1]:[F ProcessGroupNCCL.cpp:1169] [PG 2 Rank 1] [PG 2 Rank 1] ProcessGroupNCCL's watchdog got stuck for "
           "600 seconds without making progress in monitoring enqueued collectives. This typically indicates a NCCL/CUDA "
           "API hang blocking the watchdog.\n")
    assert classify_text(log, "vllm").outcome is Outcome.TIMEOUT


def test_a_size_a_setting_must_exceed_is_a_refused_setting() -> None:
    """"model context length should be greater than total sequence length" states a rule about the settings (the
    context asked for against the lengths asked for): a refusal, as "is larger than" already was. The same words about
    no setting (a kernel's own tensor) are not."""
    said = "AssertionError: model context length should be greater than total sequence length"
    assert classify_text(said, "vllm").outcome is Outcome.CONFIG_ERROR
    kernel = "AssertionError: block count must be greater than zero in the reduction kernel"
    assert classify_text(kernel, "vllm").outcome is not Outcome.CONFIG_ERROR


# == Round after F52 (written from its misses, after its score; each checked on every log read before) =============


def test_a_writers_own_later_progress_means_its_earlier_exception_did_not_stop_it() -> None:
    """An exception line a writer printed early (protobuf's harmless `AttributeError: 'MessageFactory' object has no
    attribute 'GetPrototype'` at import) did not stop it when the same writer later logs a later start-up step, even
    where another writer (the engine core) had logged that phase first."""
    log = ["INFO 03-29 13:39:10 [utils.py:238] non-default args: {'max_model_len': 8192}",
           "AttributeError: 'MessageFactory' object has no attribute 'GetPrototype'",
           "(EngineCore_DP0 pid=463) INFO 03-29 13:49:21 [gpu_model_runner.py:4364] Model loading took 60.64 GiB memory "
           "and 587.68 seconds",
           "(EngineCore_DP0 pid=463) INFO 03-29 13:49:41 [gpu_worker.py:424] Available KV cache memory: 11.94 GiB",
           "(EngineCore_DP0 pid=463) INFO 03-29 13:50:36 [core.py:282] init engine (profile, create kv cache, warmup "
           "model) took 75.18 seconds",
           "INFO 03-29 13:50:37 [llm.py:388] Supported tasks: ['generate']"]
    assert classify_text("\n".join(log), "vllm").outcome is Outcome.READY
    # the writer that raised said nothing after it: the exception stands
    assert classify_text("\n".join(log[:-1]), "vllm").outcome is not Outcome.READY


def test_the_batch_systems_time_limit_after_the_ready_line_stops_a_server_that_came_up() -> None:
    """SLURM cancelling the job at its time limit is a hang of the launch only before the server was ready; after the
    ready line the launch had come up, and the job's clock stopped it from outside."""
    limit = "slurmstepd: error: *** JOB 6753 ON gpuh04 CANCELLED AT 2026-01-07T10:29:37 DUE TO TIME LIMIT ***"
    loading = "INFO 01-07 08:10:02 [gpu_model_runner.py:2000] Starting to load model Qwen/Qwen3-VL-30B-A3B-Instruct..."
    ready = ["(APIServer pid=7) INFO:     Started server process [7]",
             "(APIServer pid=7) INFO:     Application startup complete."]
    assert classify_text("\n".join([loading, limit]), "vllm").outcome is Outcome.TIMEOUT
    assert classify_text("\n".join([loading, *ready, limit]), "vllm").outcome is Outcome.READY


# == After F54: another program's loading bar (14704 and 8412 noticed before, 15811 F54's; no other reading moved) ====


def test_a_loading_bar_after_the_engines_start_up_is_another_programs() -> None:
    """Once the engine's start-up is done (vLLM's `init engine (profile, create kv cache, warmup model) took`), a bare
    loading bar (transformers' `Loading checkpoint shards`, which Unsloth prints loading its training copy of the
    model) does not take the launch back to loading its weights: the offline engine came up. Before that, the same bar
    is the launch's own loading (or a new launch's)."""
    engine = ["INFO 07-04 17:56:20 [model_runner.py:1108] Starting to load model unsloth/Qwen3-4B-Base...",
              "INFO 07-04 17:56:39 [model_runner.py:1671] Graph capturing finished in 2 secs, took 0.10 GiB",
              "INFO 07-04 17:56:40 [llm_engine.py:428] init engine (profile, create kv cache, warmup model) took 11.31 "
              "seconds"]
    bar = "Loading checkpoint shards:   0%|          | 0/2 [00:00<?, ?it/s]"
    after = classify_text("\n".join([*engine, bar, "Unsloth 2026.6.9 patched 36 layers"]), "vllm")
    assert (after.outcome, after.phase) == (Outcome.READY, Phase.HTTP)
    capturing = "INFO 07-04 17:56:36 [model_runner.py:1513] Capturing cudagraphs for decoding."
    before = classify_text("\n".join([engine[0], capturing, bar, "next"]), "vllm")  # still capturing its graphs
    assert before.outcome is None and before.phase is Phase.WEIGHTS


# == Round after F55 (written from its misses, after its score; checked on every log read before) ===================


def test_sleep_mode_is_a_setting_an_engine_can_refuse() -> None:
    """vLLM's sleep mode is a setting (`--enable-sleep-mode`, `enable_sleep_mode=True`): its rule stated ("Sleep mode can
    only be used for one instance per process", raised when a second engine asks for it in one process) is a refused
    setting, as the helpers of F54 (15803) and F55 (16000) each labelled it; with no exit status, at low confidence."""
    got = classify_text("INFO 07-04 17:56:20 [model_runner.py:1108] Starting to load model unsloth/Qwen3-4B-Base...\n"
                        "[rank0]: AssertionError: Sleep mode can only be used for one instance per process.", "vllm")
    assert (got.outcome, got.confidence) == (Outcome.CONFIG_ERROR, "low")
    # a kernel's assertion that names no setting stays a crash
    other = classify_text("INFO 07-04 17:56:20 [model_runner.py:1108] Starting to load model unsloth/Qwen3-4B-Base...\n"
                          "[rank0]: AssertionError: Mode can only be used for one tensor per kernel.", "vllm")
    assert other.outcome is Outcome.CRASH


# == Round after F56 (written from its misses, after its score; checked on every log read before) ===================

_CHILD_DEATH = ["Traceback (most recent call last):",
                '  File "/usr/lib/python3.12/multiprocessing/process.py", line 314, in _bootstrap',
                "    self.run()",
                '  File "/usr/lib/python3.12/multiprocessing/process.py", line 108, in run',
                "    self._target(*self._args, **self._kwargs)",
                '  File "/sgl-workspace/sglang/python/sglang/multimodal_gen/runtime/managers/gpu_worker.py", line 334, '
                "in run_scheduler_process",
                "    scheduler.event_loop()",
                "RuntimeError: Scheduler terminated after 3 consecutive errors. Last error: Operation cannot be "
                "accomplished in current state"]
_HEALTH = ['[2026-01-28 08:52:46] INFO:     172.31.0.80:50570 - "GET /health HTTP/1.1" 200 OK',
           '[2026-01-28 08:52:56] INFO:     172.31.0.80:48288 - "GET /health HTTP/1.1" 200 OK']


def test_an_exception_that_ended_a_child_process_is_not_undone_by_a_front_end_that_answers_on() -> None:
    """A traceback that begins at multiprocessing's own top frame (`process.py ... in _bootstrap`) is a child process's
    death: Python prints it only for an exception nothing in the child caught, and the child exits. SGLang's diffusion
    server's scheduler died so (F56's 16509), and its HTTP front end went on answering /health: that is not a server at
    work, whose first line otherwise clears the exceptions above it."""
    got = classify_text("\n".join([*_CHILD_DEATH, *_HEALTH]), "sglang")
    assert (got.outcome, got.confidence) == (Outcome.CRASH, "low")
    # the same exception, caught and logged by the engine's own loop (its traceback begins at the engine's frames),
    # is one the server survived: the front end answering after it still reads as a server at work
    handled = ["Traceback (most recent call last):", *_CHILD_DEATH[5:]]
    assert classify_text("\n".join([*handled, *_HEALTH]), "sglang").outcome is Outcome.READY
    # a thread's top frame (threading.py's `_bootstrap`) is not a process's death
    thread = ["Traceback (most recent call last):",
              '  File "/usr/lib/python3.12/threading.py", line 1016, in _bootstrap', *_CHILD_DEATH[5:]]
    assert classify_text("\n".join([*thread, *_HEALTH]), "sglang").outcome is Outcome.READY


def test_a_child_process_that_died_after_the_server_came_up_is_the_servers_crash() -> None:
    """After the ready line an exception a request raised is not a crash of the server, unless it ended a process."""
    ready = ["[2026-01-28 08:50:00] The server is fired up and ready to roll!"]
    got = classify_text("\n".join([*ready, *_CHILD_DEATH]), "sglang")
    assert got.outcome is Outcome.CRASH
    handled = ["Traceback (most recent call last):", *_CHILD_DEATH[5:]]
    assert classify_text("\n".join([*ready, *handled]), "sglang").outcome is Outcome.READY


def test_a_traceback_cut_in_warm_up_is_guessed_a_crash_with_the_runtime_oom_the_alternative() -> None:
    """Warm-up frames (a forward pass, the sampler) with the exception cut off: F1-F40 held 4 such memory failures to 3
    others, but every batch read since F40 held none in 6 (5 crashes, 1 refused setting): the guess is a crash, low,
    the runtime OOM its alternative, as for serving and capture."""
    log = "\n".join(["INFO 06-15 16:27:40 [gpu_worker.py:1] Available KV cache memory: 30.1 GiB",
                     "(EngineCore pid=1426191) ERROR 06-15 16:27:50 [core.py:1197] Traceback (most recent call last):",
                     '(EngineCore pid=1426191) ERROR 06-15 16:27:50 [core.py:1197]   File "/x/vllm/v1/worker/'
                     'gpu_worker.py", line 580, in execute_model',
                     '(EngineCore pid=1426191) ERROR 06-15 16:27:50 [core.py:1197]   File "/x/vllm/v1/worker/gpu/'
                     'model_runner.py", line 1247, in execute_model'])
    got = classify_text(log, "vllm")
    assert (got.outcome, got.confidence) == (Outcome.CRASH, "low")
    assert [o for o, _ in got.alternatives] == [Outcome.OOM_RUNTIME] and got.missing
    assert got.needs is None


# == Before F58 (issue 33's own list: "an excerpt that begins mid-traceback ... left undecided") ======================

_HEADLESS = ['(APIServer pid=523)   File "/vllm-workspace/vllm/vllm/v1/engine/async_llm.py", line 212, in from_vllm_config',
             "(APIServer pid=523)     return cls(",
             '(APIServer pid=523)   File "/vllm-workspace/vllm/vllm/v1/engine/core_client.py", line 448, in __init__',
             "(APIServer pid=523)     with launch_core_engines(vllm_config, executor_class, log_stats) as (engine_"]


def test_an_excerpt_that_begins_inside_a_traceback_is_read_as_one_cut_at_both_ends() -> None:
    """Frames with no `Traceback (most recent call last):` above them: the excerpt began below the header. Read as a
    traceback cut before its exception line: nothing places it, so a crash, low, a refused setting the alternative;
    never the silence of a log that "ends with no error or traceback in view"."""
    got = classify_text("\n".join(_HEADLESS), "vllm")
    assert (got.outcome, got.confidence) == (Outcome.CRASH, "low") and got.missing
    assert [o for o, _ in got.alternatives] == [Outcome.CONFIG_ERROR]
    # after the weights, the phase the start-up had reached places it, as under a header
    loaded = ["INFO 06-15 16:27:40 [gpu_model_runner.py:1] Model loading took 16.8 GiB memory and 12.1 seconds",
              "INFO 06-15 16:27:41 [gpu_worker.py:1] Available KV cache memory: 30.1 GiB",
              '  File "/x/vllm/v1/worker/gpu_worker.py", line 580, in execute_model',
              "    output = self.model_runner.execute_model(scheduler_output)"]
    headed = [*loaded[:2], "Traceback (most recent call last):", *loaded[2:]]
    assert classify_text("\n".join(loaded), "vllm") == classify_text("\n".join(headed), "vllm")
    # its exception line, when in view, decides as ever
    closed = classify_text("\n".join([*_HEADLESS[:3], "ValueError: max_model_len 262144 > 131072"]), "vllm")
    assert closed.outcome is Outcome.CONFIG_ERROR
    # faulthandler's frames (`line 12 in f`, a dump of where threads stood: a hang's, not an exception's) open nothing
    dump = ["Thread 0x00007f (most recent call first):", '  File "/x/threading.py", line 331 in wait',
            '  File "/x/vllm/v1/engine/core.py", line 90 in run_busy_loop']
    assert classify_text("\n".join(dump), "vllm").outcome is None


# == Round after F58 (written from its misses, after its score; checked on every log read before) ===================


def test_a_traceback_cut_in_weights_loading_guesses_the_weights_oom_and_says_a_crash_is_as_likely() -> None:
    """Cut tracebacks through the weights loader, over every corpus: 25 weights OOMs, 23 crashes, 12 refused settings;
    since F40 1 OOM to 17 others (F58's 17407, 17408, 17500 among them). The memory guess stays (the most common single
    class, and the one a tuner's own launches meet there), and the reading says the crash is about as likely."""
    got = classify_text("\n".join([*_LOADING, *_CUT_NO_PHASE]), "vllm")
    assert (got.outcome, got.confidence) == (Outcome.OOM_WEIGHTS, "low") and got.missing
    assert [o for o, _ in got.alternatives] == [Outcome.CRASH]
    # the KV pool's guess stays alone: there memory failures are most of what the corpora hold (29 of 42)
    assert classify_text("\n".join([*_LOADED, *_CUT_NO_PHASE]), "vllm").alternatives == ()


# == Round after F59 (written from its misses, after its score; checked on every log read before) ===================

_SGL_UP = ["[2026-12-07 10:00:01] The server is fired up and ready to roll!",
           '[2026-12-07 10:00:09] INFO:     127.0.0.1:51234 - "GET /health HTTP/1.1" 200 OK',
           "[2026-12-07 10:00:12 TP0] Decode batch, #running-req: 3, #token: 1024, token usage: 0.02, gen throughput "
           "(token/s): 88.1, #queue-req: 0"]


def test_sglangs_failed_health_check_after_start_up_is_a_hang() -> None:
    """Once up, SGLang's health check sends a one-token request and logs that no output came back in its time
    (reference/engines.md, HTTP endpoints): the server stopped making progress. F59's 17719 read it READY, high."""
    assert classify_text("\n".join(_SGL_UP), "sglang").outcome is Outcome.READY
    stalled = ("[2026-12-07 10:01:40] Health check failed. Server couldn't get a response from detokenizer for last 20 "
               "seconds. tic start time: 10:01:20. last_heartbeat time: 10:00:12")
    got = classify_text("\n".join([*_SGL_UP, stalled]), "sglang")
    assert got.outcome is Outcome.TIMEOUT
    # a probe answered 503 before start-up is done is not that line: nothing is decided by it
    assert classify_text('[2026-12-07 10:00:00] INFO:     127.0.0.1:5 - "GET /health HTTP/1.1" 503 Service '
                         "Unavailable", "sglang").outcome is None


@pytest.mark.parametrize("line", [
    "[LIBX] /src/csrc/attn/select.cu:193 pick_kernel: cannot get heuristic kernel! q_type:bf16 kv_type:fp8",
    "/opt/lib/src/comm/topo.cpp:77 detect_links: unable to read the PCI topology",
    "/build/kernels/gemm.cc:12: could not find a tile config for m=8"])
def test_native_code_saying_it_cannot_do_something_is_a_crash(line: str) -> None:
    """C and CUDA libraries report their own failure by `file:line`, with their function's name or not: "cannot",
    "could not", "unable to" say a failure as "failed" does. F59's 17606 (AITER's kernel selection) read undecided."""
    got = classify_text(line, "vllm")
    assert (got.outcome, got.confidence) == (Outcome.CRASH, "low")


@pytest.mark.parametrize("line", [
    "/src/csrc/attn/select.cu:193 pick_kernel: selected kernel mla_a16w8 for gqa 16",
    "/opt/lib/src/comm/topo.cpp:77 detect_links: warning: cannot read NVLink state, using PCI",
    "the kernel at /src/csrc/attn/select.cu:193 cannot be tuned further, it is already at its best tile"])
def test_native_lines_that_are_no_failure_of_their_own_stay_undecided(line: str) -> None:
    assert classify_text(line, "vllm").outcome is None


def test_a_bare_must_be_decides_nothing_by_itself() -> None:
    """Tried after F59 and taken back: "must be" alone reads a model-shape invariant as a refused setting (SGLang's source
    census: "kv_lora_rank 448 must be multiple of quant_block_size 128" is a crash) as often as it mends one (F59's
    17600, LoRA on a MoE model)."""
    census = "AssertionError: kv_lora_rank 448 must be multiple of quant_block_size 128"
    assert classify_text(census, "sglang").outcome is Outcome.CRASH
    assert classify_text("RuntimeError: input tensor must be contiguous", "vllm").outcome is Outcome.CRASH


# == Round after F60 (written from its misses, after its score; checked on every log read before) ===================


def test_a_failed_health_check_is_a_hang_the_server_may_come_out_of() -> None:
    """F60's 17900: SGLang's failed health check twice, a request served between them (its thread blames a kernel compiled
    just in time). Read TIMEOUT, high, after F59's round; a stall is a symptom: low, READY the alternative."""
    stalled = ("[2026-12-07 10:01:40] Health check failed. Server couldn't get a response from detokenizer for last 20 "
               "seconds. tic start time: 10:01:20. last_heartbeat time: 10:00:12")
    got = classify_text("\n".join([*_SGL_UP, stalled]), "sglang")
    assert (got.outcome, got.confidence) == (Outcome.TIMEOUT, "low") and got.missing
    assert [o for o, _ in got.alternatives] == [Outcome.READY]
    # a line that names the failure decides, whatever the stall before it said
    crashed = ["[2026-12-07 10:02:10 TP0] Scheduler hit an exception: Traceback (most recent call last):",
               '  File "/x/sglang/srt/managers/scheduler.py", line 10, in event_loop_normal',
               "RuntimeError: CUDA error: an illegal memory access was encountered"]
    got = classify_text("\n".join([*_SGL_UP, stalled, *crashed]), "sglang")
    assert (got.outcome, got.alternatives) == (Outcome.CRASH, ())


@pytest.mark.parametrize("line", [
    "[PID: 5393] 2026-01-16-10:20:15.729.456 Memory_Allocation_Failure(EL0004): Failed to allocate memory.",
    "E0101 10:00:00 DEVICE_ALLOCATION_ERROR: failed to allocate 2.00 GiB of device memory",
    "E0101 10:00:00 ARENA_ALLOC_FAILURE: the arena is out of memory"])
def test_an_allocation_failure_named_with_underscores_is_out_of_memory(line: str) -> None:
    """OOM as a family, whatever reports it: an error class or code joined with underscores (Ascend's
    `Memory_Allocation_Failure(EL0004)`, F60's 18026 and F56's 16400, both read as crashes) says it as a CamelCase
    `...Error` does."""
    got = classify_text(line, "vllm")
    assert got.outcome is not None and got.outcome.is_oom


def test_underscored_words_that_are_no_allocation_failure_are_not_memory() -> None:
    got = classify_text("E0101 10:00:00 SOCKET_ERROR: failed to allocate a port for the store", "vllm")
    assert got.outcome is None or not got.outcome.is_oom


# == Round after F61 (written from its misses, after its score; checked on every log read before) ===================


@pytest.mark.parametrize("line", [
    "RuntimeError: [METAL] Command buffer execution failed: Insufficient Memory "
    "(00000008:kIOGPUCommandBufferCallbackErrorOutOfMemory).",
    "the command buffer ended with status MTLCommandBufferErrorOutOfMemory",
    "E0101 10:00:00 runtime.cc:12] call returned DEVICE_ERROR_OUT_OF_MEMORY"])
def test_a_runtimes_status_code_that_spells_out_of_memory_is_out_of_memory(line: str) -> None:
    """OOM as a family: a status or error code of any runtime that spells it (Apple Metal's, F61's 18208 and 18214, read
    as crashes, high)."""
    got = classify_text(line, "sglang")
    assert got.outcome is not None and got.outcome.is_oom


def test_not_enough_memory_of_an_apple_gpu_for_the_kv_cache_is_the_pool() -> None:
    """vLLM-Metal's own check (F61's 18206, 18207, read as refused settings): not enough Metal memory for the KV cache."""
    got = classify_text("ValueError: Paged attention: not enough Metal memory for KV cache.", "vllm")
    assert got.outcome is Outcome.OOM_KV_POOL
    # the host's memory is not the device's, and a handler's name is no status
    assert classify_text("ValueError: not enough host memory to pin the buffer", "vllm").outcome is not \
        Outcome.OOM_KV_POOL
    assert classify_text("INFO 01-01 10:00:00 [x.py:1] ErrorOutOfMemoryHandler registered", "vllm").outcome is None


# == Round after F62 (written from its misses, after its score; checked on every log read before) ===================


@pytest.mark.parametrize("line", [
    "Out of Memory: Not enough space to allocate 117440512 B DRAM buffer across 12 banks",
    "RuntimeError: allocator: not enough memory to allocate 2.0 GiB on device 3"])
def test_not_enough_room_to_allocate_is_out_of_memory(line: str) -> None:
    """OOM as a family: a device allocator that names no vendor (Tenstorrent's, F62's 18710 and 18711, read as crashes)."""
    got = classify_text(line, "vllm")
    assert got.outcome is not None and got.outcome.is_oom


@pytest.mark.parametrize("line", [
    "RuntimeError: not enough space to allocate the shared memory segment under /dev/shm",
    "RuntimeError: not enough memory to allocate the pinned host buffer",
    "OSError: not enough space to allocate the file on disk"])
def test_not_enough_room_on_the_host_or_disk_is_not_the_gpus(line: str) -> None:
    got = classify_text(line, "vllm")
    assert got.outcome is None or not got.outcome.is_oom


# == After the launch census's second part (docs/corpus-protocol.md, "The launch census") ==========================

@pytest.mark.parametrize("line", [
    "slurmstepd: error: Detected 1 oom-kill event in StepId=12.0. Some of your processes may have been killed by the "
    "cgroup out-of-memory handler.",
    "[2026-02-16T17:22:09.627] error: Detected 2 oom_kill events in StepId=1454668.batch. Some of the step tasks have "
    "been OOM Killed.",
    "    Last State:     Terminated\n      Reason:       OOMKilled\n      Exit Code:    137",
    "vllm-serve.service: Failed with result 'oom-kill'."])
def test_what_killed_for_the_hosts_memory_saying_so_is_a_crash_that_names_host_ram(line: str) -> None:
    got = classify_text("INFO 02-16 17:19:03 [loader.py:120] Loading weights took 31.2 s\n" + line, "vllm")
    assert got.outcome is Outcome.CRASH and "host ran out of RAM" in got.remedy, got


def test_a_pod_that_was_not_oom_killed_is_not_read_as_one() -> None:
    assert classify_text("    Last State:     Terminated\n      Reason:       Completed\n      Exit Code:    0",
                         "vllm").outcome is None


@pytest.mark.parametrize("line", [
    "safetensors._safetensors_rust.SafetensorError: Error while deserializing header: header too large",
    "(Worker pid=11374) ERROR 12-07 20:37:56 [multiproc_executor.py:953] safetensors_rust.SafetensorError: Error while "
    "deserializing header: incomplete metadata, file not fully covered",
    "SafetensorError: Error while deserializing header: MetadataIncompleteBuffer"])
def test_a_weights_file_safetensors_cannot_read_is_the_model_directorys_fault(line: str) -> None:
    got = classify_text("[2026-12-07 20:23:57] Load weight begin. avail mem=20.1 GB\n" + line, "sglang")
    assert got.outcome is Outcome.CONFIG_ERROR and "fetch the model again" in got.remedy
    assert got.figures.get("mfs_direction", 0) == 0


def test_sglangs_own_notice_of_a_corrupted_file_it_fetches_again_decides_nothing() -> None:
    notice = ("[2025-12-30 17:34:53] Corrupted safetensors file detected: /hf_home/hub/x/model-00002-of-00002.safetensors"
              " - SafetensorError: Error while deserializing header: invalid JSON in header: EOF while parsing a value")
    assert classify_text(notice, "sglang").outcome is None


@pytest.mark.parametrize("line", [
    "AssertionError: Not enough allowed NUMA nodes to bind threads of 2 local CPUWorkers. Allowed NUMA nodes are [0]. "
    "Please try to bind threads manually or decrease DP/TP/PP.",
    "ValueError: Not enough devices on this host for the world size asked: please reduce tensor_parallel_size.",
    "RuntimeError: the KV heads cannot be split this way; lower --tensor-parallel-size"])
def test_a_check_that_asks_for_smaller_parallel_sizes_refuses_the_launchs_choice(line: str) -> None:
    got = classify_text("INFO 12-07 20:40:00 [core.py:93] Initializing a V1 LLM engine\n" + line, "vllm")
    assert got.outcome is Outcome.CONFIG_ERROR and "parallel size" in got.remedy


_SGLANG_BACKEND_TRACE = """\
[2026-12-07 20:23:48] KV Cache is allocated. #tokens: 11821, K size: 2.89 GB, V size: 2.89 GB
[2026-12-07 20:23:48] Scheduler hit an exception: Traceback (most recent call last):
  File "/opt/env/lib/python3.11/site-packages/sglang/srt/managers/scheduler.py", line 3130, in run_scheduler_process
    scheduler = Scheduler(
  File "/opt/env/lib/python3.11/site-packages/sglang/srt/model_executor/model_runner.py", line 1798, in _get_attention_backend_from_str
    full_attention_backend = ATTENTION_BACKENDS[backend_str](self)
{frames}
NameError: name '{name}' is not defined
[2026-12-07 20:23:48] Received sigquit from a child process. It usually means the child failed.
"""


@pytest.mark.parametrize(("frames", "outcome"), [
    # SGLang's registry, then the backend module's constructor (the launch census's attn-flashinfer, 0.5.9 and 0.5.23)
    ('  File "/opt/env/lib/python3.11/site-packages/sglang/srt/layers/attention/attention_registry.py", line 69, in '
     'create_triton_backend\n    return TritonAttnBackend(self)', Outcome.CONFIG_ERROR),
    ('  File "/opt/env/lib/python3.11/site-packages/sglang/srt/layers/attention/fa3_backend.py", line 301, in __init__\n'
     '    self.workspace = WorkspaceBuffer(', Outcome.CONFIG_ERROR),
    # vLLM's backends, in a rendering that drops `File` and the quotes
    ('  vllm/v1/attention/backends/flashinfer.py:612, in FlashInferImpl.__init__', Outcome.CONFIG_ERROR),
    # the same name unbound in the backend's forward pass (a request's path), and in a quantization method's constructor
    ('  File "/opt/env/sglang/srt/layers/attention/flashinfer_backend.py", line 700, in forward_extend\n    o = w.run(q)',
     Outcome.CRASH),
    ('  File "/opt/env/sglang/srt/layers/quantization/compressed_tensors/compressed_tensors.py", line 88, in __init__\n'
     '    self.scheme = CompressedTensorsW8A8Int8(', Outcome.CRASH),
    # nothing of the backend's construction at all
    ('', Outcome.CRASH)])
def test_an_unbound_name_refuses_the_attention_backend_only_while_that_backend_is_built(frames: str,
                                                                                      outcome: Outcome) -> None:
    got = classify_text(_SGLANG_BACKEND_TRACE.format(frames=frames, name="SomeKernelWrapper"), "sglang")
    said = "attention backend" if outcome is Outcome.CONFIG_ERROR else "NameError"
    assert got.outcome is outcome and said in got.remedy, got


@pytest.mark.parametrize(("engine", "text"), [
    ("sglang", '[2026-12-08 01:00:00] Load weight begin. avail mem=20.74 GB\n'
               '[2026-12-08 01:00:01] Scheduler hit an exception: Traceback (most recent call last):\n'
               '  File "/env/sglang/srt/models/qwen2.py", line 180, in __init__\n'
               '    self.rotary_emb = get_rope(\n'
               '  File "/env/sglang/srt/layers/rotary_embedding.py", line 3585, in get_rope\n'
               '    raise ValueError(f"Unknown RoPE scaling type {scaling}")\n'
               'ValueError: Unknown RoPE scaling type yarnn\n'
               '[2026-12-08 01:00:01] Received sigquit from a child process. It usually means the child failed.'),
    ("vllm", "(Worker pid=9) ERROR 12-08 01:00:01 [multiproc_executor.py:953] ValueError: Unknown rope type 'dynamicc'")])
def test_a_kind_of_rope_the_engine_does_not_know_is_the_models_override_refused(engine: str, text: str) -> None:
    got = classify_text(text, engine)
    assert got.outcome is Outcome.CONFIG_ERROR and "setting" in got.remedy, got


_TOKENIZER_TRACE = """\
[2026-12-08 01:00:00] Load weight begin. avail mem=20.74 GB
Traceback (most recent call last):
  File "/env/sglang/srt/managers/tokenizer_manager.py", line 300, in init_tokenizer_and_processor
    self.tokenizer = get_tokenizer(
  File "/env/sglang/srt/utils/hf_transformers_utils.py", line 520, in get_tokenizer
    tokenizer = AutoTokenizer.from_pretrained(
  File "/env/transformers/tokenization_utils_base.py", line 2343, in _from_pretrained
    tokenizer = cls(*init_inputs, **init_kwargs)
  File "/env/transformers/models/qwen2/tokenization_qwen2.py", line 171, in __init__
    with open(vocab_file, encoding="utf-8") as vocab_handle:
{exc}
"""


@pytest.mark.parametrize("exc", ["TypeError: expected str, bytes or os.PathLike object, not NoneType",
                                 "json.decoder.JSONDecodeError: Expecting value: line 1 column 1 (char 0)",
                                 "ValueError: Couldn't instantiate the backend tokenizer from one of: "])
def test_a_tokenizer_that_cannot_be_loaded_is_the_models_files_whatever_else_loads_beside_it(exc: str) -> None:
    """The tokenizer's own constructor is not a model's (weights) frame, and its failure is the model directory's,
    even while the scheduler beside it loads the weights (SGLang loads both at once)."""
    got = classify_text(_TOKENIZER_TRACE.format(exc=exc), "sglang")
    assert got.outcome is Outcome.CONFIG_ERROR and "the launch's inputs" in got.remedy, got


@pytest.mark.parametrize(("line", "outcome"), [
    ("huggingface_hub.errors.LocalEntryNotFoundError: Cannot find an appropriate cached snapshot folder for the "
     "specified revision on the local disk and outgoing traffic has been disabled. To enable repo look-ups and downloads "
     "online, pass 'local_files_only=False' as input.", Outcome.CONFIG_ERROR),
    ("huggingface_hub.errors.EntryNotFoundError: 404 Client Error. Entry Not Found for url: "
     "https://huggingface.co/org/m/resolve/main/config.json.", Outcome.CONFIG_ERROR),
    # not cached where the hub could not be reached: the network's fault
    ("huggingface_hub.utils._errors.LocalEntryNotFoundError: An error happened while trying to locate the file on the "
     "Hub and we cannot find the requested files in the local cache. Please check your connection and try again.",
     Outcome.CRASH)])
def test_a_model_the_hub_cannot_give_is_refused_only_where_it_is_not_the_networks_fault(line: str,
                                                                                      outcome: Outcome) -> None:
    text = ("INFO 12-08 01:00:00 [api_server.py:1] vLLM API server version 0.11.0\n"
            '  File "/env/huggingface_hub/file_download.py", line 1371, in hf_hub_download\n' + line)
    assert classify_text(text, "vllm").outcome is outcome


@pytest.mark.parametrize(("line", "outcome"), [
    ("RuntimeError: Failed to load LoRA adapter sql: Repo id must be in the form 'repo_name' or 'namespace/repo_name': "
     "'/adapters/sql'.", Outcome.CONFIG_ERROR),
    ("ValueError: Loading lora sql failed: No adapter found for /adapters/sql", Outcome.CONFIG_ERROR),
    # the bare line raised over a chained cause says no more than a raw error
    ("RuntimeError: Loading lora /adapters/sql failed", Outcome.CRASH)])
def test_a_lora_adapter_the_engine_could_not_load_is_refused_where_it_says_why(line: str, outcome: Outcome) -> None:
    text = "INFO 12-08 01:00:00 [core.py:93] Initializing a V1 LLM engine\n" + line
    assert classify_text(text, "vllm").outcome is outcome
