"""The traceback frames the simulated SGLang prints, per release.

A real failure's traceback passes through each release's own files, functions and lines;
0.5.23 moved much of start-up out of `model_runner.py` (distributed bootstrap, the KV-cache
configurator, the CUDA-graph setup module), so the two releases' frames differ. Each chain
is abridged (the frames the classifier reads a phase from, and the one that raises) but
every frame names a function of that release at a line inside it, calling the next frame
or raising: `python -m tools.fidelity` checks each against the wheel.
"""

from __future__ import annotations

from autotune.engines.sglang.traits import traits_for

SRT = "/usr/local/lib/python3.12/dist-packages/sglang/srt"
TORCH = "/usr/local/lib/python3.12/dist-packages/torch"


def _f(path: str, line: int, func: str) -> str:
    """A frame as printed after `  File "` (the caller adds that prefix)."""
    return f'{SRT}/{path}", line {line}, in {func}'


_MR, _SCHED, _LOADER = "model_executor/model_runner.py", "managers/scheduler.py", "model_loader/loader.py"
_STORE = f'{TORCH}/distributed/rendezvous.py", line 189, in _create_c10d_store'

# phase (or a failure site within one) -> frames, innermost last. "scheduler_init"/"scheduler_serve": run_scheduler_process
# at `Scheduler(...)` / at the event loop. "launcher": sglang/launch_server.py at
# `prepare_server_args(...)`.
FRAMES: dict[str, dict[str, tuple[str, ...]]] = {
    "0.5.23": {
        "scheduler_init": (_f(_SCHED, 6362, "run_scheduler_process"),),
        "scheduler_serve": (_f(_SCHED, 6368, "run_scheduler_process"),),
        "launcher": (f'{SRT}/../launch_server.py", line 81, in <module>',),
        "init_dist": (_f(_MR, 1262, "init_torch_distributed"),
                      _f("distributed/bootstrap.py", 215, "measure_pre_model_load_memory"),
                      _f("distributed/bootstrap.py", 450, "_check_tp_memory_balance")),
        "init_dist_store": (_f(_SCHED, 536, "__init__"), _f("distributed/bootstrap.py", 145, "init_parallel_runtime"),
                            _STORE),
        "load_weights": (_f(_MR, 1312, "load_model"),
                         _f("model_executor/model_runner_components/load_model_utils.py", 346,
                            "load_model_with_memory_saver"),
                         _f(_LOADER, 1020, "load_model"), _f(_LOADER, 1257, "load_weights_and_postprocess")),
        "build_model": (_f(_MR, 1312, "load_model"),
                        _f("model_executor/model_runner_components/load_model_utils.py", 346,
                           "load_model_with_memory_saver"),
                        _f(_LOADER, 1014, "load_model"), _f(_LOADER, 309, "_initialize_model")),
        "kv_pool": (_f(_SCHED, 1090, "init_target_memory_pool"), _f("managers/tp_worker.py", 409, "alloc_memory_pool"),
                    _f(_MR, 982, "alloc_memory_pool"), _f("mem_cache/kv_cache_configurator.py", 476, "configure"),
                    _f("mem_cache/kv_cache_configurator.py", 3182, "_resolve_memory_pool_config"),
                    _f("mem_cache/kv_cache_configurator.py", 3050, "_profile_available_bytes")),
        "pool_too_small": (_f(_SCHED, 1090, "init_target_memory_pool"),
                           _f("managers/tp_worker.py", 425, "alloc_memory_pool")),
        "no_requests": (_f(_SCHED, 1090, "init_target_memory_pool"),
                        _f("managers/tp_worker.py", 420, "alloc_memory_pool")),
        "cuda_graph": (_f(_MR, 1192, "init_cuda_graphs"),
                       _f("model_executor/model_runner_components/cuda_graph_setup.py", 437, "capture_cuda_graphs"),
                       _f("model_executor/model_runner_components/cuda_graph_setup.py", 780, "capture_decode_graph"),
                       _f("model_executor/runner/decode_cuda_graph_runner.py", 602, "__init__")),
        "context_length": (_f("arg_groups/model_override_base.py", 213, "model_config_of"),
                           _f("configs/model_config.py", 955, "from_server_args"),
                           _f("configs/model_config.py", 884, "__init__"),
                           _f("configs/model_config.py", 1314, "_derive_context_length")),
        "serve": (_f(_SCHED, 2109, "event_loop_overlap"), _f(_SCHED, 4704, "run_batch"),
                  _f("managers/tp_worker.py", 675, "forward_batch_generation"), _f(_MR, 1860, "forward"),
                  _f(_MR, 2063, "_forward_raw")),
    },
    "0.5.9": {
        "scheduler_init": (_f(_SCHED, 3130, "run_scheduler_process"),),
        "scheduler_serve": (_f(_SCHED, 3169, "run_scheduler_process"),),
        "launcher": (f'{SRT}/../launch_server.py", line 32, in <module>',),
        "init_dist": (_f(_MR, 392, "__init__"), _f(_MR, 845, "init_torch_distributed")),
        "init_dist_store": (_f(_MR, 804, "init_torch_distributed"),
                            _f("distributed/parallel_state.py", 1567, "init_distributed_environment"), _STORE),
        "load_weights": (_f(_MR, 493, "initialize"), _f(_MR, 980, "load_model"), _f(_LOADER, 677, "load_model"),
                         _f(_LOADER, 875, "load_weights_and_postprocess")),
        "build_model": (_f(_MR, 493, "initialize"), _f(_MR, 980, "load_model"), _f(_LOADER, 671, "load_model"),
                        _f(_LOADER, 277, "_initialize_model")),
        "kv_pool": (_f(_MR, 590, "initialize"), _f("model_executor/model_runner_kv_cache_mixin.py", 416,
                                                   "init_memory_pool")),
        "pool_too_small": (_f(_SCHED, 368, "__init__"), _f("managers/tp_worker.py", 292, "__init__")),
        "no_requests": (_f(_SCHED, 368, "__init__"), _f("managers/tp_worker.py", 282, "__init__")),
        "cuda_graph": (_f(_MR, 609, "initialize"), _f(_MR, 2156, "init_device_graphs"),
                       _f("model_executor/cuda_graph_runner.py", 372, "__init__")),
        "context_length": (_f("server_args.py", 5592, "prepare_server_args"), _f("server_args.py", 733, "__post_init__"),
                           _f("server_args.py", 1067, "_handle_gpu_memory_settings"),
                           _f("server_args.py", 5092, "get_model_config"),
                           _f("configs/model_config.py", 250, "from_server_args"),
                           _f("configs/model_config.py", 199, "__init__"),
                           _f("configs/model_config.py", 382, "_derive_context_length")),
        "serve": (_f(_SCHED, 1165, "event_loop_overlap"), _f(_SCHED, 2368, "run_batch"),
                  _f("managers/tp_worker.py", 456, "forward_batch_generation"), _f(_MR, 2401, "forward"),
                  _f(_MR, 2500, "_forward_raw"), _f(_MR, 2337, "forward_extend")),
    },
}


def frames(version: str, phase: str) -> tuple[str, ...]:
    """The frames of `phase` in `version` (a release we have no table for: the nearest older one's)."""
    return FRAMES[traits_for(version).version].get(phase, ())
