"""Dump what the search's model and the simulator say at every point of every bench scenario, so two
trees can be compared without launching anything (a refactor of the estimator or the engine rules
must leave this byte-identical, or explain each difference):

    (cd OLD_TREE && python -m tools.bench.predictions) > old.json
    python -m tools.bench.predictions > new.json && cmp old.json new.json

Per point: the estimate on priors, the estimate after learning one launch (synthetic figures of the
first point that fits), and the simulator's ground truth (fits, how it ended, KV tokens, running
requests, peak bytes). Run from a tree's root, `python -m` imports that tree's own `autotune` and
bench scenarios (an older tree, from before this package, runs its own copy with the tree as argument).
"""

from __future__ import annotations

import itertools
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

from autotune import spec as spec_mod
from autotune.engines import get_engine
from autotune.errors import AutotuneError
from autotune.estimate import Launch, Machine, estimate_launch, learn
from autotune.sim.ground_truth import evaluate
from tools.bench import scenarios as bench


def _estimate(spec: Any, launch: Launch, machine: Machine) -> Any:
    try:
        return estimate_launch(spec.shape, launch, machine).to_dict()
    except AutotuneError as exc:
        return repr(exc)


def scenario(spec: Any) -> list[dict[str, Any]]:
    engine = get_engine(spec.engine)
    names = list(spec.searched())
    rows, machine, taught = [], Machine(), False
    for combo in itertools.product(*(spec.searched()[n] for n in names)):
        point = dict(zip(names, combo, strict=True))
        cfg = spec.config(point)
        launch = Launch.from_config(cfg, gpu_mem_gib=spec.simulated.gpu_mem_gib, gpus=len(spec.gpus),
                                    engine=spec.engine, engine_version=spec.engine_version)
        argv = engine.argv(cfg, version=spec.engine_version, launcher=[], host="127.0.0.1", port=30000)
        t = evaluate(spec.engine, argv, gpus=cfg.tp, gpu_mem_gib=spec.simulated.gpu_mem_gib, version=spec.engine_version,
                     probe_tokens=(cfg.context_length or spec.shape.max_context) - 24, burst_tokens=2048)
        rows.append({"point": point, "prior": _estimate(spec, launch, Machine()), "launch": launch,
                     "truth": [t.fits, t.ended, t.kv_tokens, t.max_running_requests, t.peak_used_bytes]})
        if t.fits and not taught:
            figs = {"kv_tokens": t.kv_tokens, "mem_fraction_static": cfg.mem_fraction_static, "weights_gib": 15.0,
                    "avail_before_weights_gib": spec.simulated.gpu_mem_gib - 0.7, "graph_gib": 0.4,
                    "draft_weights_gib": 1.0, "mamba_slots": 100}
            machine, taught = learn(Machine(), figs, spec.shape, launch), True
    for row in rows:
        row["learned"] = _estimate(spec, row.pop("launch"), machine)
    return rows


def main() -> None:
    out = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name, sc in bench.SCENARIOS.items():
            out[name] = scenario(spec_mod.load(bench.write_spec(name, sc, Path(tmp), "frontier", 40)))
            print(f"{name}: {len(out[name])} points", file=sys.stderr)
    json.dump(out, sys.stdout, indent=0, sort_keys=True, default=str)


if __name__ == "__main__":
    main()
