"""Failure candidates, their bounded store, and how a verdict is read from them.

`LogClassifier` (classify.py) turns lines into `Candidate`s and figures; this module keeps
them (`Evidence`) and turns them into a `records.Classification` (`verdict`). It is
engine-agnostic: the engine contributes its remedy wording through `EngineLog`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from autotune.classifier.rules import (
    ENVIRONMENT_BROKEN,
    NON_MEMORY_FAULT,
    OOM_TEXT,
    PARALLEL_DIVIDES,
    POSTER_SAYS_HANG,
    STILL_WAITING,
    EngineLog,
    FigureBook,
    Strength,
    config_exception,
    fill,
    memory_outside_gib,
    resolve_oom,
)
from autotune.records import Classification, Need, Outcome, Phase

_GRAPHS_EXIST = "graphs exist"  # confidence of an OOM placed after capture by torch's private-pool figure
_GRAPHS_NOTE = (" (a guess: no start-up line or frame places the OOM, but torch counts memory in CUDA-graph "
                "private pools, so graphs were already captured and the server was most likely serving)")
_CUT_TRACE = ("the exception line: the log ends inside a traceback through {phase} frames, and {outcome} is the "
              "usual failure there (read from the phase, not from an error message)")
_UNPLACED = ("the phase: no progress line, engine frame or log header around the OOM says where it happened (look for the"
             " last start-up line before it: weights loading, the KV pool or profile run, graph capture, or requests"
             " being served)")
_UNPLACED_NOTE = ("out of memory, but nothing in view places it (no start-up line, engine frame or log header): it may"
                  " be the weights, the KV pool, graph capture or a request. Read the full log upwards from the error"
                  " to the last start-up line before choosing a remedy")
_UNPLACED_WHY = "nothing places the OOM: no start-up line, engine frame or log header says which phase ran out"
# The OOM classes an unplaced OOM may be, in phase order.
_OOM_CLASSES = tuple(o for o in Outcome if o.is_oom)
_UNPLACED_CONF = "unplaced"  # confidence of an OOM nothing places (reported as "low")
# torch's OOM message lists the processes on the device: "this process has X" for its own (when it can
# see it), "Process N has X memory in use" for each other one it can see.
_OTHER_PROCESS = re.compile(r"\bProcess (?P<pid>\d+) has (?P<held>[\d.]+ ?[KMGT]i?B) memory in use")
_OWN_PROCESS = re.compile(r"\bthis process has [\d.]+ ?[KMGT]i?B memory in use")
# Memory held outside the failing process, by its OOM message's own figures (rules.memory_outside_gib): when it
# is more than the process held and a quarter of the device, the device was taken by others before this process
# could fill it. Nothing else placing the OOM, that is the likeliest reading; an OOM of its own the alternative.
_OUTSIDE_SHARE = 0.25
_OUTSIDE_WHY = ("an OOM of the engine's own in that phase, if the memory held outside it was its own (workers "
                "sharing the device) or freed before the message was written")
_OUTSIDE_BUSY_WHY = ("memory held outside the failing process by its OOM message's own figures: the GPU may have been "
                     "busy with another tenant (or it was the server's own other processes)")
_CUT_ASSERT = ("the exception line: the log ends inside a traceback through {phase} frames on a quoted `assert` "
               "statement (an AssertionError, read from the statement, not from an error message)")
_ASSERT_MEMORY_WHY = ("the log ends inside a traceback through {phase} frames, where {outcome} is the usual failure, "
                      "if what raised was below the `assert` statement quoted last")
_ASSERT_STATEMENT = re.compile(r"\s+assert\b")
_FRAME_OR_CARETS = re.compile(r'\s*(?:File "|[\^~]+\s*$)')
_CUT_FAULT = ("the exception line: the log ends inside a traceback through {phase} frames, after CUDA stated a fault "
              "that is not memory (read from that fault, not from an error message)")
_CUT_MEMORY_WHY = ("the log ends inside a traceback through {phase} frames, where {outcome} is the usual failure, "
                   "if the CUDA fault stated above it did not stop the launch")
_NOTHING_YET_SHARE = 0.01  # PyTorch's own allocation at or below this share of the device: nothing loaded yet
_FAULT_LAST_MISSING = "the exception line: the log ends after CUDA stated a fault, with no error of the engine's own"
_STILL_WAITING_MISSING = "whether the processes ever started: the log ends while the engine waits for them"
_POSTER_HANG_MISSING = "any line of the log that says it hangs: only the poster's words do"
_HUNG_SERVING_MISSING = "whether the processes ever answered again: the log ends while the engine waits for them"
_ERROR_LAST_MISSING = ("the failure's own line: the log ends on error-level lines that name nothing the rules know (see the "
                       "evidence)")
# A graph-capture progress bar at its total ("Capturing batches (bs=1 ...): 100%|...| 4/4"): the last GPU phase done.
_CAPTURE_DONE = re.compile(r"\bCapturing\b.*\b100%.*?\b(\d+)/\1\b")
_CUT_UNPLACED = ("the exception line: the log ends inside a traceback that no frame places, before the weights were "
                 "loaded (an exception killed the launch; which one is not in view)")
_UNPLACED_REFUSAL_WHY = "a setting the engine refused at start-up, if the exception cut off was its refusal"
_BARE_VALUE_WHY = "a value the engine computed itself (a bug, a broken checkpoint) rather than one it was given"
_PARALLEL_DIVIDES_REMEDY = ("a parallel size (tensor, pipeline, data or expert) does not divide a model dimension (attention "
                            "heads, experts): the check quoted above the AssertionError failed; choose a size that divides it")
# Where a traceback cut before its exception line runs through these frames, the exception was more often not memory
# than memory: among the fresh corpus's cut tracebacks of batches F1-F40, serving 26 crashes to 17 runtime OOMs, capture
# 13 to 4 graph OOMs, distributed init 4 to 2 busy GPUs (load_weights 19 OOMs to 12, kv_pool 24 to 3, warm-up 4 to 3
# stayed memory). So there the guess is a crash, the phase's memory failure the alternative. Warm-up joined after F56:
# the batches read since F40 held 6 cut warm-up tracebacks and none was memory (5 crashes, 1 refused setting); over
# every batch, 5 memory to 10 not.
_CUT_MOSTLY_NOT_MEMORY = frozenset({(Phase.READY, Outcome.OOM_RUNTIME), (Phase.CUDA_GRAPH, Outcome.OOM_CUDA_GRAPH),
                                    (Phase.INIT, Outcome.GPU_BUSY), (Phase.WARMUP, Outcome.OOM_RUNTIME)})
# Where the memory failure stays the guess but a crash is about as likely, the crash is its alternative: loading
# weights, over every corpus after F58, 25 weights OOMs to 23 crashes, 12 refused settings and 3 hangs; the batches
# read since F40 alone held 1 weights OOM to 8 crashes and 9 refused settings.
_CUT_OFTEN_A_CRASH = frozenset({(Phase.WEIGHTS, Outcome.OOM_WEIGHTS)})
_CUT_OFTEN_A_CRASH_WHY = ("the log ends inside a traceback through {phase} frames, where crashes are about as common as "
                          "{outcome} (read from the phase, not from an error message)")
_CUT_NOT_MEMORY = ("the exception line: the log ends inside a traceback through {phase} frames, where most exceptions "
                   "are not memory (read from the phase, not from an error message)")
_CUT_PHASE_MEMORY_WHY = "the log ends inside a traceback through {phase} frames, where {outcome} is the memory failure"
_STALL_MAY_PASS_WHY = ("a server that answers again after one long step (a kernel compiled just in time, a very long "
                      "prefill, a slow peer) was only slow: it stays up if requests are served after the wait")
_STALLED_REMEDY = ("the server was up, then a wait went unanswered (its own health check, a peer, a queue, a transfer) "
                   "and nothing after shows it at work: its scheduler, a worker or a collective stalled; not memory")
_STALLED_MISSING = "whether the server ever answered again: no line after the unanswered wait says it did"
_UNANSWERED_MISSING = "whether the wait ever ended: no line after it shows the launch at work"
_WAIT_RAISED_REMEDY = ("the log ends inside a traceback whose innermost frame raises a timeout (quoted above): a wait "
                       "ran out, a peer or a process that never answered; not memory")
_WAIT_RAISED_MISSING = "the exception line: the log ends at the frame that raised it, which raises a timeout"
_WAIT_RAISED_WHY = ("the frame's timeout may itself be the echo of a process that died first (its error above the "
                    "excerpt)")
_CAUSE_NOT_SHOWN = ("the server died but the cause is not in the log at hand (a cut traceback?): read the full "
                    "log before concluding anything")
EVIDENCE_LINES = 6
EVIDENCE_CHARS = 400
MAX_NOTES = 3
_KNOWN = Phase.INIT.rank  # a progress phase at or after this says where the launch was
_START_UP_FRAMES = (Phase.WEIGHTS, Phase.KV_POOL, Phase.CUDA_GRAPH)  # phases a traceback's frames name for sure
# The fraction's direction each class implies as an alternative reading of a raw CUDA OOM (knowledge.side_of): an
# allocation that failed inside the pool, capture or a request needs less fraction; weights, none.
_DIRECTION = {Outcome.OOM_KV_POOL: -1, Outcome.OOM_CUDA_GRAPH: -1, Outcome.OOM_RUNTIME: -1}


@dataclass(frozen=True)
class Candidate:
    """One failure line. `outcome` None: a raw CUDA OOM whose class comes from its phase.

    `phase` is the progress phase when it was seen, `hint` the phase its traceback frames
    show, `below` a phase a progress line just below showed (interleaved ranks).
    """

    rule: str
    outcome: Outcome | None
    strength: Strength
    mfs_direction: int
    remedy: tuple[str, ...]
    seq: int
    source: str
    phase: Phase
    hint: Phase | None
    line: str
    context: str
    values: Mapping[str, str] = field(default_factory=dict)
    after_ready: bool = False
    shorter_context: bool = False
    below: Phase | None = None
    ended_process: bool = False  # the exception that ended a child process (its traceback began at the process's top)

    @property
    def unplaced(self) -> bool:
        return self.outcome is None and self.phase.rank < _KNOWN and self.hint is None


class Evidence:
    """Candidates (bounded), notes, the ready line and the figure book of one log."""

    def __init__(self) -> None:
        self.book = FigureBook()
        self.candidates: list[Candidate] = []
        self.notes: list[str] = []
        self.ready_line = ""
        self.serving_line = ""
        self.flagged: dict[str, tuple[str, Phase]] = {}  # the first line that set each flag, and its phase

    def flag(self, name: str, line: str, phase: Phase) -> None:
        self.book.flags.add(name)
        self.flagged.setdefault(name, (line, phase))

    def add(self, candidate: Candidate, limit: int, per_rule: int) -> None:
        """Keep `candidate` unless `per_rule` of its rule are kept; when `limit` is reached it
        replaces the latest of the weakest candidates, if weaker than itself. A candidate of
        the same rule and line (re-read after a wrapped tail was joined) is replaced."""
        for i, c in enumerate(self.candidates):
            if (c.rule, c.seq) == (candidate.rule, candidate.seq):  # the same line, read again whole:
                self.candidates[i] = replace(candidate, hint=candidate.hint or c.hint, below=candidate.below or c.below)
                return  # what placed it still does (a traceback it ran into may have reset the frames since)
        if sum(1 for c in self.candidates if c.rule == candidate.rule) >= per_rule:
            return
        if len(self.candidates) >= limit:
            weakest = min(self.candidates, key=lambda c: (c.strength, -c.seq))
            if weakest.strength >= candidate.strength:
                return
            self.candidates.remove(weakest)
        self.candidates.append(candidate)

    def advance(self, phase: Phase, source: str) -> None:
        """`source` moved on to `phase`: unknown exceptions it raised before did not stop it."""
        self.candidates = [c for c in self.candidates if c.strength is not Strength.TENTATIVE
                           or c.source != source or c.phase.rank >= phase.rank]

    def drop(self, seq: int, rules: set[str]) -> None:
        """Line `seq`, read again whole, no longer reads as `rules`: their candidates from it go."""
        if rules:
            self.candidates = [c for c in self.candidates if c.seq != seq or c.rule not in rules]

    def rewrite(self, seq: int, text: str) -> None:
        """A wrapped tail was joined to line `seq`: show the whole line as evidence."""
        self.candidates = [replace(c, line=text) if c.seq == seq else c for c in self.candidates]

    def note(self, text: str) -> None:
        if len(self.notes) < MAX_NOTES and text not in self.notes:
            self.notes.append(text)

    def ready(self, text: str) -> None:
        """The ready line: what came before did not stop the launch."""
        self.ready_line = text
        self.candidates = []

    def serving(self, text: str) -> None:
        """The first line of a server at work: what came before did not stop it, but for an exception that ended a
        process (a front end may answer on after its engine died)."""
        self.serving_line = text
        self.candidates = [c for c in self.candidates if c.ended_process]

    def decisive(self) -> bool:
        return any(c.strength >= Strength.GENERIC for c in self.candidates)

    def place_open(self, phase: Phase, since_seq: int) -> None:
        """A progress line just below an OOM of unknown phase places it (ranks interleave)."""
        self.candidates = [replace(c, below=phase) if c.unplaced and c.below is None and c.seq >= since_seq
                           else c for c in self.candidates]

    def hint_open(self, source: str | None, phase: Phase, since_seq: int, order: dict[Phase, int]) -> None:
        """Traceback frames printed below an OOM line (vLLM V0 prints the message first); `source` None: a
        line that speaks for every writer (the driver naming the method its workers ran)."""
        def better(c: Candidate) -> bool:
            return (c.outcome is None and source in (None, c.source) and c.seq >= since_seq
                    and (c.hint is None or order.get(phase, 0) > order.get(c.hint, 0)))
        self.candidates = [replace(c, hint=phase) if better(c) else c for c in self.candidates]

    def best(self) -> Candidate | None:
        if not self.candidates:
            return None
        return max(self.candidates, key=lambda c: (c.strength, -c.seq))

    def first(self, strength: Strength) -> Candidate | None:
        return next((c for c in self.candidates if c.strength is strength), None)


Alternatives = tuple[tuple[Outcome, str], ...]
Resolved = tuple[Outcome, int, str, Phase, Alternatives]


def _place_oom(c: Candidate, flags: frozenset[str], figures: Mapping[str, float]) -> Resolved:
    """Class, mfs direction, confidence, phase and the other classes it may be of a raw CUDA OOM."""
    outcome, direction, confidence, phase, alternatives = _place_oom_phase(c, flags, figures)
    busy = _held_by_others(c.line)
    if busy and outcome is not Outcome.GPU_BUSY:  # the processes it names say it better than the figures alone
        alternatives = (*(a for a in alternatives if a[0] is not Outcome.GPU_BUSY), (Outcome.GPU_BUSY, busy))
    return outcome, direction, confidence, phase, alternatives


def _held_by_others(line: str) -> str:
    """Why an OOM message says another process holds memory on the device ("" when it does not):
    it names a process besides its own ("this process has ..."), or more than one. One process named
    alone is most often the engine itself seen from a container (its pid is not the one torch knows)."""
    others = list(_OTHER_PROCESS.finditer(line))
    if not others or (len(others) == 1 and _OWN_PROCESS.search(line) is None):
        return ""
    named = ", ".join(f"process {m['pid']} holds {m['held']}" for m in others[:3])
    return f"the OOM message counts memory held by other processes on the device ({named}): the GPU may have been busy"


def _place_oom_phase(c: Candidate, flags: frozenset[str], figures: Mapping[str, float]) -> Resolved:
    if c.after_ready:  # the server was up (warm-up requests included)
        return Outcome.OOM_RUNTIME, -1, "high", c.phase if c.phase.rank >= Phase.HTTP.rank else Phase.READY, ()
    phase, confidence = c.phase, "high"
    if phase.rank < _KNOWN and c.hint in (None, Phase.ARGS) and "died_serving" in flags:
        # no start-up line or frame places it, but the engine was reported dead to its clients
        return Outcome.OOM_RUNTIME, -1, "high", Phase.READY, ()
    if phase.rank < _KNOWN:
        hint = c.hint if c.hint is not Phase.ARGS else None
        phase, confidence = (hint, "high") if hint else (c.below or phase, "low")
        if phase.rank < _KNOWN and (named := _oom_object(c.line)) is not None:
            phase = named  # nothing else places it: what the message says it allocated for does (still a guess)
        if hint is Phase.WARMUP:
            confidence = "low"  # only a forward pass in view: a request, most likely
    elif c.hint is Phase.READY and phase is Phase.KV_POOL:
        phase = c.hint  # frames are unambiguous; the pool's end line (or the ready line) may be missing
    elif c.hint in _START_UP_FRAMES and c.hint.rank > phase.rank:
        # a start-up frame later than the last progress line: that phase's own line is missing (cut, not printed at
        # this log level, or a fork's wording), the frames say where the code was when it failed
        phase = c.hint
    placed = resolve_oom(phase, flags)
    if placed is None:
        return _unplaced_oom(c, figures)
    return placed[0], placed[1], confidence, phase, ()


# What an out-of-memory message says it was allocating for, in its own words ("Failed to allocate memory for KV cache",
# "CUDA out of memory while capturing CUDA graphs", "OOM when loading the model weights"): the start-up step it names.
# Read only where no progress line, frame or header module places the failure; confidence stays low.
_OOM_OBJECTS = (
    (Phase.KV_POOL, re.compile(r"(?i:\b(?:for|allocat\w*|initiali[sz]\w*|creat\w*|reserv\w*) (?:the )?"
                               r"(?:kv[ _-]?cache|kv[ _-]?pool|cache blocks|token[ _]pool|req_to_token)\b)")),
    (Phase.CUDA_GRAPH, re.compile(r"(?i:\b(?:captur\w*|during|for|in) (?:the )?(?:cuda[ _-]?graphs?|cudagraphs?|graph "
                                  r"capture)\b)")),
    (Phase.WEIGHTS, re.compile(r"(?i:\b(?:load\w*|for|allocat\w*) (?:the )?(?:model(?:'s)? )?(?:weights|checkpoint)\b"
                               r"|\b(?:loading|to load) (?:the )?model\b)")),
)


def _oom_object(line: str) -> Phase | None:
    """The start-up step an OOM message names as what it was allocating for; None when it names none or more than one."""
    named = {phase for phase, words in _OOM_OBJECTS if words.search(line)}
    return named.pop() if len(named) == 1 else None


def _unplaced_oom(c: Candidate, figures: Mapping[str, float]) -> Resolved:
    """An OOM the log does not place (no progress line, engine frame or header module) and no sign
    of a server at work. When torch's message counts memory "allocated in private pools (e.g., CUDA
    Graphs)", graphs were already captured: the server was past start-up (OOM_RUNTIME, a guess:
    capture itself also fills that pool, so OOM_CUDA_GRAPH is the alternative, and GPU_BUSY when the
    message's figures show memory held outside the process). Else, when those figures show more held
    outside the process than in it, GPU_BUSY (every OOM class an alternative). Otherwise nothing
    says where it was, and the classification says so: phase as far as the log shows (nothing
    placed), confidence low, `missing` the phase, every other OOM class an alternative (so the search
    reads it by what every reading shares). Its class is only the likeliest: torch's own figure of what it had
    allocated, (next to) nothing, means the first allocations failed, the weights'; otherwise OOM_RUNTIME. An
    OOM that nothing places is most often a request's: start-up failures come with their start-up lines, and a
    user who pastes only the error pastes it from a server at work. (Until F23 a tried allocation of a GiB and
    more, or no size, was guessed the KV pool's; on the 18 logs gathered after that rule was written which it
    decided, 3 were the pool's and 6 a request's.)"""
    outside = memory_outside_gib(figures)
    held_outside = outside is not None and outside >= max(figures["oom_own_gib"],
                                                          _OUTSIDE_SHARE * figures["oom_total_gib"])
    if figures.get("oom_private_pool_gib", 0.0) > 0:  # the process itself was past capture: that places it first
        why = "capture itself fills torch's private pools: the OOM may be the capture's"
        busy = ((Outcome.GPU_BUSY, _OUTSIDE_BUSY_WHY),) if held_outside else ()
        return Outcome.OOM_RUNTIME, -1, _GRAPHS_EXIST, Phase.READY, ((Outcome.OOM_CUDA_GRAPH, why), *busy)
    if held_outside:
        return Outcome.GPU_BUSY, 0, _UNPLACED_CONF, c.phase, tuple((o, _OUTSIDE_WHY) for o in _OOM_CLASSES)
    allocated, total = figures.get("oom_allocated_gib"), figures.get("oom_total_gib")
    first = allocated is not None and allocated <= _NOTHING_YET_SHARE * (total or 0.0)
    outcome = Outcome.OOM_WEIGHTS if first else Outcome.OOM_RUNTIME  # nothing held yet: the first allocations'
    alternatives = tuple((o, _UNPLACED_WHY) for o in _OOM_CLASSES if o is not outcome)
    return outcome, _DIRECTION.get(outcome, 0), _UNPLACED_CONF, c.phase, alternatives


def _divides_failed(raised: Candidate | None, flags: frozenset[str]) -> bool:
    """Whether `raised` is the bare AssertionError of a quoted check that a parallel size divides a model dimension."""
    return (raised is not None and raised.strength is Strength.TENTATIVE and raised.values.get("exc") == "AssertionError"
            and PARALLEL_DIVIDES in flags)


def _resolve(best: Candidate, ev: Evidence) -> Resolved:
    flags = frozenset(ev.book.flags)
    if best.outcome is None:
        return _place_oom(best, flags, ev.book.values)
    outcome, direction = best.outcome, best.mfs_direction
    if outcome is Outcome.OOM_CUDA_GRAPH and direction == 0:
        if OOM_TEXT.search(best.line) or ev.first(Strength.OOM) is not None:
            direction = -1  # the capture failed because memory ran out
        else:
            outcome = Outcome.CRASH  # a capture that failed for another reason is a crash
    alternatives: Alternatives = ()
    # a fatal marker that names no cause ("Scheduler hit an exception", "Received sigquit") lends its verdict to the
    # exception above it; one that words its own remedy ("Rank 0 scheduler is dead") still does where that exception
    # timed out or rejected a setting
    above = ev.first(Strength.TENTATIVE) if best.strength is Strength.GENERIC else None
    raised = above if best.strength is Strength.GENERIC and not best.remedy else best
    if above is not None and above.outcome in (Outcome.TIMEOUT, Outcome.CONFIG_ERROR):
        raised = above
    if (raised is not None and raised.rule == "exception" and raised.hint is Phase.ARGS
            and config_exception(raised.values.get("exc", ""))
            and ENVIRONMENT_BROKEN not in flags):  # (an engine whose build does not run here fails reading them too)
        outcome = Outcome.CONFIG_ERROR  # raised while the arguments were read
    elif _divides_failed(raised, flags):
        outcome = Outcome.CONFIG_ERROR
    elif raised is not None and raised is not best and raised.outcome in (Outcome.TIMEOUT, Outcome.CONFIG_ERROR):
        outcome = raised.outcome  # the marker's cause timed out, or rejected a setting
    elif best.rule == "exception" and best.hint is None and best.phase is Phase.SPAWN \
            and best.values.get("exc") == "ValueError":
        # Nothing before it, not even the engine's arguments: a bad value, raised before any start-up step
        outcome, alternatives = Outcome.CONFIG_ERROR, ((Outcome.CRASH, _BARE_VALUE_WHY),)
    phase = best.phase if best.phase.rank >= _KNOWN else (best.hint or outcome.facts.phase or best.phase)
    confidence = "high" if raised is not None else "low"  # (low: it died, but the cause is not in the log we have)
    return outcome, direction, confidence, phase, alternatives


def _short(text: str) -> str:
    return text if len(text) <= EVIDENCE_CHARS else text[: EVIDENCE_CHARS - 3] + "..."


def _lines(*texts: str) -> tuple[str, ...]:
    out: list[str] = []
    for text in texts:
        text = text.strip()
        if text and _short(text) not in out:
            out.append(_short(text))
    return tuple(out[:EVIDENCE_LINES])


def _figures(book: FigureBook) -> dict[str, float]:
    figures = dict(book.values)
    kv_gib, kv_tokens = figures.get("kv_gib"), figures.get("kv_tokens")
    if kv_gib and kv_tokens:
        figures["kv_cell_bytes"] = float(round(kv_gib * (1 << 30) / kv_tokens))
    return figures


def verdict(engine: EngineLog, ev: Evidence, *, phase: Phase, ready: bool, exit_code: int | None,
            log_complete: bool, last_progress: str, tail: tuple[str, ...], serving: bool = False,
            open_trace: tuple[Phase | None, str, str | None] | None = None, ends_in_error: bool = False,
            stalled: str | None = None) -> Classification:
    """The Classification the evidence supports; see `LogClassifier.classification`.

    `serving`: the log shows a server at work (batch lines, metrics, HTTP 2xx) without
    necessarily its ready line. In a finished excerpt whose process is not known to have
    ended, that is READY, and an exception we do not know, raised while it served, did not
    stop it. A live log waits for the engine's own ready line (warm-up requests are served
    before it).

    `ends_in_error`: the log's last line is logged at an error level (ERROR, CRITICAL, FATAL, glog's E).

    `stalled`: the last line that said a wait went unanswered (a health check, a peer, a queue, a timeout reported
    while serving), when no line after it shows the launch at work: where no failure decides, a finished log that
    stopped there hung.

    `open_trace`: the phase (and deepest frame, and the quoted `raise` of a timeout the log ends on, if it does) of
    the traceback the log ends inside (an excerpt cut before the
    exception line). A finished excerpt with no failure line, or with only a marker that names
    no cause, then gets the failure most likely in that phase (`_cut_guess`), with confidence
    "low" and `missing` saying the exception line was not seen. A traceback that nothing places
    (phase None: no frame says, and the start-up had not reached the weights) in an excerpt with no
    failure line reads as a crash, a refused setting the alternative.
    """
    figures = _figures(ev.book)
    best = ev.best()
    cut = open_trace if (open_trace is not None and exit_code is None and log_complete and not ready) else None
    if best is not None and serving and best.strength is Strength.TENTATIVE and best.after_ready \
            and not best.ended_process and exit_code is None and log_complete:
        best = None
    if best is None and cut is not None:
        if cut[2] is not None:  # the frame it ends in raises a timeout: the exception cut off was a wait that ran out
            return _hang(cut[0] or phase, _WAIT_RAISED_REMEDY, (last_progress, cut[2]), figures, _WAIT_RAISED_MISSING,
                         ((Outcome.CRASH, _WAIT_RAISED_WHY),))
        if cut[0] is None:
            return _unplaced_cut(engine, figures, cut[1], phase)
        return _cut_guess(engine, ev, figures, (cut[0], cut[1]), None, (last_progress, *tail), phase)
    if best is None:
        return _without_failure(ev, figures, phase, ready, exit_code, log_complete, (last_progress, *tail),
                                serving, ends_in_error, stalled)
    if best.strength is Strength.TENTATIVE and exit_code is None and not log_complete:
        return Classification(None, phase, figures=figures)  # an exception the server may survive
    outcome, direction, confidence, died_in, alternatives = _resolve(best, ev)
    if cut is not None and cut[0] is not None and confidence == "low" and best.strength is Strength.GENERIC \
            and not best.remedy:
        return _cut_guess(engine, ev, figures, (cut[0], cut[1]), best, (last_progress, *tail), phase)  # a marker
    if best.strength is Strength.TENTATIVE:
        outcome = Outcome.CONFIG_ERROR if exit_code == 2 else outcome
        confidence = "low" if exit_code is None else "high"
    cause = ev.first(Strength.TENTATIVE) if best.strength <= Strength.GENERIC else None
    remedy = _remedy(engine, ev, best, cause, outcome, direction, figures, confidence)
    figures["mfs_direction"] = float(direction)
    needs = Need.SHORTER_CONTEXT if best.shorter_context else \
        Need.MORE_FRACTION if direction > 0 else Need.LESS_FRACTION if direction < 0 else None
    raw = ev.first(Strength.OOM) if outcome is Outcome.OOM_CUDA_GRAPH and best.strength > Strength.OOM else None
    marker = ev.first(Strength.GENERIC)
    evidence = _lines(best.context, cause.line if cause else "", best.line, raw.line if raw else "",
                      marker.line if marker and marker is not best else "")
    guessed = confidence in (_GRAPHS_EXIST, _UNPLACED_CONF)
    missing = _UNPLACED if guessed else ""
    _mark_alternatives(figures, alternatives)
    return Classification(outcome, died_in, remedy, evidence, figures,
                          "low" if guessed else confidence, needs, missing, alternatives)


def _mark_alternatives(figures: dict[str, float], alternatives: Alternatives) -> None:
    """What the search reads (knowledge.side_of): each other reading's mfs direction, as the figure `alt_<OUTCOME>`."""
    for alternative, _ in alternatives:
        figures[f"alt_{alternative.value}"] = float(_DIRECTION.get(alternative, 0))


