"""The engine-agnostic, incremental log classifier.

Feed it a server's log line by line as it is written; it says at once when the evidence
decides a failure (`decisive`, so the caller can kill the server), whether the engine's
own ready line was seen (`ready_seen`), and on request the verdict so far
(`classification`). Engines differ only in their rules (`sglang/log.py`, `vllm/log.py`),
read from the engine registry (`ENGINE_LOGS`).

How the verdict is read:
- each failure line becomes a candidate with a `Strength`; the strongest wins, and among
  equals the earliest (the root cause comes first, wrappers follow). Lines that carry no
  class ("Scheduler hit an exception", "EngineCore failed to start") only say the launch
  died; the cause is read above them, or just below when ranks interleave;
- a raw CUDA OOM takes its class from the phase it happened in: the last progress line,
  else the traceback frames around it (or the one-phase engine module a log header names),
  else a progress line just below (ranks that interleave), else it is unplaced: low
  confidence, `missing` the phase, every other OOM class an alternative (verdict.py);
- once the ready line is seen, earlier candidates are dropped (they did not stop it) and
  unknown exceptions no longer count (request errors are not crashes); once the server is up
  (ready or serving), no line says its arguments were wrong (a request's validation error);
- a line that blames memory held by other processes is read by its own figures: when they show
  none was taken, held or released (`rules.others_disproved`), it is a crash, not GPU_BUSY;
- once the server was asked to stop (`STOP_REQUESTED`, its SIGTERM handler's line), markers
  and unknown exceptions no longer count: they are the stop's echo (0.5.23 reports children
  killed by that SIGTERM as crashed and SIGQUITs itself).

Memory is bounded whatever the log's length: a few counters, figures, at most
`MAX_CANDIDATES` candidates, per-source state for at most 64 sources and the last
`TAIL_LINES` lines. Feeding a line costs one trie scan for most lines (`logindex`).
"""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import replace

from autotune.classifier import text as logtext
from autotune.classifier.index import RuleIndex
from autotune.classifier.rules import (
    FRAME_LINE,
    HEADER_MODULE,
    HEADER_PHASES,
    MEMORY_CHECK_FRAME,
    NOT_HELD_BY_OTHERS,
    NOTHING_PRODUCED,
    PROCESS_TOP_FRAME,
    SERVER_STALLED,
    STOP_REQUESTED,
    TIMEOUT_RAISED,
    EngineLog,
    Rule,
    RuleKind,
    Strength,
    named_start_up,
    others_disproved,
    resolve_oom,
)
from autotune.classifier.verdict import Candidate, Evidence, verdict
from autotune.engines.registry import get_log, logs
from autotune.records import Classification, Outcome, Phase

ENGINE_LOGS: dict[str, EngineLog] = logs()  # a view of the registry, by engine name
# each engine's log once, by the name it logs as (an engine's CPU build logs as it does), in the registry's order
_READERS: dict[str, EngineLog] = {log.name: log for log in ENGINE_LOGS.values()}
_INDEXES: dict[tuple[str, frozenset[str]], tuple[EngineLog, RuleIndex]] = {}
_NO_RULES: frozenset[str] = frozenset()

TAIL_LINES = 32
MAX_CANDIDATES = 32
PER_RULE = 2  # candidates kept per rule: TP0 and TP1 say the same thing
HINT_WINDOW = 80  # lines a traceback frame stays relevant to its source
DYING_WINDOW = 200  # lines below an engine's "I died of an exception" marker where that exception's traceback may end
OPEN_WINDOW = 60  # lines below an OOM of unknown phase where a progress line may still place it
MAX_SOURCES = 64
SERVING_SHAPES = 256  # shapes of serving-only lines (numbers aside) skipped once the server is seen at work
BAR_SHAPES = 256  # shapes of progress-bar lines (numbers aside) skipped while the launch stays in their phase
_DIGITS = b"0123456789"


def _shape(line: str) -> bytes:
    """A line with its digits dropped: every line of a flood has the same shape."""
    return line.encode("utf-8", "surrogatepass").translate(None, _DIGITS)

_FRAME_TAIL = re.compile(r'[^\s"]*(?:"(?:, line(?: \d*(?:, in [\w<>]*)?)?)?)?$|\d*,? in [\w<>]+$|n? [\w<>]+$'
                         r'|line \d+, in [\w<>]+$')  # the rest of a frame line cut by a wrap (or broken after its file)
