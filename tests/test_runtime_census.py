"""The classifier on the runtimes' own messages (tests/data/runtime-census, tools/accuracy/runtime_census.py), and the
round written from that census after F63 (docs/corpus-protocol.md, "Round from the runtime census").

The census is every message its readers found in the runtimes' sources, not the ones some user posted: a rule written
from one posted log is measured here on the rest of its family. The floors are a few below what the round reaches;
the lines below them are invented variants in the runtimes' shapes, each family with the cases it must not take.
"""

from __future__ import annotations

import pytest

from autotune.classifier.classify import classify_text
from autotune.records import Outcome
from tools.accuracy import runtime_census as rc

# messages read as their source means, by family, after the round (first score, rules of 28c1a61: OOM 70/92,
# HELD_BY_OTHERS 9/17, HANG 23/67, NOT_THESE 75/86)
FLOORS = {"OOM": 0.84, "HELD_BY_OTHERS": 0.5, "HANG": 0.82, "NOT_THESE": 0.88}


def _by_message() -> dict[rc.Row, bool]:
    out: dict[rc.Row, bool] = {}
    for row, place, got in rc.score(rc.load()):
        out[row] = out.get(row, True) and rc.right(row, place, got)
    return out


def test_the_census_holds_every_family_and_reads_each_message_the_same_at_every_place() -> None:
    rows = rc.load()
    assert len(rows) >= 262 and {r.family for r in rows} == set(rc.FAMILIES)
    results = rc.score(rows)
    readings: dict[rc.Row, set[bool]] = {}
    for row, place, got in results:
        readings.setdefault(row, set()).add(rc.right(row, place, got))
    # a family read at the weights but not at the pool would be the placement's doing, not the message's
    assert all(len(r) == 1 for r in readings.values()), [row.printed[0] for row, r in readings.items() if len(r) > 1]


@pytest.mark.parametrize("family", rc.FAMILIES)
def test_most_runtime_messages_are_read_as_their_source_means(family: str) -> None:
    results = [ok for row, ok in _by_message().items() if row.family == family]
    assert sum(results) / len(results) >= FLOORS[family], f"{sum(results)}/{len(results)}"


def test_the_rendered_log_is_the_engines_start_up_with_the_runtimes_lines_where_they_print() -> None:
    row = rc.Row("NCCL", "x", "alloc.h", ("node:1:2 [0] NCCL WARN Cuda failure 'out of memory'",
                                          "torch.distributed.DistBackendError: NCCL error in: x.cpp:1, unhandled cuda "
                                          "error", "Last error:", "Cuda failure 'out of memory'"),
                 "exception", "OOM", "", "test")
    sglang_pool = next(p for p in rc.PLACEMENTS if (p.engine, p.phase) == ("sglang", "OOM_KV_POOL"))
    lines = rc.render(row, sglang_pool).splitlines()
    native = lines.index(row.printed[0])
    assert any("Load weight end" in line for line in lines[:native])  # the phase's progress came first
    assert "Scheduler hit an exception: Traceback" in lines[native + 1]
    assert "DistBackendError: NCCL error in" in "\n".join(lines[native + 2:]) and lines[-1].endswith("the child failed.")
    vllm_weights = next(p for p in rc.PLACEMENTS if (p.engine, p.phase) == ("vllm", "OOM_WEIGHTS"))
    text = rc.render(row, vllm_weights)
    # a message of several lines keeps the worker's prefix on each
    assert "[multiproc_executor.py:597] Last error:" in text and "Loading safetensors checkpoint shards" in text
    assert rc.expected(row, vllm_weights) == "OOM_WEIGHTS"


# -- the hang family: a wait that timed out, in the words of the layer that waited ----------------------------

_WORKER = "[2026-03-31 10:00:10] Load weight begin. avail mem=78.56 GB\n"


def _read(lines: str) -> Outcome | None:
    """The outcome of an SGLang start-up that printed `lines` while its weights loaded, then died."""
    return classify_text(_WORKER + lines + "\n[2026-03-31 10:00:20] Received sigquit from a child process.",
                         "sglang").outcome


