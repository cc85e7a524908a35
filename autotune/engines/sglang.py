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
from autotune.engines.base import Intent

OLD_SPELLING_BEFORE = (0, 5, 10)
_FP4 = {"new": "nvfp4", "old": "fp4_e2m1"}


def version_tuple(version: str) -> tuple[int, ...]:
    parts = []
    for piece in version.split("."):
        digits = "".join(ch for ch in piece if ch.isdigit())
        parts.append(int(digits) if digits else 0)
    return tuple(parts)


def spelling(version: str) -> str:
    return "old" if version_tuple(version) < OLD_SPELLING_BEFORE else "new"


def flag_table_version(version: str) -> str:
    """The shipped flag table closest to `version` (same spelling family)."""
    have = sorted((v for e, v in flagtable.available() if e == "sglang"), key=version_tuple)
    if version in have:
        return version
    older = [v for v in have if version_tuple(v) <= version_tuple(version)]
    if not older:
        raise KeyError(f"no SGLang flag table at or below {version} (have {', '.join(have)})")
    return older[-1]


class SglangEngine:
    name = "sglang"
    default_port = 30000
    default_launcher = ("python", "-m", "sglang.launch_server")
    # SGLang reads its API key only from `--api-key` (reference/cli/sglang-*-args.json; no
    # environment fallback): while a trial runs, the key is on the server's argv.
    api_key_env: str | None = None

    def argv(self, config: LaunchConfig, *, version: str, launcher: Sequence[str], host: str, port: int) -> list[str]:
        old = spelling(version) == "old"
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
            args += ["--disable-cuda-graph"] if old else \
                ["--cuda-graph-backend-decode", "disabled", "--cuda-graph-backend-prefill", "disabled"]
        elif config.cuda_graph_max_bs is not None:
            args += ["--cuda-graph-max-bs" if old else "--cuda-graph-max-bs-decode", str(config.cuda_graph_max_bs)]
        if config.max_running_requests is not None:
            args += ["--max-running-requests", str(config.max_running_requests)]
        if config.chunked_prefill_size is not None:
            args += ["--chunked-prefill-size", str(config.chunked_prefill_size)]
        if config.kv_cache_dtype != "auto":
            kv = config.kv_cache_dtype
            if kv in _FP4.values():
                kv = _FP4["old" if old else "new"]
            args += ["--kv-cache-dtype", kv]
        args += ["--host", host, "--port", str(port)]
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
        ns = flagtable.parse("sglang", flag_table_version(version), flags)
        old = spelling(version) == "old"
        disabled = bool(ns.disable_cuda_graph) or (not old and ns.cuda_graph_backend_decode == "disabled")
        max_bs = ns.cuda_graph_max_bs if old else ns.cuda_graph_max_bs_decode
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
        )

    def health_path(self) -> str:
        return "/health"

    def info_path(self) -> str:
        return "/server_info"

    def kv_tokens(self, info: Mapping[str, Any]) -> int | None:
        value = info.get("max_total_num_tokens")
        return int(value) if value is not None else None

    def classifier(self) -> Any:
        from autotune.engines.classify import LogClassifier

        return LogClassifier("sglang")


def _canonical_kv(value: Any) -> str | None:
    if value is None:
        return None
    text = str(value)
    return "nvfp4" if text == "fp4_e2m1" else text
