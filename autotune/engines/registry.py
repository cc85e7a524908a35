"""The one registry of engines. Everything that depends on which engine runs asks here:
the adapter that launches it, its log rules, its flag tables, its known releases. Adding an
engine is one package under `autotune/engines/` and one line in `ENGINES` (CONTRIBUTING.md has
the whole path and the tests that check it)."""

from __future__ import annotations

from autotune.classifier.rules import EngineLog
from autotune.engines import sglang, versions, vllm
from autotune.engines.base import Engine, EnginePackage, MemoryRules
from autotune.errors import SpecError

ENGINES: dict[str, EnginePackage] = {p.name: p for p in (sglang.PACKAGE, sglang.CPU_PACKAGE, vllm.PACKAGE, vllm.CPU_PACKAGE)}
DEFAULT_ENGINE = "sglang"


def get_package(name: str) -> EnginePackage:
    """The engine `name`; SpecError naming `engine` if unknown."""
    package = ENGINES.get(name)
    if package is None:
        raise SpecError("engine", f"unknown engine {name!r}", f"one of: {', '.join(sorted(ENGINES))}")
    return package


def get_engine(name: str) -> Engine:
    """The adapter that launches `name`; SpecError naming `engine` if unknown or not launchable yet."""
    adapter = get_package(name).adapter
    if adapter is None:
        raise SpecError("engine", f"{name} cannot be launched yet", f"one of: {', '.join(launchable())}")
    return adapter


def launchable() -> list[str]:
    return sorted(name for name, p in ENGINES.items() if p.adapter is not None)


def get_log(name: str) -> EngineLog:
    return get_package(name).log


def logs() -> dict[str, EngineLog]:
    return {name: p.log for name, p in ENGINES.items()}


def default_version(name: str) -> str:
    """The release assumed when none is named ('' for an unknown engine)."""
    return ENGINES[name].default_version if name in ENGINES else ""


def sizable() -> list[str]:
    """Engines whose memory rules the estimator has."""
    return sorted(name for name, p in ENGINES.items() if p.memory is not None)


def memory_rules(name: str) -> MemoryRules:
    """The memory rules the estimator sizes `name` with; SpecError naming `engine` if it has none."""
    package = ENGINES.get(name)
    if package is None or package.memory is None:
        what = "is not a known engine" if package is None else "has no memory rules the estimator can size it with"
        raise SpecError("engine", f"{name!r} {what}", "use one of: " + ", ".join(sizable()))
    return package.memory


def flag_table(name: str, version: str) -> tuple[str, str]:
    """(family, version) of the flag table for `name` at `version`: the nearest one at or
    below it (SpecError naming engine_version if `version` is older than every table)."""
    family = get_package(name).flag_family
    return family, versions.flag_table(family, version).known


def check_version(name: str, version: str) -> str | None:
    """Refuse a version older than every flag table; for one we have not seen, the warning
    that names the table (and traits) it runs with, else None."""
    get_engine(name)  # SpecError unless it can be launched
    package = ENGINES[name]
    picked = versions.flag_table(package.flag_family, version)
    notes = [picked.warning] if picked.warning else []
    if package.trait_versions:
        traits = versions.pick(name, version, package.trait_versions)
        if traits.warning and traits.known != picked.known:
            notes.append(traits.warning)
    return "; ".join(notes) or None