_PREFIXED = re.compile(r"[\[(]|(?:INFO|WARNING|ERROR|DEBUG|CRITICAL)\b|\S+\s+\| ")
_NONE: frozenset[str] = frozenset()
# A line its writer broke mid-sentence, not a terminal: it ends open, on a comma or a trailing space (`ValueError: `,
# `max seq len (40960), `); a colon alone closes a header (`Traceback (most recent call last):`). The next unprefixed
# line is read joined to it as well as alone, like a terminal's row; `_OPEN` stands for the width of such a chain.
_OPEN_END = re.compile(r"\S(?:, ?| )$")
_OPEN = -1
_PREFIX_INITIALS = frozenset("[(")  # the common prefixes, tested inline before the full check
_HINT_ORDER = {Phase.WARMUP: 0, Phase.ARGS: 1, Phase.WEIGHTS: 2, Phase.KV_POOL: 3, Phase.CUDA_GRAPH: 4, Phase.READY: 5}
_FRAME_START = 'File "'
# faulthandler's dump of a stuck thread writes frames as `File "x.py", line 314 in _bootstrap` (no comma) and quotes no
# source line under them: the line after one is a line of its own
_NO_ECHO_FRAME = re.compile(r'File "[^"]*", line \d+ in ')
# An exception line after the quoted `raise` that threw it, their newline lost: `raise ValueError("No available
# memory ...") ValueError: No available memory ...`.
_RAISED_THEN_SHOWN = re.compile(r"(?<=[\s\"')])(?:[A-Za-z_]\w*\.)*[A-Z]\w*(?:Error|Exception): ")
_EXCEPTION_LINE = re.compile(r"(?:[A-Za-z_]\w*\.)*(?:[A-Z]\w*)?(?:Error|Exception|Exit|Interrupt)\b")


def _ends_open(line: str) -> bool:
    """A line its writer went on from below (see `_OPEN_END`)."""
    return line[-1:] in " ," and _OPEN_END.search(line) is not None


def _quotes_source(line: str) -> bool:
    """A traceback frame that Python follows with the source line it quotes (faulthandler's do not)."""
    return line.startswith(_FRAME_START) and _NO_ECHO_FRAME.match(line) is None


def _index(engine: str, without: frozenset[str] = _NO_RULES) -> tuple[EngineLog, RuleIndex]:
    """The engine's rules (less the rules named in `without`) and their index, built once."""
    key = (engine, without)
    if key not in _INDEXES:
        log = get_log(engine)  # SpecError naming the known engines
        if without:
            log = replace(log, rules=tuple(r for r in log.rules if r.name not in without))
        _INDEXES[key] = (log, RuleIndex(log.rules))
    return _INDEXES[key]


