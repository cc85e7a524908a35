"""Issue 33: every line is normalised before any rule, whatever transport carried it, and memory
failures are read as families (any library's out of memory, memory held by others in any words).

The prefixes here are ones neither corpus shows (docker/kubectl timestamps on SGLang lines, journald,
the kernel ring, kubectl --prefix, a cloud logger, aggregator tags, code fences); the engine lines under
them are real lines from the corpora. Each test of a change fails on the code before it.
"""

from __future__ import annotations

import pytest

from autotune.classifier import text as logtext
from autotune.classifier.classify import classify_text
from autotune.classifier.rules import OOM_TEXT
from autotune.records import Outcome, Phase

SGLANG_LINE = "[2025-03-29 18:18:34 TP0] Scheduler hit an exception: Traceback (most recent call last):"
VLLM_LINE = "(VllmWorker rank=1 pid=5356) ERROR 04-25 10:24:22 [multiproc_executor.py:380] RuntimeError: boom"

PREFIXES = [
    "2026-12-05T10:00:01.123456789Z ",  # docker logs -t / kubectl logs --timestamps
    "2026-12-05T10:00:01Z ",
    "2026-12-05 10:00:01+00:00 ",
    "[2026-12-05T10:00:01Z] ",  # CI runners
    "INFO 2026-12-05T10:00:01.096625454Z [resource.labels.containerName: sglang] ",  # cloud logging
    "Dec 05 10:00:01 gpu-node-7 python3[48213]: ",  # journald / syslog
    "Dec  5 10:00:01 gpu-node-7 sglang.service[1]: ",
    # journald's month as the host's locale writes it (one fresh log, 10704, showed `12月 04`; the others none shows)
    "12月 05 10:00:01 gpu-node-7 bash[94422]: ",
    "déc. 05 10:00:01 gpu-node-7 python3[48213]: ",
    "Dez 05 10:00:01 gpu-node-7 python3[48213]: ",
    "дек 05 10:00:01 gpu-node-7 python3[48213]: ",
    "[pod/sglang-0/server] ",  # kubectl logs --prefix
    "[deployment/vllm/vllm] ",
    "[81752.219007] ",  # kernel ring time
    "[server]: ",  # an aggregator's tag
    "server[991]: ",
    "> 2026-12-05T10:00:01Z ",  # a markdown quote of timestamped lines
    # Issue 33, third round: forms none of the corpora shows.
    "2026-12-05 10:00:01,123 ",  # python logging's %(asctime)s, no zone
    "2026-12-05 10:00:01.257 [Error] (Process) ",  # a process wrapper's level and component
    "svc-1  | 2026-12-05 10:00:01 | ERROR | stderr | ",  # docker compose, then a logger's `date | LEVEL | stream |`
    "`",  # a pasted line opened as markdown inline code
    # a quote's bar as a web page renders it, copied with the text (one fresh log, 18700, showed `▎ `)
    "\u258e ",
    "\u2502 ",
]


@pytest.mark.parametrize("prefix", PREFIXES)
@pytest.mark.parametrize("line", [SGLANG_LINE, VLLM_LINE, '  File "/x/model_runner.py", line 1, in load_model'])
def test_transport_prefix_is_taken_off_and_the_writer_kept(prefix: str, line: str) -> None:
    assert logtext.split(prefix + line) == logtext.split(line)


def test_engine_headers_are_not_taken_for_a_transport() -> None:
    # SGLang's own bracketed date names the rank; a rank tag is not an aggregator tag.
    assert logtext.split(SGLANG_LINE)[1] == "TP0"
    assert logtext.split("[rank3]: RuntimeError: x") == ("RuntimeError: x", "rank3")
    assert logtext.split("(VllmWorker rank=1 pid=77) ERROR 05-10 16:00:15 [x.py:470] RuntimeError: y") == (
        "RuntimeError: y", "VllmWorker rank=1 pid=77")


