"""Certification: the recommended config, relaunched cold N times, must serve its worst case.

"It started" is not "it fits". Each boot launches the config from nothing (a fresh process
tree, memory back to baseline in between) and sends the worst case the config permits
(`trial/worstcase.py`: a full running batch filling the KV pool plus a full-context
request). A boot counts only if it served every request and left at least
`safety_margin_gib` of headroom (total − peak) on every GPU. The answer is certified when
every boot counts; otherwise the next config down the goal's ranking (the next frontier
point: less context, or less KV and so more slack) is certified instead, and the record
says why the one above was not.

A worst case still unanswered at `deadline_s` on a server that is up and printed no
out-of-memory line (the trial's TIMEOUT) is neither: the machine computes slower than the
deadline allows, which says nothing about memory. That attempt is *inconclusive*:
certification stops there, without stepping down (a smaller config would only be certified
because it is quicker), and says what to raise. A server that died under the load steps down.

The record is stored on the study (`certification` user attribute), so `report` and `best`
read it like every other result.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any

from autotune import store
from autotune.config import LaunchConfig
from autotune.errors import AutotuneError
from autotune.gpu.base import GpuBackend
from autotune.interrupts import Interrupted
from autotune.records import GIB, Outcome, Phase, Side, TrialResult
from autotune.search import goal as goal_mod
from autotune.search.knowledge import side_of
from autotune.search.slots import Launched, SlotPool, boot_at_once
from autotune.search.slots import of_spec as slots_of_spec
from autotune.spec import Spec
from autotune.trial.run import target_doc

ATTR = "certification"
MAX_STEPS_DOWN = 4  # failures on the way down (a cold boot each): past this, the frontier itself is wrong


@dataclass(frozen=True)
class Boot:
    """One cold boot under the worst case. Byte figures per GPU, in the trial's GPU order."""

    trial_id: str
    outcome: str
    served: bool
    kv_tokens: int | None
    peak_bytes: tuple[int, ...]
    total_bytes: tuple[int, ...]
    startup_s: float | None
    requests: int
    why: str = ""
    inconclusive: bool = False  # the worst case outlived the deadline, the server up: no memory verdict
    slot: int | None = None  # which of the run's slots it ran on, and when (epoch seconds): the timeline
    start_s: float | None = None
    end_s: float | None = None

    @property
    def headroom_bytes(self) -> tuple[int, ...]:
        return tuple(t - p for t, p in zip(self.total_bytes, self.peak_bytes, strict=True))


@dataclass(frozen=True)
class Attempt:
    """One config's certification: its source trial, its boots, the verdict and why."""

    source_trial: str
    config: str
    max_running_requests: int | None
    context_length: int
    boots: tuple[Boot, ...]
    certified: bool
    why: str
    inconclusive: bool = False
    # a config no search trial ran (a step down to a lower fraction): its first boot's TrialResult,
    # for `best` and the report to read as they read a search trial's
    result: dict[str, Any] | None = None
    # boots stopped because another boot of the same round died (they ran at once): no boots, no
    # verdict; kept for the timeline (their GPU time was spent)
    stopped: tuple[Boot, ...] = ()

    def kv_range(self) -> tuple[int, int] | None:
        kv = [b.kv_tokens for b in self.boots if b.kv_tokens is not None]
        return (min(kv), max(kv)) if kv else None

    def peak_range_bytes(self) -> tuple[int, int] | None:
        peaks = [max(b.peak_bytes) for b in self.boots if b.peak_bytes]
        return (min(peaks), max(peaks)) if peaks else None


