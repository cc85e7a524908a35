"""Tools beside the package, never shipped in its wheel: run from the repository root as modules.

- `tools.bench`: the benchmarks on the simulated node (`python -m tools.bench`, `.parallel`, `.soak`,
  `.predictions`, `.target_overhead`);
- `tools.fidelity`: the simulated SGLang server and our rules against SGLang's real source
  (`python -m tools.fidelity`);
- `tools.accuracy`: predictions against real figures (`.corpus`: the log classifier on real logs;
  `.calibration`: the estimator on logged measurements; `.vllm_cpu`: one real vLLM-CPU launch
  predicting the others; `.known_threads`: whether a thread is already in a corpus, for whoever gathers one);
- `tools.capture`: data taken from the real engines into the repository (`.flag_tables`,
  `.vllm_flags`, `.vllm_fixtures`);
- `tools.device_nvml_check`, `tools.remote_demo`: checks on a real GPU and through a target.
"""

from pathlib import Path

REPO = Path(__file__).resolve().parent.parent  # the checkout: configs/, tests/, autotune/data/
