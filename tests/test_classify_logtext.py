"""Cleaning damaged log text: autotune.classifier.text."""

from __future__ import annotations

import pytest

from autotune.classifier import text as logtext
from autotune.classifier.text import CleanLine, clean, is_wrapped


@pytest.mark.parametrize(("raw", "text", "source"), [
    ("[2026-01-01 10:00:00 TP1] Load weight begin. avail mem=139.21 GB", "Load weight begin. avail mem=139.21 GB",
     "TP1"),
    ("[2026-01-21 19:49:14 DP0 TP0] Capture cuda graph end.", "Capture cuda graph end.", "DP0 TP0"),
    ("[2026-01-01 10:00:00] The server is fired up and ready to roll!", "The server is fired up and ready to roll!",
     "main"),
    ("(EngineCore pid=4242) INFO 01-01 10:01:10 [gpu_model_runner.py:5089] Model loading took 15.27 GiB memory",
     "Model loading took 15.27 GiB memory", "EngineCore pid=4242"),
    ("(VllmWorker TP0 pid=9) ERROR 06-05 06:18:13 [multiproc_executor.py:470] RuntimeError: CUDA error: out of "
     "memory", "RuntimeError: CUDA error: out of memory", "VllmWorker TP0 pid=9"),
    ("(VllmWorker rank=3 pid=1090) ERROR x", "ERROR x", "VllmWorker rank=3 pid=1090"),
    ("(RayWorkerWrapper pid=1463574, ip=192.168.10.60) INFO 03-27 10:29:01 [worker.py:267] Memory profiling takes 4 s",
     "Memory profiling takes 4 s", "RayWorkerWrapper pid=1463574, ip=192.168.10.60"),
    ("[rank0]: Traceback (most recent call last):", "Traceback (most recent call last):", "rank0"),
    ("INFO:     Uvicorn running on http://127.0.0.1:30000 (Press CTRL+C to quit)",
     "Uvicorn running on http://127.0.0.1:30000 (Press CTRL+C to quit)", "main"),
    ("ERROR 11-18 18:07:28 engine.py:366] ValueError: No available memory", "ValueError: No available memory", "main"),
    ("vllm-1  | ERROR 11-18 18:07:28 engine.py:366] ValueError: x", "ValueError: x", "main"),
    ("  | (EngineCore_DP0 pid=6804) ValueError: y", "ValueError: y", "EngineCore_DP0 pid=6804"),
    ('  File "/x/model_runner.py", line 216, in initialize', '  File "/x/model_runner.py", line 216, in initialize',
     None),
])
def test_prefixes_are_removed_and_the_writer_named(raw: str, text: str, source: str | None) -> None:
    assert clean(raw) == CleanLine(text, source)


def test_ansi_codes_crlf_and_html_colours_are_removed() -> None:
    assert clean("\x1b[32m[2026-01-01 10:00:00 TP0]\x1b[0m Memory pool end. avail mem=13.75 GB\r\n") == \
        CleanLine("Memory pool end. avail mem=13.75 GB", "TP0")
    html = '<font color="#2AA1B3"><b>(APIServer pid=128291)</b></font> INFO 11-11 12:22:01 [api_server.py:1912] Hi'
    assert clean(html) == CleanLine("Hi", "APIServer pid=128291")


def test_tqdm_carriage_returns_keep_the_last_frame() -> None:
    raw = "Capturing batches:   0%|   | 0/52\rCapturing batches: 100%|###| 52/52\r"
    assert clean(raw).text == "Capturing batches: 100%|###| 52/52"


def test_invalid_utf8_is_tolerated() -> None:
    line = clean(b"[2026-01-01 10:00:00] phase kv_pool: \xff\xfe\xc3(\xa0 invalid utf-8")
    assert line.source == "main"
    assert line.text.startswith("phase kv_pool: \ufffd")
    assert clean("bad \ufffd\x00 text").text == "bad \ufffd text"


def test_overlong_lines_are_cut() -> None:
    assert len(clean("x" * 100_000).text) == logtext.MAX_LINE_CHARS


def test_a_terminal_wrapped_tail_is_recognised() -> None:
    head = "ValueError: To serve at least one request with the model's max seq len (100000), (4.26 GiB KV cach"
    assert is_wrapped(head, len(head) + 21, "e is needed, which is larger than", None)
    frame = 'File "/opt/venv/lib/python3.12/site-packages/vllm/v1/engine/core.py", line 305, in _initialize_k'
    assert is_wrapped(frame, 120, "v_caches", None)


@pytest.mark.parametrize(("head", "tail", "source"), [
    ("x" * 150, "e is needed", "TP0"),  # the next line has its own prefix
    ("short line that ended", "and another", None),  # the previous line was not long
    ("x" * 149 + ".", "next sentence", None),  # the previous line ended a sentence
    ("x" * 150, "    indented code", None),
    ("x" * 150, "usage: foo [-h]", None),
    ("x" * 150, "torch.OutOfMemoryError: CUDA out of memory.", None),
    ('File "/usr/lib/sglang/srt/model_loader/loader.py", line 622, in load_weights_and_postprocess' + "x" * 30,
     "min_per_gpu_memory = self.init_torch_distributed()", None),  # code after a frame line
    ("x" * 150, "node-3:811:811 [0] NCCL WARN Cuda failure 'invalid resource handle'", None),  # NCCL's own header
])
def test_lines_of_their_own_are_not_taken_for_tails(head: str, tail: str, source: str | None) -> None:
    assert not is_wrapped(head, len(head), tail, source)