@dataclass(frozen=True)
class Certification:
    boots: int
    safety_margin_gib: float
    concurrency: int | None  # the chosen concurrency (`--concurrency`), None: the goal's answer
    attempts: tuple[Attempt, ...]
    deadline_s: float = 1800.0
    note: str = ""  # how it ran, where that is worth saying (an early start that the search overtook)

    @property
    def answer(self) -> Attempt | None:
        return next((a for a in self.attempts if a.certified), None)

    @property
    def inconclusive(self) -> Attempt | None:
        """The attempt that ran out of time (certification stopped there), if any."""
        return next((a for a in self.attempts if a.inconclusive), None)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def launches(self) -> int:
        """Servers started (stopped ones included; a step down's scout boot counted once)."""
        return len({b.trial_id for a in self.attempts for b in (*a.boots, *a.stopped)})

    @staticmethod
    def from_dict(data: dict[str, Any]) -> Certification:
        def boot(b: dict[str, Any]) -> Boot:
            return Boot(**{**b, "peak_bytes": tuple(b["peak_bytes"]), "total_bytes": tuple(b["total_bytes"])})
        attempts = tuple(Attempt(**{**a, "boots": tuple(boot(b) for b in a["boots"]),
                                    "stopped": tuple(boot(b) for b in a.get("stopped", ()))})
                         for a in data["attempts"])
        return Certification(data["boots"], data["safety_margin_gib"], data.get("concurrency"), attempts,
                             data.get("deadline_s", 1800.0), data.get("note", ""))


def concurrency_of(result: TrialResult) -> int | None:
    return goal_mod.concurrency_of(result) or None


def candidates(results: Sequence[TrialResult], order: Sequence[str], required: Sequence[str],
               concurrency: int | None = None) -> list[TrialResult]:
    """Fitting results, best first by the goal, one per distinct config (at `concurrency` if given)."""
    fitting = [r for r in results if r.outcome.fits and goal_mod.satisfies(r, required)
               and (concurrency is None or concurrency_of(r) == concurrency)]
    fitting.sort(key=lambda r: goal_mod.key(r, order, required), reverse=True)
    seen: set[Any] = set()
    out = []
    for r in fitting:
        if r.config not in seen:
            seen.add(r.config)
            out.append(r)
    return out


def boot_of(result: TrialResult, launched: Launched | None = None) -> Boot:
    served = result.outcome is Outcome.READY and bool(result.probe and result.probe.ok)
    late = result.outcome is Outcome.TIMEOUT and result.phase is Phase.PROBE  # trial/run.py: too_slow
    why = "" if served else result.remedy if late else (
        result.probe.error if result.probe and result.probe.error else result.remedy)
    startup = result.figures.get("startup_engine_s", result.figures.get("startup_wall_s"))
    return Boot(result.trial_id, result.outcome.value, served, result.kv_tokens,
                tuple(g.peak_bytes for g in result.gpus), tuple(g.total_bytes for g in result.gpus),
                None if startup is None else float(startup), result.probe.burst_requests if result.probe else 0,
                why[:400], late, *((launched.slot, launched.start_s, launched.end_s) if launched else ()))


def verdict(boots: Sequence[Boot], margin_gib: float) -> tuple[bool, str]:
    """Certified, and why not: the first boot that failed or ran out of time, or the least
    headroom below the margin."""
    for i, b in enumerate(boots, 1):
        if b.inconclusive:
            return False, f"boot {i} did not finish the worst case in time: {b.why}"
        if not b.served:
            return False, f"boot {i} of {len(boots)} did not serve the worst case ({b.outcome}): {b.why}"
    least = min((min(b.headroom_bytes) for b in boots if b.peak_bytes), default=None)
    if least is not None and least < margin_gib * GIB:
        return False, (f"headroom {least / GIB:.2f} GiB on the tightest GPU and boot is below the safety margin "
                       f"{margin_gib:.2f} GiB")
    return True, f"{len(boots)} of {len(boots)} cold boots served the worst case"


