"""The simulated SGLang server, the adapter's flags and our default rules against SGLang's
real source (0.5.23 and 0.5.9 wheels, read as text: `python -m tools.fidelity`).

Runs where the wheels are cached (`make sglang-src`, which CI runs); skips with that hint
elsewhere. Each test fails with the fidelity table's mismatch rows.
"""

from __future__ import annotations

import pytest

from tools.fidelity.messages import check_messages, sim_lines
from tools.fidelity.section import Section, render, traced
from tools.fidelity.source import Source, SourceUnavailable, fetch

VERSIONS = ("0.5.23", "0.5.9")
_SOURCES: dict[str, Source] = {}


def source(version: str) -> Source:
    if version not in _SOURCES:
        try:
            _SOURCES[version] = Source(fetch(version, download=False), version)
        except SourceUnavailable as exc:
            pytest.skip(f"SGLang {version} source not cached ({exc}); run `make sglang-src` to fetch it")
    return _SOURCES[version]


def assert_clean(version: str, sec: Section) -> None:
    assert not sec.mismatches, "\n" + render(version, [sec], verbose=False)


@pytest.mark.parametrize("version", VERSIONS)
def test_every_simulated_log_line_has_its_format_string_in_the_source(version: str) -> None:
    src = source(version)
    lines = sim_lines(version)
    sec = check_messages(src, lines)
    ok, claimed = traced(sec)
    assert ok >= 0.95 * claimed, "\n" + render(version, [sec], verbose=False)  # the floor; below, all of them:
    assert_clean(version, sec)
    assert ok >= 60  # the check saw the whole start-up
    shown = "\n".join(row[0] for row in sec.rows)
    assert all(what in shown for what in ("server_args=", "Prefill batch, ", "Decode batch, ", '  File "'))


@pytest.mark.parametrize("version", VERSIONS)
def test_every_flag_we_emit_or_ship_is_registered_by_server_args(version: str) -> None:
    from tools.fidelity.checks import check_flags

    assert_clean(version, check_flags(source(version)))


@pytest.mark.parametrize("version", VERSIONS)
def test_default_rules_agree_with_the_source(version: str) -> None:
    from tools.fidelity.checks import check_defaults

    assert_clean(version, check_defaults(source(version)))


def test_the_matcher_rejects_text_sglang_never_prints() -> None:
    """The check can fail: an invented line and a reworded real one find no format string."""
    src = source("0.5.23")
    sec = check_messages(src, [
        "KV pool sized by autotune. #tokens: 100, K size: 1.00 GB",
        "RuntimeError: Not enough GPU memory for hybrid (mamba/linear-attention) state cache. Computed "
        "max_mamba_cache_size=-4 (total_rest_memory=-0.38 GB, mamba_cache_per_req=50.00 MB). Try: (1) reduce "
        "--max-running-requests, (2) increase --mem-fraction-static, (3) lower --mamba-full-memory-ratio.",
        "Load weight end. elapsed=3.20 s, type=LlamaForCausalLM, avail mem=30.00 GB, mem usage=15.00 GB.",
    ])
    assert [row[1] for row in sec.rows] == ["MISMATCH", "MISMATCH", "ok"]


SITE = "/usr/local/lib/python3.12/dist-packages/sglang/srt"


def test_traceback_frames_are_checked_against_the_release() -> None:
    """A frame must name a function of that release's file at a line inside it (it used to
    pass as Python's own text): 0.5.23 moved KV-pool sizing out of model_runner.py."""
    new, old = source("0.5.23"), source("0.5.9")
    pool_059 = f'  File "{SITE}/model_executor/model_runner_kv_cache_mixin.py", line 416, in init_memory_pool'
    pool_gone = f'  File "{SITE}/model_executor/model_runner.py", line 1590, in init_memory_pool'
    outside = f'  File "{SITE}/managers/scheduler.py", line 6362, in run_scheduler_process'  # 0.5.23's line
    torch = '  File "/usr/local/lib/python3.12/dist-packages/torch/cuda/graphs.py", line 88, in capture_end'
    assert [r[1] for r in check_messages(old, [pool_059, pool_gone, outside, torch]).rows] == \
        ["ok", "MISMATCH", "MISMATCH", "n/a"]
    assert [r[1] for r in check_messages(new, [outside, pool_059]).rows] == ["ok", "MISMATCH"]


def test_server_args_line_has_the_releases_form_and_fields() -> None:
    """0.5.9 logs the ServerArgs repr, 0.5.23 its resolved dict; keys are that release's fields in order."""
    new, old = source("0.5.23"), source("0.5.9")
    repr_line = "server_args=ServerArgs(model_path='/m', context_length=8192, tp_size=2)"
    dict_line = "server_args={'model_path': '/m', 'context_length': 8192, 'tp_size': 2}"
    assert [r[1] for r in check_messages(old, [repr_line, dict_line]).rows] == ["ok", "MISMATCH"]
    assert [r[1] for r in check_messages(new, [repr_line, dict_line]).rows] == ["MISMATCH", "ok"]
    wrong = ["server_args=ServerArgs(model_path='/m', tensor_parallel_size=2)",  # an argparse dest, not a field
             "server_args=ServerArgs(tp_size=2, model_path='/m')"]  # out of order
    assert [r[1] for r in check_messages(old, wrong).rows] == ["MISMATCH", "MISMATCH"]