class LogClassifier:
    """Incremental classifier of one launch's log; see the module docstring."""

    def __init__(self, engine: str, *, without: frozenset[str] = _NO_RULES) -> None:
        """`without`: names of rules to leave out (corpus scoring only, see `corpus`)."""
        self.engine = engine
        self._rules, self._index = _index(engine, without)
        self._may_match = self._index.may_match
        self._evidence = Evidence()
        self._phase = Phase.SPAWN
        self._seq = 0
        self._ready_seq: int | None = None
        self._serving_seq: int | None = None  # the first serving line since the last start-up line
        self._echo_seq = 0  # the line after a traceback frame: the source line it quotes, not an error
        self._serving_shapes: set[bytes] = set()
        # A progress bar logged line by line (no terminal: every frame a line) says its phase once; its other
        # frames are skipped while the launch stays in that phase. Shape (numbers aside) -> phase.
        self._bar_shapes: dict[bytes, Phase] = {}
        # A terminal's hard wrap cuts anywhere (mid-number, before a capital): the previous line
        # joined with an unprefixed line is read too, as well as each alone; `_wrap` is that joined
        # line (text, source, line number, rules matched) and the width its pieces were cut at.
        self._wrap: tuple[str, str, int, frozenset[str], int] | None = None
        self._source = "main"
        self._prev_raw_chars = 0
        self._prev_open = False  # the previous line ended open (see `_OPEN_END`): its writer went on below
        self._raw_chars = 0  # the length of the line being read, before its transport prefix was taken off
        self._last_progress = ""
        # The previous logical line, which a wrapped tail may still complete: its text (raw when
        # it was skipped: source ""), source, line number and the rules it already matched.
        self._pending: tuple[str, str, int, frozenset[str]] | None = None
        self._maybe_source: str | None = None  # a skipped raw line whose prefix may name the writer
        self._tail: deque[str] = deque(maxlen=TAIL_LINES)
        self._error_last = False  # the last line with text is logged at an error level
        self._prev_line = ""
        self._hints: dict[str, tuple[Phase, int]] = {}
        self._dispatched: set[str] = set()  # writers whose open traceback runs under a dispatcher frame (rules.Rule)
        # The traceback being printed, if no exception line closed it yet: the deepest phase its
        # frames show and how many phase frames it has. A log that ends with one open was cut
        # before its exception line (an excerpt): the phase still says the most likely class.
        self._open_trace: tuple[Phase | None, int, str] | None = None  # (phase, frames, its deepest frame)
        self._trace_seq = 0  # the line the last traceback started on
        # The phase of the last log header that named a one-phase engine module (`[profiling.py:245]`)
        # and its line: read before the header is taken off, it places an OOM no frame places.
        self._header: tuple[Phase, int] | None = None
        # Writers that said, after the server was up, that they died of an exception (vLLM's "EngineCore encountered a
        # fatal error.", SGLang's "Scheduler hit an exception:") and the line they said it on: the exceptions their
        # tracebacks end with are what killed the server, not a request's.
        self._dying: dict[str, int] = {}
        # The traceback that began at a child process's own top frame (PROCESS_TOP_FRAME), by the line it started on,
        # and the exception line that closed it once read: that exception ended the process.
        self._death: tuple[int, int | None] | None = None
        # A wait that went unanswered (a health check, a peer, a queue: `SERVER_STALLED` lines, and a timeout the server
        # reported once it was up) and the line it was said on; and the last line that showed the launch at work (a
        # progress line, the ready line, a served request). A stall with no work after it is where a log that ends
        # there stopped.
        self._stall: tuple[str, int] | None = None
        self._work_seq = 0

    # -- the incremental API -------------------------------------------------------------

    def feed(self, line: str | bytes) -> None:
        """Take one raw line as the server wrote it (damaged text is fine: records run together, padded rows too)."""
        if isinstance(line, bytes):
            line = logtext.decode(line)
        if logtext.PAD_RUN_MARK in line:  # a terminal's padded rows pasted back as one line
            line = logtext.unpad(line)
        if len(line) < logtext.GLUED_MIN_CHARS:
            self._feed(line)
            return
        for record in logtext.records(line):
            self._feed(record)

    def _feed(self, line: str) -> None:
        raw_chars = len(line)  # a terminal wraps the line as printed, prefixes included
        # the level is read before the transport prefix goes; a blank line or a markdown fence is not a line of the log
        # (a last line that is the start of the one before it is that line cut by the paste: it says nothing new)
        if _cut_of(self._prev_line, line):
            pass
        elif "ERROR" in line or "FATAL" in line or "CRITICAL" in line or "[error]" in line or line[:1] == "E":
            self._error_last = _ERROR_LEVEL.search(line) is not None
        elif _has_text(line):
            self._error_last = False
        self._prev_line = line
        line = logtext.strip_transport(line)  # every line normalised before any rule sees it
        self._raw_chars = raw_chars
        self._seq += 1
        if self._open_trace is None and _FRAME_START in line and _quotes_source(logtext.split(line)[0].lstrip()):
            # a traceback frame with no traceback open: the excerpt begins inside one, its header cut off
            self._open_trace, self._trace_seq = (None, 1, ""), self._seq
        if "_bootstrap" in line and self._seq - self._trace_seq <= 2 and PROCESS_TOP_FRAME.search(line):
            self._death = (self._trace_seq, None)  # the traceback just begun is a child process's death
        if ".py:" in line[:160]:
            m = HEADER_MODULE.match(line)
            if m is not None and m["module"] in HEADER_PHASES:
                self._header = (HEADER_PHASES[m["module"]], self._seq)
        if self._stall is not None and " took " in line and _STEP_DONE.search(line):
            self._work_seq = self._seq  # a step reported done after the wait: the process waited on was only slow
        shape = _shape(line) if self._serving_shapes or self._bar_shapes else b""
        if shape and (shape in self._serving_shapes or self._bar_shapes.get(shape) is self._phase):
            if _shows_work(line):
                self._work_seq = self._seq
            self._skip(line)  # a serving flood or a bar's frames: its first line said all it can
        elif self._may_match(line) or self._prev_open or (
                self._prev_raw_chars >= logtext.WRAP_MIN_PREVIOUS_CHARS
                and (logtext.may_be_tail(self._prev_raw_chars, line)
                     or (line[:1] not in _PREFIX_INITIALS and not _PREFIXED.match(line)))):
            self._read(line)
        else:
            self._skip(line)
        self._prev_raw_chars = raw_chars
        self._prev_open = _ends_open(line)

    def _skip(self, line: str) -> None:
        """The fast path: no rule can say more; keep only what a later line may need."""
        self._tail.append(line)
        self._pending = (line, "", self._seq, _NONE)
        self._wrap = None  # a line passed over ends any chain of joined pieces
        if line[:1] in _PREFIX_INITIALS or logtext.may_have_prefix(line):
            self._maybe_source = line

    def _read(self, line: str) -> None:
        text, source = logtext.split(line)
        pending = self._pending
        if pending is not None and source is None and logtext.may_be_tail(self._prev_raw_chars, text):
            head = pending[0] if pending[1] else logtext.split(pending[0])[0]
            if logtext.is_wrapped(head, self._prev_raw_chars, text, source):
                self._seq -= 1  # the same logical line
                chain = self._wrap if self._wrap is not None and self._prev_raw_chars == self._wrap[4] else None
                self._wrap = None
                self._join(pending, text)
                if chain is not None:  # the rows joined so far, cut at one width, go on too
                    self._read_joined(chain, text, self._raw_chars)
                return
        # Under a traceback frame stands the source line it quotes: not a piece of the frame.
        wrap_head = (self._wrap_head(pending) if source is None and text and not text.startswith(_BACKTRACE_HEADER)
                     and (self._seq != self._echo_seq or _FRAME_TAIL.match(text)) else None)
        if source is not None:
            self._source, self._maybe_source = source, None
            if self._echo_seq == self._seq:
                self._echo_seq = 0  # a line with its logger's own header is a record, not a frame's quoted source
        source = self._writer()
        self._tail.append(text)
        self._pending = (text, source, self._seq, self._process(text, source, self._seq, _NONE))
        self._wrap = None
        if wrap_head is not None:
            self._read_joined(wrap_head, text, self._raw_chars)
        rules = self._index.rules_for(text)
        if (self._serving_seq is not None and len(self._serving_shapes) < SERVING_SHAPES
                and all(r.kind is RuleKind.SERVING for r in rules)):
            self._serving_shapes.add(_shape(line))
        elif (rules and len(self._bar_shapes) < BAR_SHAPES and self._last_progress == text
              and all(r.kind is RuleKind.PROGRESS and r.phase is self._phase and r.record is None and not r.flag
                      for r in rules)):
            self._bar_shapes[_shape(line)] = self._phase

    def _wrap_head(self, pending: tuple[str, str, int, frozenset[str]] | None
                   ) -> tuple[str, str, int, frozenset[str], int] | None:
        """The line a hard-wrapped piece would continue: the joined line so far when the previous
        piece was cut at the same width, else the previous line when it was long enough."""
        if self._wrap is not None and (self._prev_raw_chars == self._wrap[4] or (self._wrap[4] == _OPEN
                                                                                 and self._prev_open)):
            return self._wrap
        if pending is None:
            return None
        if self._prev_raw_chars < logtext.WRAP_MIN_PREVIOUS_CHARS:
            return (*pending, _OPEN) if self._prev_open else None
        return (*pending, self._prev_raw_chars)

    def _read_joined(self, head: tuple[str, str, int, frozenset[str], int], tail: str, tail_chars: int) -> None:
        text, source, seq, done, width = head
        if not source:
            text, own = logtext.split(text)
            source = own or self._source
        # (a line broken after its comma by a paste or a renderer, not a terminal's cut, lost the space that stood there:
        # `File ".../memory_pool.py",` over `line 499, in _init_mamba_pool`)
        gap = " " if text.endswith(",") and tail[:1].isalpha() else ""
        joined = (text + gap + tail)[: logtext.MAX_LINE_CHARS]
        if _quotes_source(joined.lstrip()):
            self._echo_seq = self._seq + 1  # the frame ends here: the quoted source line comes next
        matched = done | self._process(joined, source, seq, done | self._pending[3] if self._pending else done)
        more = tail_chars == width or (width == _OPEN and _ends_open(tail))
        self._wrap = (joined, source, seq, matched, width) if more else None

    def _writer(self) -> str:
        """Who wrote an unprefixed line: the last prefixed line's writer."""
        if self._maybe_source is not None:
            found = logtext.split(self._maybe_source)[1]
            self._maybe_source = None
            if found is not None:
                self._source = found
        return self._source

    def _join(self, pending: tuple[str, str, int, frozenset[str]], tail: str) -> None:
        """A terminal wrapped the previous line: re-read it whole."""
        head, source, seq, done = pending
        if not source:
            head, own = logtext.split(head)
            source = own or self._writer()
        joined = (head + tail)[: logtext.MAX_LINE_CHARS]
        if self._tail:
            self._tail[-1] = joined
        self._evidence.rewrite(seq, joined)
        self._pending = (joined, source, seq, done | self._process(joined, source, seq, done))

    @property
    def decisive(self) -> bool:
        """True once the evidence decides a failure: the caller may kill the server now."""
        return self._evidence.decisive()

    @property
    def ready_seen(self) -> bool:
        """True once the engine's own ready line was logged (not uvicorn's, for SGLang)."""
        return self._ready_seq is not None

    @property
    def stop_requested(self) -> bool:
        """True once the server logged that it was asked to stop (its SIGTERM handler's line, vLLM's `[shutdown]`)."""
        return STOP_REQUESTED in self._evidence.book.flags

    @property
    def serving_seen(self) -> bool:
        """True once the log shows a running server (batch lines, metrics, HTTP 2xx), with or
        without the ready line: an excerpt of a server at work."""
        return self._serving_seq is not None

    @property
    def _up(self) -> bool:
        return self._ready_seq is not None or self._serving_seq is not None

    @property
    def phase(self) -> Phase:
        """The phase of the last progress line seen."""
        return self._phase

    def classification(self, exit_code: int | None = None, *, log_complete: bool = False) -> Classification:
        """The verdict so far.

        `exit_code` is the server's `Popen.returncode` once it ended (-9: SIGKILL, 2: argparse),
        None while it runs: then the outcome is None unless the evidence is decisive or the
        ready line was seen. `log_complete=True` says no more lines will come (a finished or
        excerpted log): a best guess is then given for what a live log would leave open,
        with confidence "low".
        """
        tail = tuple(logtext.split(raw)[0] for raw in _uncut(self._last_lines(4))[-3:])
        # (a stall line read joined to the line above it, a wrap, holds that line's number: it still came after it)
        stall = self._stall if self._stall is not None and self._stall[1] >= self._work_seq else None
        waited = self._cut_by_wait(tail)
        if waited is not None and self._up:
            stall = (waited, self._seq)  # the server was up; what it died or stalled in was a wait that ran out
        return verdict(self._rules, self._evidence, phase=self._phase,
                       ready=self.ready_seen, exit_code=exit_code, log_complete=log_complete,
                       serving=self.serving_seen,
                       last_progress=self._last_progress, open_trace=self._cut_trace(waited),
                       tail=tail, ends_in_error=self._error_last, stalled=stall[0] if stall else None)

    def _last_lines(self, n: int) -> list[str]:
        """The last `n` lines of the log that have text: a blank line or a markdown fence a poster put around the log
        is not a line of it."""
        return [raw for raw in self._tail if _has_text(raw)][-n:]

    def _cut_by_wait(self, tail: tuple[str, ...]) -> str | None:
        """The source line the log ends on, when a traceback is open and that line, quoted under its innermost frame,
        raises a timeout (`raise TimeoutError(...)`, `raise RuntimeError("Barrier timed out ...")`): the exception
        cut off was a wait that ran out."""
        if self._open_trace is None or not tail:
            return None
        last = next((line.strip() for line in reversed(tail) if not _CARETS.match(line)), "")
        return last if TIMEOUT_RAISED.match(last) else None

    def _cut_trace(self, waited: str | None = None) -> tuple[Phase | None, str, str | None] | None:
        """The phase (and its deepest frame) of a traceback the log ends inside, with no exception
        line after its frames: a traceback start or a frame (an excerpt may begin below the start). A traceback
        with no phase frame is the phase the log had reached: serving, when it began while the server
        was at work (no ready line in view: requests were what ran), else the last start-up phase from
        weights loading on; before it, nothing in view says what ran (None: an exception, unplaced)."""
        if self._open_trace is None or self._ready_seq is not None:
            return None
        phase, frames, line = self._open_trace
        if phase is None and self._serving_seq is not None:
            phase = Phase.READY
        elif phase is None and self._phase.rank >= Phase.WEIGHTS.rank:
            phase = self._phase  # no frame places it: the phase the start-up had reached does
        return (phase, line, waited) if frames >= 1 else None

    # -- one logical line ----------------------------------------------------------------

    def _process(self, text: str, source: str, seq: int, done: frozenset[str]) -> frozenset[str]:
        """Apply the rules to one (possibly re-joined) line; returns the rules that matched.

        `done` are rules that already matched this line before a wrapped tail was joined to
        it: they are not applied twice (sums would double), except failure rules, which may
        now capture more of the message and replace their candidate.
        """
        stripped = text.lstrip()
        if _quotes_source(stripped):
            self._echo_seq = seq + 1
        if stripped.startswith("raise ") and (shown := _RAISED_THEN_SHOWN.search(stripped)) is not None:
            text = stripped = stripped[shown.start():]  # the quoted raise and its exception line, run together
        rules = self._index.rules_for(text)
        if not rules:
            return frozenset()
        matched: set[str] = set()
        # After a join, a more specific failure rule may now match the whole line. A source line
        # quoted in a traceback (the line under a frame, or `raise ValueError("No available
        # memory ...")`) is not the error.
        failed = (seq == self._echo_seq and _EXCEPTION_LINE.match(stripped) is None) or stripped.startswith("raise ")
        for rule in rules:
            if (rule.name in done and rule.kind is not RuleKind.FAILURE) or (failed and rule.kind is RuleKind.FAILURE):
                continue
            m = rule.pattern.search(text)
            if m is None:
                continue
            matched.add(rule.name)
            if rule.kind is RuleKind.FAILURE:
                failed = True
            if rule.record is not None:
                rule.record(m, self._evidence.book, source)
            if rule.flag:
                self._evidence.flag(rule.flag, text, self._phase)
                if rule.flag == SERVER_STALLED:
                    self._stalled(text, seq)
            self._apply(rule, m.groupdict(), text, source, seq)
        if done and failed:
            # The line read whole is a failure line: what its pieces read as (a cut message matching a vaguer
            # rule, or a rule the whole line gives to another) yields to the whole line's own reading, when that
            # is as strong (a false join, two lines run together, reads weaker: a generic exception).
            whole = max((r.strength for r in rules if r.name in matched and r.kind is RuleKind.FAILURE), default=None)
            stale = [r for r in self._rules.rules if r.name in done - matched and r.kind is RuleKind.FAILURE]
            if whole is not None and stale and whole >= max(r.strength for r in stale):
                self._evidence.drop(seq, {r.name for r in stale})
        return frozenset(matched)

    def _apply(self, rule: Rule, groups: dict[str, str | None], text: str, source: str, seq: int) -> None:
        if rule.kind is RuleKind.PROGRESS:
            self._progress(rule, text, source, seq)
        elif rule.kind is RuleKind.READY:
            self._ready(text, seq)
        elif rule.kind is RuleKind.HINT:
            self._hint(rule.phase, source, seq, rule.every_writer, dispatcher=rule.dispatcher, text=text)
        elif rule.kind is RuleKind.FAILURE:
            if seq >= self._trace_seq:  # (a line above it, re-read joined to the next, does not)
                self._open_trace = None  # the exception line closes the traceback
                if self._death is not None and self._death[0] == self._trace_seq and self._death[1] is None:
                    self._death = (self._death[0], seq)  # ... and ends the child process it began in
            self._failure(rule, groups, text, source, seq)
        elif rule.kind is RuleKind.SERVING:
            self._serving(text, seq)
        if rule.note:
            self._evidence.note(text)

    def _progress(self, rule: Rule, text: str, source: str, seq: int) -> None:
        if rule.phase is None or self._ready_seq is not None:
            return  # after ready the launch stays ready, whatever the log says
        if rule.anyones and self._phase.rank >= Phase.HTTP.rank > rule.phase.rank:
            return  # the engine's start-up is done: another program's bar, not the launch starting over
        if self._serving_seq is not None:
            if rule.phase.rank >= Phase.HTTP.rank:
                return
            self._serving_seq = None  # a start-up line after serving: the excerpt holds a new launch
        self._evidence.advance(rule.phase, source)  # (its own progress, though another writer's was further already)
        self._work_seq = seq
        self._phase = rule.phase
        self._last_progress = text
        self._evidence.place_open(rule.phase, seq - OPEN_WINDOW)

    def _ready(self, text: str, seq: int) -> None:
        self._ready_seq = self._work_seq = seq
        self._phase = Phase.READY
        self._last_progress = text
        self._evidence.ready(text)

    def _serving(self, text: str, seq: int) -> None:
        if self._ready_seq is None and self._phase is Phase.WARMUP and _QUERIED in text:
            return  # a front end up before its warm-up (SGLang's) answering the warm-up's own query: still starting
        self._open_trace = None  # a server at work: a traceback above it did not end the log
        if _shows_work(text):
            self._work_seq = seq
        if self._serving_seq is None:
            self._serving_seq = seq
            self._evidence.serving(text)

    def _hint(self, phase: Phase | None, source: str, seq: int, every_writer: bool = False, *,
              dispatcher: bool = False, text: str = "") -> None:
        if phase is None:  # a new traceback starts: frames of an older one no longer apply
            self._hints.pop(source, None)
            self._dispatched.discard(source)
            self._open_trace, self._trace_seq = (None, 1, ""), seq
            return
        # Frames that place a failure below whatever phase holds the traceback, whatever the phases' order: a start-up
        # step named by its function under a loop that runs whatever it is sent (that step failed), and a check of the
        # arguments or the config (`ensure_divisibility` under a layer's constructor under `load_model`), the innermost
        # frame of its traceback when it fails.
        named = named_start_up(text) if source in self._dispatched and not dispatcher else None
        if dispatcher:
            self._dispatched.add(source)
        elif named is not None:
            self._dispatched.discard(source)
            phase = named
        force = named is not None or phase is Phase.ARGS
        deepest, frames, line = self._open_trace or (None, 0, "")
        if deepest is None or force or _HINT_ORDER.get(phase, 0) >= _HINT_ORDER.get(deepest, 0):
            deepest, line = phase, (self._tail[-1] if self._tail else "")
        self._open_trace = (deepest, frames + 1, line)
        old = self._hints.get(source)
        if old is None or force or seq - old[1] > HINT_WINDOW or _HINT_ORDER.get(phase, 0) >= _HINT_ORDER.get(old[0], 0):
            if old is None and len(self._hints) >= MAX_SOURCES:
                self._hints.pop(next(iter(self._hints)))
            self._hints[source] = (phase, seq)
            # (the named step takes over the hint of an exception line printed above the frames too)
            order = {**_HINT_ORDER, phase: len(_HINT_ORDER)} if named is not None else _HINT_ORDER
            self._evidence.hint_open(None if every_writer else source, phase, seq - OPEN_WINDOW, order)

    def _failure(self, rule: Rule, groups: dict[str, str | None], text: str, source: str, seq: int) -> None:
        after_ready = self._up
        ended = self._ended_process(seq)
        if self._ready_seq is not None and rule.strength is Strength.TENTATIVE and not ended \
                and not self._killed_by(source, seq):
            if rule.outcome is Outcome.TIMEOUT and not _A_REQUESTS.search(text):
                self._stalled(text, seq)  # a wait that ran out while serving: a hang if nothing worked after it
            return  # an exception while serving a request is not a crash of the server
        if rule.strength <= Strength.GENERIC and STOP_REQUESTED in self._evidence.book.flags:
            return  # the server was asked to stop: children killed by that signal, SIGQUIT, exceptions on the way out
        if rule.before_ready and self._ready_seq is not None:
            return  # the batch system's clock stopped a server that had come up
        hint = self._hints.get(source)
        fresh_hint = hint[0] if hint is not None and seq - hint[1] <= HINT_WINDOW else None
        if fresh_hint is None and self._header is not None and seq - self._header[1] <= HINT_WINDOW:
            fresh_hint = self._header[0]  # no frame places it; the module that was logging does
        outcome, remedy, direction = rule.outcome, rule.remedy, rule.mfs_direction
        instead = next((u for u in rule.unless if u[0] in self._evidence.book.flags), None)
        if instead is not None:  # the line means another outcome here: the rule's memory direction is not its
            outcome, remedy, direction = instead[1], (instead[2],), 0
        values = {k: v for k, v in groups.items() if v is not None}
        if outcome is Outcome.CONFIG_ERROR and self._up:
            return  # a server at work accepted its arguments: a validation error now is a request's
        if outcome is Outcome.CRASH and rule.strength is Strength.TENTATIVE and fresh_hint is not None \
                and self._raised_by_memory_check() \
                and (placed := resolve_oom(fresh_hint, frozenset(self._evidence.book.flags))) is not None:
            outcome, remedy = placed[0], ()  # the frame's function checks for memory: this is its shortage
        if outcome is Outcome.GPU_BUSY and (disproved := others_disproved(text)):
            outcome, remedy, values["figures_say"] = Outcome.CRASH, (NOT_HELD_BY_OTHERS,), disproved
        if after_ready and rule.strength is Strength.GENERIC:
            self._dying[source] = seq
        candidate = Candidate(rule=rule.name, outcome=outcome, strength=rule.strength,
                              mfs_direction=direction, remedy=remedy, seq=seq, source=source,
                              phase=self._phase, hint=fresh_hint, line=text, context=self._last_progress,
                              values=values, after_ready=after_ready, shorter_context=rule.shorter_context,
                              ended_process=ended)
        self._evidence.add(candidate, MAX_CANDIDATES, PER_RULE)

    def _stalled(self, text: str, seq: int) -> None:
        """A wait went unanswered on line `seq` (the latest such line is kept: a line read again joined to the one
        above it, in case a terminal wrapped it, does not move it back)."""
        if self._stall is None or seq >= self._stall[1]:
            self._stall = (text, seq)

    def _ended_process(self, seq: int) -> bool:
        """Whether the failure line `seq` is the exception that closed a child process's death traceback."""
        return self._death is not None and self._death[0] == self._trace_seq and self._death[1] == seq

    def _killed_by(self, source: str, seq: int) -> bool:
        """Whether an exception read while the server was up ends the traceback of a writer that just said it died of
        one (the marker comes first: both engines log the traceback under it): the server's death, not a request's."""
        marked = self._dying.get(source)
        return marked is not None and seq - marked <= DYING_WINDOW

    def _raised_by_memory_check(self) -> bool:
        """Whether the innermost frame above the exception line just read (within the few lines a `raise` statement
        and its carets take) is a function named for checking there is enough memory."""
        for raw in list(self._tail)[-6:-1][::-1]:
            line = logtext.split(raw)[0]
            if FRAME_LINE.match(line):
                return MEMORY_CHECK_FRAME.match(line) is not None
        return False


