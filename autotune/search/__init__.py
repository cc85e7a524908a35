"""The search: which launch next, until the largest config that fits is found and confirmed.

- `space`: the searched parameters, their memory order, groups and dominance;
- `goal`: which of two fitting configs is "larger";
- `knowledge`: what the finished trials say, and what follows from them by monotonicity;
- `frontier`: the model-based strategy (default); `baselines`: Optuna TPE, random, grid;
- `loop`: ask → run → tell with budget, resume and progress.
"""