def _guessed_remedy(engine: EngineLog, outcome: Outcome, figures: dict[str, float]) -> str:
    """The engine's remedy for `outcome`, marked as a guess from a log cut before its error line."""
    remedy = fill(engine.fallback(outcome), figures)
    return (remedy + " " if remedy else "") + "(a guess: the log was cut before its error line, see `missing`)"


def _ends_on_assert(lines: tuple[str, ...]) -> bool:
    """Whether the log ends on a traceback frame's quoted statement that is an `assert` (the last line, or the one
    before a last line cut short, such as a next line's prefix): the exception being raised is an AssertionError."""
    quoted = [line for line in lines[-2:] if line[:1] in (" ", "\t") and not _FRAME_OR_CARETS.match(line)]
    return bool(quoted) and _ASSERT_STATEMENT.match(quoted[-1]) is not None  # (quoted statements are indented)


def _unplaced_cut(engine: EngineLog, figures: dict[str, float], frame: str, phase: Phase) -> Classification:
    """An excerpt cut inside a traceback that no frame places, before the weights, with no failure line: an
    exception killed the launch, a crash most likely (a setting refused at start-up the alternative); low."""
    figures["mfs_direction"] = 0.0
    alternatives: Alternatives = ((Outcome.CONFIG_ERROR, _UNPLACED_REFUSAL_WHY),)
    _mark_alternatives(figures, alternatives)
    return Classification(Outcome.CRASH, phase, _guessed_remedy(engine, Outcome.CRASH, figures), _lines(frame), figures,
                          "low", None, _CUT_UNPLACED, alternatives)