# A line's error level, as the loggers write it: "ERROR 03-05 12:36:31 [core.py:1006]", "[ERROR] GE(...)", "- root -
# ERROR -", glog's "E1226 15:44:09.437 socket.cpp:1011]" (not CUDA_ERROR_X, not a word inside a message).
_BLANK_INITIALS = " \t`~"
_ERROR_LEVEL = re.compile(r"(?:^|[\s\[(|:])(?:ERROR|CRITICAL|FATAL)(?=[\s\]:|)]|$)|^\W{0,3}E\d{4} \d\d:\d\d"
                          r"|\[(?:error|critical|fatal)\]")  # (spdlog's bracketed level: Habana's "[PT_BRIDGE ][error]")


def _has_text(line: str) -> bool:
    """Whether a line is a line of the log: not blank, not a markdown fence (tested on its first character first)."""
    return line[:1] not in _BLANK_INITIALS or bool(line.strip(_BLANK_INITIALS))


def _uncut(raws: list[str]) -> list[str]:
    """The last lines without a last one a paste cut off mid-line in a flood of one line: it is the start of the line
    before it ("(APIServer pid=1) DEBUG 07-" after "(APIServer pid=1) DEBUG 07-15 07:11:54 [...] Waiting for ..."),
    so it says only that the flood went on."""
    if len(raws) >= 2 and (_cut_of(raws[-2], raws[-1], figures_may_differ=True)
                           or _HEADER_ONLY.match(logtext.split(raws[-1])[0])):
        return raws[:-1]
    return raws