def test_code_fence_is_an_empty_line() -> None:
    assert logtext.split("```bash")[0] == ""
    assert logtext.split("~~~")[0] == ""


# A real SGLang weight-loading OOM (shared corpus shape), then its deciding lines.
_SGLANG_OOM = """[2025-11-01 16:50:36 TP0] Load weight begin. avail mem=23.10 GB
[2025-11-01 16:50:40 TP0] Scheduler hit an exception: Traceback (most recent call last):
  File "/sgl-workspace/sglang/python/sglang/srt/managers/scheduler.py", line 2009, in run_scheduler_process
    scheduler = Scheduler(server_args, port_args, gpu_id, tp_rank, dp_rank)
  File "/sgl-workspace/sglang/python/sglang/srt/model_executor/model_runner.py", line 457, in initialize
    self.load_model()
  File "/sgl-workspace/sglang/python/sglang/srt/model_executor/model_runner.py", line 700, in load_model
    self.model = get_model(
torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 130.00 MiB. GPU 0 has a total capacity of 23.52 GiB of which 13.00 MiB is free. Including non-PyTorch memory, this process has 23.48 GiB memory in use."""


@pytest.mark.parametrize("prefix", PREFIXES)
def test_a_prefixed_log_reads_as_the_bare_one(prefix: str) -> None:
    bare = classify_text(_SGLANG_OOM, "sglang")
    assert bare.outcome is Outcome.OOM_WEIGHTS
    prefixed = "\n".join(prefix + line for line in _SGLANG_OOM.splitlines())
    got = classify_text(prefixed, "sglang")
    assert (got.outcome, got.phase) == (bare.outcome, bare.phase)


def test_timestamped_lines_hard_wrapped_mid_word() -> None:
    # kubectl --timestamps lines, then a terminal wrapping the long OOM line mid-word at 120 columns.
    lines = ["2026-12-05T10:00:01.000000001Z " + line for line in _SGLANG_OOM.splitlines()]
    wrapped: list[str] = []
    for line in lines:
        while len(line) > 120:
            wrapped.append(line[:120])
            line = line[120:]
        wrapped.append(line)
    assert classify_text("\n".join(wrapped), "sglang").outcome is Outcome.OOM_WEIGHTS


@pytest.mark.parametrize("prefix", PREFIXES[:3] + ["ERROR 2026-12-05T10:00:01.198923587Z "])
def test_a_collectors_time_before_an_engines_header_is_not_a_record_of_its_own(prefix: str) -> None:
    # A line long enough to be searched for records run together: the header after the collector's time is
    # where the record starts, not a second record (the time alone, read as the previous line's wrapped tail).
    line = prefix + "[2026-05-26 13:36:14 TP5] Scheduler watchdog timeout (self.watchdog_timeout=300, self.soft=False)"
    assert logtext.records(line) == [line]
    lines = ["[2026-05-26 13:36:10 TP5] Prefill batch. #new-seq: 1, #new-token: 8192, #cached-token: 0, token usage: "
             "0.91, #running-req: 31, #queue-req: 212", line]
    got = classify_text("\n".join(lines), "sglang")
    assert got.outcome is Outcome.TIMEOUT
    assert got.evidence[0].endswith("self.soft=False)")


def test_a_line_with_its_loggers_header_under_a_frame_is_read_not_taken_for_its_quoted_source() -> None:
    # A log exported newest first (a cloud console): the frame comes above the line that opened its traceback.
    lines = ['ERROR 2025-04-05T00:01:19.198975563Z File "/sgl/python/sglang/srt/managers/scheduler.py", line 1999, '
             "in run_scheduler_process",
             "ERROR 2025-04-05T00:01:19.198923587Z [2025-04-05 00:01:19 TP1] Scheduler hit an exception: Traceback "
             "(most recent call last):"]
    assert classify_text("\n".join(lines), "sglang").outcome is Outcome.CRASH


