"""The estimator's public surface: `estimate()`, its JSON form, verdicts and errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import autotune.estimate as est
from autotune.errors import ModelConfigError, SpecError
from autotune.estimate import Estimate, Launch, Machine, Verdict, estimate, estimate_launch, learn

MODELS = Path(__file__).resolve().parents[1] / "configs" / "models"
A6000_GIB = 49140 / 1024


def test_public_names_are_pinned() -> None:
    assert sorted(est.__all__) == sorted([
        "Estimate", "Launch", "Machine", "Observation", "Verdict", "estimate",
        "estimate_launch", "learn",
    ])


def test_to_dict_is_plain_json_with_the_contract_fields() -> None:
    e = estimate(MODELS / "Qwen3-8B", gpu_mem_gib=80, tp=1, context_length=32768)
    d = json.loads(json.dumps(e.to_dict()))
    for key in ("weights_gib_per_gpu", "draft_weights_gib_per_gpu", "kv_bytes_per_token", "state_bytes_per_request",
                "default_mem_fraction", "kv_tokens", "max_context_length", "verdict", "assumptions"):
        assert key in d
    assert d["verdict"] == "fits" and isinstance(d["assumptions"], list) and d["assumptions"]
    assert d["kv_bytes_per_token"] == 147456 and d["state_bytes_per_request"] == 0
    assert d["context_length"] == 32768 <= d["kv_tokens"]
    assert d["max_context_length"] == 40960  # the model's maximum fits too


def test_weights_that_cannot_fit_say_so() -> None:
    e = estimate(MODELS / "Meta-Llama-3.1-70B", gpu_mem_gib=80, tp=1)
    assert e.verdict is Verdict.WEIGHTS_DO_NOT_FIT and e.kv_tokens == 0 and e.max_context_length == 0
    assert estimate(MODELS / "Meta-Llama-3.1-70B", gpu_mem_gib=80, gpus=4, tp=4).fits


def test_no_kv_room_names_the_lever() -> None:
    low = estimate(MODELS / "Qwen3-32B", gpu_mem_gib=80, tp=1, mem_fraction_static=0.78, context_length=32768)
    assert low.verdict is Verdict.NO_KV_ROOM
    assert low.min_mem_fraction is not None and low.min_mem_fraction > 0.78
    at_min = estimate(MODELS / "Qwen3-32B", gpu_mem_gib=80, tp=1, mem_fraction_static=low.min_mem_fraction,
                      context_length=32768)
    assert at_min.fits and at_min.kv_tokens >= 32768


def test_concurrency_bounds_the_context() -> None:
    one = estimate(MODELS / "Qwen3-8B", gpu_mem_gib=80, tp=1, context_length=32768)
    many = estimate(MODELS / "Qwen3-8B", gpu_mem_gib=80, tp=1, context_length=32768, concurrency=16)
    assert many.kv_tokens == one.kv_tokens
    assert many.max_context_length == min(40960, one.kv_tokens // 16)
    assert many.fits == (one.kv_tokens >= 16 * 32768)


def test_reference_scenario_0_5_9_mtp_on_two_a6000() -> None:
    # engines.md addendum: Qwen3.6-27B, 2 x A6000, TP 2, mfs 0.85, NEXTN with 4 draft tokens fails on
    # 0.5.9 because 48 running requests x 4 draft tokens of state are reserved first
    common = {"gpu_mem_gib": A6000_GIB, "gpus": 2, "tp": 2, "engine_version": "0.5.9", "mem_fraction_static": 0.85,
              "speculative": True, "speculative_num_draft_tokens": 4, "context_length": 32768}
    failing = estimate(MODELS / "Qwen3.6-27B", **common)  # type: ignore[arg-type]
    assert failing.verdict is Verdict.NO_KV_ROOM
    fewer = estimate(MODELS / "Qwen3.6-27B", max_running_requests=8, **common)  # type: ignore[arg-type]
    assert fewer.fits
    assert failing.draft_weights_gib_per_gpu == pytest.approx(5.53 / 2 + 0.1, abs=0.02)


def test_speculative_0_5_23_counts_the_draft_before_the_pool() -> None:
    off = estimate(MODELS / "Qwen3.6-27B", gpu_mem_gib=80, tp=1, mem_fraction_static=0.9, context_length=32768)
    on = estimate(MODELS / "Qwen3.6-27B", gpu_mem_gib=80, tp=1, mem_fraction_static=0.9, context_length=32768,
                  speculative=True)
    assert on.kv_bytes_per_token == off.kv_bytes_per_token * 17 // 16
    assert on.kv_tokens < off.kv_tokens
    assert on.state_bytes_per_request == off.state_bytes_per_request > 140 * 2**20


def test_vllm_estimate() -> None:
    e = estimate(MODELS / "Qwen3-8B", gpu_mem_gib=79.19, tp=1, engine="vllm", context_length=16384)
    assert e.engine_version == "0.33.0" and e.default_mem_fraction == 0.92 and e.mem_fraction == 0.92
    assert e.fits and e.kv_tokens % 16 == 0
    assert any("vLLM" in a for a in e.assumptions)


def test_learning_removes_the_priors_it_replaced() -> None:
    launch = Launch(gpu_mem_gib=80, tp=1, mem_fraction_static=0.85, context_length=32768)
    before = estimate_launch(MODELS / "Qwen3-8B", launch)
    machine = learn(Machine(), {"avail_before_weights_gib": 79.3, "weights_gib": 15.4, "avail_after_weights_gib": 63.9,
                                "kv_tokens": 350000, "graph_gib": 0.8}, MODELS / "Qwen3-8B", launch)
    after = estimate_launch(MODELS / "Qwen3-8B", launch, machine)
    assert isinstance(after, Estimate)
    assert any(a.startswith("prior: target weights") for a in before.assumptions)
    assert not any(a.startswith("prior: target weights") or a.startswith("prior: CUDA context")
                   for a in after.assumptions)
    assert after.kv_tokens == pytest.approx(350000, abs=2)


def test_missing_or_incomplete_configs_raise_model_config_error(tmp_path: Path) -> None:
    with pytest.raises(ModelConfigError, match="does not exist"):
        estimate(tmp_path / "nope", gpu_mem_gib=80)
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "llama", "architectures": ["LlamaForCausalLM"],
                                                      "hidden_size": 4096, "num_attention_heads": 32}))
    with pytest.raises(ModelConfigError, match="num_hidden_layers"):
        estimate(tmp_path, gpu_mem_gib=80)
    with pytest.raises(ModelConfigError, match="MTP"):
        estimate(MODELS / "Qwen3-8B", gpu_mem_gib=80, speculative=True)


@pytest.mark.parametrize(("model", "tp", "fix"), [
    ("Qwen3.6-27B", 3, "4 KV heads do not divide over tp=3"),  # its 24 query heads do: only the KV rule refuses
    ("Qwen3.6-27B", 6, "tp=6 is not a multiple of the 4 KV heads"),
    ("Qwen3-Next-80B-A3B-Thinking", 3, "16 attention heads do not divide over tp=3"),
])
def test_tp_the_engines_cannot_split_is_refused(model: str, tp: int, fix: str) -> None:
    with pytest.raises(SpecError) as info:
        estimate(MODELS / model, gpu_mem_gib=80, gpus=8, tp=tp)
    assert info.value.field == "tp" and fix in str(info.value) and "splits over: 1, 2, 4, 8" in str(info.value)


def test_tp_with_replicated_kv_heads_is_accepted() -> None:
    # 32 query heads over 8 ranks, the 4 KV heads each held by two: the engines accept it
    assert estimate(MODELS / "Qwen3-30B-A3B", gpu_mem_gib=80, gpus=8, tp=8).verdict is not None


@pytest.mark.parametrize(("kwargs", "field"), [
    ({"kv_cache_dtype": "fp8"}, "kv_cache_dtype"),  # SGLang wants fp8_e4m3 / fp8_e5m2
    ({"tp": 3, "gpus": 4}, "tp"),  # 32 heads do not split three ways
    ({"tp": 2, "gpus": 1}, "tp"),
    ({"context_length": 10**6}, "context_length"),
    ({"mem_fraction_static": 1.2}, "mem_fraction_static"),
    ({"engine": "trtllm"}, "engine"),
    ({"engine_version": "0.4.10"}, "engine_version"),
])
def test_arguments_an_engine_would_reject_raise_spec_error(kwargs: dict[str, object], field: str) -> None:
    args: dict[str, object] = {"gpu_mem_gib": 80, "gpus": 4, "tp": 1}
    args.update(kwargs)
    with pytest.raises(SpecError) as info:
        estimate(MODELS / "Qwen3-8B", **args)  # type: ignore[arg-type]
    assert info.value.field == field


def test_the_estimator_takes_the_launch_config_shape() -> None:
    """One config shape through the path: an estimate's launch is a LaunchConfig (every field, same
    name, same value), and `estimate()`'s launch arguments are LaunchConfig's names."""
    import dataclasses
    import inspect

    from autotune.config import LaunchConfig

    config = LaunchConfig(model_path="m", tp=2, mem_fraction_static=0.8, context_length=4096, speculative=True,
                          speculative_num_steps=2, speculative_eagle_topk=1, speculative_num_draft_tokens=3,
                          cuda_graph_max_bs=16, disable_cuda_graph=True, max_running_requests=8,
                          chunked_prefill_size=1024, kv_cache_dtype="fp8_e4m3")
    launch = Launch.from_config(config, gpu_mem_gib=80, gpus=2, engine="sglang", engine_version="0.5.23")
    assert isinstance(launch, LaunchConfig)
    for f in dataclasses.fields(LaunchConfig):
        assert getattr(launch, f.name) == getattr(config, f.name), f.name
    config_names = {f.name for f in dataclasses.fields(LaunchConfig)}
    machine_and_goal = {"model", "gpu_mem_gib", "gpus", "engine", "engine_version", "concurrency", "machine"}
    assert set(inspect.signature(estimate).parameters) - machine_and_goal <= config_names


def test_which_rules_size_an_engine_is_the_registrys_answer(monkeypatch: pytest.MonkeyPatch) -> None:
    """The estimator names no engine: a new engine package that declares SGLang's memory rules is
    sized exactly as SGLang is, and one without memory rules is refused by name."""
    import dataclasses

    from autotune.engines import registry

    fork = dataclasses.replace(registry.ENGINES["sglang"], name="sglang-fork")
    monkeypatch.setitem(registry.ENGINES, "sglang-fork", fork)
    args = {"gpu_mem_gib": 80, "tp": 1, "mem_fraction_static": 0.85, "context_length": 32768}
    theirs = estimate(MODELS / "Qwen3-8B", engine="sglang-fork", engine_version="0.5.23", **args)  # type: ignore[arg-type]
    ours = estimate(MODELS / "Qwen3-8B", engine="sglang", engine_version="0.5.23", **args)  # type: ignore[arg-type]
    assert (theirs.kv_tokens, theirs.engine) == (ours.kv_tokens, "sglang-fork")
    with pytest.raises(SpecError) as info:
        estimate(MODELS / "Qwen3-8B", engine="vllm-cpu", gpu_mem_gib=80)
    assert info.value.field == "engine" and "no memory rules" in info.value.message