def _cut_guess(engine: EngineLog, ev: Evidence, figures: dict[str, float], trace: tuple[Phase, str],
               marker: Candidate | None, lines: tuple[str, ...], phase: Phase) -> Classification:
    """The most likely outcome of an excerpt cut inside a traceback, with confidence "low" and what is missing: by the
    phase its frames show, argument parsing a refused setting, loading weights, the KV pool and warm-up the memory of
    that phase; distributed init, capture and serving a crash, that phase's memory failure (another process's memory
    before the weights) the alternative (`_CUT_MOSTLY_NOT_MEMORY`); loading weights with a crash the alternative
    (`_CUT_OFTEN_A_CRASH`). When CUDA or NCCL stated a fault that is not memory
    earlier in the log and the launch (at `phase`) had not moved on from it, or the traceback ends on a quoted `assert`,
    it is read as a crash too, the phase's memory failure the alternative."""
    cut, frame = trace
    placed = resolve_oom(cut, frozenset(ev.book.flags))
    outcome, direction = placed if placed is not None else (Outcome.CONFIG_ERROR, 0)
    died_in = Phase.READY if outcome is Outcome.OOM_RUNTIME else cut
    missing = _CUT_TRACE.format(phase=cut.value, outcome=outcome.value)
    fault = ev.flagged.get(NON_MEMORY_FAULT)
    crash: tuple[str, str] | None = None  # read as a crash: (why memory stays the alternative, what is missing)
    if outcome.is_oom or outcome is Outcome.GPU_BUSY:
        if _ends_on_assert(lines):
            # the innermost frame's quoted statement is an `assert`: what it raises is an AssertionError, not memory
            crash = (_ASSERT_MEMORY_WHY, _CUT_ASSERT)
        elif fault is not None and fault[1].rank >= phase.rank:
            # the launch had not moved on from that fault: the traceback is more likely its own than memory's
            crash = (_CUT_MEMORY_WHY, _CUT_FAULT)
        elif (cut, outcome) in _CUT_MOSTLY_NOT_MEMORY:
            crash = (_CUT_PHASE_MEMORY_WHY, _CUT_NOT_MEMORY)
    alternatives: Alternatives = ()
    if crash is not None:
        alternatives = ((outcome, crash[0].format(phase=cut.value, outcome=outcome.value)),)
        outcome, direction, died_in = Outcome.CRASH, 0, cut
        missing = crash[1].format(phase=cut.value)
    elif (cut, outcome) in _CUT_OFTEN_A_CRASH:
        alternatives = ((Outcome.CRASH, _CUT_OFTEN_A_CRASH_WHY.format(phase=cut.value, outcome=outcome.value)),)
    figures["mfs_direction"] = float(direction)
    remedy = _guessed_remedy(engine, outcome, figures)
    needs = Need.MORE_FRACTION if direction > 0 else Need.LESS_FRACTION if direction < 0 else None
    _mark_alternatives(figures, alternatives)
    evidence = _lines(marker.line if marker else "", fault[0] if alternatives and fault else "", frame, lines[0])
    return Classification(outcome, died_in, remedy, evidence, figures, "low", needs, missing, alternatives)


