"""The simulated SGLang server's HTTP side: uvicorn's lines, SGLang's endpoints, warm-up,
and the continuous-batching scheduler (`sim/scheduler.py`) whose running requests and prefill
forwards charge memory on every rank.

Endpoints: `/health` and `/health_generate` (503 until warm-up is done), `/model_info`,
`/server_info` (+ the deprecated `/get_*` aliases), `/v1/models`, `/generate` (text or
`input_ids`), `/v1/completions` (a string or token-id prompt), `/v1/chat/completions`, and the
simulator's own worst-case description (`trial/worstcase.py`; advertised in `/server_info`
unless `AUTOTUNE_SIM_WORST_CASE_CONNECTIONS=1`). A request whose prefill chunk does not fit the
memory left crashes the scheduler with a CUDA OOM, which takes the whole server down.
"""

from __future__ import annotations

import json
import os
import shlex
import socket
import sys
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, Any

import requests

from autotune.modelshape import ModelShape
from autotune.records import GIB, WORST_CASE_INFO_KEY
from autotune.sim import http_json
from autotune.sim.rank import emit
from autotune.sim.scheduler import Request, Scheduler
from autotune.sim.sglang_args import Resolved
from autotune.sim.sglang_engine import SchedulerFailure, SglangEngine

ENV_CONNECTIONS = "AUTOTUNE_SIM_WORST_CASE_CONNECTIONS"  # "1": no description; one connection per request
WORST_CASE_PATH = "/autotune/worst_case"

if TYPE_CHECKING:
    from autotune.sim.sglang import Launcher


class App:
    """State shared by the handler threads."""

    def __init__(self, launcher: Launcher, ns: Any, args: Resolved, shape: ModelShape, engine: SglangEngine,
                 port: int) -> None:
        self.launcher, self.ns, self.args, self.shape, self.engine = launcher, ns, args, shape, engine
        self.port = port
        self.up = False
        self.scheduler = Scheduler(launcher, engine)
        # the simulator takes the worst case as one description unless told to receive it as real connections
        self.describe_worst_case = os.environ.get(ENV_CONNECTIONS, "") != "1"
        self.api_keys = set(ns.api_key or []) if isinstance(ns.api_key, list) else {ns.api_key} if ns.api_key else set()

    def model_info(self) -> dict[str, Any]:
        return {
            "model_path": self.ns.model_path, "tokenizer_path": self.ns.tokenizer_path or self.ns.model_path,
            "is_generation": True, "preferred_sampling_params": None, "weight_version": "default",
            "has_image_understanding": "ConditionalGeneration" in self.shape.architecture,
            "has_audio_understanding": False, "model_type": self.shape.model_type,
            "architectures": [self.shape.architecture],
        }

    def resolved_args(self) -> dict[str, Any]:
        a, st = self.args, self.engine.state
        out = {k: v for k, v in vars(self.ns).items() if _jsonable(v)}
        out.update(mem_fraction_static=a.mem_fraction_static, context_length=a.context_len,
                   chunked_prefill_size=a.chunked_prefill_size, max_running_requests=st.max_running_requests,
                   speculative_algorithm=a.spec_algorithm, kv_cache_dtype=self.ns.kv_cache_dtype,
                   enable_torch_compile=a.torch_compile, disable_cuda_graph=not a.graphs_enabled)
        if a.spec_algorithm:
            out.update(speculative_num_steps=a.spec_steps, speculative_eagle_topk=a.spec_topk,
                       speculative_num_draft_tokens=a.spec_draft_tokens)
        if not self.launcher.traits.server_info_graph_config:
            out.update(cuda_graph_max_bs=max(a.decode_bs, default=None), cuda_graph_bs=a.decode_bs)
        else:
            out["cuda_graph_config"] = {
                "decode": {"max_bs": max(a.decode_bs, default=None), "bs": a.decode_bs,
                           "backend": "full" if a.graphs_enabled else "disabled"},
                "prefill": {"max_bs": max(a.prefill_buckets, default=None), "bs": a.prefill_buckets,
                            "backend": "breakable" if a.prefill_buckets else "disabled"},
            }
        return out

    def server_info(self) -> dict[str, Any]:
        st = self.engine.state
        args = self.resolved_args()
        graph = {k: round(v / GIB, 2) for k, v in st.graph_bytes.items()}
        memory = {"weight": round((st.weights_bytes + st.draft_bytes) / GIB, 2), "kvcache": round(st.kv_bytes / GIB, 2),
                  "token_capacity": st.kv_tokens,
                  "graph": graph if self.launcher.traits.server_info_graph_config else round(sum(st.graph_bytes.values()) / GIB, 2)}
        internal = dict(args, memory_usage=memory, effective_max_running_requests_per_dp=st.max_running_requests)
        sim = {WORST_CASE_INFO_KEY: WORST_CASE_PATH} if self.describe_worst_case else {}
        return dict(args, **sim, launch_command=shlex.join(["python", "-m", "sglang.launch_server", *self.launcher.argv]),
                    status="ready", max_total_num_tokens=st.kv_tokens, max_req_input_len=self.args.context_len - 1,
                    startup_time=round(sum(st.phase_seconds.values()), 2), version=self.launcher.version,
                    frontend="python", internal_states=[internal],
                    startup_phases_s={k: round(v, 2) for k, v in st.phase_seconds.items()})


