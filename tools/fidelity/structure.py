"""The message checks that one string literal cannot decide (see messages.py).

- traceback frames: `File ".../sglang/srt/<path>", line N, in F` names a file of that
  release, a function F defined there, and a line inside F (`<module>`: a module-level line);
- the `server_args=` line: the form that release logs (0.5.9 `f"{server_args=}"`, the
  dataclass repr; 0.5.23 `server_args={_server_args_for_logging(...)}`, a dict from
  `resolved_dict()`), every key a ServerArgs field, in that release's field order;
- lines built up in one function (`msg = f"..."; msg += f"..."`), such as the batch lines:
  the line is the first piece and then some of the appended pieces, in source order.
"""

from __future__ import annotations

import ast
import json
import re
from dataclasses import dataclass
from functools import cached_property

from tools.fidelity.source import Source, _variants

FRAME = re.compile(r'^  File "[^"]*/(sglang/(?:srt/)?[\w/.]+\.py)", line (\d+), in (\S+)$')


# -- traceback frames ------------------------------------------------------------------------

def frame_verdict(src: Source, line: str) -> tuple[bool, str] | None:
    """None when `line` is no frame of an SGLang file; else (ok, where/why)."""
    m = FRAME.match(line)
    if not m:
        return None
    path, lineno, func = m[1].replace("/srt/../", "/"), int(m[2]), m[3]
    if path not in src.files:
        return False, f"frame: no {path} in {src.version}"
    tree = src.tree(path)
    if func == "<module>":
        inside = [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
                  and n.lineno <= lineno <= (n.end_lineno or 0)]
        stmt = any(getattr(n, "lineno", None) == lineno for n in ast.walk(tree) if isinstance(n, ast.stmt))
        return (not inside and stmt), f"frame: {path}:{lineno} at module level" if not inside and stmt else \
            f"frame: {path}:{lineno} is not a module-level statement"
    spans = [(n.lineno, n.end_lineno or n.lineno) for n in ast.walk(tree)
             if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef) and n.name == func]
    if not spans:
        return False, f"frame: no function {func} in {path}"
    if not any(a <= lineno <= b for a, b in spans):
        return False, f"frame: line {lineno} is outside {func} ({', '.join(f'{a}-{b}' for a, b in spans)})"
    return True, f"frame: {path}:{lineno} in {func}"


# -- the server_args= line ---------------------------------------------------------------------

def _logged_form(src: Source) -> str | None:
    """'repr' or 'dict': how entrypoints/engine.py formats its `server_args=` log line."""
    tree = src.tree("sglang/srt/entrypoints/engine.py")
    for node in ast.walk(tree):
        if not (isinstance(node, ast.JoinedStr) and len(node.values) == 2):
            continue
        head, value = node.values
        if not (isinstance(head, ast.Constant) and head.value == "server_args="
                and isinstance(value, ast.FormattedValue)):
            continue
        if isinstance(value.value, ast.Name) and value.conversion == ord("r"):  # f"{server_args=}"
            return "repr"
        if isinstance(value.value, ast.Call) and isinstance(value.value.func, ast.Name):
            helper = src.function_text("sglang/srt/entrypoints/engine.py", value.value.func.id)
            if ".resolved_dict()" in helper:
                return "dict"
    return None


def _field_order(src: Source, form: str) -> list[str]:
    """ServerArgs's fields in the order its repr (dataclass) or resolved_dict() lists them."""
    if form == "dict":  # record_fields: POSITIONAL_FIELD_ORDER, then fields it does not list
        order = src.tree("sglang/srt/arg_groups/field_order.py")
        for node in order.body:
            if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", "") == "POSITIONAL_FIELD_ORDER":
                return [str(e.value) for e in node.value.elts if isinstance(e, ast.Constant)]  # type: ignore[attr-defined]
        return []
    for node in src.tree("sglang/srt/server_args.py").body:
        if isinstance(node, ast.ClassDef) and node.name == "ServerArgs":
            if any(isinstance(f, ast.FunctionDef) and f.name == "__repr__" for f in node.body):
                return []  # a hand-written repr: not the dataclass's field list
            return [s.target.id for s in node.body if isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name)]
    return []