_INPUTS_REFUSED = ("the server raised {exc} while it read the launch's inputs (its arguments, the model's config, "
                   "tokenizer or files; see the evidence): they are wrong or incomplete, so every memory setting fails "
                   "alike; fix what the evidence names")


def _remedy(engine: EngineLog, ev: Evidence, best: Candidate, cause: Candidate | None, outcome: Outcome,
            direction: int, figures: dict[str, float], confidence: str) -> str:
    """The engine's special wording, else the deciding line's templates, else the outcome's.

    A generic marker ("Scheduler hit an exception") lends its place to the exception above
    it; with no cause in view the remedy says so rather than guess.
    """
    decider = cause if (best.strength is Strength.GENERIC and not best.remedy and cause) else best
    values: dict[str, object] = {**figures, **decider.values}
    flags = frozenset(ev.book.flags)
    if outcome is Outcome.CONFIG_ERROR and _divides_failed(decider, flags):
        return _PARALLEL_DIVIDES_REMEDY
    if outcome is Outcome.CONFIG_ERROR and decider.rule == "exception":
        return fill((_INPUTS_REFUSED,), values)  # a raw exception the place it was raised in reads as the inputs
    text = engine.special(outcome, direction, best.rule, values, flags) or fill(decider.remedy, values)
    if not text and confidence == "low" and decider.strength is Strength.GENERIC:
        text = _CAUSE_NOT_SHOWN
    if confidence == _UNPLACED_CONF:
        return _UNPLACED_NOTE  # no class-specific fix: the phase decides it, and the log does not show it
    text = text or fill(engine.fallback(outcome), values)
    return text + (_GRAPHS_NOTE if confidence == _GRAPHS_EXIST else "")