def test_batch_lines_follow_the_releases_composition() -> None:
    """The batch lines are built with `msg += ...`: matched against that composition, not
    against a list of fragments (which passed the old `Prefill batch. ...` shape)."""
    new, old = source("0.5.23"), source("0.5.9")
    head = "Prefill batch, #new-seq: 1, #new-token: 7, #cached-token: 0, token usage: 0.00, #running-req: 0, #queue-req: 0"
    line_0523 = f"{head}, #pending-token: 0, cuda graph: True, input throughput (token/s): 12.00"
    line_059 = f"{head}, input throughput (token/s): 12.00, cuda graph: False"
    dotted = "Prefill batch. #new-seq: 1, #new-token: 7, #cached-token: 0, token usage: 0.00, #running-req: 0,"
    assert [r[1] for r in check_messages(new, [line_0523, line_059, dotted]).rows] == ["ok", "MISMATCH", "MISMATCH"]
    # (not the converse: 0.5.9's `#queue-req: {...}` placeholder, last before optional pieces, can
    # absorb 0.5.23's extra fields; a placeholder matches any text)
    assert [r[1] for r in check_messages(old, [line_059, dotted]).rows] == ["ok", "MISMATCH"]


def test_rules_read_from_the_source_are_sglangs_numbers() -> None:
    """Spot values of what `SourceRules` extracts (H200 worked example: 0.903 / 0.907)."""
    from tools.fidelity.rules import SourceRules, source_fraction

    new, old = SourceRules.read(source("0.5.23")), SourceRules.read(source("0.5.9"))
    assert new.chunk_and_bs(24564, 1) == (4096, 48) and old.chunk_and_bs(24564, 1) == (2048, 24)
    assert new.decode_bs(100, False)[-2:] == [96, 100] and old.decode_bs(100, False)[-1] == 96
    assert (new.reserve["spec_other"], old.reserve["spec_other"], old.reserve["spec_standalone"]) == (0, 2048, 6144)
    assert new.memory_before_spec and old.memory_before_spec and new.spec_mrr == old.spec_mrr == 48
    assert source_fraction(new, gpu_mem_mib=143771, tp=1, spec=None, user_mrr=None, mla=False) == 0.903
    assert source_fraction(old, gpu_mem_mib=143771, tp=1, spec=None, user_mrr=None, mla=False) == 0.907
    assert new.mxfp8_block == 32 and old.mxfp8_block is None and new.fp4_block == 16


@pytest.mark.parametrize("version", VERSIONS)
def test_both_versions_log_the_speculative_request_cap(version: str) -> None:
    """0.5.9's server_args.py logs "Max running requests is reset to 48" too (the simulator
    used to print it on 0.5.23 only)."""
    from autotune import flagtable
    from autotune.modelshape import load
    from autotune.sim.sglang_args import resolve
    from tests.conftest import MODELS

    line = ("Max running requests is reset to 48 for speculative decoding. You can override this by "
            "explicitly setting --max-running-requests.")
    assert source(version).find(line) is not None
    model = MODELS / "Qwen3.6-27B"
    ns = flagtable.parse("sglang", version, ["--model-path", str(model), "--speculative-algorithm", "NEXTN"])
    assert line in resolve(ns, version, load(model), 48 * 1024, {}).warnings


def test_find_takes_the_literal_with_the_most_constant_text(tmp_path) -> None:
    """A wheel of our own: a line several literals produce gets the one whose constant text covers most of it (the
    first in the source among equals); a literal below the coverage floor, or one that does not match whole, none."""
    import zipfile

    wheel = tmp_path / "sglang-0.0.0-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as zf:
        zf.writestr("sglang/srt/a.py", 'log(f"Load weight end. elapsed={t}")\nlog(f"Load {what}")\n'
                                       'log(f"Load weight end. elapsed={t} s, type={arch}")\n')
        zf.writestr("sglang/srt/b.py", 'log(f"Load weight end. elapsed={t} s, kind={arch}")\n')
    src = Source(wheel, "0.0.0")
    found = src.find("Load weight end. elapsed=3.2 s, type=LlamaForCausalLM")
    assert found is not None and (found.path, found.lineno) == ("sglang/srt/a.py", 3)
    tie = src.find("Load weight end. elapsed=3.2 s, type=x s, kind=y")  # a.py:3 and b.py:1 both produce it
    assert tie is not None and tie.path == "sglang/srt/a.py"
    assert src.find("Load everything, and more, and more still") is None  # only "Load " is constant: under the floor
    assert src.find("Unload weight end. elapsed=3.2 s") is None  # no literal produces it whole
