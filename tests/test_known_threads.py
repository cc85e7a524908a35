"""The known-thread check helpers run before they gather a batch (tools/accuracy/known_threads.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tools.accuracy.known_threads import Known, main


def _index(tmp_path: Path, rows: list[dict[str, str]]) -> Path:
    path = tmp_path / "index.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def test_a_thread_is_known_whatever_form_either_side_writes_it_in(tmp_path: Path) -> None:
    index = _index(tmp_path, [
        {"source": "sgl-project/sglang#7691 (comment)", "url": "https://github.com/sgl-project/sglang/issues/7691"},
        {"source": "volcengine/verl#302", "url": "https://github.com/volcengine/verl/issues/302"},
        {"source": "https://huggingface.co/x/y/discussions/3", "url": "https://huggingface.co/x/y/discussions/3"}])
    known = Known([index])
    # F59's helpers compared exact `owner/repo#N` lines and missed the first of these
    assert known.has("sgl-project/sglang#7691") and known.has("https://github.com/sgl-project/sglang/pull/7691")
    assert known.has("verl-project/verl#302")  # the repository's new name
    assert known.has("https://huggingface.co/x/y/discussions/3/")
    assert not known.has("sgl-project/sglang#7692") and not known.has("https://huggingface.co/x/y/discussions/4")
    assert known.of_repository("sgl-project/sglang#1") == 1


def test_a_committed_file_is_known_at_any_commit_and_in_either_form(tmp_path: Path) -> None:
    index = _index(tmp_path, [
        {"source": "er0080/vllm-benchmarking:tests/fixtures/serve.log",
         "url": "https://github.com/er0080/vllm-benchmarking/blob/1949e7f/tests/fixtures/serve.log"},
        {"source": "https://github.com/wxsms/docs/blob/001e5a2/_sources/native_api.ipynb",
         "url": "https://github.com/wxsms/docs/blob/001e5a2/_sources/native_api.ipynb"}])
    known = Known([index])
    # F64's helper asked with a blob URL at another commit and was told `new` for files the index held by path
    assert known.has("https://github.com/er0080/vllm-benchmarking/blob/main/tests/fixtures/serve.log")
    assert known.has("https://raw.githubusercontent.com/er0080/vllm-benchmarking/abc123/tests/fixtures/serve.log")
    assert known.has("wxsms/docs:_sources/native_api.ipynb")
    assert not known.has("https://github.com/er0080/vllm-benchmarking/blob/main/tests/fixtures/other.log")
    assert not known.has("er0080/vllm-benchmarking:tests/fixtures/serve.log.bak")
    assert known.of_repository("er0080/vllm-benchmarking:x.log") == 1


def test_the_corpora_here_are_read_and_their_threads_known(capsys: pytest.CaptureFixture[str]) -> None:
    fresh = Path(__file__).resolve().parent / "data" / "corpus-fresh-2026-12-05" / "index.jsonl"
    first = json.loads(fresh.read_text(encoding="utf-8").splitlines()[0])
    assert main([first["url"], "nobody/nothing#1"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("KNOWN") and out[1].startswith("new")