def _jsonable(value: Any) -> bool:
    return isinstance(value, (str, int, float, bool, list, dict, type(None)))


def make_handler(app: App) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            pass  # access lines are emitted by send_json, in uvicorn's format

        def send_json(self, status: int, body: Any) -> None:
            http_json.send_json(self, status, body)
            phrase = {200: "OK", 400: "Bad Request", 401: "Unauthorized", 404: "Not Found", 503: "Service Unavailable"}
            host, port = self.client_address[:2]
            emit(f'INFO:     {host}:{port} - "{self.command} {self.path} HTTP/1.1" {status} {phrase.get(status, "")}')

        def authorised(self) -> bool:
            if not app.api_keys or self.path.startswith("/health"):
                return True
            header = self.headers.get("Authorization", "")
            if header.removeprefix("Bearer ").strip() in app.api_keys:
                return True
            self.send_json(401, {"error": "Unauthorized"})
            return False

        def do_GET(self) -> None:  # noqa: N802 (http.server's naming)
            if not self.authorised():
                return
            path = self.path.split("?")[0]
            if path in ("/health", "/health_generate"):
                self.send_json(200 if app.up and app.scheduler.is_alive() else 503, {})
            elif path in ("/model_info", "/get_model_info"):
                self.send_json(200, app.model_info())
            elif path in ("/server_info", "/get_server_info"):
                self.send_json(200, app.server_info())
            elif path == "/v1/models":
                self.send_json(200, {"object": "list", "data": [{
                    "id": app.ns.served_model_name or app.ns.model_path, "object": "model", "owned_by": "sglang",
                    "root": app.ns.model_path, "max_model_len": app.args.context_len}]})
            else:
                self.send_json(404, {"detail": "Not Found"})

        def do_POST(self) -> None:  # noqa: N802
            if not self.authorised():
                return
            try:
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", "0"))) or b"{}")
            except ValueError:
                self.send_json(400, {"error": {"message": "invalid JSON body"}})
                return
            path = self.path.split("?")[0]
            if path == "/generate":
                self.generate(body)
            elif path == "/v1/chat/completions":
                self.chat(body)
            elif path == "/v1/completions":
                self.completions(body)
            elif path == WORST_CASE_PATH:
                self.worst_case(body)
            else:
                self.send_json(404, {"detail": "Not Found"})

        def refusal(self, tokens: int, max_new: int) -> str:
            """Why SGLang would refuse this request before scheduling it ('' when it would not)."""
            limit = app.args.context_len
            if tokens >= limit:
                return f"The input ({tokens} tokens) is longer than the model's context length ({limit} tokens)."
            if tokens + max_new > app.engine.state.kv_tokens:
                return (f"The input ({tokens} tokens) plus max_new_tokens ({max_new}) exceeds the KV cache pool "
                        f"({app.engine.state.kv_tokens} tokens).")
            return ""

        def run_request(self, tokens: int, max_new: int) -> Request | None:
            refused = self.refusal(tokens, max_new)
            if refused:
                self.send_json(400, {"error": {"message": refused}})
                return None
            return app.scheduler.submit(Request(tokens, max_new))

        def worst_case(self, body: dict[str, Any]) -> None:
            """The worst case as one description (trial/worstcase.py): `batch.requests` prompts of
            `batch.prompt_tokens`, then the long one, handed to the scheduler in one piece, as if
            every connection had arrived at once. 200 when all were served, as 400 per request."""
            try:
                batch, long = body["batch"], body["long"]
                sizes = [(int(batch["prompt_tokens"]), int(batch["max_tokens"]))] * int(batch["requests"])
                sizes.append((int(long["prompt_tokens"]), int(long["max_tokens"])))
            except (KeyError, TypeError, ValueError) as exc:
                self.send_json(400, {"error": {"message": f"bad worst-case description: {exc}"}})
                return
            refused = next(filter(None, (self.refusal(n, new) for n, new in set(sizes))), "")
            if refused:
                self.send_json(400, {"error": {"message": refused}})
                return
            done = app.scheduler.submit_all([Request(n, new) for n, new in sizes])
            self.send_json(200, {"served": len(done), "seconds": round(max(r.seconds for r in done), 3)})

        def generate(self, body: dict[str, Any]) -> None:
            ids = body.get("input_ids")
            tokens = len(ids) if isinstance(ids, list) else max(1, len(str(body.get("text", ""))) // 4)
            max_new = int((body.get("sampling_params") or {}).get("max_new_tokens", 16))
            req = self.run_request(tokens, max_new)
            if req is not None:
                self.send_json(200, {"text": " Paris" * min(max_new, 8), "meta_info": {
                    "id": uuid.uuid4().hex, "finish_reason": {"type": "length", "length": max_new},
                    "prompt_tokens": tokens, "completion_tokens": max_new, "cached_tokens": 0,
                    "e2e_latency": round(req.seconds, 3)}})

        def completions(self, body: dict[str, Any]) -> None:
            """OpenAI completions as SGLang serves them (serving_completions.py): a prompt of token ids
            goes in as input_ids, a string as text; `max_tokens` is max_new_tokens; errors are
            `{"object": "error", "message", "type": "BadRequestError", "param", "code"}`."""
            prompt = body.get("prompt")
            if not prompt or (isinstance(prompt, list) and all(not p for p in prompt)):
                self.send_json(400, {"object": "error", "message": "Prompt cannot be empty", "type": "BadRequestError",
                                     "param": None, "code": 400})
                return
            if isinstance(prompt, list) and all(isinstance(t, int) for t in prompt):
                tokens = len(prompt)
            else:
                tokens = max(1, len(str(prompt)) // 4)
            max_new = int(body.get("max_tokens") or 16)
            req = self.run_request(tokens, max_new)
            if req is not None:
                self.send_json(200, {"id": uuid.uuid4().hex, "object": "text_completion", "created": int(time.time()),
                                     "model": body.get("model", app.ns.model_path),
                                     "choices": [{"index": 0, "text": " Paris" * min(max_new, 8), "logprobs": None,
                                                  "finish_reason": "length", "matched_stop": None}],
                                     "usage": {"prompt_tokens": tokens, "completion_tokens": max_new,
                                               "total_tokens": tokens + max_new}})

        def chat(self, body: dict[str, Any]) -> None:
            text = " ".join(str(m.get("content", "")) for m in body.get("messages", []))
            tokens = max(1, len(text) // 4) + 8
            max_new = int(body.get("max_tokens") or 16)
            req = self.run_request(tokens, max_new)
            if req is not None:
                self.send_json(200, {"id": uuid.uuid4().hex, "object": "chat.completion", "created": int(time.time()),
                                     "model": body.get("model", app.ns.model_path),
                                     "choices": [{"index": 0, "message": {"role": "assistant", "content": "Paris."},
                                                  "finish_reason": "length"}],
                                     "usage": {"prompt_tokens": tokens, "completion_tokens": max_new,
                                               "total_tokens": tokens + max_new}})

    return Handler


class _Server(ThreadingHTTPServer):
    """uvicorn listens with a backlog of 2048; http.server's 5 resets a burst of concurrent clients."""

    request_queue_size = 2048


def warmup(app: App) -> None:
    """SGLang's warm-up: GET /model_info, then one small /generate, then 'fired up'."""
    launcher = app.launcher
    try:
        launcher.on_phase("warmup")
    except SchedulerFailure as exc:
        launcher.fail_schedulers(exc)
    base = f"http://127.0.0.1:{app.port}"
    headers = {"Authorization": f"Bearer {next(iter(app.api_keys))}"} if app.api_keys else {}
    if not app.ns.skip_server_warmup:
        requests.get(f"{base}/model_info", headers=headers, timeout=600)
        requests.post(f"{base}/generate", headers=headers, timeout=600,
                      json={"text": "The capital city of France is", "sampling_params": {"max_new_tokens": 8}})
    app.up = True
    launcher.log("The server is fired up and ready to roll!")


def serve_forever(launcher: Launcher, ns: Any, args: Resolved, shape: ModelShape, engine: SglangEngine) -> None:
    try:
        launcher.on_phase("http")
    except SchedulerFailure as exc:
        launcher.fail_schedulers(exc)
    pid = os.getpid()
    for line in (f"Started server process [{pid}]", "Waiting for application startup.", "Application startup complete."):
        emit(f"INFO:     {line}")
    app = App(launcher, ns, args, shape, engine, int(ns.port))
    try:
        server = _Server((ns.host, int(ns.port)), make_handler(app))
    except OSError as exc:
        emit(f"ERROR:    [Errno {exc.errno}] error while attempting to bind on address "
             f"('{ns.host}', {ns.port}): {os.strerror(exc.errno or 0).lower()}")
        emit("INFO:     Waiting for application shutdown.")
        emit("INFO:     Application shutdown complete.")
        launcher.stop_children()
        sys.exit(3)
    server.daemon_threads = True
    server.socket.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
    emit(f"INFO:     Uvicorn running on http://{ns.host}:{ns.port} (Press CTRL+C to quit)")
    launcher.serving = True
    launcher.http = server
    app.scheduler.start()
    threading.Thread(target=server.serve_forever, daemon=True, name="http").start()
    threading.Thread(target=warmup, args=(app,), daemon=True, name="warmup").start()
    launcher.wait_for_signals()
