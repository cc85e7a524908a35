"""The simulated SGLang server, as real processes: each failure from its real condition,
SGLang's exit behaviour, both versions' log formats, the endpoints, the fault knobs."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import requests

from autotune.classifier.classify import LogClassifier
from autotune.records import GIB, Outcome
from autotune.sim.node import SimNode
from autotune.trial.supervisor import tagged_processes
from tests.conftest import MODELS, REPO, SIM_SGLANG, free_port

QWEN36 = str(MODELS / "Qwen3.6-27B")
LLAMA8 = str(MODELS / "Meta-Llama-3.1-8B")
QWEN32 = str(MODELS / "Qwen3-32B")
SPEC = ["--speculative-algo", "NEXTN", "--speculative-num-steps", "3", "--speculative-eagle-topk", "1",
        "--speculative-num-draft-tokens", "4"]
REFERENCE = ["--model-path", QWEN36, "--tp-size", "2", "--mem-fraction-static", "0.85", "--context-length", "65536",
             "--enable-torch-compile", *SPEC]
V59 = {"AUTOTUNE_SIM_SGLANG_VERSION": "0.5.9"}


def failed_like_sglang(server, message: str) -> str:  # type: ignore[no-untyped-def]
    """The launcher dies by SIGKILL after 'Received sigquit', with `message` in a scheduler traceback."""
    code = server.wait()
    text = server.text()
    assert code == -signal.SIGKILL, text[-2000:]
    assert "Scheduler hit an exception: Traceback (most recent call last):" in text
    assert message in text, text[-2000:]
    assert "Received sigquit from a child process. It usually means the child failed." in text
    return str(text)


def test_reference_scenario_fails_like_the_real_machine(node: SimNode, start_server) -> None:  # type: ignore[no-untyped-def]
    server = start_server([*REFERENCE, "--port", str(free_port())], V59)
    text = failed_like_sglang(server, "RuntimeError: Not enough memory. Please try to increase --mem-fraction-static. "
                                      "Current value: self.server_args.mem_fraction_static=0.85")
    assert text.count("Scheduler hit an exception") == 2  # both TP ranks
    assert "[TP0]" not in text and re.search(r"\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d TP1\] Load weight end", text)


def test_a_smaller_config_becomes_ready_and_serves(node: SimNode, start_server) -> None:  # type: ignore[no-untyped-def]
    port = free_port()
    server = start_server(["--model-path", QWEN36, "--tp-size", "2", "--mem-fraction-static", "0.85",
                           "--context-length", "65536", "--port", str(port)], V59)
    server.wait_for("The server is fired up and ready to roll!")
    base = f"http://127.0.0.1:{port}"
    assert requests.get(base + "/health", timeout=5).status_code == 200
    out = requests.post(base + "/generate", json={"input_ids": list(range(100, 1100)),
                                                  "sampling_params": {"max_new_tokens": 4}}, timeout=30).json()
    assert out["meta_info"]["prompt_tokens"] == 1000
    info = requests.get(base + "/server_info", timeout=5).json()
    assert info["mem_fraction_static"] == 0.85 and info["context_length"] == 65536
    assert info["max_total_num_tokens"] > 65536 and info["internal_states"][0]["memory_usage"]["weight"] > 25
    assert info["speculative_algorithm"] is None
    assert requests.get(base + "/v1/models", timeout=5).json()["data"][0]["max_model_len"] == 65536
    chat = requests.post(base + "/v1/chat/completions", json={"messages": [{"role": "user", "content": "hi"}]},
                         timeout=30).json()
    assert chat["choices"][0]["message"]["role"] == "assistant"
    # the probe's engine-neutral request: OpenAI completions with the prompt as token ids
    done = requests.post(base + "/v1/completions", json={"model": QWEN36, "prompt": list(range(100, 1100)),
                                                         "max_tokens": 4, "temperature": 0, "ignore_eos": True},
                         timeout=30)
    assert done.status_code == 200 and done.json()["object"] == "text_completion"
    assert done.json()["usage"] == {"prompt_tokens": 1000, "completion_tokens": 4, "total_tokens": 1004}
    too_long = requests.post(base + "/v1/completions", json={"model": QWEN36, "prompt": [7] * 70000, "max_tokens": 4},
                             timeout=30)
    assert too_long.status_code == 400
    used = [g.used_bytes for g in node.snapshot()]
    assert all(u > 40 * GIB for u in used)
    server.proc.send_signal(signal.SIGTERM)
    assert server.wait() == 0
    assert "Application shutdown complete." in server.text()


def test_health_is_503_until_warmup_is_done(node: SimNode, start_server) -> None:  # type: ignore[no-untyped-def]
    port = free_port()
    server = start_server(["--model-path", LLAMA8, "--port", str(port)], {"AUTOTUNE_SIM_FAULTS": "hang@warmup"})
    server.wait_for("Uvicorn running on")
    assert requests.get(f"http://127.0.0.1:{port}/health", timeout=5).status_code == 503
    assert "fired up" not in server.text()
    server.kill()


@pytest.mark.parametrize("version,args,message", [
    ("0.5.23", ["--model-path", LLAMA8, "--mem-fraction-static", "0.3"],
     "ValueError: Loaded weights leave no GPU memory for the KV cache under --mem-fraction-static=0.3. "
     "Raise --mem-fraction-static above 0."),
    ("0.5.23", ["--model-path", LLAMA8, "--mem-fraction-static", "0.3205", "--page-size", "4096"],
     "RuntimeError: Not enough memory. Please try to increase --mem-fraction-static. "
     "Current value: mem_fraction_static=0.3205"),
    ("0.5.23", ["--model-path", QWEN36, "--tp-size", "2", "--mem-fraction-static", "0.55"],
     "RuntimeError: Not enough GPU memory for hybrid (mamba/linear-attention) state cache."),
    ("0.5.23", ["--model-path", QWEN36, "--tp-size", "2", "--max-mamba-cache-size", "2"],
     "RuntimeError: Hybrid (mamba/linear-attention) state cache is too small to serve any requests. "
     "max_mamba_cache_size=2, mamba_ratio=3"),
    ("0.5.23", ["--model-path", QWEN32], "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate"),
    ("0.5.9", ["--model-path", LLAMA8, "--mem-fraction-static", "0.996", "--context-length", "8192"],
     "Exception: Capture cuda graph failed: "
                                                                          "CUDA out of memory."),
    ("0.5.23", ["--model-path", LLAMA8, "--context-length", "1"], "AssertionError: Memory pool size is too small"),
    # 0.5.9, hybrid: a few hundred MiB left after the weights: KV tokens, but not one state slot
    ("0.5.9", ["--model-path", QWEN36, "--tp-size", "2", "--mem-fraction-static", "0.561", "--context-length", "8192"],
     "AssertionError: max_running_request is zero"),
    ("0.5.23", ["--model-path", str(MODELS / "gpt-oss-20b"), "--swa-full-tokens-ratio", "0.0001"],
     "tokens) cannot hold even one request: the prefill admission floor is sliding_window_size (128) + "
     "page_size (1). Increase --swa-full-tokens-ratio or the total KV budget."),
])
def test_each_failure_arises_from_its_condition(node: SimNode, start_server, version: str, args: list[str],
                                                message: str) -> None:  # type: ignore[no-untyped-def]
    server = start_server([*args, "--port", str(free_port())], {"AUTOTUNE_SIM_SGLANG_VERSION": version})
    failed_like_sglang(server, message)


def test_weights_oom_happens_while_loading(node: SimNode, start_server) -> None:  # type: ignore[no-untyped-def]
    server = start_server(["--model-path", QWEN32, "--port", str(free_port())])
    text = failed_like_sglang(server, "CUDA out of memory")
    assert "Load weight begin" in text and "Load weight end" not in text


def test_context_above_model_max_fails_in_the_launcher(node: SimNode, start_server) -> None:  # type: ignore[no-untyped-def]
    server = start_server(["--model-path", LLAMA8, "--context-length", "262144", "--port", str(free_port())])
    assert server.wait() == 1
    text = server.text()
    assert "ValueError: Warning: User-specified context_length (262144) is greater than the derived context_length (131072)" in text
    assert "SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1" in text and "Load weight" not in text


def test_busy_gpu_unbalances_tp(node: SimNode, start_server) -> None:  # type: ignore[no-untyped-def]
    holder = subprocess.Popen([sys.executable, "-m", "autotune.sim.hold", "--gpu", "1", "--gib", "12"],
                              stdout=subprocess.PIPE, text=True)
    assert holder.stdout is not None and holder.stdout.readline().startswith("holding")
    holder.stdout.close()
    try:
        server = start_server(["--model-path", LLAMA8, "--tp-size", "2", "--port", str(free_port())])
        failed_like_sglang(server, "RuntimeError: The memory capacity is unbalanced. Some GPUs may be occupied "
                                   "by other processes.")
    finally:
        holder.terminate()
        holder.wait()


@pytest.mark.parametrize("version", ["0.5.23", "0.5.9"])
def test_kv_smaller_than_context_only_warns_on_0_5_23(node: SimNode, start_server, version: str) -> None:  # type: ignore[no-untyped-def]
    server = start_server(["--model-path", LLAMA8, "--mem-fraction-static", "0.36", "--context-length", "131072",
                           "--port", str(free_port())], {"AUTOTUNE_SIM_SGLANG_VERSION": version})
    server.wait_for("The server is fired up and ready to roll!")  # not fatal in either version
    tokens = int(re.search(r"max_total_num_tokens=(\d+)", server.text())[1])  # type: ignore[index]
    assert tokens < 131072
    warned = re.search(r"KV pool holds \d+ tokens, fewer than --context-length 131072", server.text())
    assert bool(warned) == (version == "0.5.23")
    server.kill()


def test_a_request_that_does_not_fit_crashes_the_server(node: SimNode, start_server) -> None:  # type: ignore[no-untyped-def]
    port = free_port()
    server = start_server(["--model-path", LLAMA8, "--mem-fraction-static", "0.955", "--chunked-prefill-size", "16384",
                           "--port", str(port)])
    server.wait_for("The server is fired up and ready to roll!")
    with pytest.raises(requests.RequestException):
        requests.post(f"http://127.0.0.1:{port}/generate", timeout=30,
                      json={"input_ids": list(range(16000)), "sampling_params": {"max_new_tokens": 4}})
    assert server.wait() == -signal.SIGKILL
    text = server.text()
    assert "Scheduler hit an exception" in text and "CUDA out of memory" in text
    assert "SIGQUIT received. signum=3, frame=None. It usually means one child failed." in text


def test_argparse_behaviour_of_each_version(node: SimNode) -> None:
    def run(version: str, *flags: str) -> subprocess.CompletedProcess[str]:
        env = {**os.environ, "AUTOTUNE_SIM_SGLANG_VERSION": version}
        return subprocess.run([*SIM_SGLANG, "--model-path", LLAMA8, *flags, "--help"], capture_output=True,
                              text=True, env=env)

    bad = run("0.5.23", "--cuda-graph-max-bs", "8")
    assert bad.returncode == 2
    assert "ambiguous option: --cuda-graph-max-bs could match --cuda-graph-max-bs-decode, --cuda-graph-max-bs-prefill" \
        in bad.stderr
    assert run("0.5.9", "--cuda-graph-max-bs", "8").returncode == 0
    assert run("0.5.23", "--speculative-algo", "NEXTN", "--mem-frac", "0.8").returncode == 0
    assert "invalid choice: 'fp8'" in run("0.5.23", "--kv-cache-dtype", "fp8").stderr


def test_unknown_architecture_is_a_clear_error(node: SimNode, start_server, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    model = tmp_path / "weird"
    model.mkdir()
    (model / "config.json").write_text(json.dumps({"architectures": ["WeirdForCausalLM"], "model_type": "weird"}))
    server = start_server(["--model-path", str(model), "--port", str(free_port())])
    assert server.wait() == 1
    assert "ValueError: Model architectures ['WeirdForCausalLM'] are not supported for now." in server.text()


# -- log formats ------------------------------------------------------------------------------

def _patterns(version: str) -> list[re.Pattern[str]]:
    path = REPO / "tests" / "data" / "reference" / "log-patterns.json"  # ../shared/reference's (tests/data/README.md)
    rows = json.loads(path.read_text())
    return [re.compile(r["regex"]) for r in rows if r["engine"] in ("sglang", "any")
            and (version in r["versions"] or "any" in r["versions"] or any(v.startswith("torch") for v in r["versions"]))]


OWN_LINES = ("server_args=ServerArgs(", "server_args={", "Prefill batch,", "Decode batch,", "Capture cuda graph bs", "Memory baseline",
             "INFO:     ", "Capture target prefill", "Capture draft", "Init parallel ends", "Mamba Cache",
             # not in the reference patterns; traced to real logs (tests/test_sim_sglang_memory_lines.py)
             "Using KV cache dtype", "Engine startup timings")


@pytest.mark.parametrize("version", ["0.5.23", "0.5.9"])
def test_log_lines_match_the_reference_patterns(node: SimNode, start_server, version: str) -> None:  # type: ignore[no-untyped-def]
    port = free_port()
    server = start_server(["--model-path", QWEN36, "--tp-size", "2", "--mem-fraction-static", "0.88", "--context-length",
                           "32768", *SPEC, "--max-running-requests", "8", "--port", str(port)],
                          {"AUTOTUNE_SIM_SGLANG_VERSION": version})
    server.wait_for("The server is fired up and ready to roll!")
    server.kill()
    patterns = _patterns(version)
    lines = [ln for ln in server.text().splitlines() if ln.startswith("[")]
    unmatched = [ln for ln in lines if not any(p.search(ln) for p in patterns)
                 and not any(own in ln for own in OWN_LINES)]
    assert not unmatched, unmatched
    text = server.text()
    own, other = ("Init parallel begin.", "Init torch distributed begin.")[:: 1 if version == "0.5.23" else -1]
    assert own in text and other not in text
    assert ("KV Cache is allocated. dtype: torch.bfloat16" in text) == (version == "0.5.23")
    # 0.5.23 counts the draft before the pool; 0.5.9 loads it after the target's graphs
    loads = [i for i, ln in enumerate(lines) if "Load weight end" in ln]
    first_pool = next(i for i, ln in enumerate(lines) if "Memory pool end" in ln)
    assert (max(loads) < first_pool) == (version == "0.5.23")


# -- fault knobs -------------------------------------------------------------------------------

def test_fault_hang_keeps_the_process_alive_and_silent(node: SimNode, start_server) -> None:  # type: ignore[no-untyped-def]
    server = start_server(["--model-path", LLAMA8, "--port", str(free_port())], {"AUTOTUNE_SIM_FAULTS": "hang@kv_pool"})
    server.wait_for("Load weight end")
    size = len(server.text())
    time.sleep(0.5)
    assert server.proc.poll() is None and len(server.text()) == size
    server.kill()


def test_fault_ignore_sigterm(node: SimNode, start_server) -> None:  # type: ignore[no-untyped-def]
    server = start_server(["--model-path", LLAMA8, "--port", str(free_port())], {"AUTOTUNE_SIM_FAULTS": "ignore_sigterm"})
    server.wait_for("fired up")
    os.killpg(server.proc.pid, signal.SIGTERM)
    time.sleep(0.5)
    assert server.proc.poll() is None
    server.kill()


def test_fault_leaked_child_outlives_the_server(node: SimNode, start_server) -> None:  # type: ignore[no-untyped-def]
    server = start_server(["--model-path", LLAMA8, "--port", str(free_port())], {"AUTOTUNE_SIM_FAULTS": "leak_child"})
    server.wait_for("fired up")
    os.killpg(server.proc.pid, signal.SIGKILL)
    server.wait()
    time.sleep(0.2)
    leaked = tagged_processes(server.tag)
    assert leaked, "the leaked grandchild should survive its process group"
    assert any(p.pid in {q.pid for g in node.snapshot() for q in g.processes} for p in leaked)
    server.kill()  # sweeps by tag


def test_fault_crash_at_a_phase(node: SimNode, start_server) -> None:  # type: ignore[no-untyped-def]
    server = start_server(["--model-path", LLAMA8, "--port", str(free_port())], {"AUTOTUNE_SIM_FAULTS": "crash@cuda_graph"})
    text = failed_like_sglang(server, "RuntimeError: CUDA error: an illegal memory access was encountered")
    assert "Memory pool end" in text


def test_fault_exit0_early(node: SimNode, start_server) -> None:  # type: ignore[no-untyped-def]
    server = start_server(["--model-path", LLAMA8, "--port", str(free_port())], {"AUTOTUNE_SIM_FAULTS": "exit0@kv_pool"})
    assert server.wait() == 0
    assert "fired up" not in server.text()


def test_port_in_use_exits_3_after_startup_complete(node: SimNode, start_server) -> None:  # type: ignore[no-untyped-def]
    import socket

    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        server = start_server(["--model-path", LLAMA8, "--port", str(port)])
        assert server.wait() == 3
    text = server.text()
    assert text.index("Application startup complete.") < text.index("error while attempting to bind on address")


SIGQUIT_ON_ANOTHER_THREAD = """
import os, signal, sys, threading
from autotune.sim.sglang import Launcher
from autotune.sim.sglang_engine import SchedulerFailure