_CARETS = re.compile(r"\s*[\^~]+\s*$")
# An HTTP GET answered (`"GET /v1/models HTTP/1.1" 200 OK`, /metrics, /health): the server's front end answers it
# while its scheduler or workers are stuck, so it shows the server up, not at work (a request served, a batch, a
# step's figures).
_QUERIED = '"GET /'
# A serving line that shows no work done: a request that arrived ("Received request", "Added request"), or the engine's
# own figures of requests running while nothing was produced ("Avg prompt throughput: 0.0 tokens/s, Avg generation
# throughput: 0.0 tokens/s, Running: 1 reqs", which `rules.wait_unanswered` reads as a stall).
_NOT_WORK = re.compile(r"\b(?:Received|Added) request\b|" + NOTHING_PRODUCED)


def _shows_work(serving: str) -> bool:
    """Whether a line of a server at work shows work done (not a query answered, a request arrived, nothing produced)."""
    return _QUERIED not in serving and not _NOT_WORK.search(serving)


# torch's C++ backtrace begins on a line of its own under the exception's message ("Exception raised from doWait at
# ../torch/csrc/distributed/c10d/TCPStore.cpp:550 (most recent call first):"): never the tail of the line above.
_BACKTRACE_HEADER = "Exception raised from "
# A time-out whose subject is one request ("TimeoutError: request 7 timed out", "Queue: request timed out waiting for
# token"): after the ready line, the client's, not the server's stall.
_A_REQUESTS = re.compile(r"(?i:\brequests?\b)[^\n]{0,40}?\btimed out\b")
# A step reported done, with its time ("Initial profiling/warmup run took 76.71 s", "torch.compile took 82.29 s in
# total", "Loading weights took 11.18 seconds"): the process that logged it was at work.
_STEP_DONE = re.compile(r"\btook \d+(?:\.\d+)? ?(?:s|secs?|seconds)\b")


