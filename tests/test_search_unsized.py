"""A model the estimator cannot size is still searchable on a real engine (issue 10): the spec
warns instead of refusing, the frontier launches without predictions, and what each launch
logged (its KV pool) predicts the pool at the other fractions."""

from __future__ import annotations

import io
import json
from dataclasses import replace
from pathlib import Path

import pytest

from autotune import spec as spec_mod
from autotune.config import LaunchConfig
from autotune.errors import SpecError
from autotune.machine import prepare_backend
from autotune.modelshape import ModelShape, unsized
from autotune.progress import PlainProgress
from autotune.records import Outcome, Phase, TrialResult
from autotune.search.loop import run
from autotune.search.model import EstimatorPredictor, FiguresPredictor
from autotune.spec import fields as spec_fields
from tests.conftest import MODELS
from tests.test_search import true_optimum, write_spec

LLAMA = MODELS / "Meta-Llama-3.1-8B"


def _unsized_llama(_path: str) -> ModelShape:
    """Llama-3.1-8B as the estimator sees an architecture it does not know."""
    return unsized(json.loads((LLAMA / "config.json").read_text()), "the estimator cannot size it (test)")


def _result(config: LaunchConfig, outcome: Outcome, **figures: float) -> TrialResult:
    return TrialResult(trial_id="t", config=config, engine="sglang", engine_version="0.5.23", outcome=outcome,
                       phase=Phase.READY, remedy="", evidence=(), figures=figures, argv=(), log_path="",
                       exit_code=None, launched=True, wall_s=1.0, gpu_s=1.0, gpus=(),
                       kv_tokens=int(figures.get("kv_tokens", 0)) or None, resolved={})


def test_spec_accepts_an_unknown_architecture_and_the_run_warns(tmp_path: Path) -> None:
    model = tmp_path / "fancy"
    model.mkdir()
    (model / "config.json").write_text(json.dumps({"architectures": ["FancyNewForCausalLM"],
                                                   "max_position_embeddings": 65536}))
    with pytest.raises(SpecError, match="simulated server cannot run it"):  # only the simulator refuses it
        spec_mod.load(write_spec(tmp_path, model=str(model)))
    real = write_spec(tmp_path, model=str(model), launcher="python3 -m sglang.launch_server", simulated=None)
    spec = spec_mod.load(real)  # was: SpecError "unsupported architecture"
    assert spec.shape is not None and not spec.shape.sized and spec.shape.max_context == 65536
    out = io.StringIO()
    PlainProgress(out).run_started(spec, _space(spec), 0)
    assert "WARNING" in out.getvalue() and "without predictions" in out.getvalue()


def _space(spec: spec_mod.Spec):  # type: ignore[no-untyped-def]
    from autotune.search.space import space_of

    return space_of(spec.searched(), spec.fixed())


def test_figures_alone_predict_the_pool_at_other_fractions() -> None:
    shape = _unsized_llama("")
    base = LaunchConfig(model_path=str(LLAMA), tp=1, mem_fraction_static=0.80, context_length=32768)
    fresh = EstimatorPredictor(shape, engine="sglang", engine_version="0.5.23", gpu_mem_gib=24, gpus=1, concurrency=1,
                               config_of=lambda p: LaunchConfig(model_path=str(LLAMA), tp=1, **p))
    assert fresh.kv_tokens({"mem_fraction_static": 0.9, "context_length": 65536}) is None  # no prediction yet
    logged = _result(base, Outcome.KV_TOO_SMALL, kv_tokens=20000.0, kv_cell_bytes=131072.0, mem_fraction_static=0.80)
    taught = EstimatorPredictor(shape, engine="sglang", engine_version="0.5.23", gpu_mem_gib=24, gpus=1, concurrency=1,
                                config_of=lambda p: LaunchConfig(model_path=str(LLAMA), tp=1, **p), results=[logged])
    point = {"mem_fraction_static": 0.9, "context_length": 65536}
    expected = 20000 + 0.10 * 24 * (1 << 30) / 131072
    assert taught.kv_tokens(point) == pytest.approx(expected)
    assert taught.confident(point)
    vllm = _result(base, Outcome.READY, kv_tokens=20000.0, kv_avail_gib=2.44140625, gpu_memory_utilization=0.80)
    assert FiguresPredictor(24, [vllm]).kv_tokens(replace(base, mem_fraction_static=0.9)) == pytest.approx(expected)
    other_tp = FiguresPredictor(24, [logged])
    assert other_tp.kv_tokens(LaunchConfig(model_path=str(LLAMA), tp=2, mem_fraction_static=0.9)) is None


def test_frontier_finds_the_optimum_of_a_model_the_estimator_cannot_size(tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    # The simulator serves Llama-3.1-8B; the search is told the estimator cannot size it.
    monkeypatch.setattr(spec_fields, "load_shape", _unsized_llama)
    spec = spec_mod.load(write_spec(tmp_path))
    assert spec.shape is not None and not spec.shape.sized
    out = io.StringIO()
    summary = run(spec, prepare_backend(spec), progress=PlainProgress(out))
    assert "without predictions" in out.getvalue()
    assert summary.stopped_because.startswith("converged")
    assert summary.best is not None
    assert (summary.best.config.context_length, summary.best.kv_tokens) == true_optimum(spec)
    # learning the pool from logged figures: 10 launches here (the sizing estimator: 9); without it, 28
    assert summary.launched_now <= 14, f"{summary.launched_now} launches"