@pytest.mark.parametrize(("raw", "text"), [
    ("**AttributeError: 'Glm4vMoe' object has no attribute 'capture_aux_hidden_states'**",
     "AttributeError: 'Glm4vMoe' object has no attribute 'capture_aux_hidden_states'"),
    ("**error:** new fill batch. #seq: 1.", "error: new fill batch. #seq: 1."),
    ("    return Runtime(*args, **kwargs)", "    return Runtime(*args, **kwargs)"),  # Python's, not markdown
    ("** 3 warnings **", "** 3 warnings **"),
])
def test_a_line_pasted_in_markdown_bold_is_read_without_it(raw: str, text: str) -> None:
    assert logtext.strip_transport(raw) == text


@pytest.mark.parametrize("text", [
    "RuntimeError: Triton Error [CUDA]: out of memory",  # the driver's text through a kernel compiler
    "RuntimeError: CUDA Error: out of memory at /workspace/csrc/cumem_allocator.cpp:62",  # an extension's allocator
    "Cuda failure 'out of memory'",  # NCCL's last error
    "[torch_memory_saver.cpp] cudaError error: 2 (out of memory)  file=csrc/core.cpp func=resume line=172",
    "RuntimeError: cuDNN error: CUDNN_STATUS_ALLOC_FAILED",
])
def test_out_of_memory_from_any_library(text: str) -> None:
    assert OOM_TEXT.search(text)


@pytest.mark.parametrize("text", [
    "If out-of-memory error occurs during cudagraph capture, consider decreasing `gpu_memory_utilization`.",
    "triton.runtime.errors.OutOfResources: out of resource: shared memory, Required: 66560, Hardware limit: 65536.",
    "CUDA graphs can take additional 1~3 GiB memory per GPU. If you are running out of memory, consider decreasing",
])
def test_advice_and_other_resources_are_not_out_of_memory(text: str) -> None:
    assert not OOM_TEXT.search(text)


def test_memory_held_by_others_in_words_no_rule_had() -> None:
    # A profiling-time check that names other processes and asks to release memory.
    log = ("INFO 12-05 10:00:01 [gpu_worker.py:200] Memory profiling takes 1.2 seconds\n"
           "ERROR 12-05 10:00:02 [core.py:396] AssertionError: Error in memory profiling. Initial free memory 31.4 "
           "GiB, current free memory 34.2 GiB. This happens when other processes sharing the same container "
           "release GPU memory while vLLM is profiling during initialization.")
    got = classify_text(log, "vllm")
    assert got.outcome is Outcome.GPU_BUSY


def test_a_pid_in_torch_oom_text_is_not_another_tenant() -> None:
    log = ("Loading safetensors checkpoint shards:   3% Completed | 1/37 [00:02<01:39,  2.77s/it]\n"
           "(EngineCore_DP0 pid=556790) torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 80.00 MiB. GPU 0 "
           "has a total capacity of 139.72 GiB of which 60.69 MiB is free. Process 691170 has 139.65 GiB memory in use.")
    assert classify_text(log, "vllm").outcome is not Outcome.GPU_BUSY


def test_one_frame_places_an_excerpt_cut_mid_traceback() -> None:
    log = ('(VllmWorker rank=1 pid=5356) ERROR 04-25 10:24:22 [multiproc_executor.py:380]   File '
           '"/usr/local/lib/python3.10/dist-packages/vllm/v1/worker/gpu_model_runner.py", line 1618, in capture_model\n'
           '(VllmWorker rank=1 pid=5356) ERROR 04-25 10:24:22 [multiproc_executor.py:380]     self._dummy_run(num_tokens)')
    got = classify_text(log, "vllm")  # placed in capture; the exception unread: a crash guessed, the graphs' OOM the other
    assert (got.outcome, got.phase, [o for o, _ in got.alternatives]) == (
        Outcome.CRASH, Phase.CUDA_GRAPH, [Outcome.OOM_CUDA_GRAPH])
    assert got.confidence == "low" and got.missing


# -- issue 33, third round: headers of any shape, records run together, facts of memory held by others ---------

