"""Issue 33, second round: an OOM nothing places is called unplaced (not a weights failure), a log
that supports two classes says both and why, the search reads it by the more conservative one, and
the engine module a log header names is phase evidence. Lines are written here, not taken from
the corpora, so they test the structure rather than any corpus log's wording."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from autotune.classifier.classify import classify_text
from autotune.cli import app
from autotune.config import LaunchConfig
from autotune.records import Classification, Need, Outcome, Phase, Side, TrialResult
from autotune.search.knowledge import conservative, side_of
from autotune.search.model import _served

SMALL_OOM = ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 64.00 MiB. GPU 0 has a total capacity "
             "of 47.50 GiB of which 12.00 MiB is free. Including non-PyTorch memory, this process has 47.40 GiB "
             "memory in use. Of the allocated memory 46.90 GiB is allocated by PyTorch, and 210.00 MiB is reserved "
             "by PyTorch but unallocated.")
LARGE_OOM = SMALL_OOM.replace("Tried to allocate 64.00 MiB", "Tried to allocate 9.50 GiB")
OOM_CLASSES = {Outcome.OOM_WEIGHTS, Outcome.OOM_KV_POOL, Outcome.OOM_CUDA_GRAPH, Outcome.OOM_RUNTIME}


def _vllm(module: str, text: str, level: str = "INFO") -> str:
    return f"(EngineCore_DP0 pid=811) {level} 11-02 10:41:07 [{module}:118] {text}"


# -- unplaced -------------------------------------------------------------------------------------


def test_an_oom_nothing_places_is_unplaced_a_request_s_unless_nothing_was_held_yet() -> None:
    first = LARGE_OOM.replace("Of the allocated memory 46.90 GiB", "Of the allocated memory 0 bytes")
    for engine in ("vllm", "sglang"):
        # the size does not place it (a prefill allocates GiBs too); torch holding nothing yet does: the weights'
        for line, likeliest in ((SMALL_OOM, Outcome.OOM_RUNTIME), (LARGE_OOM, Outcome.OOM_RUNTIME),
                                (first, Outcome.OOM_WEIGHTS)):
            got = classify_text(line, engine)
            assert got.outcome is likeliest, (engine, line[:60])
            assert got.phase is Phase.SPAWN  # no phase claimed
            assert got.confidence == "low" and got.missing.startswith("the phase")
            assert {o for o, _ in got.alternatives} | {got.outcome} == OOM_CLASSES
            assert "--tensor-parallel-size" not in got.remedy and "--tp-size" not in got.remedy
            assert "last start-up line" in got.remedy  # what to look for


def test_an_oom_a_start_up_line_places_has_no_alternatives() -> None:
    lines = [_vllm("weight_utils.py", "Using model weights format ['*.safetensors']"), SMALL_OOM]
    got = classify_text("\n".join(lines), "vllm")
    assert (got.outcome, got.confidence, got.alternatives, got.missing) == (Outcome.OOM_WEIGHTS, "high", (), "")


def test_alternatives_are_in_the_json_and_the_text_output(tmp_path) -> None:
    log = tmp_path / "oom.log"
    log.write_text(SMALL_OOM + "\n")
    out = CliRunner().invoke(app, ["classify", str(log), "--engine", "vllm", "--json"])
    data = json.loads(out.stdout)
    assert {a["outcome"] for a in data["alternatives"]} | {data["outcome"]} == {o.value for o in OOM_CLASSES}
    assert all(a["why"] for a in data["alternatives"]) and data["missing"].startswith("the phase")
    text = CliRunner().invoke(app, ["classify", str(log), "--engine", "vllm"]).stdout
    assert "or:       OOM_WEIGHTS:" in text and "missing:  the phase" in text
    assert Classification(Outcome.CRASH, Phase.SPAWN).to_dict()["alternatives"] == []


# -- the header's module as phase evidence -------------------------------------------------------


def test_the_module_a_header_names_places_an_oom_no_frame_places() -> None:
    cases = {
        "profiling.py": (Outcome.OOM_KV_POOL, Phase.KV_POOL),
        "default_loader.py": (Outcome.OOM_WEIGHTS, Phase.WEIGHTS),
        "serving_completion.py": (Outcome.OOM_RUNTIME, Phase.READY),
    }
    for module, (outcome, phase) in cases.items():
        lines = [_vllm(module, "a line this module writes", "WARNING"), _vllm("engine.py", SMALL_OOM, "ERROR")]
        got = classify_text("\n".join(lines), "vllm")
        assert (got.outcome, got.phase, got.confidence) == (outcome, phase, "high"), module


def test_a_module_of_every_phase_places_nothing() -> None:
    lines = [_vllm("gpu_model_runner.py", "something", "WARNING"), _vllm("core.py", SMALL_OOM, "ERROR")]
    got = classify_text("\n".join(lines), "vllm")
    assert got.confidence == "low" and got.missing.startswith("the phase") and got.phase is Phase.SPAWN
    assert len(got.alternatives) == 3


def test_vllms_weights_progress_bar_places_an_oom_just_above_it() -> None:
    # a large allocation, which alone would be read as a pool's: the bar below says weights were loading
    lines = [LARGE_OOM, "Loading safetensors checkpoint shards:   5% Completed | 2/40 [00:03<01:10,  1.80s/it]"]
    assert classify_text("\n".join(lines), "vllm").outcome is Outcome.OOM_WEIGHTS


def test_a_wake_up_frame_places_the_oom_after_start_up() -> None:
    lines = ["Traceback (most recent call last):",
             '  File "/srv/venv/lib/python3.12/site-packages/vllm/v1/worker/gpu_worker.py", line 97, in wake_up',
             "    allocator.wake_up(tags)",
             "RuntimeError: CUDA Error: out of memory at /workspace/csrc/cumem_allocator.cpp:58"]
    got = classify_text("\n".join(lines), "vllm")
    assert (got.outcome, got.phase) == (Outcome.OOM_RUNTIME, Phase.READY)


# -- ambiguity ------------------------------------------------------------------------------------


def test_an_oom_that_counts_another_process_memory_also_reads_gpu_busy() -> None:
    other = SMALL_OOM.replace("memory in use. Of", "memory in use. Process 7319 has 30.25 GiB memory in use. Of")
    got = classify_text(other, "sglang")
    busy = [why for o, why in got.alternatives if o is Outcome.GPU_BUSY]
    assert got.outcome is not Outcome.GPU_BUSY and busy and "7319" in busy[0]
    assert got.figures["alt_GPU_BUSY"] == 0.0


def test_one_process_named_alone_is_the_engine_seen_from_a_container() -> None:
    own = SMALL_OOM.replace("this process has", "Process 5120 has")
    got = classify_text(own, "vllm")
    assert Outcome.GPU_BUSY not in {o for o, _ in got.alternatives}


# -- how the search reads an ambiguous launch ---------------------------------------------------


def _result(outcome: Outcome, needs: Need | None = None, **figures: float) -> TrialResult:
    return TrialResult(trial_id="t", config=LaunchConfig(model_path="m"), engine="vllm", engine_version="0.11.0",
                       outcome=outcome, phase=Phase.SPAWN, remedy="", evidence=(), figures=figures, argv=(),
                       log_path="", exit_code=1, launched=True, wall_s=1.0, gpu_s=1.0, gpus=(), kv_tokens=None,
                       resolved={}, needs=needs)


def test_the_conservative_reading_rules_out_only_what_every_reading_does() -> None:
    assert conservative([Side.ANY, Side.LOW]) is Side.LOW
    assert conservative([Side.ANY, Side.HIGH, Side.CONTEXT]) is Side.HIGH
    assert conservative([Side.LOW, Side.HIGH]) is Side.UNKNOWN
    assert conservative([Side.FITS, Side.HIGH]) is Side.UNKNOWN
    assert conservative([Side.ANY]) is Side.ANY


def test_the_search_reads_an_ambiguous_launch_conservatively() -> None:
    assert side_of(_result(Outcome.OOM_WEIGHTS)) is Side.ANY
    assert side_of(_result(Outcome.OOM_WEIGHTS, alt_OOM_KV_POOL=1.0)) is Side.LOW
    assert side_of(_result(Outcome.OOM_RUNTIME, Need.LESS_FRACTION, alt_GPU_BUSY=0.0)) is Side.UNKNOWN
    assert side_of(_result(Outcome.OOM_KV_POOL, Need.MORE_FRACTION, alt_OOM_CUDA_GRAPH=-1.0)) is Side.UNKNOWN


def test_an_unplaced_oom_teaches_the_search_only_what_every_oom_class_shares() -> None:
    got = classify_text(SMALL_OOM, "vllm")
    result = _result(got.outcome, got.needs, **got.figures)
    # weights (any fraction) or pool / capture / request (less fraction): only "less" is common to all
    assert side_of(result) is Side.HIGH
    assert _served(result) is None  # no serving figure for the estimator: it may not have served at all
    assert _served(_result(Outcome.OOM_RUNTIME, Need.LESS_FRACTION)) is False