def _hang(phase: Phase, remedy: str, evidence: tuple[str, ...], figures: dict[str, float], missing: str,
          alternatives: Alternatives = ()) -> Classification:
    """A log with no failure line that ends where a hang would leave it: TIMEOUT at low confidence, `missing` what would
    make it sure, `alternatives` what else it may be; no memory setting helps."""
    figures["mfs_direction"] = 0.0
    _mark_alternatives(figures, alternatives)
    return Classification(Outcome.TIMEOUT, phase, remedy, _lines(*evidence), figures, "low", None, missing, alternatives)


def _without_failure(ev: Evidence, figures: dict[str, float], phase: Phase, ready: bool,
                     exit_code: int | None, log_complete: bool, lines: tuple[str, ...],
                     serving: bool = False, ends_in_error: bool = False, stalled: str | None = None
                     ) -> Classification:
    """No failure line: ready, still running, or ended without saying why.

    `lines` are the last progress line then the last lines of the log; `stalled` see `verdict`.
    """
    if (ready or serving) and stalled is not None and exit_code is None and log_complete:
        # the server was up, then a wait went unanswered and nothing after shows it at work, nor says why
        return _hang(Phase.READY, _STALLED_REMEDY, (ev.ready_line or ev.serving_line, stalled), figures,
                     _STALLED_MISSING, ((Outcome.READY, _STALL_MAY_PASS_WHY),))
    if ready:
        return Classification(Outcome.READY, Phase.READY, "", _lines(ev.ready_line, *ev.notes), figures)
    if serving and exit_code is None and log_complete and STILL_WAITING.search(lines[-1]):
        # it served, then its own processes stopped answering, and the log ends there: a hang while serving
        return _hang(phase, "the server was at work, then the log ends with the engine waiting on its own processes: a "
                     "hang while serving (or a paste cut there); see the evidence", (lines[-1], ev.serving_line),
                     figures, _HUNG_SERVING_MISSING)
    if serving and exit_code is None and log_complete:
        # Requests served after start-up lines but with no ready line may be the warm-up's own.
        warmup = phase.rank >= Phase.HTTP.rank
        return Classification(Outcome.READY, phase if warmup else Phase.READY, "",
                              _lines(ev.serving_line, *ev.notes), figures, "low" if warmup else "high")
    if exit_code is None:
        fault = ev.flagged.get(NON_MEMORY_FAULT)
        if log_complete and fault is not None and fault[1].rank >= phase.rank:
            # the launch did not move on from a fault CUDA stated, and nothing else ended it: the fault did
            figures["mfs_direction"] = 0.0
            return Classification(Outcome.CRASH, phase, "CUDA stated a fault that is not memory and the log ends "
                                  "there (see the evidence): a kernel or build problem; lowering memory will not help",
                                  _lines(fault[0], lines[-1]), figures, "low", None, _FAULT_LAST_MISSING)
        if log_complete and STILL_WAITING.search(lines[-1]):
            return _hang(phase, "the log ends with the engine still waiting for its own processes to start: a hang (or a "
                         "paste cut there); see the evidence", (lines[-1],), figures, _STILL_WAITING_MISSING)
        if log_complete and stalled is not None:
            return _hang(phase, "the log ends after a wait went unanswered (a peer, a queue, a health or readiness "
                         "check), with nothing after it that shows the launch at work: a hang (or a paste cut there); "
                         "see the evidence", (stalled, lines[-1]), figures, _UNANSWERED_MISSING)
        if log_complete and POSTER_SAYS_HANG in ev.book.flags:
            return _hang(phase, "no line of the log says how it ended; the excerpt's own prose says it hangs there: a "
                         "hang (see the evidence)", (lines[-1],), figures, _POSTER_HANG_MISSING)
        if log_complete and (phase.rank >= Phase.HTTP.rank or _CAPTURE_DONE.search(lines[0])):
            # every GPU phase done (the last, graph capture, at its total); the ready line not in view
            return Classification(Outcome.READY, phase, "", _lines(lines[0], *ev.notes), figures, "low")
        if log_complete and ends_in_error:
            # it stopped on errors it logged, in words no rule knows (a runtime's, a kernel compiler's): a crash
            figures["mfs_direction"] = 0.0
            return Classification(Outcome.CRASH, phase, "the log ends on errors no rule recognises (see the evidence): "
                                  "read them; nothing says memory", _lines(*lines[1:]), figures, "low", None,
                                  _ERROR_LAST_MISSING)
        missing = (f"any failure line: the log ends during {phase.value} with no error or traceback in view"
                   if log_complete else "")
        return Classification(None, phase, figures=figures, confidence="low" if log_complete else "high",
                              missing=missing)
    figures["mfs_direction"] = 0.0
    if exit_code == 2:
        return Classification(Outcome.CONFIG_ERROR, Phase.ARGS, "the process exited with status 2, argparse's: "
                              "the engine rejected the command line", _lines(*lines[1:]), figures, "low")
    if exit_code in (-9, 137):
        why = ("it was SIGKILLed before it was ready with no error in the log: the host OOM killer (check "
               "`dmesg -T | grep -i oom`) or a kill from outside")
    elif exit_code == 0:
        why = "it exited with status 0 before it was ready, without an error"
    elif exit_code < 0:
        why = f"it was killed by signal {-exit_code} before it was ready, with no error in the log"
    else:
        why = f"it exited with status {exit_code} before it was ready, with no recognised error (see the evidence)"
    return Classification(Outcome.CRASH, phase, why, _lines(*lines), figures)
