"""SGLang's real source, read from its wheel: never imported, never executed.

`fetch(version)` finds `sglang-<version>-*.whl` in the cache (`$AUTOTUNE_SGLANG_SRC`, else
`~/.cache/autotune/sglang`) or downloads it with `pip download --no-deps`. `Source` reads
the wheel's `.py` files with `zipfile` and offers what the fidelity check needs: every
string literal as a match pattern, the CLI flags `ServerArgs` registers, a function's text
and AST, and a tiny evaluator for list/range expressions (literals and one bound name only).
"""

from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import sys
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

PLACEHOLDER = re.compile(r"%[-+ #0-9.]*[sdfrixg]|\{[^{}]*\}")


class SourceUnavailable(Exception):
    """The wheel is neither cached nor downloadable (no network, no pip)."""


def cache_dir() -> Path:
    env = os.environ.get("AUTOTUNE_SGLANG_SRC")
    return Path(env) if env else Path.home() / ".cache" / "autotune" / "sglang"


def fetch(version: str, *, download: bool = True, timeout_s: float = 300) -> Path:
    """The cached wheel of `version`, downloading it once when `download` is set."""
    cache = cache_dir()
    found = sorted(cache.glob(f"sglang-{version}-*.whl"))
    if found:
        return found[0]
    if not download:
        raise SourceUnavailable(f"no sglang-{version} wheel in {cache}; run `make sglang-src`")
    cache.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", f"sglang=={version}", "-d", str(cache)]
    # 0.5.23 ships per-interpreter wheels (same .py files); off those, ask for a known one
    pinned = ["--only-binary=:all:", "--python-version", "3.11", "--platform", "manylinux_2_34_x86_64"]
    error = ""
    for extra in ([], pinned):
        try:
            done = subprocess.run(cmd + extra, capture_output=True, text=True, timeout=timeout_s, check=False)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise SourceUnavailable(f"pip download sglang=={version} failed: {exc}") from exc
        found = sorted(cache.glob(f"sglang-{version}-*.whl"))
        if done.returncode == 0 and found:
            return found[0]
        error = done.stderr.strip()[-500:]
    raise SourceUnavailable(f"pip download sglang=={version} failed: {error}")


@dataclass(frozen=True)
class Literal:
    """One source string (one line of it): its constant fragments around placeholders."""

    path: str
    lineno: int
    fragments: tuple[str, ...]
    open_start: bool  # starts with a placeholder
    open_end: bool  # ends with a placeholder

    @cached_property
    def text_len(self) -> int:
        return sum(len(f) for f in self.fragments)

    @cached_property
    def regex(self) -> re.Pattern[str]:
        body = "(.*?)".join(re.escape(f) for f in self.fragments)
        return re.compile(("(.*?)" if self.open_start else "") + body + ("(.*)" if self.open_end else ""), re.S)


def _pieces(node: ast.AST) -> list[str | None] | None:
    """A string expression as constant pieces and None for each placeholder."""
    variants = _variants(node)
    return variants[0] if variants else None


