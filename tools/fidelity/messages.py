"""The log lines the simulated SGLang server prints, and each traced to that version's source.

Two sources, per version: the start-up procedure run in-process against virtual GPUs
(`truth.VirtualIO`) over scenarios that reach each failure and each pool layout, and one
real simulated server per outcome (ready, served, SIGTERM; a scheduler failure) for the
launcher's, HTTP and shutdown lines. Lines are returned without their `[time TPn]` prefix.

`check_messages`: every line has its format string in the source, or is built there with
`msg += ...`, or (traceback frames, the server_args line) matches that version's functions and
ServerArgs fields (structure.py); else it is third-party text or listed as simulator-only.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import requests

from autotune import flagtable
from autotune.modelshape import load as load_shape
from autotune.records import GIB
from autotune.sim.node import SimNode
from autotune.sim.sglang import launcher_traceback, scheduler_traceback
from autotune.sim.sglang_args import LaunchFailure, resolve
from autotune.sim.sglang_engine import SchedulerFailure, SglangEngine
from autotune.sim.truth import VirtualIO
from autotune.trial.ports import kernel_port
from tools import REPO
from tools.fidelity import structure
from tools.fidelity.section import Section
from tools.fidelity.source import Source

MODELS = REPO / "configs" / "models"

# Lines that are not SGLang's own text: (regex, origin). Nothing in SGLang's source to find.
THIRD_PARTY = (
    (r"^(INFO|ERROR|WARNING):     ", "uvicorn's own log line"),
    (r"^Traceback \(most recent call last\):$|^  File \"", "Python's traceback (frames of SGLang's files are checked)"),
    (r"^torch\.OutOfMemoryError: CUDA out of memory\.", "torch's CUDA OOM text"),
)
# Lines SGLang builds from several literals (`msg += ...`) or from a repr: each listed
# fragment must be a literal (or a literal's constant part) of that version's source.
# (Lines composed with `msg += ...` in one function, such as the batch lines, are matched
# against the source's own composition: structure.composed_templates.)
COMPOSED = (
    (r"^Scheduler hit an exception: ", ("Scheduler hit an exception: ",)),
    # 0.5.23: msg = "Not enough memory. ..."; msg += f" Current value: mem_fraction_static={...}"
    (r"^RuntimeError: Not enough memory\. .* Current value: mem_fraction_static=",
     ("Not enough memory. Please try to increase --mem-fraction-static.", " Current value: mem_fraction_static=")),
    # f"{msg} To allow overriding ...", msg being the "Warning: ..." text logged when allowed
    (r"^ValueError: Warning: User-specified context_length \(",
     ("Warning: ", " context_length (", ") is greater than the derived context_length (",
      "This may lead to incorrect model outputs or CUDA errors. Note that the derived context_length may differ",
      " To allow overriding this maximum, set the env var SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1")),
    # f"Capture cuda graph failed: {e}" around torch's OOM text
    (r"^Exception: Capture cuda graph failed: CUDA out of memory\.", ("Capture cuda graph failed: ",)),
)
# Simulator-only lines, on purpose: (regex, reason).
SIM_ONLY: tuple[tuple[str, str], ...] = (
    (r"^ValueError: speculative decoding with NEXTN/EAGLE needs --speculative-draft-model-path",
     "SGLang has no such check: without a draft path or MTP layers it fails later, loading the draft; "
     "the simulator fails at once with its own text"),
)
EXCEPTION = re.compile(r"^(?:[A-Za-z_][\w.]*(?:Error|Exception)|Exception|Warning): ")


PREFIX = re.compile(r"^\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?: TP\d+)?\] ")
SPEC = ["--speculative-algorithm", "NEXTN", "--speculative-num-steps", "3", "--speculative-eagle-topk", "1",
        "--speculative-num-draft-tokens", "4"]


def _m(name: str) -> str:
    return str(MODELS / name)


# (argv, gpus, GiB per GPU[, GiB another process holds on the last GPU]): ready starts of each
# pool layout and each failure's condition
SCENARIOS: list[tuple[list[str], int, float] | tuple[list[str], int, float, float]] = [
    (["--model-path", _m("Meta-Llama-3.1-8B")], 1, 80),
    (["--model-path", _m("Meta-Llama-3.1-8B"), "--enable-torch-compile", "--max-running-requests", "100000",
      "--max-total-tokens", "100000000"], 1, 80),
    (["--model-path", _m("Qwen3.6-27B"), "--tp-size", "2", "--context-length", "32768", *SPEC,
      "--max-running-requests", "8"], 2, 48),
    (["--model-path", _m("Qwen3.6-27B"), "--tp-size", "2", "--context-length", "32768"], 2, 48),
    (["--model-path", _m("DeepSeek-V3"), "--tp-size", "8", *SPEC, "--kv-cache-dtype", "fp8_e4m3"], 8, 141),
    (["--model-path", _m("gpt-oss-20b")], 1, 80),
    (["--model-path", _m("Qwen3-32B-FP8"), "--context-length", "8192"], 1, 80),
    (["--model-path", _m("Meta-Llama-3.1-8B"), "--mem-fraction-static", "0.3"], 1, 48),
    (["--model-path", _m("Meta-Llama-3.1-8B"), "--mem-fraction-static", "0.3205", "--page-size", "4096"], 1, 48),
    (["--model-path", _m("Qwen3.6-27B"), "--tp-size", "2", "--mem-fraction-static", "0.55"], 2, 48),
    (["--model-path", _m("Qwen3.6-27B"), "--tp-size", "2", "--max-mamba-cache-size", "2"], 2, 48),
    (["--model-path", _m("Qwen3.6-27B"), "--tp-size", "2", "--mem-fraction-static", "0.561",
      "--context-length", "8192"], 2, 48),
    (["--model-path", _m("Qwen3-32B")], 1, 48),
    (["--model-path", _m("Meta-Llama-3.1-8B"), "--mem-fraction-static", "0.996", "--context-length", "8192"], 1, 48),
    (["--model-path", _m("Meta-Llama-3.1-8B"), "--context-length", "1"], 1, 48),
    (["--model-path", _m("gpt-oss-20b"), "--swa-full-tokens-ratio", "0.0001"], 1, 48),
    (["--model-path", _m("Meta-Llama-3.1-8B"), "--context-length", "200000"], 1, 48),
    (["--model-path", _m("Meta-Llama-3.1-8B"), "--context-length", "150000", "--mem-fraction-static", "0.9"], 1, 48),
    (["--model-path", _m("Qwen3-8B"), "--speculative-algorithm", "EAGLE"], 1, 48),
    (["--model-path", _m("Meta-Llama-3.1-8B"), "--tp-size", "2"], 2, 48, 12),  # memory capacity unbalanced
]


def strip(line: str) -> str:
    return PREFIX.sub("", line)


def engine_lines(version: str) -> list[str]:
    """Every line the start-up prints (and each failure's exception text) over SCENARIOS."""
    out: list[str] = []
    for argv, _gpus, gib, *rest in SCENARIOS:
        held = rest[0] if rest else 0
        # context 150000 > the model's 131072: allowed by the env var (a warning), else fatal
        env = {"SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN": "1"} if "150000" in argv else {}
        ns = flagtable.parse("sglang", version, argv)
        shape = load_shape(Path(ns.model_path))
        total = int(gib * GIB)
        try:
            args = resolve(ns, version, shape, total >> 20, env)
        except LaunchFailure as exc:
            out += launcher_traceback(version, exc.exc_line, exc.frames)
            continue
        out += args.warnings
        io = VirtualIO([total] * args.tp, [0] * (args.tp - 1) + [int(held * GIB)])  # held: another process
        engine = SglangEngine(shape, args, io)
        try:
            engine.start()
        except SchedulerFailure as exc:
            for rank in exc.ranks:
                out += scheduler_traceback(version, exc, rank)
        out += [strip(ln) for ln in io.lines]
    return out


def server_lines(version: str, timeout_s: float = 60) -> list[str]:
    """Two real simulated servers: one ready, served and stopped by SIGTERM; one that fails."""
    lines: list[str] = []
    with tempfile.TemporaryDirectory() as tmp:
        node = SimNode.create(Path(tmp) / "node", gpus=2, gpu_mem_gib=48, gpu_name="NVIDIA RTX A6000")
        env = {k: v for k, v in os.environ.items() if not k.startswith(("AUTOTUNE_", "SGLANG_"))}
        env.update(AUTOTUNE_SIM_NODE=str(node.root), AUTOTUNE_SIM_TIME_SCALE="0.001",
                   AUTOTUNE_SIM_SGLANG_VERSION=version)
        base = ["--model-path", _m("Meta-Llama-3.1-8B"), "--tp-size", "2", "--context-length", "8192"]
        lines += _run(base + ["--port", str(kernel_port("127.0.0.1"))], env, Path(tmp) / "ready.log", serve=True,
                      timeout_s=timeout_s)
        fail = ["--model-path", _m("Meta-Llama-3.1-8B"), "--mem-fraction-static", "0.3"]  # no room for KV
        lines += _run(fail + ["--port", str(kernel_port("127.0.0.1"))], env,
                      Path(tmp) / "fail.log", serve=False, timeout_s=timeout_s)
    return [strip(ln) for ln in lines]


def _run(argv: list[str], env: dict[str, str], log: Path, *, serve: bool, timeout_s: float) -> list[str]:
    port = int(argv[argv.index("--port") + 1])
    with open(log, "wb") as fh:
        proc = subprocess.Popen([sys.executable, "-m", "autotune.sim.sglang", *argv], stdout=fh,
                                stderr=subprocess.STDOUT, env=env, start_new_session=True, stdin=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + timeout_s
        if serve:
            while "fired up and ready to roll" not in log.read_text(errors="replace"):
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"simulated server did not start:\n{log.read_text()[-2000:]}")
                time.sleep(0.05)
            requests.post(f"http://127.0.0.1:{port}/generate", timeout=30,
                          json={"input_ids": list(range(100, 600)), "sampling_params": {"max_new_tokens": 48}})
            proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=max(1.0, deadline - time.monotonic()))
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)
    return log.read_text(errors="replace").splitlines()


