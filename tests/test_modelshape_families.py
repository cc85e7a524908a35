"""Models a user brings (issue 10): the family rule is chosen by the config's `architectures`
entry, real spellings are accepted, and every real config we hold sizes sensibly.

Each config read here is a real published config.json (configs/models/README.md and
../shared/calibration/models/SOURCES.md name the sources); every calibration config is copied into
configs/models, so nothing here needs ../shared but the check that the copies are verbatim."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from autotune.errors import ModelConfigError
from autotune.estimate import estimate
from autotune.estimate.kvcache import geometry, per_layer_bytes
from autotune.estimate.launch import Launch
from autotune.modelshape import UnsizedModelError, from_config, load, load_for_search
from tests.conftest import MODELS, REPO, SHARED

ALL_CONFIGS = sorted(MODELS.glob("*/config.json"))
DATA = REPO / "tests" / "data"

# Published total parameter counts (billions; MTP/NextN draft layers excluded unless noted)
PUBLISHED_B = {
    "Kimi-K2-Instruct": 1000.0,  # "1T total parameters"
    "DeepSeek-V3.2": 671.0,  # 685B with the MTP module
    "GLM-4.5-Air": 106.0,
    "MiniMax-M2.5": 229.0,
    "MiMo-V2-Flash": 309.0,
    "Nemotron-H-56B-Base-8K": 56.0,
    "gemma-3-12b-it": 12.2,  # vision tower included
}


def _name(path: Path) -> str:
    return path.parent.name


def _launch(tp: int = 1, engine: str = "sglang") -> Launch:
    return Launch(gpu_mem_gib=80, gpus=tp, tp=tp, engine=engine, engine_version="0.5.23" if engine == "sglang" else "0.33")


@pytest.mark.parametrize("path", ALL_CONFIGS, ids=_name)
def test_every_real_config_loads_with_a_sensible_shape(path: Path) -> None:
    shape = load(path)
    assert shape.sized and shape.params() > (1e7 if _name(path) == "tiny-llama-cpu" else 1e8)  # tiny: made for the CPU engine
    assert shape.attention_layers > 0 and shape.max_context >= 8192
    assert per_layer_bytes(shape, 1, 2.0) > 0
    assert 0 < shape.weight_bytes_per_rank(2) < shape.weight_bytes_per_rank(1)
    published = PUBLISHED_B.get(_name(path))
    if published:
        assert shape.params() / 1e9 == pytest.approx(published, rel=0.03), _name(path)


def test_kimi_k2_is_sized_by_its_architecture_as_deepseek_v3() -> None:
    # architectures DeepseekV3ForCausalLM, model_type kimi_k2: was "unsupported"
    shape = load(MODELS / "Kimi-K2-Instruct")
    assert shape.architecture == "DeepseekV3ForCausalLM" and shape.model_type == "kimi_k2"
    assert shape.mla_kv_dim == 512 + 64  # MLA: kv_lora_rank + qk_rope_head_dim per layer
    assert geometry(shape, _launch(tp=8)).target_cell_bytes == 61 * 576 * 2  # latent replicated on every GPU
    assert shape.num_experts == 384


def test_real_nemotron_h_config_spelling_attention_head_dim() -> None:
    # Nemotron-H-56B spells attention_head_dim: was "lacks 'head_dim'"
    shape = load(MODELS / "Nemotron-H-56B-Base-8K")
    assert shape.head_dim == 128 and shape.count("full") == 10 and shape.count("mamba") == 54
    assert geometry(shape, _launch()).target_cell_bytes == 10 * 8 * 256 * 2


def test_deepseek_v32_keeps_an_indexer_key_per_token_per_layer() -> None:
    shape = load(MODELS / "DeepSeek-V3.2")
    assert shape.indexer_bytes_per_layer == 128 + 4  # FP8 index key + one fp32 scale per 128
    v3 = load(MODELS / "DeepSeek-V3")
    assert geometry(shape, _launch(tp=8)).target_cell_bytes == geometry(v3, _launch(tp=8)).target_cell_bytes + 61 * 132
    est = estimate(MODELS / "DeepSeek-V3.2", gpu_mem_gib=141, gpus=8, tp=8)
    assert any("DSA indexer" in a for a in est.assumptions)  # an uncertain fact is stated, not silent


def test_gemma3_multimodal_config_sizes_its_text_model_with_sliding_layers() -> None:
    shape = load(MODELS / "gemma-3-12b-it")
    assert shape.architecture == "Gemma3ForConditionalGeneration"
    assert (shape.count("full"), shape.count("sliding"), shape.sliding_window) == (8, 40, 1024)
    assert not any(g.kind == "lm_head" for g in shape.groups)  # Gemma ties its embeddings
    assert any(g.name == "vision_tower" for g in shape.groups)
    per_layer = 8 * 512 * 2
    assert geometry(shape, _launch()).target_cell_bytes == round(per_layer * (8 + 0.8 * 40))


def test_gemma3_period_without_layer_types() -> None:
    config = json.loads((MODELS / "gemma-3-12b-it" / "config.json").read_text())
    del config["text_config"]["layer_types"]
    shape = from_config(config)
    assert shape.layer_kinds[5] == "full" and shape.layer_kinds[4] == "sliding" and shape.count("full") == 8


def test_mimo_v2_flash_sliding_layers_keep_their_own_kv_heads() -> None:
    shape = load(MODELS / "MiMo-V2-Flash")
    assert (shape.count("full"), shape.count("sliding")) == (9, 39)
    full, swa = per_layer_bytes(shape, 1, 2.0), per_layer_bytes(shape, 1, 2.0, "sliding")
    assert (full, swa) == (4 * (192 + 128) * 2, 8 * (192 + 128) * 2)
    assert geometry(shape, _launch(engine="vllm")).target_cell_bytes == 9 * full + 39 * swa


def test_glm45_and_mimo_count_their_nextn_draft_and_moe_layers() -> None:
    glm = load(MODELS / "GLM-4.5-Air")
    assert glm.mtp_layers == 1 and glm.num_experts == 128
    assert sum(1 for g in glm.groups if g.name.endswith("mlp.experts") and not g.draft) == 45  # first layer dense
    mimo = load(MODELS / "MiMo-7B-Base")
    assert mimo.mtp_layers == 1 and mimo.params(draft=True) > 0 and not mimo.is_moe


def test_model_type_is_only_a_fallback() -> None:
    config = json.loads((MODELS / "Qwen3-8B" / "config.json").read_text())
    assert from_config({k: v for k, v in config.items() if k != "architectures"}).params() == from_config(config).params()
    with pytest.raises(UnsizedModelError, match="architecture FancyNewForCausalLM") as err:
        from_config({**config, "architectures": ["FancyNewForCausalLM"], "model_type": "fancy"})
    assert "known architectures" in (err.value.hint or "")


def test_an_unsizeable_model_loads_for_the_search_with_its_context(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text(json.dumps({"architectures": ["FancyNewForCausalLM"], "model_type": "fancy",
                                                      "max_position_embeddings": 65536}))
    with pytest.raises(UnsizedModelError):
        load(tmp_path)
    shape = load_for_search(tmp_path)
    assert not shape.sized and shape.max_context == 65536 and "FancyNewForCausalLM" in (shape.unsized_reason or "")
    with pytest.raises(ModelConfigError, match="cannot size"):  # the estimator still refuses it, clearly
        estimate(shape, gpu_mem_gib=80)
    (tmp_path / "config.json").write_text("{not json")
    with pytest.raises(ModelConfigError) as bad:  # unreadable is still an error, not a search without predictions
        load_for_search(tmp_path)
    assert not isinstance(bad.value, UnsizedModelError)


def test_mimo_v2_flash_sliding_pool_matches_what_sglang_logged() -> None:
    # m007 (sgl-project/sglang#18039): TP 4, the sliding-window pool's line
    # "#tokens: 300288, K size: 8.38 GB, V size: 5.59 GB" (SGLang's GB are GiB; its buffers hold
    # one page more than #tokens, and the run used --page-size 64)
    rows = (DATA / "calibration" / "measurements-m007.jsonl").read_text().splitlines()  # tests/data/README.md
    m = next(r for r in map(json.loads, filter(str.strip, rows)) if r["id"] == "m007")
    shape = load(MODELS / "MiMo-V2-Flash")
    assert "--page-size 64" in m["raw_lines"][0]
    per_token_layers = (m["kv_tokens"] + 64) * shape.count("sliding") * shape.kv_heads_per_rank(m["tp"], "sliding") * 2
    assert round(per_token_layers * shape.head_dim / (1 << 30), 2) == m["k_size_gb"]
    assert round(per_token_layers * shape.v_head_dim / (1 << 30), 2) == m["v_size_gb"]


def _shared_originals() -> list[tuple[Path, Path]]:
    """(copy in the repository, its original in ../shared): configs/models/README.md, tests/data/README.md."""
    pairs = [(MODELS / p.name.removesuffix(".config.json") / "config.json", p)
             for p in sorted((SHARED / "calibration" / "models").glob("*.config.json"))]
    return [*pairs, (DATA / "reference" / "log-patterns.json", SHARED / "reference" / "log-patterns.json")]


@pytest.mark.skipif(not (SHARED / "calibration" / "models").is_dir(),
                    reason=f"a check of the copies against the shared corpus, which is not at {SHARED}")
def test_shared_copies_are_verbatim() -> None:
    """Every calibration config is in configs/models, and every copy a test reads equals its original."""
    for copy, original in _shared_originals():
        assert copy.is_file(), f"{original} has no copy at {copy}"
        assert copy.read_bytes() == original.read_bytes(), f"{copy} differs from {original}"
    rows = [json.loads(r) for r in (SHARED / "calibration" / "measurements.jsonl").read_text().splitlines() if r.strip()]
    copied = [json.loads(r) for r in (DATA / "calibration" / "measurements-m007.jsonl").read_text().splitlines()]
    assert copied == [r for r in rows if r["id"] == "m007"]
