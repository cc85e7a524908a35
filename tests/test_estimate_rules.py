"""Engine memory rules, each against a worked example from the reference or a real log."""

from __future__ import annotations

from pathlib import Path

import pytest

from autotune.engines.sglang import rules
from autotune.engines.sglang.traits import traits_for
from autotune.estimate import Launch, kvcache, sglang_defaults, vllm_pool
from autotune.estimate import inputs as est_inputs
from autotune.estimate.weights import analytic_weights
from autotune.modelshape import load, state_bytes_per_request
from autotune.records import GIB, MIB

MODELS = Path(__file__).resolve().parents[1] / "configs" / "models"
H200_GIB = 143771 / 1024  # nvidia-smi memory.total of an H200, in GiB


def launch(**kw: object) -> Launch:
    base: dict[str, object] = {"gpu_mem_gib": 80.0, "gpus": 8}
    base.update(kw)
    return Launch(**base)  # type: ignore[arg-type]


def cell(model: str, **kw: object) -> kvcache.KvGeometry:
    return kvcache.geometry(load(MODELS / model), launch(**kw))


def test_gqa_kv_heads_split_until_one_per_gpu_then_replicate() -> None:
    # Llama-3.1-8B: 8 KV heads x (128 + 128) x 32 layers x 2 B = 131072 B/token at TP1
    assert cell("Meta-Llama-3.1-8B", tp=1).pool_cell_bytes == 131072
    assert cell("Meta-Llama-3.1-8B", tp=2).pool_cell_bytes == 65536
    assert cell("Meta-Llama-3.1-8B", tp=8).pool_cell_bytes == 16384
    shape = load(MODELS / "Meta-Llama-3.1-8B")
    big = Launch(gpu_mem_gib=80, gpus=16, tp=16)
    assert kvcache.geometry(shape, big).pool_cell_bytes == 16384  # one replicated head per GPU
    # K/V projections replicate too: TP16 holds more than half of TP8's share of them
    kv8 = sum(shape.group_bytes_per_rank(g, 8) for g in shape.groups if g.split == "kv")
    kv16 = sum(shape.group_bytes_per_rank(g, 16) for g in shape.groups if g.split == "kv")
    assert kv16 == kv8


def test_mla_latent_is_replicated_and_fp8_matches_the_logged_deepseek_cell() -> None:
    # DeepSeek MLA fp8: 61 layers x (512 + 64) x 1 B = 35,136 B/token on every GPU
    for tp in (1, 8):
        assert cell("DeepSeek-V3", tp=tp, kv_cache_dtype="fp8_e4m3").pool_cell_bytes == 35136
    assert cell("DeepSeek-V3", tp=8).pool_cell_bytes == 70272


def test_kv_dtypes_and_checkpoint_fp8_kv_scheme() -> None:
    assert cell("Qwen3-8B", kv_cache_dtype="fp8_e5m2").pool_cell_bytes == 73728
    assert cell("Qwen3-8B", kv_cache_dtype="nvfp4").pool_cell_bytes == round(147456 / 2 * (0.5 + 1 / 16))
    # the checkpoint asks for an FP8 KV cache: SGLang's auto follows it
    geo = kvcache.geometry(load(MODELS / "Qwen3.6-27B-NVFP4"), launch(tp=1))
    assert (geo.dtype_name, geo.pool_cell_bytes) == ("fp8_e4m3", 32768)


