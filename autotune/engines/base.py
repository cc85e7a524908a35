"""The Engine protocol: what the trial needs to know about an inference server.

An engine is data plus pure functions: argv from a config for a version, readiness and
introspection URLs, what the resolved server reports (`intent_from_server_info`), and what
an argv asks for (`intent_from_argv`); its log rules are its package's (`EnginePackage.log`). `verify` compares
intents with the config; it is shared by every engine.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Any, Protocol

from autotune.classifier.rules import EngineLog
from autotune.config import LaunchConfig


@dataclass(frozen=True)
class DriverFacts:
    """What the place a server runs says about the GPU driver, for an engine that needs one to import
    (SGLang's CPU path): whether a real `libcuda.so.1` loads there (the tool's no-driver stand-in does
    not count), the stand-in's folder beside the launcher's environment (None when not built there),
    and the LD_LIBRARY_PATH a server started there inherits. Read here by `cpu.local_facts`, in a
    target by the helper (`launcher ARGV0 MODULE 1`)."""

    real_driver: bool
    stand_in: str | None
    ld_library_path: str
    where: str = "on this machine"

    @classmethod
    def from_answer(cls, doc: Mapping[str, Any], where: str) -> DriverFacts:
        return cls(bool(doc["real_driver"]), doc.get("stand_in") or None, str(doc.get("ld_library_path") or ""), where)


@dataclass(frozen=True)
class Intent:
    """The memory-relevant settings of a launch, engine-neutral. None: not stated / default.

    The parameters an engine reads back from an argv or its server, each a LaunchConfig field of the
    same name and type (tests/test_engine_conformance.py pins it), and two things of the launch."""

    model_path: str | None = None
    tp: int | None = None
    mem_fraction_static: float | None = None
    context_length: int | None = None
    speculative: bool | None = None
    speculative_num_draft_tokens: int | None = None
    torch_compile: bool | None = None
    cuda_graph_max_bs: int | None = None
    disable_cuda_graph: bool | None = None
    max_running_requests: int | None = None
    chunked_prefill_size: int | None = None
    kv_cache_dtype: str | None = None
    host: str | None = None
    init_port: int | None = None  # the distributed-init (rendezvous) port, where the engine states it


def completion_body(model: str, ids: list[int], max_new: int) -> dict[str, Any]:
    """The OpenAI-compatible completions request with the prompt as token ids, decoding exactly
    `max_new` tokens: SGLang and vLLM both take it, and neither needs a tokenizer for it."""
    return {"model": model, "prompt": ids, "max_tokens": max_new, "temperature": 0, "ignore_eos": True}


class Engine(Protocol):
    """An engine's adapter: everything the trial needs to launch, follow and check its server.

    Adapters subclass it: the optional members (`device`, `distribution`, `needs_driver_facts`,
    `intent_from_log`, `launch_env`, `unsupported`) and what both engines answer alike (the health and
    probe paths, the probe's body) have their defaults here, and an engine that differs overrides them."""

    name: str
    default_port: int
    default_launcher: tuple[str, ...]  # the command a real launch starts with
    simulated_module: str  # the module `python -m` runs for `launcher: simulated`
    # The environment variable the server reads its API key from (vLLM: VLLM_API_KEY), or
    # None when it takes the key only as `--api-key` on its command line, readable in `ps`.
    api_key_env: str | None
    # How a launch is told its distributed-init (rendezvous) port: `argv(init_port=...)` puts it on
    # the command line where the engine has a flag (SGLang --nccl-port); else this environment
    # variable carries it (vLLM: VLLM_PORT); None for both: the engine takes no such port.
    init_port_env: str | None
    # How the engine's processes are known on a host (gpu.hostread.server_matcher): the titles its children
    # give themselves (setproctitle) and the module its server runs as (`python -m ...`).
    process_titles: tuple[str, ...]
    server_modules: tuple[str, ...]
    # What its server leaves in /dev/shm never mapped (trial.shm.sweep_leftovers); () for none.
    shm_leftovers: tuple[str, ...]
    # Where its memory is: "gpu", or "host" for an engine on host memory (vLLM's CPU build, SGLang's
    # CPU path), read as the engine reads it (`host_memory`).
    device: str = "gpu"
    # The pip distribution whose installed version must be engine_version; None: not checked.
    distribution: str | None = None
    # In a target, `launch_env` is given the target's DriverFacts (SGLang's CPU path).
    needs_driver_facts: bool = False

    def argv(self, config: LaunchConfig, *, version: str, launcher: Sequence[str], host: str, port: int,
             init_port: int | None = None) -> list[str]:
        """The full command line (launcher prefix + flags). Never a shell string. `init_port`: the
        distributed-init port, on the command line where the engine has a flag for it."""
        ...

    def flags_of(self, cmdline: Sequence[str]) -> list[str]:
        """The engine flags inside a process command line (launcher prefix stripped)."""
        ...

    def intent_from_argv(self, flags: Sequence[str], version: str) -> Intent:
        """What the flags ask for, as the engine's own parser reads them (FlagError if rejected)."""
        ...

    def intent_from_server_info(self, info: Mapping[str, Any]) -> Intent:
        ...

    def intent_from_log(self, text: str, version: str) -> Intent | None:
        """What the server's log says it was asked for (vLLM prints its non-default args), or None
        where the engine prints no such line (or not yet)."""
        return None

    def health_path(self) -> str:
        return "/health"

    def info_path(self) -> str: ...

    def probe_path(self) -> str:
        """The path the probe posts token-id prompts to (OpenAI completions, or SGLang's /generate)."""
        return "/v1/completions"

    def probe_body(self, model: str, ids: list[int], max_new: int) -> dict[str, Any]:
        """One probe request for that path: the prompt as token ids, exactly `max_new` tokens decoded."""
        return completion_body(model, ids, max_new)

    def launch_env(self, launcher: Sequence[str], *, local: bool = True,
                   driver: DriverFacts | None = None) -> dict[str, str]:
        """What the engine's server needs in its environment where it runs beyond the spec's `env`
        ({} for most; SGLang's CPU path: its engine switch and the driver stand-in). `local`: the server
        runs here (not in a target), where what this machine has can be checked; in a target an engine
        whose `needs_driver_facts` is true is given the target's answer as `driver`."""
        return {}

    def host_memory(self, version: str) -> dict[str, Any]:
        """Where the device is host memory: how `version` reads it (gpu.hostmem.HostMemBackend's keywords
        `reading` and `psutil_cgroup`)."""
        ...

    def unsupported(self, space: Mapping[str, Sequence[Any]]) -> list[tuple[str, str, str]]:
        """(knob, the engine's reason, a note) for each knob the space turns on that this engine cannot run."""
        return []

    def kv_tokens(self, info: Mapping[str, Any]) -> int | None: ...


class Budget(str, Enum):
    """How an engine splits GPU memory between weights, its KV cache and the rest: the estimator
    has one sizing model per kind, and an engine names the kind its rules follow.

    STATIC_FRACTION: weights and the KV/state pools take `fraction x free memory`; CUDA graphs and
      activations must fit in what is left (SGLang's --mem-fraction-static).
    PROFILED: the KV cache gets `ceil(capacity x utilisation)` minus the weights and the profiled
      activation, non-torch and graph use (vLLM's --gpu-memory-utilization).
    """

    STATIC_FRACTION = "static_fraction"
    PROFILED = "profiled"


@dataclass(frozen=True)
class MemoryRules:
    """What the estimator needs from an engine beyond its pool arithmetic: the budget kind, the
    releases whose memory rules are written (the nearest older one stands in for another), what
    --kv-cache-dtype accepts at a release, whether `auto` follows a checkpoint's FP8 KV scheme,
    and the prior for resident weights over their parameter bytes (GiB per GPU)."""

    budget: Budget
    versions: tuple[str, ...]
    kv_dtype_choices: Callable[[str], tuple[str, ...]]
    auto_kv_follows_checkpoint: bool
    weights_overhead_gib: float


@dataclass(frozen=True)
class EnginePackage:
    """One engine as the registry holds it: its log rules, its adapter (None while the tool can
    classify its logs but not yet launch it), its flag-table family, its known trait sets and its
    memory rules for the estimator (None: the estimator cannot size it; the search then learns
    from launches alone)."""

    name: str
    log: EngineLog
    adapter: Engine | None
    flag_family: str
    default_version: str
    trait_versions: tuple[str, ...]
    memory: MemoryRules | None = None


def verify(intent: Intent, config: LaunchConfig, *, source: str, init_port: int | None = None) -> list[str]:
    """Ways in which `intent` (read from `source`: 'argv' or 'server_info') contradicts `config`
    (and `init_port`, the distributed-init port the trial reserved for its server, where given).

    Only what the config pins is checked; a value the engine resolved for an unpinned
    field is fine. Values the engine may legitimately lower (running requests, graph
    batch size capped by running requests) must not exceed what was asked.
    """
    problems: list[str] = []

    def differs(name: str, want: Any, got: Any, what: str) -> None:
        if want is not None and got is not None and want != got:
            problems.append(f"{source}: {what} is {got!r} but the config says {want!r}")

    differs("tp", config.tp, intent.tp, "tensor parallel size")
    if config.mem_fraction_static is not None and intent.mem_fraction_static is not None:
        if abs(config.mem_fraction_static - intent.mem_fraction_static) > 1e-6:
            differs("mfs", config.mem_fraction_static, intent.mem_fraction_static, "mem_fraction_static")
    differs("context", config.context_length, intent.context_length, "context length")
    if intent.speculative is not None and intent.speculative != config.speculative:
        state = "on" if intent.speculative else "off"
        problems.append(f"{source}: speculative decoding is {state} but the config says "
                        f"{'on' if config.speculative else 'off'}")
    if config.speculative:
        differs("draft", config.speculative_num_draft_tokens, intent.speculative_num_draft_tokens,
                "speculative_num_draft_tokens")
    if intent.torch_compile is not None and intent.torch_compile != config.torch_compile:
        differs("compile", config.torch_compile, intent.torch_compile, "torch.compile")
    if intent.disable_cuda_graph is not None and intent.disable_cuda_graph != config.disable_cuda_graph:
        differs("graphs", config.disable_cuda_graph, intent.disable_cuda_graph, "CUDA graphs disabled")
    _not_above(problems, source, "CUDA-graph max batch size", config.cuda_graph_max_bs, intent.cuda_graph_max_bs)
    _not_above(problems, source, "max running requests", config.max_running_requests, intent.max_running_requests)
    differs("chunk", config.chunked_prefill_size, intent.chunked_prefill_size, "chunked prefill size")
    if config.kv_cache_dtype != "auto":
        differs("kv", config.kv_cache_dtype, intent.kv_cache_dtype, "KV cache dtype")
    if init_port is not None and intent.init_port is not None and intent.init_port != init_port:
        problems.append(f"{source}: distributed-init port is {intent.init_port} but the trial reserved {init_port} "
                        "(leave it out of extra_args: each trial, each slot, gets its own free one)")
    return problems


def _not_above(problems: list[str], source: str, what: str, want: int | None, got: int | None) -> None:
    if want is not None and got is not None and got > want:
        problems.append(f"{source}: {what} is {got} but the config allows at most {want}")
