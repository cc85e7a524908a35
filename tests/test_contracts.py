"""The stable surfaces: exported names, the JSON of each command, import directions, and the
study's refusal of a worker on other hardware."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import optuna
import pytest

import autotune
from autotune import store
from autotune.errors import StoreError
from tests.conftest import MODELS, REPO

CLI = [sys.executable, "-m", "autotune.cli"]
PACKAGE = REPO / "autotune"


def test_exported_names_are_pinned() -> None:
    assert sorted(autotune.__all__) == ["AutotuneError", "Classification", "LaunchConfig", "Outcome", "Phase",
                                        "TrialResult", "__version__"]


# The layer map. Every module under autotune/ belongs to one group; a group imports only the
# groups listed for it (and itself). New modules must be placed here, or the test fails.
GROUP_OF = {
    # base: the vocabulary every layer shares; imports nothing above it
    "errors": "base", "config": "base", "records": "base", "redact": "base", "flagtable": "base",
    "modelshape": "base", "data": "base", "store": "base", "__init__": "base",
    "settings": "base", "interrupts": "base",  # arriving from the spec and runctl branches
    # the log classifier: its vocabulary (rules, text, index: what an engine's log rules are written in)
    # sits below the engines; the reading (classify, verdict, corpus) above them, as it asks the registry
    "classifier": "classifier",
    "gpu": "gpu", "engines": "engines", "estimate": "estimate", "sim": "sim",
    # an engine's public memory rules and release traits (engines/<e>/rules.py, traits.py) and the
    # version picking they use, and the one KV-dtype byte table (engines/kvdtype.py): pure data,
    # shared by the estimator and the simulator
    "engine_rules": "engine_rules",
    "spec": "spec",  # one package: the Spec and its loading, the schema, the fields' meaning, the space
    "trial": "trial", "target": "target",
    "machine": "machine", "search": "search",
    "report": "report",
    "regress": "regress", "regress_render": "regress",
    "progress": "cli", "cli": "cli",
}
BASE = {"base"}
RULE_MODULES = ("rules", "traits")
_SEARCH = BASE | {"gpu", "engines", "log_vocabulary", "classifier", "estimate", "spec", "trial", "search", "target"}
MAY_IMPORT = {
    "base": BASE,
    "gpu": BASE | {"gpu"},  # the protocol and NVML; knows nothing of the simulator
    "engine_rules": BASE | {"engine_rules"},  # never an adapter or a classifier
    "log_vocabulary": BASE | {"log_vocabulary"},
    "engines": BASE | {"engines", "engine_rules", "log_vocabulary"},
    "classifier": BASE | {"classifier", "log_vocabulary", "engines", "engine_rules"},
    # never the simulator: the tests compare the two as independent; both read the engine's public rules.
    # The registry says which memory rules (budget kind, releases, KV dtypes) an engine has.
    "estimate": BASE | {"estimate", "engine_rules", "engines"},
    "sim": BASE | {"sim", "gpu", "engine_rules"},  # the simulated node implements gpu's protocol (sim -> gpu, never back)
    "spec": BASE | {"spec", "engines", "engine_rules", "estimate"},  # not trial: a spec is read before any trial exists
    "target": BASE | {"target"},  # ssh + exec prefix: knows nothing of trials or GPUs
    "trial": BASE | {"trial", "gpu", "engines", "log_vocabulary", "classifier", "estimate", "target"},  # real GPUs too: the simulator only via GpuBackend
    "machine": BASE | {"machine", "gpu", "sim", "spec", "engines", "target"},  # picks the backend a spec (its engine, its target) asks for
    "search": _SEARCH,
    "report": _SEARCH | {"report"},
    "regress": _SEARCH | {"report", "regress"},  # regress reuses the report's frontier, never the reverse
    "cli": set(GROUP_OF.values()) | {"log_vocabulary"},
}


def _module_name(path: Path) -> str:
    parts = path.relative_to(REPO).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _resolve(name: str) -> str:
    """`autotune.a.b` if it is a module or package under autotune/, else its parent (a name in it)."""
    rel = Path(*name.split("."))
    if (REPO / rel).with_suffix(".py").is_file() or (REPO / rel).is_dir():
        return name
    return name.rsplit(".", 1)[0]


def autotune_imports(path: Path) -> list[tuple[str, str]]:
    """(module imported, name taken from it or '') for every autotune import in `path`, relative ones
    resolved, with `from pkg import module` counted as an import of the module."""
    here = _module_name(path)
    package = here if path.name == "__init__.py" else here.rsplit(".", 1)[0]
    found: list[tuple[str, str]] = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found += [(_resolve(a.name), "") for a in node.names if a.name.split(".")[0] == "autotune"]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(anchor + ([node.module] if node.module else []))
            if base.split(".")[0] != "autotune":
                continue
            for alias in node.names:
                target = _resolve(f"{base}.{alias.name}")
                found.append((target, "") if target != base else (base, alias.name))
    return found


def group_of(module: str) -> str:
    parts = module.split(".")
    if parts[1:2] == ["engines"] and (parts[2:] in (["versions"], ["kvdtype"])
                                      or (len(parts) == 4 and parts[3] in RULE_MODULES)):
        return "engine_rules"
    if parts[1:2] == ["classifier"] and parts[2:] in (["rules"], ["text"], ["index"], []):
        return "log_vocabulary"
    key = parts[1] if len(parts) > 1 else "__init__"
    assert key in GROUP_OF, f"{module} is in no layer: add it to GROUP_OF in tests/test_contracts.py"
    return GROUP_OF[key]


MODULES = sorted(PACKAGE.rglob("*.py"))


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_every_module_imports_only_layers_below(path: Path) -> None:
    mine = group_of(_module_name(path))
    bad = sorted({m for m, _ in autotune_imports(path) if group_of(m) not in MAY_IMPORT[mine]})
    assert not bad, f"{path.relative_to(REPO)} ({mine}) imports {bad}; {mine} may import {sorted(MAY_IMPORT[mine])}"


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_the_package_never_imports_the_tools_or_the_tests(path: Path) -> None:
    """tools/ and tests/ sit beside the package and are not in its wheel: an import of them would fail there."""
    tree = ast.parse(path.read_text())
    found = [a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names]
    found += [n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and not n.level and n.module]
    bad = sorted(name for name in found if name.split(".")[0] in ("tools", "tests"))
    assert not bad, f"{path.relative_to(REPO)} imports {bad}"


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_no_module_takes_another_modules_private_names(path: Path) -> None:
    here = _module_name(path)
    bad = [f"{m}.{name}" for m, name in autotune_imports(path)
           if name.startswith("_") and not name.startswith("__") and m != here]
    tree = ast.parse(path.read_text())
    aliases = {a.asname or a.name for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)
               and (n.level or (n.module or "").startswith("autotune")) for a in n.names}
    aliases |= {a.asname for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names if a.asname}
    bad += [f"{n.value.id}.{n.attr}" for n in ast.walk(tree) if isinstance(n, ast.Attribute)
            and isinstance(n.value, ast.Name) and n.value.id in aliases and n.attr.startswith("_")
            and not n.attr.startswith("__")]
    assert not bad, f"{path.relative_to(REPO)} uses private names of other modules: {bad}"


def test_classify_json_contract(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    log.write_text("[2026-01-01 10:00:03 TP0] Load weight begin. avail mem=46.76 GB\n"
                   "[2026-01-01 10:00:22 TP0] Load weight end. elapsed=19.19 s, type=Qwen3_5ForConditionalGeneration, "
                   "dtype=torch.bfloat16, avail mem=20.66 GB, mem usage=26.10 GB.\n"
                   "[2026-01-01 10:00:22 TP0] Scheduler hit an exception: Traceback (most recent call last):\n"
                   "RuntimeError: Not enough memory. Please try to increase --mem-fraction-static. Current value: "
                   "self.server_args.mem_fraction_static=0.85\n"
                   "[2026-01-01 10:00:22] Received sigquit from a child process. It usually means the child failed.\n")
    out = subprocess.run([*CLI, "classify", str(log), "--engine", "sglang", "--json"], capture_output=True, text=True,
                         check=True)
    data = json.loads(out.stdout)
    assert {"outcome", "remedy", "phase", "evidence", "figures"} <= set(data)
    assert data["outcome"] == "OOM_KV_POOL" and data["phase"] == "kv_pool"
    assert data["figures"]["weights_gib"] == 26.1 and all(isinstance(v, (int, float)) for v in data["figures"].values())
    assert any("Not enough memory" in line for line in data["evidence"])


def test_estimate_json_contract() -> None:
    out = subprocess.run([*CLI, "estimate", "--model", str(MODELS / "Qwen3.6-27B"), "--gpu-mem-gib", "48", "--gpus",
                          "2", "--tp", "2", "--speculative", "--context-length", "65536", "--json"],
                         capture_output=True, text=True, check=True)
    data = json.loads(out.stdout)
    for key in ("weights_gib_per_gpu", "draft_weights_gib_per_gpu", "kv_bytes_per_token", "state_bytes_per_request",
                "default_mem_fraction", "kv_tokens", "max_context_length", "verdict", "assumptions"):
        assert key in data
    assert data["verdict"] in ("fits", "no_kv_room", "weights_do_not_fit")
    assert data["kv_bytes_per_token"] == 34816  # 16 full-attention layers x 2 KV heads/GPU x 256 x 2 x 2 B + draft
    assert 25 < data["weights_gib_per_gpu"] < 27 and data["assumptions"]


def test_bad_cli_input_is_an_error_not_a_traceback(tmp_path: Path) -> None:
    out = subprocess.run([*CLI, "classify", str(tmp_path / "missing.log")], capture_output=True, text=True)
    assert out.returncode == 1 and "Traceback" not in out.stderr and "cannot read" in out.stderr
    out = subprocess.run([*CLI, "estimate", "--model", str(tmp_path), "--gpu-mem-gib", "24"], capture_output=True,
                         text=True)
    assert out.returncode == 1 and "config.json" in out.stderr and "Traceback" not in out.stderr


def test_a_study_refuses_a_worker_on_other_hardware(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'study.db'}"
    fp = {"gpu_names": "NVIDIA H100", "engine_version": "0.5.23"}
    store.open_study("s", url, fp, optuna.samplers.RandomSampler())
    store.open_study("s", url, dict(fp), optuna.samplers.RandomSampler())  # same machine: fine
    with pytest.raises(StoreError) as err:
        store.open_study("s", url, {**fp, "gpu_names": "NVIDIA H200"}, optuna.samplers.RandomSampler())
    assert "different machine" in err.value.message and "new study name" in err.value.hint


def _collected(*args: str) -> list[str]:
    out = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
                          "tests/test_soak.py", *args], cwd=REPO, capture_output=True, text=True, timeout=120)
    return [line for line in out.stdout.splitlines() if "::" in line]


def test_the_default_run_leaves_the_soak_out_and_slow_runs_it() -> None:
    """`make test` stays fast; `make test-slow` (CI, after `make test`) still runs the short soak."""
    assert _collected() == []
    assert _collected("-m", "slow") == ["tests/test_soak.py::test_short_soak"]
