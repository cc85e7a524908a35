"""Benchmarks on the simulated node, run from the repository root:

- `python -m tools.bench`: the search strategies against each scenario's true optimum (`make bench`);
- `python -m tools.bench.parallel`: slots on one box, 4 against 1 (`make bench-parallel`);
- `python -m tools.bench.soak`: many trials with injected faults (`make soak`);
- `python -m tools.bench.predictions`: what the model and the simulator say at every bench point,
  to compare two trees;
- `python -m tools.bench.target_overhead`: what reaching a server through a target costs.

The scenarios and their exhaustive truth are `scenarios.py`.
"""
