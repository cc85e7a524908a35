"""Issue 5, end to end: one real launch of the simulated server, its figures read by the
classifier, taught to the estimator; then the KV tokens it predicts for other fractions
are compared with what the simulated server reports when launched at them."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from autotune.config import LaunchConfig
from autotune.estimate import Launch, Machine, estimate_launch, learn
from autotune.records import Outcome
from autotune.settings import ProbeSpec
from autotune.sim.backend import SimulatedBackend
from autotune.sim.node import SimNode
from autotune.trial.run import run_trial  # noqa: I001
from tests.conftest import MODELS
from tests.test_trial import settings


@pytest.mark.parametrize("model,tp,version,speculative", [
    ("Qwen3.6-27B", 2, "0.5.23", True),
    ("Qwen3.6-27B", 2, "0.5.9", False),
    ("Meta-Llama-3.1-8B", 1, "0.5.23", False),
])
def test_one_launch_teaches_the_estimator_kv_tokens_at_other_fractions(
        node: SimNode, tmp_path: Path, model: str, tp: int, version: str, speculative: bool) -> None:
    gpus = tuple(range(tp))
    s = replace(settings(node, tmp_path, version=version, gpus=gpus), probe=ProbeSpec(enabled=False))
    path = str(MODELS / model)
    base = LaunchConfig(model_path=path, tp=tp, context_length=8192, speculative=speculative,
                        max_running_requests=8 if speculative else None)
    first = run_trial(base.replace(mem_fraction_static=0.80), s, SimulatedBackend(node.root))
    assert first.outcome is Outcome.READY
    common = {"gpu_mem_gib": 48.0, "gpus": 2, "tp": tp, "engine_version": version, "speculative": speculative,
              "context_length": 8192, "max_running_requests": 8 if speculative else None}
    machine = learn(Machine(), first.figures, path, Launch(mem_fraction_static=0.80, **common))
    errors = []
    for frac in (0.70, 0.75, 0.85, 0.88):
        told = run_trial(base.replace(mem_fraction_static=frac), s, SimulatedBackend(node.root))
        assert told.outcome is Outcome.READY and told.kv_tokens
        predicted = estimate_launch(path, Launch(mem_fraction_static=frac, **common), machine).kv_tokens
        errors.append(abs(predicted - told.kv_tokens) / told.kv_tokens)
    print(f"\n{model} TP{tp} {version} spec={speculative}: worst KV-token error after one launch "
          f"{max(errors):.4%}")
    assert max(errors) < 0.01