# A line cut by a paste inside its logger's header, before any message ("INFO 07-15 15:34:47 [shm_broa", "DEBUG 07-"):
# whatever it was, it says nothing.
_HEADER_ONLY = re.compile(r"^(?:DEBUG|INFO|WARN(?:ING)?|ERROR|CRITICAL)(?: [\d/-]*(?: [\d:.]*(?: \[[\w.]*(?::\d*)?)?)?)?$")


def _cut_of(previous: str, line: str, *, figures_may_differ: bool = False) -> bool:
    """Whether `line` is the start of `previous` and no line of its own: a paste cut off in a flood of that line. With
    `figures_may_differ` its figures may differ from the line before (a later timestamp, another pid): digits are
    compared as digits (once, for the log's last line: not for every line fed)."""
    if line == previous or len(line) > len(previous) or not line.strip():
        return False
    return previous.startswith(line) or (figures_may_differ and previous[: len(line)].translate(_DIGITS_AS_0)
                                         == line.translate(_DIGITS_AS_0))


_DIGITS_AS_0 = str.maketrans("123456789", "000000000")


def which_engine(lines: Iterable[str]) -> str | None:
    """The engine whose signature (`EngineLog.signature`: its log header, process tags, package in a frame) most lines
    of the log carry, less the engines another one present runs inside its own processes (`EngineLog.imports`: their
    lines are its library's); None when no line carries one, or two engines as many (a log that does not say)."""
    counts = dict.fromkeys(_READERS, 0)
    for line in lines:
        for name, log in _READERS.items():
            if log.signature.search(line):
                counts[name] += 1
    inside = {imported for name, log in _READERS.items() if counts[name] for imported in log.imports}
    ranked = sorted(((name, n) for name, n in counts.items() if name not in inside), key=lambda item: -item[1])
    if not ranked or ranked[0][1] == 0 or (len(ranked) > 1 and ranked[1][1] == ranked[0][1]):
        return None
    return ranked[0][0]