def certify(spec: Spec, backend: GpuBackend, results: Sequence[TrialResult], *, boots: int,
            safety_margin_gib: float, concurrency: int | None = None, deadline_s: float | None = None,
            on_boot: Callable[[Attempt | None, Boot], None] | None = None, pool: SlotPool | None = None,
            later: Callable[[], Sequence[TrialResult]] | None = None,
            stop: threading.Event | None = None) -> Certification:
    """Certify the best candidate, stepping down until one holds (or MAX_STEPS_DOWN); an
    inconclusive attempt (out of time, `deadline_s`, default the spec's) stops it there. See
    `StepDown` for where each step goes. A config's boots run at once on `pool`'s free slots
    (default: the spec's slots, `slots.of_spec`), one slot one boot (`slots.boot_at_once`).

    `later`: where certification starts before the search has ended (`loop.run`), the search's
    final results, blocking until it has: asked only when a step down leaves the answer's family
    for the next config the goal ranks, which a result still to come may be."""
    deadline = deadline_s or spec.certify.deadline_s
    settings = spec.trial_settings(spec.api_key())
    settings = replace(settings, probe=replace(settings.probe, enabled=True, worst_case=True, timeout_s=deadline),
                       env={**settings.env, **spec.certify_env()})
    pool = pool if pool is not None else SlotPool(slots_of_spec(spec))
    attempts: list[Attempt] = []
    ranked = candidates(results, spec.goal.order, spec.goal.required_features, concurrency)
    reranked = None if later is None else (
        lambda: candidates(later(), spec.goal.order, spec.goal.required_features, concurrency))
    steps = StepDown(ranked, spec.space["mem_fraction_static"], results, reranked)
    scouted: dict[Any, tuple[list[TrialResult], list[Boot]]] = {}  # step downs whose one boot served
    while steps.walked <= MAX_STEPS_DOWN and (source := steps.next()) is not None:
        runs, done = scouted.pop(source.config, ([], []))
        made = source.trial_id == "" or bool(done)  # a step no search trial ran: the record keeps its first boot
        scout = made and not done  # a step down's first boot only says where the boundary is
        fresh, halted = boot_at_once(pool, source.config, settings, backend, 1 if scout else boots - len(done),
                                     target=target_doc(spec.target), busy_wait_s=settings.release_timeout_s,
                                     stop=stop)
        if stop is not None and stop.is_set():
            raise Interrupted()
        for launched in fresh:
            runs.append(launched.result)
            done.append(boot_of(launched.result, launched))
            if on_boot:
                on_boot(None, done[-1])
        stopped = tuple(boot_of(h.result, h) for h in halted)
        ok, why = verdict(done, safety_margin_gib)
        late = any(b.inconclusive for b in done)
        source_trial = runs[0].trial_id if made else source.trial_id
        record = runs[0].to_dict() if made else None
        if scout and ok and not late:
            # held on its one boot: the fractions between it and the failure above first (one boot
            # each), then the highest that held gets the rest of its boots
            if steps.served(source):
                attempts.append(Attempt(source_trial, _describe(source), concurrency_of(source),
                                        goal_mod.context_of(source), tuple(done), False,
                                        f"boot 1 served the worst case; not the answer yet: the fractions above it "
                                        f"and below {steps.ceiling(source):g} (which failed) are tried first, a "
                                        f"boot each, the highest that holds is certified", False, record))
                scouted[source.config] = (runs, done)
                continue
            if boots > 1:  # the highest that held: its other boots
                scouted[source.config] = (runs, done)
                steps.queued = source
                continue
        attempts.append(Attempt(source_trial, _describe(source), concurrency_of(source), goal_mod.context_of(source),
                                tuple(done), ok, why, late, record, stopped))
        if ok or late:  # out of time says nothing about memory: a smaller config is no answer to it
            break
        # more slack helps a boot that died on the slack side (as the search reads it), or too little headroom
        steps.failed(source, needs_slack=any(side_of(r) is Side.HIGH for r in runs) or all(b.served for b in done))
    return Certification(boots, safety_margin_gib, concurrency, tuple(attempts), deadline)


