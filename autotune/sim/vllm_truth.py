"""Ground truth of a simulated vLLM launch without launching: what `python -m autotune.sim.vllm`
would do with the same argv on an idle simulated node, as arithmetic.

The steps are the simulated server's, in its order: the version's flag table parses the argv;
the API server's plan (sim/vllm_plan.py) refuses or sizes the launch; each worker runs vLLM's
start-up check (requested = ceil(total · utilization) must be free), allocates its non-KV memory
then its KV share on its device; the engine core takes the smallest rank's KV, and one request of
max_model_len must fit in its 16-token blocks. Then the probe: vLLM answers a completion whose
prompt plus output fit in max_model_len (the simulated server checks nothing else).

The estimator never comes in: only the simulator's arithmetic and the engine's public budget.
Only benchmarks and tests may use this — the tuner must learn by launching.
"""

from __future__ import annotations

from pathlib import Path

from autotune import flagtable
from autotune.engines.vllm import rules
from autotune.engines.vllm.traits import traits_for
from autotune.modelshape import load as load_shape
from autotune.records import GIB
from autotune.sim.truth import Truth
from autotune.sim.vllm_plan import PlanRefused, VllmPlan, plan


def evaluate(
    argv: list[str], *, gpus: int, gpu_mem_gib: float, engine: str = "vllm", version: str = "0.33.0",
    probe_tokens: int | None = None, max_new_tokens: int = 0,
) -> Truth:
    """Start-up (and the probe's long request of `probe_tokens` + `max_new_tokens`, when asked) of
    `argv` on `gpus` idle devices of `gpu_mem_gib` each. `kv_tokens` is what the engine core logs,
    `startup_s` the modelled seconds of its start-up (what its log's clock spans)."""
    traits = traits_for(engine, version)
    try:
        ns = flagtable.parse(traits.engine, traits.version, argv)
    except flagtable.FlagError as exc:
        return Truth(False, "args", str(exc), 0, 0, 0.0, 0)
    total = int(gpu_mem_gib * GIB)
    try:
        launch = plan(ns, load_shape(Path(ns.model)), traits.device, total)
    except PlanRefused as exc:
        return Truth(False, "args", exc.lines[-1], 0, 0, 0.0, 0)
    if launch.tp > gpus:
        return Truth(False, "args", f"tensor_parallel_size {launch.tp} > {gpus} devices", 0, 0, 0.0, 0)
    return _start(launch, total, probe_tokens, max_new_tokens)


def _start(launch: VllmPlan, total: int, probe_tokens: int | None, max_new_tokens: int) -> Truth:
    worker = rules.Budget(total_bytes=total, free_bytes=total, utilization=launch.utilization,
                          non_kv_bytes=launch.non_kv_bytes, kv_bytes_per_token=launch.kv_bytes_per_token,
                          max_model_len=launch.max_model_len)
    if worker.refused_at_start:
        return Truth(False, "start", "requested more than is free", 0, 0, 0.0, 0)
    if launch.non_kv_bytes > total:  # the worker's allocation of its non-KV memory fails
        return Truth(False, "load", "torch.OutOfMemoryError", 0, 0, 0.0, total)
    kv = worker.kv_bytes  # every rank holds the same: the smallest is any of them
    peak = launch.non_kv_bytes + max(0, kv)  # a worker allocates no KV when there is none
    loaded_s = launch.load_s + launch.profile_s
    core = rules.Budget(total, total, launch.utilization, worker.requested_bytes - kv, launch.kv_bytes_per_token,
                        launch.max_model_len)
    if not core.fits_one_request:
        return Truth(False, "kv_cache", "one request of max_model_len does not fit", core.kv_tokens, 0, loaded_s, peak)
    ready_s = loaded_s + launch.warmup_s
    if probe_tokens is not None and probe_tokens + max_new_tokens > launch.max_model_len:
        return Truth(False, "probe", "prompt and output exceed max_model_len", core.kv_tokens, 0, ready_s, peak)
    return Truth(True, "ready", "", core.kv_tokens, 0, ready_s, peak)