@pytest.mark.parametrize("line", [
    "node-3:811:811 [0] misc/socket.cc:540 NCCL WARN socketPollConnect: exceeded timeouts (3)",
    "RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:544] Read timeout [10.1.0.7]:50321",
    "RuntimeError: [third_party/gloo/gloo/rendezvous/prefix_store.cc:33] Wait timeout for key(s): [rank_3]",
    "torch.distributed.DistStoreError: wait timeout after 300000ms, keys: /default_pg/0//nccl//0",
    "[rank2]:[E ProcessGroupNCCL.cpp:912] [Rank 2] Work WorkNCCL(SeqNum=9, OpType=BROADCAST) timed out in blocking wait.",
    "EI0002: [PID: 77] 2026-01-03-10:00:00.1 The wait execution of the Notify register times out. Reason: remote rank [3]",
    "[ERROR] HCCL(901,python3):2026-01-03-10:00:00 [hccl_socket_manager.cc:813] wait socket establish timeout, role[1]",
    "E0103 10:00:02.1 900 transfer_engine_py.cpp:540] Sync data transfer timeout after 30000000000ns",
    "E0103 10:00:02.1 900 nixl_etcd_metadata_backend.cpp:236] Watch timed out for key: /nixl/agents/decode-1/metadata",
    "[F0103 10:00:02 ProcessGroupNCCL.cpp:1700] Terminating the process ... due to ProcessGroupNCCL watchdog hang.",
    "(FATAL) missing collectives status on Neuron Device 1 NC 2 - suspected hang in collectives operation 4 out of 9",
])
def test_a_wait_that_timed_out_in_a_layer_beneath_the_engine_is_a_hang(line: str) -> None:
    assert _read(line) is Outcome.TIMEOUT, line


@pytest.mark.parametrize("line", [
    "I0103 10:00:00.1 900 transfer_executor_base.cpp:121] Set transfer timeout to:120000",  # a setting
    "INFO: using connect timeout: 30s and read timeout (600 s)",  # settings
    "[2026-08-20 10:01:00,1 E 42 42] (raylet) worker_pool.cc:589: Some workers of the worker process(7) have not "
    "registered within the timeout. The process is dead, probably it crashed during start.",
])
def test_a_timeout_setting_or_a_worker_that_died_is_not_a_hang(line: str) -> None:
    assert _read(line) is not Outcome.TIMEOUT, line


# -- the memory family: a device allocation that failed, whatever reports it ----------------------------------

@pytest.mark.parametrize("line", [
    ":1:hip_memory.cpp           :333 : 99 us:  Allocation failed : Device memory : required :4096 | free :0 | total :8",
    ":1:memory.cpp               :358 : 99 us:  Video memory allocation failed!",
    "ggml_vulkan: Device memory allocation of size 2147483648 failed.",
    "RuntimeError: [Rank:3] FATAL ERROR :: MODULE:PT_DEVMEM Allocation failed for size::1073741824 (1024)MB",
    "ggml_backend_sycl_buffer_type_alloc_buffer: can't allocate 1073741824 Bytes of memory on device",
    "RuntimeError: miopenStatusAllocFailed",
    "ggml_vulkan: vk::Device::allocateMemory: ErrorOutOfDeviceMemory",
    "RuntimeError: [TensorRT-LLM][ERROR] CUDA runtime error in cudaMallocAsync(&ptr, bytes, stream): out of memory (x.cu:9)",
    "EL0004: [PID: 12] 2026-01-03-10:00:00.1 Failed to allocate memory.",
    "RuntimeError: NPU function error: aclrtMalloc, error code is ACL_ERROR_RT_MEMORY_ALLOCATION",
])
def test_a_device_allocation_that_failed_is_an_oom_of_its_phase(line: str) -> None:
    assert _read(line) is Outcome.OOM_WEIGHTS, line


@pytest.mark.parametrize("line", [
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate more than 1EB memory.",  # an allocator's size guard
    "torch.OutOfMemoryError: NPU out of memory. Tried to allocate more than 1 EB memory.",
    "RuntimeError: Malloc pin memory failed, host out of memory, tried to allocate size: 1073741824",  # the host's
    "VK_ERROR_OUT_OF_HOST_MEMORY",
    # NCCL's failed allocation says only that it failed: the CUDA error above it says why (17917)
    "node:1:1 [0] include/alloc.h:103 NCCL WARN Cuda failure 1 'invalid argument'\n"
    "node:1:1 [0] include/alloc.h:161 NCCL WARN Failed to CUDA malloc 512 bytes",
])
def test_a_size_error_host_memory_or_an_allocation_failed_for_another_reason_is_not_device_oom(line: str) -> None:
    got = _read(line)
    assert got is None or not got.is_oom, line


# -- after F64: ROCm's HSA runtime aborting a queue ----------------------------------------------------------------

def test_rocms_queue_aborted_out_of_resources_is_an_oom_and_on_any_other_status_a_fault() -> None:
    head = ":0:rocdevice.cpp            :2994: 7 us:  Callback: Queue 0x7f00aa000000 aborting with error : "
    oom = classify_text(_WORKER + head + "HSA_STATUS_ERROR_OUT_OF_RESOURCES: The runtime failed to allocate the "
                        "necessary resources. Code: 0x1008 Available Free mem : 12 MB", "sglang")
    assert oom.outcome is Outcome.OOM_WEIGHTS
    fault = classify_text(_WORKER + head + "HSA_STATUS_ERROR_ILLEGAL_INSTRUCTION: The agent attempted to execute an "
                          "illegal shader instruction. code: 0x2a", "sglang")
    assert fault.outcome is Outcome.CRASH and "aborted a GPU queue" in fault.remedy
    # Intel's out of resources (UR code 40) is not memory alone: the corpora's threads call it a crash as often as not
    intel = _read("RuntimeError: UR backend failed. UR backend returns:40 (UR_RESULT_ERROR_OUT_OF_RESOURCES)")
    assert intel is None or not intel.is_oom


