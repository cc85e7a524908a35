"""The SGLang adapter: argv per version, intents from argv and /server_info, URLs.

Version differences that matter here (reference/engines.md §4):
- 0.5.23 renamed `--cuda-graph-max-bs` to `--cuda-graph-max-bs-decode` (the old spelling is
  now ambiguous and exits 2) and prefers `--cuda-graph-backend-{decode,prefill}=disabled`
  over the deprecated `--disable-cuda-graph`;
- the FP4 KV dtype is `fp4_e2m1` in 0.5.9 and `nvfp4` in 0.5.23;
- 0.5.23 maps NEXTN to EAGLE when resolving, so /server_info says EAGLE.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from autotune import flagtable
from autotune.config import LaunchConfig
from autotune.engines import versions
from autotune.engines.base import DriverFacts, Engine, Intent
from autotune.engines.sglang.traits import traits_for

FLAG_FAMILY = "sglang"
FP4_NAMES = ("nvfp4", "fp4_e2m1")  # one dtype, spelled per release (SglangTraits.fp4_kv_name)


def flag_table_version(version: str) -> str:
    """The shipped flag table nearest at or below `version` (SpecError if older than all)."""
    return versions.flag_table(FLAG_FAMILY, version).known


class SglangEngine(Engine):
    name = "sglang"
    default_port = 30000
    default_launcher: tuple[str, ...] = ("python", "-m", "sglang.launch_server")
    simulated_module = "autotune.sim.sglang"  # the simulated server run for `launcher: simulated`
    distribution = "sglang"  # the pip distribution whose version must be engine_version
    # What it leaves in /dev/shm unmapped (trial.shm.sweep_leftovers): 0.5.9's start-up load files, and
    # the multiprocessing semaphores its resource tracker, killed with the group, never unlinks.
    shm_leftovers: tuple[str, ...] = ("sglang_loads_*.shm", "sem.mp-*")

    # How its processes are known on a host (gpu.hostread.server_matcher): the children's setproctitle
    # titles (`sglang::scheduler`, `sglang::detokenizer`, `sglang::scheduler_TP0`...) and the server's module.
    process_titles: tuple[str, ...] = ("sglang::",)
    server_modules: tuple[str, ...] = ("sglang.launch_server",)
    # SGLang reads its API key only from `--api-key` (reference/cli/sglang-*-args.json; no
    # environment fallback): while a trial runs, the key is on the server's argv.
    api_key_env: str | None = None
    # --nccl-port: rank 0's TCPStore for torch.distributed. Unset, 0.5.23 draws a free port below the
    # ephemeral range itself (PortArgs.init_new), so two servers starting at once can draw the same one.
    init_port_env: str | None = None

    def argv(self, config: LaunchConfig, *, version: str, launcher: Sequence[str], host: str, port: int,
             init_port: int | None = None) -> list[str]:
        t = traits_for(version)
        args = [*launcher, "--model-path", config.model_path, "--tp-size", str(config.tp)]
        if config.mem_fraction_static is not None:
            args += ["--mem-fraction-static", f"{config.mem_fraction_static:g}"]
        if config.context_length is not None:
            args += ["--context-length", str(config.context_length)]
        if config.speculative:
            args += ["--speculative-algorithm", config.speculative_algorithm]
            for flag, value in (("--speculative-num-steps", config.speculative_num_steps),
                                ("--speculative-eagle-topk", config.speculative_eagle_topk),
                                ("--speculative-num-draft-tokens", config.speculative_num_draft_tokens)):
                if value is not None:
                    args += [flag, str(value)]
        if config.torch_compile:
            args.append("--enable-torch-compile")
        if config.disable_cuda_graph:
            args += list(t.disable_graph_flags)
        elif config.cuda_graph_max_bs is not None:
            args += [t.graph_max_bs_flag, str(config.cuda_graph_max_bs)]
        if config.max_running_requests is not None:
            args += ["--max-running-requests", str(config.max_running_requests)]
        if config.chunked_prefill_size is not None:
            args += ["--chunked-prefill-size", str(config.chunked_prefill_size)]
        if config.kv_cache_dtype != "auto":
            kv = config.kv_cache_dtype
            if kv in FP4_NAMES:
                kv = t.fp4_kv_name
            args += ["--kv-cache-dtype", kv]
        args += ["--host", host, "--port", str(port)]
        if init_port is not None:
            args += ["--nccl-port", str(init_port)]
        return args + list(config.extra_args)

    def flags_of(self, cmdline: Sequence[str]) -> list[str]:
        """Everything from the first `--flag` on: the interpreter, `-m module`, a wrapper script
        or `sglang serve` before it are the launcher (SGLang takes no positional arguments)."""
        cmd = list(cmdline)
        for i, token in enumerate(cmd[1:], 1):
            if token.startswith("--"):
                return cmd[i:]
        return []

    def intent_from_argv(self, flags: Sequence[str], version: str) -> Intent:
        ns = flagtable.parse(FLAG_FAMILY, flag_table_version(version), flags)
        t = traits_for(version)
        disabled = bool(ns.disable_cuda_graph) or getattr(ns, "cuda_graph_backend_decode", None) == "disabled"
        max_bs = getattr(ns, t.graph_max_bs_dest)
        return Intent(
            model_path=ns.model_path,
            tp=int(getattr(ns, "tp_size", None) or getattr(ns, "tensor_parallel_size", None) or 1),
            mem_fraction_static=ns.mem_fraction_static,
            context_length=ns.context_length,
            speculative=ns.speculative_algorithm is not None,
            speculative_num_draft_tokens=ns.speculative_num_draft_tokens,
            torch_compile=bool(ns.enable_torch_compile),
            cuda_graph_max_bs=max_bs,
            disable_cuda_graph=disabled,
            max_running_requests=ns.max_running_requests,
            chunked_prefill_size=ns.chunked_prefill_size,
            kv_cache_dtype=_canonical_kv(ns.kv_cache_dtype),
            host=ns.host,
            init_port=ns.nccl_port,
        )

    def intent_from_server_info(self, info: Mapping[str, Any]) -> Intent:
        graph = info.get("cuda_graph_config") or {}
        decode = graph.get("decode") or {}
        if graph:
            max_bs, disabled = decode.get("max_bs"), decode.get("backend") == "disabled"
        else:
            max_bs, disabled = info.get("cuda_graph_max_bs"), bool(info.get("disable_cuda_graph"))
        return Intent(
            model_path=info.get("model_path"),
            tp=info.get("tp_size") or info.get("tensor_parallel_size"),
            mem_fraction_static=info.get("mem_fraction_static"),
            context_length=info.get("context_length"),
            speculative=info.get("speculative_algorithm") is not None,
            speculative_num_draft_tokens=info.get("speculative_num_draft_tokens"),
            torch_compile=info.get("enable_torch_compile"),
            cuda_graph_max_bs=None if disabled else max_bs,
            disable_cuda_graph=disabled,
            max_running_requests=info.get("max_running_requests"),
            chunked_prefill_size=info.get("chunked_prefill_size"),
            kv_cache_dtype=_canonical_kv(info.get("kv_cache_dtype")),
            host=info.get("host"),
            init_port=info.get("nccl_port"),
        )

    def info_path(self) -> str:
        return "/server_info"

    def host_memory(self, version: str) -> dict[str, Any]:
        """How its memory is read (`gpu.hostmem.HostMemBackend`'s keywords): psutil's available memory per
        NUMA node, as SGLang's `get_available_gpu_memory("cpu")` takes it; from 0.5.23 on, also bounded by
        the cgroup v2 room (reference/sglang-cpu.md)."""
        from packaging.version import InvalidVersion, Version

        try:
            cgroup = Version(version) >= Version("0.5.23")
        except InvalidVersion:
            cgroup = True
        return {"reading": "psutil", "psutil_cgroup": cgroup}

    def kv_tokens(self, info: Mapping[str, Any]) -> int | None:
        value = info.get("max_total_num_tokens")
        return int(value) if value is not None else None


def _canonical_kv(value: Any) -> str | None:
    if value is None:
        return None
    text = str(value)
    return "nvfp4" if text == "fp4_e2m1" else text


class SglangCpuEngine(SglangEngine):
    """SGLang's CPU path (engine `sglang-cpu`): the same flags and server, on host memory.

    The tool adds what the path needs (`cpu.launch_env`, `--device cpu`, `--sleep-on-idle`, a named
    request cap) so a spec names only the search; torch.compile and speculative decoding are refused
    before any launch (`cpu.UNSUPPORTED`). Prompts go to SGLang's native `/generate` as token ids: with
    `--skip-tokenizer-init` its OpenAI route answers 500 (`'text'`)."""

    name = "sglang-cpu"
    device = "host"
    needs_driver_facts = True  # in a target, `launch_env` is given the target's (helper `launcher ... 1`)

    def argv(self, config: LaunchConfig, *, version: str, launcher: Sequence[str], host: str, port: int,
             init_port: int | None = None) -> list[str]:
        from autotune.engines.sglang import cpu

        if config.max_running_requests is None:
            config = config.replace(max_running_requests=cpu.DEFAULT_MAX_RUNNING)
        args = super().argv(config, version=version, launcher=launcher, host=host, port=port, init_port=init_port)
        extra = set(config.extra_args)
        if "--device" not in extra:
            args += list(cpu.CPU_FLAGS)
        if cpu.SLEEP_FLAG not in extra:
            args.append(cpu.SLEEP_FLAG)
        return args

    def launch_env(self, launcher: Sequence[str], *, local: bool = True,
                   driver: DriverFacts | None = None) -> dict[str, str]:
        """Here, this machine's driver facts; in a target, the target's (`driver`, asked there by the
        helper at the launcher check): the stand-in goes on LD_LIBRARY_PATH only where no real driver loads."""
        from autotune.engines.sglang import cpu

        if driver is None and not local:
            raise ValueError("sglang-cpu in a target needs the target's driver facts (Transport.driver_facts)")
        return cpu.launch_env(launcher, driver=driver)

    def unsupported(self, space: Mapping[str, Sequence[Any]]) -> list[tuple[str, str, str]]:
        from autotune.engines.sglang import cpu

        return [(knob, reason, cpu.AMX_NOTE) for knob, reason in cpu.unsupported(space)]

    def probe_path(self) -> str:
        return "/generate"

    def probe_body(self, model: str, ids: list[int], max_new: int) -> dict[str, Any]:
        return {"input_ids": ids, "sampling_params": {"max_new_tokens": max_new, "temperature": 0, "ignore_eos": True}}
