"""The memory estimator: what a launch config needs per GPU, and whether it fits.

    estimate(model, gpu_mem_gib=..., tp=..., ...) -> Estimate      before any launch
    learn(machine, figures, model, launch)      -> Machine       after each launch

`estimate` combines the model's shape (config.json, `autotune.modelshape`), the engine's
memory rules (SGLang 0.5.23 / 0.5.9, vLLM 0.33: `kvcache`, `sglang_defaults`,
`sglang_pool`, `vllm_pool`) and the machine's unknowns (`Machine`: priors until launches
teach them). `learn` turns the figures one launch logged into a refined `Machine`, so the
next prediction for the same model and machine is near-exact.

This package never imports `autotune.sim`: the simulated server's costs are ground truth
the estimator has to learn from logs, as it would on real GPUs (a test checks this).
"""

from autotune.estimate.launch import Launch
from autotune.estimate.learn import learn
from autotune.estimate.machine import Machine, Observation
from autotune.estimate.predict import estimate, estimate_launch
from autotune.estimate.result import Estimate, Verdict

__all__ = [
    "Estimate",
    "Launch",
    "Machine",
    "Observation",
    "Verdict",
    "estimate",
    "estimate_launch",
    "learn",
]
