"""Certification alongside the search: the answer's cold boots on the run's slots, started as soon
as the frontier has settled the answer (`Strategy.settled`), not after every other feature
combination is finished.

The search goes on meanwhile on whatever slots the boots leave (boots take a freed slot first:
`slots.SlotPool`). What certifies is still only what ran: when the search has ended, the
certified config must be the answer the final results rank first; if a result that came later
overtook it (the settling bet on the estimator's optimistic bound, `Frontier.potential`, and a
launch proved it wrong), the final answer is certified anew and the record says so. With one slot
there is nothing to overlap: certification runs after the search, as it always did.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import replace

import optuna

from autotune import store
from autotune.gpu.base import GpuBackend
from autotune.interrupts import Interrupted
from autotune.records import TrialResult
from autotune.search import certify as cert_mod
from autotune.search.slots import SlotPool
from autotune.spec import Spec


class Alongside:
    """One run's certification: `start` it early (at most once), `finish` it when the search ends."""

    def __init__(self, spec: Spec, backend: GpuBackend, study: optuna.Study, pool: SlotPool,
                 stop: threading.Event) -> None:
        self.spec, self.backend, self.study, self.pool, self.stop = spec, backend, study, pool, stop
        self.search_done = threading.Event()
        self.thread: threading.Thread | None = None
        self.started_s: float | None = None
        self.early: Sequence[TrialResult] = ()  # the results it started from, when it started before the end
        self.cert: cert_mod.Certification | None = None
        self.error: BaseException | None = None
        self.launched = 0  # certification's servers started, an overtaken early one's included
        self.lock = threading.Lock()

    @property
    def started(self) -> bool:
        return self.thread is not None

    def start(self, results: Sequence[TrialResult]) -> None:
        """Certify the answer of `results` now, on a thread, while the search goes on."""
        if self.thread is not None:
            return
        self.early = list(results)
        self.thread = threading.Thread(target=self._certify_early, name="certify", daemon=True)
        self.thread.start()

    def _certify_early(self) -> None:
        try:
            self.cert = self._certify(self.early, later=self._final)
        except BaseException as exc:  # noqa: BLE001 - handed to the run's thread by `finish`
            self.error = exc

    def _final(self) -> list[TrialResult]:
        """The search's results once it has ended (a step down leaving the answer's family waits here)."""
        while not self.search_done.wait(0.5):
            if self.stop.is_set():
                raise Interrupted()
        return store.results(self.study)

    def _certify(self, results: Sequence[TrialResult],
                 later: Callable[[], Sequence[TrialResult]] | None = None) -> cert_mod.Certification:
        c = self.spec.certify
        cert = cert_mod.certify(self.spec, self.backend, results, boots=c.boots, safety_margin_gib=c.safety_margin_gib,
                                deadline_s=c.deadline_s, pool=self.pool, stop=self.stop, later=later)
        with self.lock:
            self.launched += cert.launches()
        return cert

    def finish(self, results: Sequence[TrialResult], *, certify: bool) -> cert_mod.Certification | None:
        """The search has ended with `results`: wait for an early certification (or run it now, `certify`
        saying whether there is an answer to certify at all), certify anew if the search overtook it,
        save the record. None where nothing was certified (no answer, a fault)."""
        self.search_done.set()
        if self.thread is not None:
            if not certify:
                self.stop.set()  # a fault ended the search: its boots are stopped, nothing is recorded
            while self.thread.is_alive():
                self.thread.join(0.5)
            if self.error is not None and certify:
                raise self.error
        if not certify:
            return None
        ranked = cert_mod.candidates(results, self.spec.goal.order, self.spec.goal.required_features)
        if not ranked:
            return None
        cert = self.cert
        if cert is None:
            cert = self._certify(results)
        elif cert.attempts and cert.attempts[0].source_trial != ranked[0].trial_id:
            first = cert.attempts[0]
            cert = replace(self._certify(results), note=(
                f"certification started early on {first.config} (trial {first.source_trial}), the answer once "
                f"the frontier had settled it; a later result overtook it (trial {ranked[0].trial_id}), "
                f"so that was certified instead ({cert.launches()} boot(s) spent on the first)"))
        elif self.early:
            cert = replace(cert, note=f"certification started while the search went on, after "
                                      f"{len(self.early)} of its {len(results)} results: the rest could not beat "
                                      f"the answer")
        cert_mod.save(self.study.study_name, self.spec.storage, cert)
        return cert
