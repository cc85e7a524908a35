"""The cheap prefilter: which rules are worth trying on a line.

Every rule names literal keys; one regex built as a trie of all keys finds the keys a
line holds in a single C-level scan (an alternation of fifty literals would retry every
alternative at every position); where a key may start inside another's match it is tried
again there, so keys that overlap are all found. Most lines of a flooding log hold no key
at all and cost one scan. Keys written `^key` must start the line and are checked with
`str.startswith`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from autotune.classifier.rules import Rule

_CACHE_LIMIT = 4096  # distinct key combinations remembered; real logs have a few dozen
_SHAPES_LIMIT = 1024  # key-less line shapes remembered (then forgotten all at once)
_SHAPE_MAX_CHARS = 1024
_DIGITS = bytes.maketrans(b"123456789", b"000000000")
_MIN_OVERLAP = 3  # characters two keys must share to be looked for overlapping


def trie_pattern(words: Iterable[str]) -> str:
    """A regex matching any of `words` (the longest at a position), factored as a trie."""
    root: dict[str, dict] = {}  # type: ignore[type-arg]
    for word in words:
        node = root
        for ch in word:
            node = node.setdefault(ch, {})
        node[""] = {}
    return _branch(root) or "(?!)"


def _branch(node: dict[str, dict]) -> str:  # type: ignore[type-arg]
    ends_here = "" in node
    parts = [re.escape(ch) + _branch(sub) for ch, sub in sorted(node.items()) if ch]
    if not parts:
        return ""
    body = parts[0] if len(parts) == 1 else "(?:" + "|".join(parts) + ")"
    return f"(?:{body})?" if ends_here else body


class RuleIndex:
    """The rules of one engine, found by key. `rules_for(text)` keeps the rules' order."""

    def __init__(self, rules: tuple[Rule, ...]) -> None:
        self.rules = rules
        plain = {k for r in rules for k in r.keys if not k.startswith("^")}
        self._starts = tuple(sorted({k[1:] for r in rules for k in r.keys if k.startswith("^")}))
        self._finder = re.compile(trie_pattern(plain))
        # Where inside a key another key may start and run past its end ("imed out after" at 1 in "Timed out"): a scan
        # takes matches that do not overlap, so those places are tried again (a key wholly inside another is found by
        # `_by_key` below). Keys are words: an overlap of a letter or two ("Capture" and "release") would need two
        # words glued together, so it is not looked for.
        self._inner = {k: starts for k in plain
                       if (starts := tuple(i for i in range(1, len(k) - _MIN_OVERLAP + 1)
                                           if any(o.startswith(k[i:]) and len(o) > len(k) - i for o in plain)))}
        # A found key may contain shorter keys (the trie reports the longest): include their rules.
        self._by_key = {k: frozenset(i for i, r in enumerate(rules) if any(rk in k for rk in r.keys)) for k in plain}
        self._by_start = {k: frozenset(i for i, r in enumerate(rules) if "^" + k in r.keys) for k in self._starts}
        self._cache: dict[frozenset[str], tuple[Rule, ...]] = {}
        self._keyless: set[bytes] = set()
        if any(ch.isdigit() for k in plain for ch in k):
            raise ValueError("rule keys must hold no digit (the key-less shape cache relies on it)")

    def may_match(self, raw: str) -> bool:
        """Cheap test on a raw, uncleaned line: could any rule match once it is cleaned?

        Keys sit in the message, never in the prefixes, so a line without any key can be
        skipped (ANSI codes or HTML tags could split a key: such lines are always read).
        `^keys` are looked for at the start of the raw line: argparse writes unprefixed.
        Floods repeat one line with other numbers, and no key holds a digit, so a line of
        the same shape (digits aside) as a key-less one is key-less too: a set lookup.
        """
        shape = raw.encode("utf-8", "surrogatepass").translate(_DIGITS) if len(raw) <= _SHAPE_MAX_CHARS else b""
        if shape and shape in self._keyless:
            return False
        if (self._finder.search(raw) is not None or "\x1b" in raw or "</" in raw
                or raw.startswith(self._starts) or (raw[:1] == ">" and raw.lstrip("> ").startswith(self._starts))):
            return True
        if shape:
            if len(self._keyless) >= _SHAPES_LIMIT:
                self._keyless.clear()
            self._keyless.add(shape)
        return False

    def rules_for(self, text: str) -> tuple[Rule, ...]:
        found = self._keys(text)
        if self._starts and text.startswith(self._starts):
            found += ["^" + k for k in self._starts if text.startswith(k)]
        if not found:
            return ()
        keys = frozenset(found)
        hit = self._cache.get(keys)
        if hit is None:
            hit = self._lookup(keys)
        return hit

    def _keys(self, text: str) -> list[str]:
        """Every key the text holds, also one that starts inside another's match and runs past it."""
        found = []
        for m in self._finder.finditer(text):
            found.append(key := m.group())
            for offset in self._inner.get(key, ()):
                if (inner := self._finder.match(text, m.start() + offset)) is not None:
                    found.append(inner.group())
        return found

    def _lookup(self, keys: frozenset[str]) -> tuple[Rule, ...]:
        indices: set[int] = set()
        for key in keys:
            indices |= self._by_start[key[1:]] if key.startswith("^") else self._by_key[key]
        rules = tuple(self.rules[i] for i in sorted(indices))
        if len(self._cache) < _CACHE_LIMIT:
            self._cache[keys] = rules
        return rules