def test_a_logger_header_with_a_pid_and_rank_tags_names_the_rank() -> None:
    assert logtext.split("ERROR 31423 [ TP6 PP0 scheduler.py:2547] Scheduler hit an exception") == (
        "Scheduler hit an exception", "TP6 PP0")
    assert logtext.split("WARNING 12-05 10:00:01 [ DP1 TP3 model_runner.py:9] low memory") == ("low memory", "DP1 TP3")


def test_an_sglang_header_cut_before_its_ranks_still_names_them() -> None:
    assert logtext.split("TP0] Decode batch. #running-req: 4") == ("Decode batch. #running-req: 4", "TP0")
    assert logtext.split("DP1 TP1] Prefill batch. #new-seq: 2") == ("Prefill batch. #new-seq: 2", "DP1 TP1")


def test_a_carriage_return_in_caret_notation_is_a_line_end() -> None:
    assert logtext.split('  File "/x/scheduler.py", line 9, in event_loop_normal^M') == (
        '  File "/x/scheduler.py", line 9, in event_loop_normal', None)
    log = "\n".join(line + "^M" for line in _SGLANG_OOM.splitlines())
    assert classify_text(log, "sglang").outcome is Outcome.OOM_WEIGHTS


def test_records_run_together_are_read_apart() -> None:
    glued = ("ERROR 12-05 10:00:01 [async_llm_engine.py:68] Engine background task failed ERROR 12-05 10:00:01 "
             "[async_llm_engine.py:68] Traceback (most recent call last): ERROR 12-05 10:00:01 [async_llm_engine.py:68] "
             'File "/x/vllm/engine/async_llm_engine.py", line 856, in run_engine_loop [2026-12-05 10:00:02 TP0] x')
    assert [logtext.split(r)[0] for r in logtext.records(glued)] == [
        "Engine background task failed", "Traceback (most recent call last):",
        'File "/x/vllm/engine/async_llm_engine.py", line 856, in run_engine_loop', "x"]
    # A line's own prefixes before its header are not a record of their own.
    line = "(Worker pid=148) ERROR 12-05 10:00:01 [multiproc_executor.py:870] ValueError: Free memory on device"
    assert logtext.records(line) == [line]
    got = classify_text(glued.rsplit(" [2026", 1)[0], "vllm")  # a traceback cut in the engine loop
    assert (got.outcome, got.confidence, got.phase) == (Outcome.CRASH, "low", Phase.READY)
    assert [o for o, _ in got.alternatives] == [Outcome.OOM_RUNTIME]


def test_a_traceback_run_together_is_read_as_its_lines() -> None:
    # a digest that joined a paste's lines (the frames, the source they quote, the exception): invented paths
    glued = ('File "/x/vllm/v1/worker/gpu_worker.py", line 300, in determine_available_memory est = '
             'self.model_runner.profile_cudagraph_memory() File "/x/vllm/v1/worker/gpu_model_runner.py", line 5000, '
             "in profile_cudagraph_memory self._warmup_and_capture(desc) ... torch.OutOfMemoryError: CUDA out of "
             "memory. Tried to allocate 1.00 GiB. GPU 0 has a total capacity of 23.00 GiB of which 0.90 GiB is free.")
    assert logtext.records(glued) == [
        'File "/x/vllm/v1/worker/gpu_worker.py", line 300, in determine_available_memory',
        "    est = self.model_runner.profile_cudagraph_memory()",
        'File "/x/vllm/v1/worker/gpu_model_runner.py", line 5000, in profile_cudagraph_memory',
        "    self._warmup_and_capture(desc) ...",
        glued[glued.index("torch.OutOfMemoryError"):]]
    # vLLM sizes its graphs inside the memory profile by capturing them: an OOM there is the graphs'
    assert classify_text(glued, "vllm").outcome is Outcome.OOM_CUDA_GRAPH
    # SGLang's marker keeps its traceback's first line; the frame after it is a line of its own
    line = 'Scheduler hit an exception: Traceback (most recent call last):  File "/x/scheduler.py", line 9, in loop'
    assert logtext.records(line) == ["Scheduler hit an exception: Traceback (most recent call last):",
                                     'File "/x/scheduler.py", line 9, in loop']