_SURER = {"low": 0, "medium": 1, "high": 2}


def classify_lines(lines: Iterable[str | bytes], engine: str, exit_code: int | None = None, *,
                   without: frozenset[str] = _NO_RULES) -> Classification:
    """Classify a whole log, given line by line (a huge file never sits in memory)."""
    classifier = LogClassifier(engine, without=without)
    for line in lines:
        classifier.feed(line)
    return classifier.classification(exit_code, log_complete=True)


def classify_unnamed(lines: Callable[[], Iterable[str | bytes]], exit_code: int | None = None
                     ) -> tuple[str, bool, Classification]:
    """Classify a log whose engine nobody named: (the engine read with, whether the log's own lines said it, the
    classification). `lines` gives the log afresh on each call. The engine is the one its lines say wrote it
    (`which_engine`); where they do not say (an error message alone, a wrapper's lines), the log is read with each
    engine's rules and the reading that decides, then the surer, is kept (the first engine registered on a tie): an
    engine's own failure text is what its rules know."""
    named = which_engine(line.decode("utf-8", "replace") if isinstance(line, bytes) else line for line in lines())
    if named is not None:
        return named, True, classify_lines(lines(), named, exit_code)
    readings = [(name, classify_lines(lines(), name, exit_code)) for name in _READERS]
    name, best = max(readings, key=lambda r: (r[1].outcome is not None, _SURER.get(r[1].confidence, 0)))
    return name, False, best


def classify_text(text: str, engine: str, exit_code: int | None = None, *,
                  without: frozenset[str] = _NO_RULES) -> Classification:
    """Classify a whole log (a finished launch's file, or an excerpt) in one call."""
    return classify_lines(text.splitlines(), engine, exit_code, without=without)


__all__ = ["ENGINE_LOGS", "LogClassifier", "classify_lines", "classify_text", "classify_unnamed", "which_engine"]
