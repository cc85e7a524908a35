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
