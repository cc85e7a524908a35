"""Cleaning of damaged server-log text, one raw line at a time.

Logs reach the classifier in every state users and terminals leave them in: ANSI colour
codes (or colours pasted as HTML), CRLF and tqdm's carriage returns, docker-compose and CI
prefixes (`sglang-1  | `, `  | `), process prefixes (`(EngineCore pid=12)`,
`(VllmWorker TP0 pid=9)`, `[rank0]:`), markdown quote markers (`> `), the engines' own headers (SGLang's
`[2026-01-01 10:00:00 TP1] `, vLLM's `INFO 01-01 10:00:00 [file.py:12] `, uvicorn's
`INFO:     `), what a transport puts before every line (timestamps of docker, kubectl, CI and cloud
loggers, syslog / journald, aggregator tags, a wrapper's `[Error] (Process) `, layers of `name | `:
`strip_transport`), markdown code fences and inline-code backticks, a carriage return in caret notation
(`^M`), invalid UTF-8, lines a terminal hard-wrapped mid-word (cut into lines, or into rows padded with
spaces to its width and pasted back as one line: `unpad`), and records a paste ran together on one line
(`records`).

`clean(raw)` strips all of that and says which process or rank wrote the line (`source`),
so that interleaved ranks can be told apart. `is_wrapped(...)` decides, conservatively,
whether a raw line is the tail of the previous line cut by a terminal. Nothing here knows
about engines or outcomes.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# Longer lines are cut (memory stays bounded). Not shorter: SGLang 0.5.23 logs its arguments as one line of
# ~19,000 characters (0.5.9: ~10,000), and knobs the verdict reads (speculative_algorithm, enable_torch_compile)
# stand past character 8,000 (tests/data/sglang-cpu).
MAX_LINE_CHARS = 32768
WRAP_MIN_PREVIOUS_CHARS = 80  # only a line at least a terminal wide can have been wrapped

_ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[@-Z\\-_]")
# The same colour codes as rsyslog writes a control character it escapes, in octal after a `#` (`#033[2m`).
_ANSI_ESCAPED = re.compile(r"#033\[[0-?]*[ -/]*[@-~]")
_HTML = re.compile(r"</?(?:font|b|i|u|em|strong|span|code)\b[^>]*>", re.IGNORECASE)
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")
# (a quote's bar as a web page renders it, copied with the text: `▎ ValueError: ...`)
_QUOTE_BARS = "\u258c\u258d\u258e\u258f\u2502\u2503"
_QUOTE = re.compile(r"^(?:[>" + _QUOTE_BARS + r"][ \t]?)+")
_TICKS = re.compile(r"^`{1,2}(?!`)")  # a pasted line opened as inline code
_COMPOSE = re.compile(r"^\s*(?:[\w.-]+\s+)?\|\s?")
_PROCESS = re.compile(
    r"^\(?(?P<proc>(?:[A-Za-z][\w-]*(?:[ _][\w=-]+)*? )?pid=\d+(?:, ip=[^)\s]*)?)\)\s?")
_RANK = re.compile(r"^\[rank(?P<rank>\d+)\]:\s?")
_SGLANG_HEADER = re.compile(
    r"^\[\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}:\d{2}(?:[.,]\d+)?(?P<tags>(?: (?:DP|PP|TP|EP|CP)\d+)*)\]\s?")
_RANK_TAGS = r"(?P<tags>(?:(?:DP|PP|TP|EP|CP|ATTN_CP)\d+\s*)*)"
# vLLM's header, and any logger's of the same shape: a level, a date and time, a pid, then the module and line
# in brackets, with rank tags before them when the logger names the rank (`ERROR 31423 [ TP6 PP0 scheduler.py:2547] `,
# a custom SGLang format).
_VLLM_HEADER = re.compile(
    r"^(?P<level>DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL)\s+(?:(?:\d{2}-\d{2}|\d{4}-\d{2}-\d{2})"
    r" \d{2}:\d{2}:\d{2}(?:[.,]\d+)?\s+)?(?:\d+\s+)?\[?\s*" + _RANK_TAGS + r"[\w./<>-]+:\d+\]\s?")
# SGLang's bracketed header with its opening bracket and date lost to a cut (`TP0] Decode batch`).
_CUT_SGLANG_HEADER = re.compile(r"^" + _RANK_TAGS.replace("*)*)", "*)+)") + r"\]\s?")
_UVICORN = re.compile(r"^(?P<level>INFO|WARNING|ERROR|DEBUG|CRITICAL):\s+")
# A record at one of these levels tells of something: an exception it names in its message is not raised (`split`).
_NOTICE_LEVELS = frozenset({"DEBUG", "INFO", "WARNING", "WARN"})
# The same header abridged by whoever pasted it, its date and module replaced by an ellipsis (`ERROR ... AssertionError`).
_ABRIDGED_HEADER = re.compile(r"^(?P<level>DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL)\s+(?:\.{3}|\u2026)\s+")
# What a transport puts before every line, whatever the engine wrote: a timestamp (`docker logs -t`,
# `kubectl logs --timestamps`, CI runners: RFC 3339 / ISO 8601, bare or bracketed), a cloud logger's
# severity and resource (`INFO 2025-11-19T20:16:36.09Z [resource.labels.containerName: vllm] `), syslog /
# journald (`Dec 05 10:00:01 host vllm[123]: `, its month in the host's locale), a bare date and time (python
# logging's `%(asctime)s`), a process wrapper's bracketed level and one-word component (`[Error] (Process) `), a
# kernel-ring time (`[81752.219007] `), kubectl's
# `--prefix` (`[pod/name/container] `), an aggregator's tag (`[vllm]: `, `vllm[123]: `). Each is recognised
# by its form, never by an engine's words; a bracketed date without `T`/`Z` is SGLang's own header (it
# names the rank), so it is left to `_SGLANG_HEADER`.
_ISO_TS = r"\d{4}-\d{2}-\d{2}(?:T\d{2}:\d{2}:\d{2}(?:[.,]\d+)?(?:Z|[+-]\d{2}:?\d{2})?|[ ]\d{2}:\d{2}:\d{2}(?:[.,]\d+)?(?:Z|[+-]\d{2}:?\d{2}))"
_TRANSPORT = re.compile(
    r"^(?:(?:DEFAULT|DEBUG|INFO|NOTICE|WARNING|WARN|ERROR|CRITICAL|ALERT|EMERGENCY)\s+)?" + _ISO_TS + r"\s"
    r"|^\[" + _ISO_TS.replace("[ ]", "[ T]") + r"\]\s?"
    # (Ascend's CANN joins date and time with "-" and writes milli- and microseconds apart: 2025-12-29-03:16:15.787.356)
    r"|^\d{4}-\d{2}-\d{2}[T -]\d{2}:\d{2}:\d{2}(?:[.,]\d+){0,2}\s"
    r"|^\[(?i:debug|info|notice|warn|warning|error|critical|fatal)\]\s"
    r"|^\([A-Z][A-Za-z]*\) "
    # (the month as the host's locale abbreviates it: `Dec`, `déc.`, `Dez`, `дек`, `12月`, `12월`)
    r"|^(?:[^\W\d_]{3,5}\.?|\d{1,2}[\u6708\uc6d4]) [ \d]\d \d{2}:\d{2}:\d{2} [\w.-]+ [\w.@/-]+(?:\[\d+\])?:\s?"
    r"|^\[\s*\d+\.\d+\]\s"
    r"|^\[(?:pod|deployment|job|statefulset|daemonset|replicaset)/[^\]]+\]\s?"
    r"|^\[(?:resource\.)?[\w.]+: [^\]]*\]\s?"
    r"|^\[(?!rank\d)[A-Za-z][\w.-]*\]:\s?"
    r"|^[A-Za-z][\w.-]*\[\d+\]:\s")
_TRANSPORT_INITIALS = frozenset("0123456789[(ADEINWCJFMSO") | frozenset("abcdefghijklmnopqrstuvwxyz")
_FENCE = re.compile(r"^\s*(?:```|~~~)[\w+-]*\s*$")
_LEVEL_INITIALS = frozenset("DIWEC")
_PREFIX_INITIALS = frozenset("[(DIWEC")
# A wrapped tail starts with a lower-case word piece ("e is needed", "ss has", "v_caches");
# the words of _NOT_A_TAIL start real lines of their own, so they are never taken for one.
_TAIL_INITIALS = frozenset("abcdefghijklmnopqrstuvwxyz_")
_NOT_A_TAIL = re.compile(r"(?:usage|error|warning|info|debug|self\.|raise |return |await |import |from )"
                         r"|[\w.]*(?:Error|Exception|Warning)\b"
                         r"|[\w.-]+:\d+:\d+ \[\d+\] ")  # NCCL's own header: `host:pid:tid [device] NCCL WARN ...`
_FRAME_LINE = re.compile(r'^\s*File "[^"]*", line \d+, in \w*$')
_IDENTIFIER = re.compile(r"\w+$")


# A paste that lost its newlines runs log records together on one line: an engine header (vLLM's
# `ERROR 04-02 08:25:00 [file.py:68] `, SGLang's `[2025-01-01 10:00:00 TP0] `) met after a space starts a record
# of its own. Only a header with a date counts: a level word alone is prose.
_GLUED = re.compile(
    r"\s(?=(?:DEBUG|INFO|WARNING|ERROR|CRITICAL)\s+(?:\d{2}-\d{2}|\d{4}-\d{2}-\d{2}) \d{2}:\d{2}:\d{2}(?:[.,]\d+)?\s+"
    r"\[?[\w./<>-]+:\d+\]|\[\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}(?:[.,]\d+)?(?: (?:DP|PP|TP|EP|CP)\d+)*\] )")
GLUED_MIN_CHARS = 60  # two headers and a message at the least
# A traceback whose newlines were lost (a digest that joins a paste's lines, an issue window) runs its frames, the
# source lines they quote and its exception line together. Python writes a frame (`File "x.py", line 5, in f`) as a
# line of its own with nothing after it, so a frame that does not start the line, or has text after it, is such a
# paste: each frame, the text between frames (the quoted source) and the exception line after the first frame are
# records of their own (SGLang's `Scheduler hit an exception: Traceback (most recent call last):` is one line).
# faulthandler's frames have no comma before `in`: they are not matched.
_GLUED_FRAME = re.compile(r'(?<!\S)File "[^"\n]*", line \d+, in [\w<>.]+')
# An exception's type as Python prints it (a dotted module path, then a name ending in Error or Exception).
_EXC_TYPE = r"(?:[A-Za-z_]\w*\.)*[A-Z]\w*(?:Error|Exception)"
_GLUED_EXCEPTION = re.compile(r"(?<=\s)" + _EXC_TYPE + r"(?:\([\w.]*\))?: ")
# An exception written other than as Python prints it (see `_as_raised`): its repr on a line of its own, or raised inside
# a sentence's inline code, a markdown list item, or prose in Chinese or Japanese.
_REPR = re.compile(r"^\s*(?P<exc>" + _EXC_TYPE + r")\((?P<q>['\"])(?P<msg>.+)(?P=q),?\)\s*$")
_RAISED = r"(?P<raised>" + _EXC_TYPE + r": \S.*)"
_BULLETS = frozenset({"* ", "- ", "+ "})
_BULLETED = re.compile(r"^[*+-] " + _RAISED)
_AFTER_CJK = re.compile(r"(?<=[\u3000-\u303f\u3040-\u30ff\u4e00-\u9fff\uff00-\uffef])[:\uff1a]?\s*(?P<exc>" + _EXC_TYPE
                        + r")[:\uff1a] ?(?P<msg>\S.*)")
_CODE_SPAN = re.compile(r"(?:(?<=[\s(])|^)`{1,3}(?:[a-z]+ )?(?P<raised>" + _EXC_TYPE + r": [^`]+)`{0,3}")
# An exception line a poster put in quotation marks (`"ValueError: No supported config format found in x"`).
_QUOTED = re.compile(r"^[\"“'](?P<raised>" + _EXC_TYPE + r": .+?)[\"”']\s*$")
_QUOTE_MARKS = frozenset("\"“'")
# A sentence that says it got an error, then the error as Python prints it (`I get the error ValueError: ...`, `fails
# with error: RuntimeError: ...`, `I get a KeyError: ...`, `facing runtime problem ModuleNotFoundError: ...`): a noun
# for the error ("error", "exception", "problem", "issue") or a verb of getting it ("get", "hit", "see", "raised", ...)
# right before it says it is one.
_IN_PROSE = re.compile(r"(?i:\b(?:(?:error|exception|problem|issue)s?(?::| is| was)?|(?:get|gets|got|getting|facing|hit"
                       r"|hitting|throws?|raises?|raised|receiv\w+|see|seeing|saw)(?: an?| the)?))\s+" + _RAISED)

# A terminal that wraps a long line into rows and pads each row with spaces to its width leaves, once the rows
# are pasted back as one line, a run of spaces wherever a row ended, mid-word or not (`GiB of
# which`, `by P                             yTorch`). Its mark is regularity: each run holds a multiple of the
# terminal's width. A run between two words of a line of text is otherwise an alignment (a table, code).
_PAD_RUN = re.compile(r"(?<=\S) {4,}(?=\S)")
PAD_RUN_MARK = "    "  # `unpad` has nothing to do on a line without it


@dataclass(frozen=True)
class CleanLine:
    """One line with its decorations removed.

    `text` is what the engine logged (message only); `source` names the writer when the
    raw line said (`TP1`, `DP0 TP0`, `EngineCore pid=229`, `rank0`, `main` for SGLang's
    launcher), else None: the line continues whatever the previous line's writer wrote.
    """

    text: str
    source: str | None


def decode(raw: str | bytes) -> str:
    """Text from a raw line; undecodable bytes become U+FFFD instead of raising."""
    if isinstance(raw, bytes):
        return raw.decode("utf-8", errors="replace")
    return raw


def strip_decorations(text: str) -> str:
    """Remove CR/LF endings, tqdm carriage-return frames, ANSI codes, HTML colour tags, controls."""
    text = text.rstrip("\r\n")
    if "\r" in text:  # a tqdm bar redraws with CR: the last frame is what the terminal showed
        frames = [f for f in text.split("\r") if f.strip()]
        text = frames[-1] if frames else ""
    if "\x1b" in text:
        text = _ANSI.sub("", text)
    if "#033[" in text:
        text = _ANSI_ESCAPED.sub("", text)
    if "</" in text:  # colours pasted as HTML always close their tags
        text = _HTML.sub("", text)
    if len(text) > MAX_LINE_CHARS:
        text = text[:MAX_LINE_CHARS]
    return text if text.isprintable() else _CONTROL.sub("", text)


def strip_transport(text: str) -> str:
    """`text` without what a transport put before it (see `_TRANSPORT`; layers stack in any order, e.g.
    a markdown quote of `kubectl logs --timestamps`, or docker compose's `name | ` before a logger's
    `date | LEVEL | stderr | `), a carriage return shown in caret notation (`^M`), markdown's inline-code
    backticks or bold around a pasted line, and a markdown code fence as an empty line. Everything an engine
    wrote itself (its header, its rank and process tags) is left for `split`."""
    if text[-2:] == "^M":
        text = text[:-2]
    for _ in range(6):
        first = text[:1]
        if first == ">" or first in _QUOTE_BARS:
            text = _QUOTE.sub("", text, count=1)
            first = text[:1]
        if first == "`" and text[:3] != "```":
            text = _TICKS.sub("", text, count=1)
            continue
        if first == "*" and text[:2] == "**" and text[2:3] not in ("", " ", "*"):  # a line pasted in markdown bold
            text = text[2:]
            end = text.find("**")  # the bold closes at the line's end or after its first words (`**error:** ...`)
            text = text[:end] + text[end + 2:] if end > 0 else text
            continue
        if "|" in text[:48]:
            m = _COMPOSE.match(text)
            if m is not None and m.end():
                text = text[m.end():]
                continue
        if first not in _TRANSPORT_INITIALS and first.isascii():  # (a locale's month may begin with any letter)
            break
        m = _TRANSPORT.match(text)
        if m is None or not m.end():
            break
        text = text[m.end():]
    if text[:3] in ("```", "~~~") or (text[:1] == " " and _FENCE.match(text)):
        return "" if _FENCE.match(text) else text
    return text


def split(raw: str | bytes) -> tuple[str, str | None]:
    """`clean` as a plain (text, source) pair: the classifier's per-line fast path.

    Each prefix regex is tried only when the line's first characters could start it,
    because most lines of a long log carry one header at most.
    """
    text = decode(raw)
    if not text.isprintable() or "</" in text or "#033[" in text or len(text) > MAX_LINE_CHARS:
        text = strip_decorations(text)
    source: str | None = None
    text = strip_transport(text)
    for _ in range(3):  # prefixes stack, e.g. "(APIServer pid=1) [rank0]: ..."
        m = _PROCESS.match(text) if "pid=" in text[:80] else None
        if m is None and text.startswith("[rank"):
            m = _RANK.match(text)
        if m is None:
            break
        source = m["proc"] if "proc" in m.re.groupindex else f"rank{m['rank']}"
        text = text[m.end():]
    first = text[:1]
    notice = False  # an engine's record below ERROR: the engine tells of something, it does not raise it
    if first == "[":
        m = _SGLANG_HEADER.match(text)
        if m is not None:
            return text[m.end():], m["tags"].strip() or source or "main"
    elif first in _LEVEL_INITIALS:
        m = _VLLM_HEADER.match(text)
        if m is not None:
            source, text = source or m["tags"].strip() or "main", text[m.end():]
            notice = m["level"] in _NOTICE_LEVELS
        elif (m := _ABRIDGED_HEADER.match(text)) is not None:
            source, text = source or "main", text[m.end():]
        elif (m := _CUT_SGLANG_HEADER.match(text)) is not None:
            return text[m.end():], m["tags"].strip()
    elif first in "TPA" and (m := _CUT_SGLANG_HEADER.match(text)) is not None:
        return text[m.end():], m["tags"].strip()
    if text[:1] in _LEVEL_INITIALS:
        m = _UVICORN.match(text)
        if m is not None:
            source, text = source or "main", text[m.end():]
    if (text[-1:] == ")" and "(" in text or "`" in text or text[:2] in _BULLETS or not text.isascii()
            or "Error: " in text or "Exception: " in text or text[:1] in _QUOTE_MARKS):
        text = _as_raised(text, prose=not notice)
    return text, source


def _as_raised(text: str, *, prose: bool = True) -> str:
    """An exception written other than as Python prints it, as Python prints it: its repr as a line of its own
    (`AssertionError('Only FlashAttention backend is supported for now.')`, a worker re-logging the exception it
    caught), inside a poster's inline code in a sentence (`expected ValueError raised, e.g. `ValueError: ...``), as a
    markdown list item, or run on from prose in Chinese or Japanese. Not `prose` (an engine's own record below
    ERROR, vLLM's "This can cause fd limit errors like `OSError: [Errno 24] Too many open files`"): only the repr,
    the rest is the engine naming an error, not raising one."""
    m = _REPR.match(text)
    if m is not None:
        return f"{m['exc']}: {m['msg']}"
    if not prose:
        return text
    m = _CODE_SPAN.search(text) if "`" in text else None
    if m is None and text[:1] in _QUOTE_MARKS:
        m = _QUOTED.match(text)  # an exception line in quotation marks
    if m is None and text[:2] in _BULLETS:
        m = _BULLETED.match(text)  # a markdown list item that is an exception (`* ImportError: libnvrtc.so.12: ...`)
    if m is None and not text.isascii():
        m = _AFTER_CJK.search(text)  # an exception run on from prose in Chinese or Japanese (`部署失败报错ValueError: ...`)
        if m is not None:  # (after a colon of its own, or with the space after its type lost: `报错:ValueError:User-...`)
            return f"{m['exc']}: {m['msg']}"
    if m is None and ("Error: " in text or "Exception: " in text):
        m = _IN_PROSE.search(text)  # an exception a sentence names as the error it got (`I get the error ValueError: ...`)
    return text if m is None else m["raised"]


def records(raw: str) -> list[str]:
    """The log records one raw line holds: `[raw]`, or its pieces when a paste ran records together
    (see `_GLUED`, `_GLUED_FRAME`); the first piece keeps whatever came before the first header."""
    cuts = [m.start() for m in _GLUED.finditer(raw)] if len(raw) >= GLUED_MIN_CHARS else []
    if cuts and not split(strip_transport(raw[:cuts[0] + 1]))[0].strip():
        del cuts[0]  # only the line's own prefixes stand before it (`(Worker pid=1) ERROR ...`, a collector's time)
    if not cuts:
        return _trace_records(raw)
    starts = [0, *(c + 1 for c in cuts)]
    pieces = (raw[a:b] for a, b in zip(starts, [*cuts, len(raw)], strict=True))
    return [record for piece in pieces if piece.strip() for record in _trace_records(piece.rstrip())]


def _trace_records(raw: str) -> list[str]:
    """A traceback run together on one line, as its lines (see `_GLUED_FRAME`); any other line as it is."""
    frames = list(_GLUED_FRAME.finditer(raw)) if 'File "' in raw else []
    if not frames:
        return [raw]
    first, last = frames[0], frames[-1]
    cuts = {m.start() for m in frames} | {m.end() for m in frames}
    cuts |= {m.start() for m in _GLUED_EXCEPTION.finditer(raw, first.end())}
    bounds = sorted(c for c in cuts if 0 < c < len(raw))
    while bounds and not split(strip_transport(raw[:bounds[0]]))[0].strip():
        del bounds[0]  # only the line's own prefixes stand before it: they stay on its first record
    if len(frames) == 1 and (not bounds or bounds == [last.end()]) and not raw[last.end():].strip():
        return [raw]  # one frame, written as Python writes it
    edges = [0, *bounds, len(raw)]
    quoted = {m.end() for m in frames}  # what follows a frame is the source line it quotes, indented as Python does
    return [("    " if a in quoted else "") + piece for a, b in zip(edges, edges[1:], strict=False)
            if (piece := raw[a:b].strip())]


def unpad(raw: str) -> str:
    """`raw` with a terminal's row padding taken out (see `_PAD_RUN`); any other line is returned as it is.

    The rows are `width` characters each, the first starting the line, and hold `content` characters of the
    line each, padded with spaces to the width. So when at least two runs of spaces stand inside the line and
    the k-th (from 0) holds the row boundary at (k+1) x width, for a width at least a terminal wide, the
    padding is the last `width - content` characters before each boundary; `content` is the longest row seen
    (a row that ended mid-word). Spaces of the line itself at a row's end or the next row's start are kept.
    """
    runs = [(m.start(), m.end()) for m in _PAD_RUN.finditer(raw)]
    if len(runs) < 2:
        return raw
    width = min(end // (k + 1) for k, (_, end) in enumerate(runs))
    if width < WRAP_MIN_PREVIOUS_CHARS or any(not start < (k + 1) * width <= end
                                              for k, (start, end) in enumerate(runs)):
        return raw
    pad = width - max(start - k * width for k, (start, _) in enumerate(runs))
    kept = (raw[k * width:(k + 1) * width - pad] for k in range(len(runs)))  # each row less its padding
    return "".join(kept) + raw[len(runs) * width:]


def clean(raw: str | bytes) -> CleanLine:
    """Strip decorations and prefixes from one raw line; see the module docstring."""
    text, source = split(raw)
    return CleanLine(text, source)


def may_have_prefix(raw: str) -> bool:
    """Cheap test: could `raw` start with a prefix that names its writer?"""
    return raw[:1] in _PREFIX_INITIALS or "pid=" in raw[:80] or "|" in raw[:40]


def may_be_tail(previous_raw_chars: int, raw: str) -> bool:
    """Cheap test: could `raw` be a wrapped tail (see `is_wrapped`)? False for most lines."""
    return previous_raw_chars >= WRAP_MIN_PREVIOUS_CHARS and raw[:1] in _TAIL_INITIALS


def is_wrapped(previous: str, previous_raw_chars: int, text: str, source: str | None) -> bool:
    """True when `text` (written by `source`) looks like the tail of the previous line, cut by a terminal.

    Conservative on purpose: the previous raw line must be long and end mid-word, this
    one must carry no prefix of its own and start with a lower-case word piece that does
    not begin a line of its own (code, `usage:`, `torch.OutOfMemoryError` ...). After a
    traceback frame line only a bare identifier (the rest of the function name) is a tail:
    code lines that lost their indentation follow frames too.
    """
    if (source is not None or previous_raw_chars < WRAP_MIN_PREVIOUS_CHARS or not text
            or not previous or not (previous[-1].isalnum() or previous[-1] == "_")):
        return False
    if text[0] not in _TAIL_INITIALS or _NOT_A_TAIL.match(text) is not None:
        return False
    return _FRAME_LINE.match(previous) is None or _IDENTIFIER.match(text) is not None