def _variants(node: ast.AST) -> list[list[str | None]]:
    """Like `_pieces`, but an f-string field `{'a' if c else 'b'}` gives one variant per branch."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        out: list[str | None] = []
        pos = 0
        for m in PLACEHOLDER.finditer(node.value):
            out += [node.value[pos:m.start()], None]
            pos = m.end()
        return [[*out, node.value[pos:]]]
    if isinstance(node, ast.JoinedStr):
        variants: list[list[str | None]] = [[]]
        for value in node.values:
            if isinstance(value, ast.Constant):
                options = _variants(value)
            elif isinstance(value, ast.FormattedValue) and isinstance(value.value, ast.IfExp) and all(
                    isinstance(b, ast.Constant) and isinstance(b.value, str)
                    for b in (value.value.body, value.value.orelse)) and len(variants) < 8:
                options = [[str(value.value.body.value)], [str(value.value.orelse.value)]]  # type: ignore[attr-defined]
            else:
                options = [[None]]
            variants = [v + o for v in variants for o in options]
        return variants
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = _variants(node.left), _variants(node.right)
        if left and right:
            return [a + b for a in left for b in right][:8]
    return []


def _string_exprs(node: ast.AST) -> Iterator[tuple[ast.AST, list[str | None]]]:
    """The outermost string expressions under `node` (not their parts again), per variant."""
    for child in ast.iter_child_nodes(node):
        variants = _variants(child) if isinstance(child, ast.BinOp | ast.JoinedStr | ast.Constant) else []
        if variants:
            for pieces in variants:
                yield child, pieces
        else:
            yield from _string_exprs(child)


def _literals_of(pieces: list[str | None], path: str, lineno: int) -> Iterator[Literal]:
    """Split at newlines (the simulator's lines are compared one by one)."""
    line: list[str | None] = []
    for piece in pieces:
        if piece is None:
            line.append(None)
            continue
        chunks = piece.split("\n")
        for i, chunk in enumerate(chunks):
            if i:
                yield _literal(line, path, lineno)
                line = []
            line.append(chunk)
    yield _literal(line, path, lineno)


def _literal(pieces: list[str | None], path: str, lineno: int) -> Literal:
    frags: list[str] = []
    joined = ""
    for piece in pieces:
        if piece is None:
            frags.append(joined)
            joined = ""
        else:
            joined += piece
    frags.append(joined)
    open_start, open_end = frags[0] == "", frags[-1] == ""
    kept = tuple(f for f in frags if f)
    return Literal(path, lineno, kept, open_start or not kept, open_end)


class Source:
    """The `.py` files of one SGLang wheel, by path inside the wheel."""

    def __init__(self, wheel: Path, version: str) -> None:
        self.wheel, self.version = wheel, version
        with zipfile.ZipFile(wheel) as zf:
            self.files = {n: zf.read(n).decode("utf-8", "replace") for n in zf.namelist()
                          if n.startswith("sglang/") and n.endswith(".py")}

    def text(self, path: str) -> str:
        return self.files[path]

    def tree(self, path: str) -> ast.Module:
        return ast.parse(self.files[path])

    def function(self, path: str, name: str) -> ast.FunctionDef:
        for node in ast.walk(self.tree(path)):
            if isinstance(node, ast.FunctionDef) and node.name == name:
                return node
        raise KeyError(f"{name} not in {path} ({self.version})")

    def function_text(self, path: str, name: str) -> str:
        return ast.get_source_segment(self.files[path], self.function(path, name)) or ""

    def message_files(self) -> Iterator[tuple[str, str]]:
        """Where log and exception texts live: the runtime, less model definitions and tests."""
        for path, text in self.files.items():
            if path.startswith("sglang/srt/") and not path.startswith(("sglang/srt/models/", "sglang/srt/multimodal")) \
                    and "/test" not in path:
                yield path, text

    @cached_property
    def literals(self) -> list[Literal]:
        """Every string literal of the runtime, one per line of text, deduplicated (indexed
        once per wheel next to it: parsing the 0.5.23 runtime takes ~20 s)."""
        index = self.wheel.with_suffix(".literals.json")
        if index.is_file() and index.stat().st_mtime >= self.wheel.stat().st_mtime:
            return [Literal(p, n, tuple(f), a, b) for p, n, f, a, b in json.loads(index.read_text())]
        out = self._index_literals()
        try:
            index.write_text(json.dumps([[x.path, x.lineno, x.fragments, x.open_start, x.open_end] for x in out]))
        except OSError:
            pass  # a read-only cache still works, only slower
        return out

    def _index_literals(self) -> list[Literal]:
        seen: set[tuple[tuple[str, ...], bool, bool]] = set()
        out: list[Literal] = []
        for path, text in self.message_files():
            try:
                tree = ast.parse(text)
            except SyntaxError:
                continue
            for node, pieces in _string_exprs(tree):
                for lit in _literals_of(pieces, path, getattr(node, "lineno", 0)):
                    key = (lit.fragments, lit.open_start, lit.open_end)
                    if lit.fragments and key not in seen:
                        seen.add(key)
                        out.append(lit)
        return out

    @cached_property
    def _fragment_text(self) -> str:
        return "\x00".join(f for lit in self.literals for f in lit.fragments)

    def has_fragment(self, text: str) -> bool:
        """`text` is part of one literal's constant text."""
        return text in self._fragment_text

    @cached_property
    def _longest_first(self) -> list[Literal]:
        """The literals by constant text, longest first (a stable sort: the source's order among equals)."""
        return sorted(self.literals, key=lambda lit: -lit.text_len)

    def find(self, line: str, coverage: float = 0.5) -> Literal | None:
        """The source literal that produces `line` whole, its constant text covering at least
        `coverage` of the line (the most constant text wins; among equals, the first in the source)."""
        shape = re.sub(r"\d+(?:\.\d+)?", "0", re.sub(r"\[[\d, ]*\]", "[]", line))  # figures and bs lists
        floor = max(4, coverage * len(shape))
        for lit in self._longest_first:
            if lit.text_len < floor:
                return None  # every literal after this one has less constant text still
            if lit.fragments[0] in line and lit.regex.fullmatch(line):
                return lit
        return None

    # -- flags -------------------------------------------------------------------------------

    @cached_property
    def flags(self) -> dict[str, str]:
        """Every option string ServerArgs registers -> where: explicit `add_argument` calls in
        the server-args modules, and (0.5.23) the dataclass fields `add_cli_args_from_dataclass`
        turns into `--field-name` (plus `cli_name`/`aliases`, minus `no_cli`)."""
        out: dict[str, str] = {}
        for path, text in self.files.items():
            if not path.startswith("sglang/srt/") or ("server_args" not in path and "/arg_groups/" not in path):
                continue
            tree = ast.parse(text)
            for node in ast.walk(tree):
                if isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "add_argument":
                    for arg in node.args:
                        if isinstance(arg, ast.Constant) and str(arg.value).startswith("-"):
                            out[str(arg.value)] = f"{path}:{node.lineno}"
                if isinstance(node, ast.ClassDef) and "/arg_groups/fields/" in path:
                    for name, where in _dataclass_flags(node):
                        out.setdefault(name, f"{path}:{where}")
        return out


def _dataclass_flags(cls: ast.ClassDef) -> Iterator[tuple[str, int]]:
    for stmt in cls.body:
        if not (isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name)):
            continue
        ann = stmt.annotation
        if not (isinstance(ann, ast.Subscript) and getattr(ann.value, "id", "") in ("A", "Annotated")):
            continue
        meta = ann.slice.elts[1:] if isinstance(ann.slice, ast.Tuple) else []
        arg = next((m for m in meta if isinstance(m, ast.Call) and getattr(m.func, "id", "") == "Arg"), None)
        if arg is None and not any(isinstance(m, ast.Constant) and isinstance(m.value, str) for m in meta):
            continue
        kw = {k.arg: k.value for k in arg.keywords} if arg else {}
        no_cli = kw.get("no_cli")
        if isinstance(no_cli, ast.Constant) and no_cli.value is True:
            continue
        cli = kw.get("cli_name")
        names = [str(cli.value) if isinstance(cli, ast.Constant) else "--" + stmt.target.id.replace("_", "-")]
        aliases = kw.get("aliases")
        if isinstance(aliases, ast.List):
            names += [str(a.value) for a in aliases.elts if isinstance(a, ast.Constant)]
        action = kw.get("action")
        negatable = isinstance(action, ast.Attribute) and action.attr == "BooleanOptionalAction"
        for name in names:  # BooleanOptionalAction also registers --no-<name>
            yield name, stmt.lineno
            if negatable and name.startswith("--"):
                yield "--no-" + name[2:], stmt.lineno


def evaluate(node: ast.expr, names: dict[str, Any]) -> Any:
    """Evaluate a list/range expression: constants, lists, + - * //, list(), range(), and the
    names (or attribute tails) in `names`. Anything else raises ValueError; nothing runs."""
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.List):
        return [evaluate(e, names) for e in node.elts]
    if isinstance(node, ast.Name | ast.Attribute):
        key = node.id if isinstance(node, ast.Name) else node.attr
        if key in names:
            return names[key]
        raise ValueError(f"unbound name {key}")
    if isinstance(node, ast.BinOp):
        a, b = evaluate(node.left, names), evaluate(node.right, names)
        ops = {ast.Add: lambda: a + b, ast.Sub: lambda: a - b, ast.Mult: lambda: a * b, ast.FloorDiv: lambda: a // b}
        if type(node.op) in ops:
            return ops[type(node.op)]()
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("list", "range"):
        args = [evaluate(a, names) for a in node.args]
        return list(args[0]) if node.func.id == "list" else range(*args)
    raise ValueError(f"cannot evaluate {ast.dump(node)[:80]}")
