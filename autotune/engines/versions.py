"""Engine versions as data: parse them properly and pick the nearest known table.

Every engine ships tables keyed by version (flag tables, trait sets). For a version we
have not seen, the table at or below it applies: a newer release runs with the newest
traits and a warning that names what was picked; one older than every table is refused
(its flags and memory rules may differ in ways we cannot know).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from packaging.version import InvalidVersion, Version

from autotune import flagtable
from autotune.errors import SpecError


@dataclass(frozen=True)
class Picked:
    """The known version that stands in for `asked`; `warning` is set when they differ."""

    asked: str
    known: str
    warning: str | None


def parse(engine: str, version: str) -> Version:
    """`version` as a `packaging` Version; SpecError naming engine_version when it is not one."""
    try:
        return Version(version)
    except InvalidVersion:
        raise SpecError("engine_version", f"{version!r} is not a version of {engine}",
                        "e.g. 0.5.23 (as `pip show` prints it)") from None


def pick(engine: str, version: str, known: Iterable[str], what: str = "traits") -> Picked:
    """The newest of `known` at or below `version` (`what` names the table in messages)."""
    asked = parse(engine, version)
    have = sorted(known, key=lambda v: parse(engine, v))
    if not have:
        raise SpecError("engine", f"{engine} ships no {what}", "capture them with tools/capture/")
    exact = [v for v in have if parse(engine, v) == asked]
    if exact:
        return Picked(version, exact[0], None)
    older = [v for v in have if parse(engine, v) < asked]
    if not older:
        raise SpecError("engine_version", f"{engine} {version} is older than every known {what} "
                        f"(have {', '.join(have)})", f"use {engine} {have[0]} or newer")
    chosen = older[-1]
    newest = " (the newest we know)" if chosen == have[-1] else ""
    return Picked(version, chosen, f"{engine} {version} is not known: using the {what} of {chosen}{newest}")


def flag_table(family: str, version: str) -> Picked:
    """The shipped flag table (`autotune/data/flags/<family>-<v>.json`) nearest at or below `version`."""
    return pick(family, version, [v for e, v in flagtable.available() if e == family], what="flag table")