def test_hybrid_state_sizes_qwen35_27b() -> None:
    shape = load(MODELS / "Qwen3.5-27B")
    conv, ssm = state_bytes_per_request(shape, 1)
    assert ssm == 144 * MIB
    assert conv / MIB == pytest.approx(2.8125)
    conv2, ssm2 = state_bytes_per_request(shape, 2)
    assert (conv2, ssm2) == (conv // 2, ssm // 2)
    assert kvcache.state_bytes(shape, 1) == conv + ssm
    # only the 16 full-attention layers keep KV: 16 x 4 heads x 512 x 2 B
    assert cell("Qwen3.5-27B", tp=1).pool_cell_bytes == 65536


def test_draft_weights_qwen35_27b_include_their_own_embed_and_lm_head() -> None:
    # measured: SGLang loads the MTP draft as 5.53 GB (GiB in SGLang's logs)
    aw = analytic_weights(load(MODELS / "Qwen3.5-27B"), 1)
    assert aw.draft_gib == pytest.approx(5.53, abs=0.01)
    assert aw.target_gib == pytest.approx(51.05, rel=0.005)  # measured 51.05 GB incl. the vision tower


def test_speculative_draft_kv_folded_on_0523_and_late_on_059() -> None:
    new = cell("Qwen3.5-27B", tp=1, speculative=True)
    assert new.pool_cell_bytes == 65536 + 65536 // 16 and new.draft_late_cell_bytes == 0
    old = cell("Qwen3.5-27B", tp=1, speculative=True, engine_version="0.5.9")
    assert (old.pool_cell_bytes, old.draft_late_cell_bytes) == (65536, 4096)


def test_mxfp4_expert_padding() -> None:
    aw = analytic_weights(load(MODELS / "gpt-oss-20b"), 1)
    assert aw.target_gib == pytest.approx(13.47, rel=0.005)  # vLLM logged 13.47 GiB
    assert any("2880 -> 3072" in n for n in aw.notes)


@pytest.mark.parametrize(("version", "tp", "mib", "expected"), [
    ("0.5.23", 1, 143771, 0.903),  # engines.md §3.4 worked example (H200)
    ("0.5.23", 2, 143771, 0.902),
    ("0.5.23", 1, 81559, 0.830),  # 80 GiB H100
    ("0.5.9", 1, 143771, 0.907),
])
def test_default_mem_fraction_worked_examples(version: str, tp: int, mib: int, expected: float) -> None:
    shape = load(MODELS / "Qwen3-8B")
    args = sglang_defaults.resolve(shape, launch(gpu_mem_gib=mib / 1024, tp=tp, engine_version=version))
    assert args.default_mem_fraction == expected
    assert args.mem_fraction == expected


def test_default_fraction_0_5_9_reserves_two_gib_for_a_draft() -> None:
    shape = load(MODELS / "Qwen3.5-27B")
    off = sglang_defaults.resolve(shape, launch(gpu_mem_gib=H200_GIB, tp=1, engine_version="0.5.9"))
    on = sglang_defaults.resolve(shape, launch(gpu_mem_gib=H200_GIB, tp=1, engine_version="0.5.9",
                                               speculative=True))
    assert on.max_running_requests == 48 and on.draft_tokens == 4
    assert off.default_mem_fraction - on.default_mem_fraction > 0.01  # 2 GiB (graph bs: sized before the 48 cap)


def test_graph_and_bucket_tables() -> None:
    """SGLang's public tables, written once in engines/sglang/rules.py for estimator and simulator."""
    new = traits_for("0.5.23")
    assert rules.chunk_and_decode_max_bs(int(H200_GIB * 1024), 1, new) == (8192, 256)
    assert rules.chunk_and_decode_max_bs(int(47.5 * 1024), 2, new) == (4096, 32)
    assert len(rules.prefill_buckets(8192)) == 58
    assert rules.decode_batch_sizes(8, False, new) == [1, 2, 4, 8]
    assert rules.decode_batch_sizes(50, False, new)[-1] == 50  # 0.5.23 adds max_bs itself
    assert rules.decode_batch_sizes(50, False, traits_for("0.5.9"))[-1] == 48


@pytest.mark.parametrize(("tp", "kv", "block"), [(1, "auto", 784), (1, "fp8", 1568), (2, "fp8", 1568), (2, "auto", 784)])
def test_vllm_hybrid_block_size(tp: int, kv: str, block: int) -> None:
    ctx = est_inputs.context(MODELS / "Qwen3.5-27B", launch(engine="vllm", engine_version="0.33", tp=tp,
                                                            kv_cache_dtype=kv, context_length=131072), None)
    inp, _, _, _ = est_inputs.vllm(ctx)
    assert vllm_pool.pool_from_available(inp, 10 * GIB, 0.9).block_tokens == block


def test_vllm_hybrid_reported_tokens_match_a_real_log() -> None:
    # Qwen3.8-27B-FP8 TP2 fp8 KV, 4.99 GiB available: vLLM logged 302,921 tokens (2.31x of 131,072)
    ctx = est_inputs.context(MODELS / "Qwen3.5-27B", launch(engine="vllm", engine_version="0.33", tp=2,
                                                            kv_cache_dtype="fp8_e4m3", context_length=131072), None)
    inp, _, _, _ = est_inputs.vllm(ctx)
    pool = vllm_pool.pool_from_available(inp, 4.99 * GIB, 0.92)
    assert (pool.num_blocks, pool.kv_tokens) == (208, 302921)


def test_checkpoint_index_total_size_rescales_the_weights(tmp_path: Path) -> None:
    import json
    import shutil

    shutil.copy(MODELS / "Qwen3-8B" / "config.json", tmp_path / "config.json")
    plain = analytic_weights(load(tmp_path), 1)
    counted = plain.target_gib * GIB
    (tmp_path / "model.safetensors.index.json").write_text(
        json.dumps({"metadata": {"total_size": int(counted * 1.02)}, "weight_map": {}}))
    shape = load(tmp_path)
    assert shape.checkpoint_bytes == int(counted * 1.02)
    assert analytic_weights(shape, 1).target_gib == pytest.approx(plain.target_gib * 1.02, rel=1e-6)
    (tmp_path / "model.safetensors.index.json").write_text("not json")
    assert load(tmp_path).checkpoint_bytes is None  # an unreadable index is ignored, not an error


def test_one_kv_dtype_table_for_the_estimator_and_both_simulators() -> None:
    """engines/kvdtype.py is the only table of KV bytes per element: SGLang's rules (which its
    simulator reads) and the estimator take it for every name SGLang accepts, and the simulated vLLM
    sizes its cache by it too (it used to charge 2 bytes whatever --kv-cache-dtype said)."""
    from autotune.engines import kvdtype
    from autotune.engines.vllm import rules as vllm_rules
    from autotune.sim.vllm_plan import kv_bytes_per_token

    for name in traits_for("0.5.23").kv_dtype_choices + traits_for("0.5.9").kv_dtype_choices:
        if name == "auto":
            continue
        version = "0.5.23" if name in traits_for("0.5.23").kv_dtype_choices else "0.5.9"
        geo = cell("Qwen3-8B", tp=1, kv_cache_dtype=name, engine_version=version)
        assert geo.elem_bytes == rules.KV_DTYPES[name][1] == kvdtype.ELEMENT_BYTES[name], name
    shape = load(MODELS / "Meta-Llama-3.1-8B")
    assert kv_bytes_per_token(shape, 1) == 131072  # bf16: 32 layers x 8 KV heads x 128 x 2 (K, V) x 2 B
    for name in vllm_rules.KV_DTYPE_CHOICES[1:]:
        assert kv_bytes_per_token(shape, 1, name) == 131072 / 2 * kvdtype.ELEMENT_BYTES[name], name
        est = cell("Meta-Llama-3.1-8B", tp=1, engine="vllm", kv_cache_dtype=name)
        assert est.pool_cell_bytes == kv_bytes_per_token(shape, 1, name), name