@pytest.mark.parametrize("line", [
    '  File "/x/scheduler.py", line 9, in event_loop_normal',
    '(EngineCore pid=5)   File "/x/core.py", line 9, in run_busy_loop',
    '[rank0]:   File "/x/core.py", line 9, in run_busy_loop',
    'File "/x/a.py", line 3 in wait',  # faulthandler's form
])
def test_a_frame_written_as_python_writes_it_is_one_record(line: str) -> None:
    assert logtext.records(line) == [line]


@pytest.mark.parametrize("text", [
    "RuntimeError: alloc_req_slots runs out of memory. Please set a smaller number for `--max-running-requests`.",
    "RuntimeError: KV cache pool failure: ran out of memory while extending",
])
def test_an_engines_own_allocator_error_is_out_of_memory(text: str) -> None:
    assert OOM_TEXT.search(text)


def test_sglangs_retraction_notice_is_not_an_error() -> None:
    assert not OOM_TEXT.search("Decode out of memory happened. #retracted_reqs: 1, #new_token_ratio: 0.4 -> 0.6")


_OOM = ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 300.00 MiB. GPU 0 has a total capacity of "
        "{total} GiB of which 90.00 MiB is free. {others}Including non-PyTorch memory, this process has {own} GiB "
        "memory in use. Of the allocated memory {alloc} GiB is allocated by PyTorch, and 20.00 MiB is reserved by "
        "PyTorch but unallocated.")


def test_an_unplaced_oom_with_the_device_held_outside_the_process_reads_gpu_busy() -> None:
    # Others hold 60 of 80 GiB (two seen, the rest in other containers); the process 19.
    got = classify_text(_OOM.format(total="80.00", own="19.00", alloc="18.50",
                                    others="Process 11 has 9.00 GiB memory in use. Process 12 has 2.00 GiB memory in "
                                           "use. "), "vllm")
    assert (got.outcome, got.confidence) == (Outcome.GPU_BUSY, "low")
    assert {o for o, _ in got.alternatives} >= {Outcome.OOM_KV_POOL, Outcome.OOM_RUNTIME}


@pytest.mark.parametrize(("own", "alloc"), [("78.00", "77.50"),  # the process itself filled the device
                                            ("0 bytes", "77.50")])  # a container hides it: PyTorch's figure counts
def test_an_unplaced_oom_of_the_process_itself_is_not_gpu_busy(own: str, alloc: str) -> None:
    text = _OOM.format(total="80.00", own=own, alloc=alloc, others="").replace("0 bytes GiB", "0 bytes")
    got = classify_text(text, "vllm")
    assert got.outcome is not Outcome.GPU_BUSY


def test_old_torchs_misspelt_capacity_is_read() -> None:
    text = ("torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB. GPU 0 has a total capacty "
            "of 24.00 GiB of which 2.00 MiB is free.")
    assert classify_text(text, "vllm").figures["oom_total_gib"] == 24.0


def test_vllm_v0s_worker_loop_places_a_traceback_cut_before_its_error() -> None:
    log = ('(VllmWorkerProcess pid=90) ERROR 12-05 10:00:01 multiproc_worker_utils.py:229]   File '
           '"/x/vllm/worker/worker_base.py", line 85, in start_worker_execution_loop\n'
           "(VllmWorkerProcess pid=90) ERROR 12-05 10:00:01 multiproc_worker_utils.py:229]     output = "
           "self.execute_model(execute_model_req=None)")
    got = classify_text(log, "vllm")
    assert (got.outcome, got.confidence, got.phase) == (Outcome.CRASH, "low", Phase.READY)
    assert [o for o, _ in got.alternatives] == [Outcome.OOM_RUNTIME]