# -- the census's second part: the engines' and launchers' own words for a hang (docs/corpus-protocol.md, "Round from
# the census's second part"; first score: HANG 41/94 messages, NOT_THESE 65/68, cut tracebacks 5/91 placed readings)

SECOND_FLOORS = {"HANG": 0.85, "NOT_THESE": 0.82}


@pytest.mark.parametrize("family", SECOND_FLOORS)
def test_most_of_the_engines_and_launchers_words_for_a_hang_are_read_as_their_source_means(family: str) -> None:
    results = [ok for row, ok in _by_message().items() if row.as_printed and row.family == family]
    assert len(results) >= 60 and sum(results) / len(results) >= SECOND_FLOORS[family], f"{sum(results)}/{len(results)}"


def test_most_tracebacks_cut_below_the_frames_of_their_wait_are_read_as_hangs() -> None:
    cut = rc.score_cut(rc.load())
    assert len(cut) >= 80 and sum(rc.right(row, place, got) for row, place, got in cut) / len(cut) >= 0.65


def test_a_second_part_row_is_placed_by_its_engine_and_moment_and_ends_the_log_as_printed() -> None:
    row = rc.Row("SGLang", "x", "python/sglang/srt/x.py", ("[2026-03-31 10:05:20 TP0] still waiting on a peer",),
                 "last", "HANG", "", "test", "sglang", "serving", (), True)
    (place,) = rc.places(row)
    assert (place.engine, place.phase) == ("sglang", "OOM_RUNTIME") and rc.expected(row, place) == "TIMEOUT"
    lines = rc.render(row, place).splitlines()
    assert "fired up and ready to roll" in lines[-3] and "POST /v1/chat/completions" in lines[-2]
    assert lines[-1] == row.printed[0]  # nothing of a death is added
    raised = rc.Row("vLLM", "x", "vllm/x.py", ("(EngineCore_DP0 pid=7) ERROR 10-02 10:06:20 [core.py:710] TimeoutError: "
                                               "RPC call to sample_tokens timed out.",), "exception", "HANG", "", "test",
                    "vllm", "start-up", ('  File "/usr/lib/x/vllm/v1/executor/multiproc_executor.py", line 9, in get_response',
                                         '    raise TimeoutError(f"RPC call to {method} timed out.") from e'), True)
    assert [p.phase for p in rc.places(raised)] == ["OOM_WEIGHTS", "OOM_KV_POOL"]
    full = rc.render(raised, rc.places(raised)[0]).splitlines()
    prefix = "(EngineCore_DP0 pid=7) ERROR 10-02 10:06:20 [core.py:710] "
    assert full[-4:] == [prefix + line for line in ("Traceback (most recent call last):", *raised.frames)] + [
        raised.printed[0]]
    cut = rc.render(raised, rc.places(raised)[0], cut=True).splitlines()
    assert cut[-1] == prefix + raised.frames[1] and cut == full[:-1]


_UP = ("[2026-03-31 10:00:44] The server is fired up and ready to roll!\n"
       '[2026-03-31 10:01:00] INFO:     127.0.0.1:45700 - "POST /generate HTTP/1.1" 200 OK\n')


def test_a_server_that_was_up_and_then_only_waited_hung() -> None:
    waits = ("[2026-03-31 10:05:20 TP0] Some requests fail to receive KV Cache transfer done signal after bootstrapping\n"
             "[2026-03-31 10:06:20 TP0] Some requests fail to receive KV Cache transfer done signal after bootstrapping")
    got = classify_text(_UP + waits, "sglang")
    assert (got.outcome, got.confidence) == (Outcome.TIMEOUT, "low") and got.missing
    assert Outcome.READY in {o for o, _ in got.alternatives}  # it may answer again after one long step
    # the front end answering queries while the scheduler waits is not work; a request served after the wait is
    queried = '\n[2026-03-31 10:06:30] INFO:     127.0.0.1:45702 - "GET /health HTTP/1.1" 200 OK'
    assert classify_text(_UP + waits + queried, "sglang").outcome is Outcome.TIMEOUT
    served = '\n[2026-03-31 10:06:40] INFO:     127.0.0.1:45703 - "POST /generate HTTP/1.1" 200 OK'
    assert classify_text(_UP + waits + served, "sglang").outcome is Outcome.READY