launcher = Launcher("0.5.23", [])
launcher.install_signals()
# The failing rank's SIGQUIT, sent once the launcher waits; the main thread blocks it at the C level,
# so the kernel hands it to this thread, as it may whenever the main thread has a signal pending.
threading.Timer(0.5, os.kill, (os.getpid(), signal.SIGQUIT)).start()
signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGQUIT})

class RankIO:
    def prefix(self, rank):
        return "[t]"
    def fail(self, ranks):
        return True

launcher.io = RankIO()
launcher.fail_schedulers(SchedulerFailure("ValueError: x", (), (0,), "kv_pool"))
"""


def test_the_launcher_acts_on_a_sigquit_that_another_thread_received(tmp_path: Path) -> None:
    """The race behind a launcher that outlived its KV failure: the handler of a signal the main
    thread did not itself receive waited for the launcher's time.sleep(60) to end."""
    proc = subprocess.Popen([sys.executable, "-c", SIGQUIT_ON_ANOTHER_THREAD], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, start_new_session=True)
    try:
        out, _ = proc.communicate(timeout=20)  # the old launcher slept 60 s; now it exits within ~0.5 s
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert proc.returncode == -signal.SIGKILL, out
    assert b"Received sigquit from a child process" in out


def test_tp_the_heads_cannot_split_over_fails_as_the_model_is_built(node: SimNode, start_server,  # type: ignore[no-untyped-def]
                                                                     tmp_path: Path) -> None:
    """Qwen3.6-27B: 24 attention heads split three ways, its 4 KV heads do not: SGLang's attention
    layer asserts while the model is built (after 'Load weight begin'), on every rank."""
    four = SimNode.create(tmp_path / "node4", gpus=4, gpu_mem_gib=48, gpu_name="NVIDIA RTX A6000")
    server = start_server(["--model-path", QWEN36, "--tp-size", "3", "--port", str(free_port())],
                          {"AUTOTUNE_SIM_NODE": str(four.root)})
    text = failed_like_sglang(server, "    assert self.total_num_kv_heads % tp_size == 0\n")
    assert text.count("Scheduler hit an exception") == 3 and "\nAssertionError" in text.replace("] AssertionError", "\nAssertionError")
    assert "Load weight begin" in text and "Load weight end" not in text
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and any(g.used_bytes for g in four.snapshot()):
        time.sleep(0.05)
    assert not any(g.used_bytes for g in four.snapshot())
    # The check the assert quotes is the parallel size against a model dimension: the config, never memory.
    classifier = LogClassifier("sglang")
    for line in text.splitlines():
        classifier.feed(line.encode())
    verdict = classifier.classification(-signal.SIGKILL, log_complete=True)
    assert verdict.outcome is Outcome.CONFIG_ERROR and verdict.phase.value == "load_weights"
    assert "does not divide a model dimension" in verdict.remedy
