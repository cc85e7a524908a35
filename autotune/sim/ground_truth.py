"""The ground truth of a launch on the simulated node, per engine: how the engine's simulated server
would end a launch of `argv` (start-up, then the tuner's probe), computed without launching.

Each simulated engine has its own evaluator, built from that simulator's own steps: SGLang's
(sim/truth.py) runs the simulated scheduler's procedure on virtual GPUs; vLLM's (sim/vllm_truth.py)
runs the simulated API server's plan and its workers' budget. Only benchmarks and tests may use
this — the tuner must learn by launching.
"""

from __future__ import annotations

from autotune.sim import truth, vllm_truth
from autotune.sim.truth import Truth

ENGINES = ("sglang", "vllm", "vllm-cpu")


def evaluate(
    engine: str, argv: list[str], *, gpus: int, gpu_mem_gib: float, version: str,
    probe_tokens: int | None = None, max_new_tokens: int = 0, burst_tokens: int = 0,
) -> Truth:
    """`argv` is the engine's own flags (no launcher); the probe is one request of `probe_tokens`
    prompt tokens and `max_new_tokens` output, then a burst of `burst_tokens` prompt tokens."""
    if engine == "sglang":
        return truth.evaluate(argv, gpus=gpus, gpu_mem_gib=gpu_mem_gib, version=version, probe_tokens=probe_tokens,
                              burst_tokens=burst_tokens, env={})
    if engine in ("vllm", "vllm-cpu"):
        return vllm_truth.evaluate(argv, gpus=gpus, gpu_mem_gib=gpu_mem_gib, engine=engine, version=version,
                                   probe_tokens=probe_tokens, max_new_tokens=max_new_tokens)
    raise ValueError(f"no simulated ground truth for engine {engine!r}; known: {', '.join(ENGINES)}")