def server_args_verdict(src: Source, line: str) -> tuple[bool, str] | None:
    """None when `line` is not the server_args line; else (ok, where/why)."""
    if not line.startswith("server_args="):
        return None
    form = _logged_form(src)
    text = line.removeprefix("server_args=")
    try:
        if text.startswith("ServerArgs("):
            call = ast.parse(text, mode="eval").body
            keys = [str(k.arg) for k in call.keywords] if isinstance(call, ast.Call) else []
            shape = "repr"
        else:
            keys, shape = list(ast.literal_eval(text)), "dict"
    except (SyntaxError, ValueError):
        return False, "server_args: not a ServerArgs repr nor a dict"
    if shape != form:
        return False, f"server_args: {src.version} logs the {form} form, not the {shape} form"
    order = _field_order(src, form)
    unknown = [k for k in keys if k not in order]
    if unknown:
        return False, f"server_args: not ServerArgs fields in {src.version}: {unknown}"
    if [order.index(k) for k in keys] != sorted(order.index(k) for k in keys):
        return False, "server_args: fields out of ServerArgs's order"
    return True, f"server_args: {form} form, {len(keys)} fields in order (entrypoints/engine.py)"


# -- lines composed with `msg += ...` ---------------------------------------------------------

@dataclass(frozen=True)
class Composed:
    """`name = <base>` then `name += <piece>` ... in one function: pieces of constant text and
    None for each placeholder."""

    path: str
    lineno: int
    base: tuple[str | None, ...]
    appends: tuple[tuple[str | None, ...], ...]

    @cached_property
    def regex(self) -> re.Pattern[str]:
        def rx(pieces: tuple[str | None, ...]) -> str:
            return "".join("(?:.*?)" if p is None else re.escape(p) for p in pieces)
        return re.compile(rx(self.base) + "".join(f"(?:{rx(a)})?" for a in self.appends), re.S)

    @property
    def head(self) -> str:
        return next((p for p in self.base if p), "")


def _composed_in(func: ast.FunctionDef | ast.AsyncFunctionDef, path: str) -> list[Composed]:
    starts: dict[str, tuple[int, list[str | None]]] = {}
    appends: dict[str, list[tuple[str | None, ...]]] = {}
    for node in sorted((n for n in ast.walk(func) if isinstance(n, ast.Assign | ast.AugAssign)),
                       key=lambda n: (n.lineno, n.col_offset)):
        target = node.targets[0] if isinstance(node, ast.Assign) else node.target
        if not isinstance(target, ast.Name):
            continue
        variants = _variants(node.value)
        if not variants:
            continue
        if isinstance(node, ast.Assign) and target.id not in starts:
            starts[target.id] = (node.lineno, variants[0])
        elif isinstance(node, ast.AugAssign) and isinstance(node.op, ast.Add) and target.id in starts:
            if any(p for p in variants[0]):  # a bare `msg += suffix()` could be anything: left out
                appends.setdefault(target.id, []).append(tuple(variants[0]))
    return [Composed(path, starts[name][0], tuple(starts[name][1]), tuple(parts))
            for name, parts in appends.items() if sum(len(p or "") for p in starts[name][1]) >= 12]


def composed_templates(src: Source) -> list[Composed]:
    """Every `msg = ...; msg += ...` string of the runtime (cached next to the wheel)."""
    index = src.wheel.with_suffix(".composed-v1.json")  # bump when _composed_in changes
    if index.is_file() and index.stat().st_mtime >= src.wheel.stat().st_mtime:
        return [Composed(p, n, tuple(b), tuple(tuple(a) for a in ap)) for p, n, b, ap in json.loads(index.read_text())]
    out: list[Composed] = []
    for path, text in src.message_files():
        try:
            tree = ast.parse(text)
        except SyntaxError:
            continue
        for func in ast.walk(tree):
            if isinstance(func, ast.FunctionDef | ast.AsyncFunctionDef):
                out += _composed_in(func, path)
    try:
        index.write_text(json.dumps([[c.path, c.lineno, c.base, c.appends] for c in out]))
    except OSError:
        pass
    return out


def composed_verdict(src: Source, line: str, templates: list[Composed]) -> tuple[bool, str] | None:
    """(True, where) when a composed string of the source produces `line` whole; else None."""
    for c in templates:
        if c.head and c.head in line and c.regex.fullmatch(line):
            return True, f"composed at {c.path.removeprefix('sglang/srt/')}:{c.lineno}"
    return None