def sim_lines(version: str, *, servers: bool = True) -> list[str]:
    """Distinct lines, in first-seen order."""
    lines = engine_lines(version) + (server_lines(version) if servers else [])
    return list(dict.fromkeys(ln for ln in lines if ln.strip()))


def check_messages(src: Source, lines: list[str]) -> Section:
    sec = Section("messages")
    for line in lines:
        sec.add(*_message_verdict(src, line))
    return sec


def _message_verdict(src: Source, line: str) -> tuple[str, bool | None, str]:
    shown = line if len(line) <= 110 else line[:107] + "..."
    for check in (structure.frame_verdict, structure.server_args_verdict):
        verdict = check(src, line)
        if verdict is not None:
            return shown, *verdict
    for pattern, origin in THIRD_PARTY:
        if re.search(pattern, line):
            return shown, None, f"third-party: {origin}"
    for pattern, reason in SIM_ONLY:
        if re.search(pattern, line):
            return shown, None, f"simulator-only: {reason}"
    for pattern, fragments in COMPOSED:
        if re.search(pattern, line):
            missing = [f for f in fragments if not src.has_fragment(f)]
            return shown, not missing, f"composed; missing {missing}" if missing else "composed: pieces found"
    body = EXCEPTION.sub("", line)
    lit = src.find(line) or (src.find(body) if body != line else None)
    if lit is None:
        templates = structure.composed_templates(src)
        composed = structure.composed_verdict(src, line, templates) or structure.composed_verdict(src, body, templates)
        return (shown, *composed) if composed else (shown, False, "no format string in the source")
    return shown, True, f"{lit.path.removeprefix('sglang/srt/')}:{lit.lineno}"