class StepDown:
    """Where certification goes after a config fails its worst case. A death under load (or too
    little headroom) asks for more slack: the same config at a lower fraction, in doubling steps
    from the first that failed (one fraction of the space down, two, four, ...; the lowest last),
    whether or not the search launched it: the search confirms the optimum with few fits below
    it, and walking only those jumped to a shorter context or a smaller batch at once. A step
    down that holds (`served`) is not the answer yet: the doubling steps overshoot (DeepSeek-R1 at
    TP 8: 0.96 to 0.92 failed, 0.88 held, and 0.91 held too), so the fractions between it and the
    lowest failure above are bisected, and the highest that held is certified (`next` returns it
    again). A fraction known to leave too little KV, or a failure that is not about slack, ends the
    walk there: the next known fit ranked below the first of them is next (as is for any other failure)."""

    def __init__(self, ranked: Sequence[TrialResult], fractions: Sequence[Any], results: Sequence[TrialResult],
                 reranked: Callable[[], list[TrialResult]] | None = None) -> None:
        self.ranked = list(ranked)
        self.reranked = reranked  # the final ranking, once the search has ended (see `certify`'s `later`)
        self.fractions = sorted(float(f) for f in fractions if f is not None)
        self.low = {r.config for r in results if side_of(r) is Side.LOW}  # too little KV for its context
        self.tried: set[Any] = set()
        self.pivot: TrialResult | None = None  # the first of this config's family to fail
        self.misses = 0
        self.walked = 0  # failures on the way down (bisecting back up is bounded by the fractions between)
        self.failures: list[float] = []  # the family's fractions that failed for want of slack
        self.held: list[TrialResult] = []  # the family's step downs whose first boot held
        self.queued: TrialResult | None = self.ranked[0] if self.ranked else None

    def next(self) -> TrialResult | None:
        source, self.queued = self.queued, None
        if source is not None:
            self.tried.add(source.config)
        return source

    def ceiling(self, source: TrialResult) -> float:
        """The lowest fraction of `source`'s family that failed for want of slack."""
        return min(self.failures, default=float(source.config.mem_fraction_static or 1.0))

    def served(self, source: TrialResult) -> bool:
        """A step down held its first boot: queue the next fraction between it and the failure
        above (True), or nothing left between, False: it is the one to certify."""
        self.held.append(source)
        between = self._between(source)
        if between is None:
            return False
        self.queued = self._made(source, between)
        return True

    def failed(self, source: TrialResult, *, needs_slack: bool) -> None:
        if self.pivot is None or _family(self.pivot.config) != _family(source.config):
            self.pivot, self.misses, self.failures, self.held = source, 0, [], []
        self.held = [h for h in self.held if h.config != source.config]
        if needs_slack and source.config.mem_fraction_static is not None:
            self.failures.append(float(source.config.mem_fraction_static))
        below = [h for h in self.held if needs_slack and float(h.config.mem_fraction_static or 0) < self.ceiling(source)]
        if below:  # bisecting back up: this failure narrows it
            top = max(below, key=lambda h: float(h.config.mem_fraction_static or 0))
            between = self._between(top)
            self.queued = self._made(top, between) if between is not None else top  # top: its remaining boots
            return
        self.misses += 1
        self.walked += 1
        lower = self._lower() if needs_slack else None
        if lower is not None:
            self.queued = self._made(source, lower)
            return
        if self.reranked is not None:  # leaving the family: the next config the goal ranks, by the final results
            self.ranked, self.reranked = self.reranked(), None
        # a family's first attempt is always a known fit (by trial id: a re-ranking reads the results anew)
        after = next(i for i, r in enumerate(self.ranked) if r.trial_id == self.pivot.trial_id) + 1
        self.queued = next((r for r in self.ranked[after:] if r.config not in self.tried), None)

    def _made(self, source: TrialResult, mfs: float) -> TrialResult:
        return replace(source, trial_id="", config=replace(source.config, mem_fraction_static=mfs),
                       kv_tokens=None, figures={})

    def _between(self, held: TrialResult) -> float | None:
        """The middle untried fraction strictly between `held` and the lowest failure above it."""
        lo, hi = float(held.config.mem_fraction_static or 0), self.ceiling(held)
        open_ = [f for f in self.fractions if lo + 1e-9 < f < hi - 1e-9
                 and replace(held.config, mem_fraction_static=f) not in self.tried
                 and replace(held.config, mem_fraction_static=f) not in self.low]
        return open_[len(open_) // 2] if open_ else None

    def _lower(self) -> float | None:
        assert self.pivot is not None
        top = self.pivot.config.mem_fraction_static
        if top is None:
            return None
        below = [f for f in reversed(self.fractions) if f < float(top) - 1e-9]  # nearest first
        step = 2 ** (self.misses - 1)
        pick = below[step - 1] if step <= len(below) else below[-1] if below else None
        if pick is not None and pick >= min(self.failures, default=2.0) - 1e-9:
            # a fraction that held its first boot failed a later one: on below the lowest failure
            pick = next((f for f in below if f < min(self.failures) - 1e-9), None)
        if pick is None:
            return None
        config = replace(self.pivot.config, mem_fraction_static=pick)
        if config in self.tried or config in self.low:
            return None
        return pick


def _family(config: LaunchConfig) -> LaunchConfig:
    return replace(config, mem_fraction_static=None)


def certified_answer(cert: Certification | None, results: Sequence[TrialResult]) -> TrialResult | None:
    """The certified answer as a TrialResult: its search trial, or for a step down no search trial
    ran, its first boot; None where nothing was certified."""
    answer = cert.answer if cert else None
    if answer is None:
        return None
    found = next((r for r in results if r.trial_id == answer.source_trial), None)
    return found if found is not None or not answer.result else TrialResult.from_dict(answer.result)


def standing(cert: Certification | None) -> dict[str, Any]:
    """Where the recommendation stands with certification, for `best` and the report: `state`
    (`not_run`, `certified`, `stepped_down`, `not_certified`, `inconclusive`) and `note`, a sentence
    saying so and why (a step down names the search's answer, why it was not certified, and the
    config certified instead)."""
    if cert is None or not cert.attempts:
        return {"state": "not_run", "note": "not certified: certification has not run (`autotune certify SPEC`)"}
    first, answer, late = cert.attempts[0], cert.answer, cert.inconclusive
    if answer is first:
        return {"state": "certified", "note": f"certified: {answer.why}"}
    if answer is not None:
        tried = sum(1 for a in cert.attempts if a is not answer)
        return {"state": "stepped_down",
                "note": f"certification stepped down: the search's answer {first.config} was not certified "
                        f"({first.why.split(':')[0]}); {answer.config} was ({answer.why}), after {tried} other "
                        f"config(s) tried (`autotune report` lists each boot)"}
    if late is not None:
        return {"state": "inconclusive", "note": f"not certified, inconclusive: {late.why}"}
    return {"state": "not_certified", "note": f"not certified: no config held its worst case ({first.why})"}


def recommended(results: Sequence[TrialResult], order: Sequence[str], required: Sequence[str],
                cert: Certification | None, concurrency: int | None = None) -> TrialResult | None:
    """What to recommend: the certified answer where certification found one (a search trial, or
    a step down no search trial ran, read from its first boot), else the goal's best."""
    ranked = candidates(results, order, required, concurrency)
    found = certified_answer(cert, ranked)
    return found if found is not None else ranked[0] if ranked else None


def _describe(r: TrialResult) -> str:
    c = r.config
    parts = [f"ctx={goal_mod.context_of(r)}", f"mfs={c.mem_fraction_static}"]
    if concurrency_of(r):
        parts.append(f"mrr={concurrency_of(r)}")
    if c.chunked_prefill_size:
        parts.append(f"chunk={c.chunked_prefill_size}")
    feats = "+".join(c.features()) or "base"
    return f"{feats} " + " ".join(parts)


def save(name: str, url: str, cert: Certification) -> None:
    """Keep the record on the study, one per chosen concurrency (None: the goal's answer)."""
    study = store.load_study(name, url)
    kept = dict(study.user_attrs.get(ATTR) or {})
    kept[str(cert.concurrency or "goal")] = cert.to_dict()
    study.set_user_attr(ATTR, kept)


def load(user_attrs: dict[str, Any], concurrency: int | None = None) -> Certification | None:
    data = (user_attrs.get(ATTR) or {}).get(str(concurrency or "goal"))
    return Certification.from_dict(data) if data else None


def boot_line(i: int, b: Boot) -> str:
    peaks = " ".join(f"{p / GIB:.2f}" for p in b.peak_bytes)
    heads = " ".join(f"{h / GIB:.2f}" for h in b.headroom_bytes)
    startup = f"{b.startup_s:.1f}" if b.startup_s is not None else "-"
    if b.inconclusive:
        return (f"boot {i}: OUT OF TIME ({b.outcome}), {b.kv_tokens if b.kv_tokens is not None else '-'} KV tokens, "
                f"peak GiB/GPU so far {peaks}, trial {b.trial_id}")
    if not b.served:  # the allocation that failed never shows in a peak
        return (f"boot {i}: FAILED ({b.outcome}), {b.kv_tokens if b.kv_tokens is not None else '-'} KV tokens, "
                f"peak GiB/GPU before it died {peaks}, trial {b.trial_id}")
    return (f"boot {i}: served, {b.kv_tokens if b.kv_tokens is not None else '-'} KV tokens, peak GiB/GPU {peaks}, "
            f"headroom GiB/GPU {heads}, start-up {startup} s, trial {b.trial_id}")


def variance_line(a: Attempt) -> str:
    kv, peak = a.kv_range(), a.peak_range_bytes()
    if kv is None or peak is None:
        return "variance: -"
    return (f"variance over {len(a.boots)} boot(s): KV tokens {kv[0]}–{kv[1]} (spread {kv[1] - kv[0]}), "
            f"peak {peak[0] / GIB:.2f}–{peak[1] / GIB:.2f} GiB (spread {(peak[1] - peak[0]) / 1024**2:.0f} MiB)")


def summary_lines(cert: Certification) -> list[str]:
    """For people: each attempt, its boots, its variance and its verdict, then the answer."""
    lines = [cert.note] if cert.note else []
    for a in cert.attempts:
        state = "CERTIFIED" if a.certified else "INCONCLUSIVE" if a.inconclusive else "not certified"
        lines.append(f"{a.config} (trial {a.source_trial}): {state} — {a.why}")
        lines += [f"  {boot_line(i, b)}" for i, b in enumerate(a.boots, 1)]
        lines.append(f"  {variance_line(a)}")
    answer, late = cert.answer, cert.inconclusive
    if answer:
        lines.append(f"certified answer: {answer.config} (trial {answer.source_trial})")
    elif late:
        lines.append(f"not certified, inconclusive: the worst case of {late.config} was still running at the "
                     f"{cert.deadline_s:g} s deadline on a server that stayed up without running out of memory. "
                     "That is this machine's speed, not a memory verdict, so nothing was stepped down. To decide it, "
                     f"allow longer: `autotune certify SPEC --deadline-s {int(cert.deadline_s * 4)}` "
                     "(or certify.deadline_s in the spec).")
    else:
        lines.append("no config certified: nothing served the worst case on every boot")
    return lines


def header(spec: Spec, boots: int, deadline_s: float) -> str:
    """What certification is about to do (or did, said after a run that certified alongside its search)."""
    return (f"certifying {spec.study}: {boots} cold boot(s) per config under the worst case, {deadline_s:g} s deadline "
            f"each" + (f", safety margin {spec.certify.safety_margin_gib} GiB" if spec.certify.safety_margin_gib else "")
            + (f", at once on {len(slots_of_spec(spec))} slots" if spec.parallel > 1 else ""))


def run_certification(spec: Spec, backend: GpuBackend, *, boots: int | None = None, concurrency: int | None = None,
                      deadline_s: float | None = None, say: Callable[[str], None] = print) -> Certification:
    """Certify the study's answer (or its best at `concurrency`), save the record, tell `say`."""
    results = store.results(store.load_study(spec.study, spec.storage))
    n = boots or spec.certify.boots
    if not candidates(results, spec.goal.order, spec.goal.required_features, concurrency):
        raise AutotuneError(f"nothing to certify in study {spec.study!r}" +
                            (f" at max_running_requests={concurrency}" if concurrency else ""),
                            hint="run `autotune run SPEC` first" + (", with that value in space.max_running_requests"
                                                                    if concurrency else ""))
    deadline = deadline_s or spec.certify.deadline_s
    say(header(spec, n, deadline))
    cert = certify(spec, backend, results, boots=n, safety_margin_gib=spec.certify.safety_margin_gib,
                   concurrency=concurrency, deadline_s=deadline)
    save(spec.study, spec.storage, cert)
    for line in summary_lines(cert):
        say(line)
    return cert
