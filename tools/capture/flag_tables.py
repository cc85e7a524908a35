"""Copy the engines' flag tables from ../shared/reference/cli into autotune/data/flags.

    python -m tools.capture.flag_tables [SOURCE_DIR]

The tables were dumped from the real parsers (SGLang 0.5.23/0.5.9, vLLM 0.33.0). We keep
only what is needed to rebuild an equivalent argparse parser: option strings, dest,
action, nargs, type name, choices, default, required. Run again when a table is added.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from tools import REPO

FIELDS = ("options", "dest", "action", "nargs", "type", "choices", "default", "required")
# The program name the engine's usage and error lines print, where it is not the dumped parser's:
# SGLang's `sglang serve` entry point prints "usage: sglang serve ..." (as real logs show).
USAGE_PROG = {"sglang": "sglang serve"}


def main(src: Path, dst: Path) -> None:
    dst.mkdir(parents=True, exist_ok=True)
    for path in sorted(src.glob("*-args.json")):
        table = json.loads(path.read_text())
        engine = "vllm" if table["prog"].startswith("vllm") else "sglang"
        out = {
            "engine": engine,
            "engine_version": table["engine_version"],
            "prog": USAGE_PROG.get(engine, table["prog"]),
            "allow_abbrev": table["allow_abbrev"],
            "arguments": [[arg[f] for f in FIELDS] for arg in table["arguments"]],
        }
        target = dst / f"{engine}-{table['engine_version']}.json"
        target.write_text(json.dumps(out, separators=(",", ":")) + "\n")
        print(f"{path.name} -> {target} ({len(out['arguments'])} arguments)")


if __name__ == "__main__":
    src = Path(sys.argv[1]) if len(sys.argv) > 1 else REPO.parent / "shared/reference/cli"
    main(src, REPO / "autotune/data/flags")