@pytest.mark.parametrize("line", [
    "[2026-03-31 10:05:20] Encoder health check timed out after 45s",  # a timeout the server reported once it was up
    "2026-12-07 10:05:00,123 - orchestrator - WARNING - inference health check failed 5 times for instance a1",
    "  Warning  Unhealthy  12s (x4 over 48s)  kubelet  Liveness probe failed: Get \"http://10.0.0.9:30000/health\": "
    "context deadline exceeded",
])
def test_a_health_check_that_went_unanswered_while_serving_is_a_hang(line: str) -> None:
    assert classify_text(_UP + line, "sglang").outcome is Outcome.TIMEOUT


@pytest.mark.parametrize("line", [
    "2026-12-07 10:05:00,123 - orchestrator - WARNING - inference health check failed with status 503 for instance a1",
    "  Warning  Unhealthy  2s (x3 over 9s)  kubelet  Readiness probe failed: Get \"http://10.0.0.9:30000/health\": dial "
    "tcp 10.0.0.9:30000: connect: connection refused",
    "[2026-03-31 10:05:20] TimeoutError: request 12 timed out",  # one request's, the client's
])
def test_a_check_the_server_answered_or_refused_or_a_requests_time_out_is_not_a_hang(line: str) -> None:
    assert classify_text(_UP + line, "sglang").outcome is Outcome.READY


def test_a_start_up_that_ends_on_a_long_wait_hung_unless_a_step_was_done_after_it() -> None:
    load = "INFO 10-22 10:00:10 model_runner.py:1000] Loading model weights took 14.99 GB\n"
    wait = ("(VllmWorkerProcess pid=12) WARNING 10-22 10:01:20 shm_broadcast.py:396] No available block found in 60 "
            "second. \n")
    got = classify_text(load + wait + wait, "vllm")
    assert (got.outcome, got.confidence) == (Outcome.TIMEOUT, "low") and got.missing
    done = "(VllmWorkerProcess pid=12) INFO 10-22 10:02:30 worker.py:90] Memory profiling run took 95.20 s"
    assert classify_text(load + wait + done, "vllm").outcome is not Outcome.TIMEOUT


@pytest.mark.parametrize("line", [
    "2025-07-31 10:10:20 ERROR sglang_router_rs::routers::router: src/routers/router.rs:99: Timeout 120s waiting for "
    "workers [\"http://10.0.0.3:30000\"] to become healthy",
    "RuntimeError: Server failed to start in time.",
    "RuntimeError: Router health check failed after 600 seconds.",
])
def test_a_launchers_deadline_for_the_server_it_started_is_a_hang(line: str) -> None:
    assert _read(line) is Outcome.TIMEOUT


def test_a_traceback_cut_at_a_frame_that_raises_a_timeout_is_a_hang() -> None:
    frames = ['Traceback (most recent call last):',
              '  File "/usr/local/lib/python3.12/dist-packages/launcher/wait.py", line 88, in wait_ready',
              '    raise TimeoutError(']
    got = classify_text(_WORKER + "\n".join(frames), "sglang")
    assert (got.outcome, got.confidence) == (Outcome.TIMEOUT, "low") and got.missing
    assert Outcome.CRASH in {o for o, _ in got.alternatives}
    other = classify_text(_WORKER + "\n".join([*frames[:2], "    raise RuntimeError("]), "sglang")
    assert other.outcome is not Outcome.TIMEOUT


def test_vllms_own_figures_of_requests_running_and_nothing_produced_are_a_stall() -> None:
    # (after F67's first score, from its 20012 and the fresh corpus's 9718; 18312 was mended without being read)
    up = ("(APIServer pid=1) INFO:     Application startup complete.\n"
          "(APIServer pid=1) INFO 07-17 22:45:50 [loggers.py:118] Engine 000: Avg prompt throughput: 2.5 tokens/s, Avg "
          "generation throughput: 4.0 tokens/s, Running: 1 reqs, Waiting: 0 reqs\n")
    stuck = ("(APIServer pid=1) INFO 07-17 22:46:00 [loggers.py:118] Engine 000: Avg prompt throughput: 0.0 tokens/s, Avg "
             "generation throughput: 0.0 tokens/s, Running: 2 reqs, Waiting: 0 reqs\n")
    arrived = "(APIServer pid=1) INFO 07-17 22:46:01 [logger.py:43] Received request chatcmpl-0fc7: prompt: 'hi'"
    got = classify_text(up + stuck + arrived, "vllm")
    assert (got.outcome, got.confidence) == (Outcome.TIMEOUT, "low")  # a request arriving is no work done
    idle = stuck.replace("Running: 2 reqs", "Running: 0 reqs")  # an idle server produces nothing either
    assert classify_text(up + idle, "vllm").outcome is Outcome.READY
    assert classify_text(up + stuck + up, "vllm").outcome is Outcome.READY  # it produced again
