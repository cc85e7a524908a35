"""Which engine wrote a log nobody named (`classify.which_engine`), and the reading `autotune classify` then makes
(`classify.classify_unnamed`): the lines each engine alone writes, from its logger's format and its package's paths."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from autotune.classifier.classify import classify_unnamed, which_engine
from autotune.records import Outcome

VLLM_HEADER = "(EngineCore_DP0 pid=86) INFO 06-01 13:18:12 [gpu_worker.py:298] Available KV cache memory: 28.22 GiB"
VLLM_OLD_HEADER = "INFO 02-19 15:51:07 weight_utils.py:164] Using model weights format ['*.safetensors']"
SGLANG_TAGGED = "[2026-01-01 10:00:03 TP0] Load weight begin. avail mem=46.76 GB"
SGLANG_FRAME = '  File "/usr/local/lib/python3.12/dist-packages/sglang/srt/managers/scheduler.py", line 2802, in run'
UNTAGGED = "[2026-01-01 10:00:03] Load weight begin. avail mem=46.76 GB"  # SGLang with TP=1, or any other logger


def test_each_engines_own_lines_name_it() -> None:
    assert which_engine([VLLM_HEADER]) == "vllm" and which_engine([VLLM_OLD_HEADER]) == "vllm"
    assert which_engine(['  File "/opt/venv/lib/python3.12/site-packages/vllm_ascend/worker.py", line 9, in x']) == "vllm"
    assert which_engine([SGLANG_TAGGED]) == "sglang" and which_engine([SGLANG_FRAME]) == "sglang"
    assert which_engine(["$ python -m sglang.launch_server --model-path /m"]) == "sglang"


def test_a_log_that_names_no_engine_or_both_alike_is_undecided() -> None:
    assert which_engine([UNTAGGED, "RuntimeError: CUDA error: out of memory"]) is None
    assert which_engine([]) is None


def test_vllm_lines_inside_sglang_are_sglangs_library() -> None:
    """Old SGLang runs vLLM's loaders and parallel state in its own processes, whose logger writes vLLM's header: more
    such lines than SGLang's own still make an SGLang log; vLLM runs no SGLang code, so the converse does not hold."""
    assert which_engine([VLLM_OLD_HEADER, VLLM_OLD_HEADER, VLLM_HEADER, SGLANG_FRAME]) == "sglang"
    assert which_engine([VLLM_HEADER, VLLM_HEADER]) == "vllm"


def test_an_unnamed_error_is_read_with_the_rules_of_the_engine_that_knows_it() -> None:
    """A bare error line names no engine: each engine's rules read it, and the one whose own failure text it is
    decides (SGLang's KV-pool message, vLLM's), whichever engine is registered first."""
    sglang_text = ["RuntimeError: Not enough memory. Please try to increase --mem-fraction-static. Current value: "
                   "mem_fraction_static=0.85"]
    engine, said, got = classify_unnamed(lambda: sglang_text)
    assert (engine, said, got.outcome) == ("sglang", False, Outcome.OOM_KV_POOL)
    vllm_text = ["ValueError: To serve at least one request with the models's max seq len (16384), (3.0 GiB KV cache "
                 "is needed, which is larger than the available KV cache memory (1.87 GiB). Based on the available "
                 "memory, the estimated maximum model length is 10224. Try increasing `gpu_memory_utilization` or "
                 "decreasing `max_model_len` when initializing the engine."]
    engine, said, got = classify_unnamed(lambda: vllm_text)
    assert (engine, said, got.outcome) == ("vllm", False, Outcome.OOM_KV_POOL)
    assert "10224" in got.remedy  # vLLM's own remedy, from vLLM's rule


def test_the_cli_names_the_engine_it_read_with(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    log.write_text(f"{VLLM_HEADER}\n(EngineCore_DP0 pid=86) ERROR 06-01 13:18:13 [core.py:708] ValueError: No "
                   "available memory for the cache blocks. Try increasing `gpu_memory_utilization` when initializing "
                   "the engine.\n")
    out = subprocess.run([sys.executable, "-m", "autotune.cli", "classify", str(log), "--json"], capture_output=True,
                         text=True, check=True)
    data = json.loads(out.stdout)
    assert (data["engine"], data["outcome"]) == ("vllm", "OOM_KV_POOL")
    text = subprocess.run([sys.executable, "-m", "autotune.cli", "classify", str(log), "--engine", "sglang"],
                          capture_output=True, text=True, check=True).stdout
    assert text.startswith("engine:   sglang (as asked)")
