"""The main job: ask → launch → tell, until converged or out of budget, resumable.

Every finished trial is told to the Optuna study with its whole TrialResult in the user
attributes; the strategy rebuilds what it knows from the study at every step, so a run
killed at any moment resumes where it was: trials left RUNNING by a dead tuner on this
host are recovered (their orphaned servers found by trial tag and stopped, the trial
marked FAIL and interrupted, its point launched again later) and nothing is counted twice.
"""

from __future__ import annotations

import hashlib
import re
import socket
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import optuna
import psutil

from autotune import store
from autotune.errors import AutotuneError
from autotune.gpu.base import GpuBackend
from autotune.interrupts import Interrupted, signals_interrupt
from autotune.records import Outcome, TrialResult
from autotune.search import goal as goal_mod
from autotune.search import runlock
from autotune.search.alongside import Alongside
from autotune.search.certify import Certification
from autotune.search.knowledge import Knowledge
from autotune.search.model import EstimatorPredictor
from autotune.search.slots import SlotPool
from autotune.search.slots import of_spec as slots_of_spec
from autotune.search.space import Space, space_of
from autotune.search.strategies import Strategy, make_strategy
from autotune.spec import Spec
from autotune.trial import gpumem
from autotune.trial.run import (
    UNEXPLAINED,
    WRITE_FAILED,
    recover_orphans,
    run_trial,
    secrets_of,
    stop_tagged,
    target_doc,
)
from autotune.trial.supervisor import TRIAL_ENV

TRIAL_ID_ATTR = "trial_id"
CLOCK_ATTR = "clock"  # {"slot", "start_s", "end_s"}: where and when (epoch seconds) a trial held its slot
WAIT_POLL_S = 0.5  # how often a worker with nothing to launch looks for other workers' results
__all__ = ["Interrupted", "Progress", "RunSummary", "run"]  # Interrupted: re-exported for callers of run()


@dataclass
class RunSummary:
    study: str
    strategy: str
    launched_now: int
    total_trials: int
    stopped_because: str
    best: TrialResult | None
    results: list[TrialResult] = field(default_factory=list)
    recovered: list[str] = field(default_factory=list)
    fault: bool = False  # stopped by something outside the search (busy GPUs, memory not released, disk full)
    cancelled: int = 0  # launches stopped early because a fresh result made their point pointless (slots)
    certification: Certification | None = None  # run(certify=True): the answer's, saved on the study
    certify_launched: int = 0  # certification's servers started (stopped ones included)

    @property
    def exit_code(self) -> int:
        """`autotune run`'s exit status: 0 an answer, the run ended by convergence or budget;
        1 no answer (nothing fitted) or stopped by a fault. (2 bad input, 130 interrupted: cli.)"""
        return 0 if self.best is not None and not self.fault else 1


class Progress:
    """What a person watching sees. Subclasses render; this one is silent."""

    def run_started(self, spec: Spec, space: Space, done: int) -> None: ...
    def trial_started(self, number: int, point: dict[str, Any], trial_id: str) -> None: ...
    def phase(self, phase: str, used_bytes: tuple[int, ...], totals: tuple[int, ...]) -> None: ...
    def trial_finished(self, result: TrialResult, best: TrialResult | None, done: int, budget: int,
                       note: str = "") -> None: ...
    def trial_cancelled(self, number: int, why: str) -> None: ...
    def run_finished(self, summary: RunSummary) -> None: ...
    def recovered(self, lines: list[str]) -> None: ...
    def close(self) -> None:
        """Called on every way out of a run (return, error, interrupt); must not raise."""


def fingerprint(spec: Spec, backend: GpuBackend) -> dict[str, str]:
    fp = {k: v for k, v in backend.fingerprint().items()}
    fp.update(engine=spec.engine, engine_version=spec.engine_version,
              model=spec.shape.architecture if spec.shape else spec.model_path,
              gpus_used=",".join(map(str, spec.gpus)), model_config=_model_config_hash(spec.model_path))
    return fp


def _model_config_hash(model_path: str) -> str:
    """The model's config.json, hashed: workers sharing a study must size the same model, wherever
    its files lie on each host (so the path is not part of it)."""
    config = Path(model_path) / "config.json"
    try:
        return hashlib.sha256(config.read_bytes()).hexdigest()[:16]
    except OSError:
        return "unreadable"


def spec_summary(spec: Spec) -> dict[str, Any]:
    return {"engine": spec.engine, "engine_version": spec.engine_version, "model_path": spec.model_path,
            "launcher": list(spec.launcher), "host": spec.host, "gpus": list(spec.gpus),
            "api_key_env": spec.api_key_env,  # the name only: the recommended command refers to it
            "goal": {"order": list(spec.goal.order), "required_features": list(spec.goal.required_features),
                     "min_concurrency": spec.goal.min_concurrency},
            "space": {k: list(v) for k, v in spec.space.items() if k != "extra_args"},
            "extra_args": list(spec.space["extra_args"][0]), "strategy": spec.strategy,
            "simulated": spec.simulated is not None, "launch_env": launch_env(spec)}


def launch_env(spec: Spec) -> dict[str, str]:
    """The environment a recommended command needs, as the trials ran it: what the engine needs where
    its server runs (SGLang's CPU path: its switch and the driver stand-in), then the spec's `env`.
    Secret-looking variables are left out (never written to a record; the user's shell has them)."""
    if spec.simulated is not None:
        return {}
    from autotune.engines import get_engine
    from autotune.redact import is_secret_env

    env = {**get_engine(spec.engine).launch_env(spec.launcher, local=spec.target.local), **spec.env}
    return {k: v for k, v in env.items() if not is_secret_env(k)}


def recover_interrupted(study: optuna.Study, backend: GpuBackend, spec: Spec) -> list[str]:
    """Trials a dead tuner on this host left RUNNING: stop their servers, mark them FAIL.

    A RUNNING trial with no worker recorded was asked for by a tuner killed before it could
    say who it was (between `ask` and launching): nobody can ever finish it, so it is closed
    too. The caller holds the study's run lock, so no live run on this host is mid-ask.
    """
    recovered = recover_orphans(spec.study_dir / "trials", backend, spec.release_timeout_s,
                                secrets_of(spec.trial_settings(spec.api_key())))
    for trial in study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.RUNNING,)):
        worker = trial.user_attrs.get(store.WORKER_ATTR)
        if worker and _live_elsewhere(worker, _machine(spec)):
            continue  # another live worker's trial (or another host's): not ours to touch
        trial_id = trial.user_attrs.get(TRIAL_ID_ATTR, "")
        stragglers = stop_tagged(trial_id, target_doc(spec.target))  # here, or inside the spec's target
        store.mark_interrupted(study, trial)
        study.tell(trial.number, state=optuna.trial.TrialState.FAIL)
        what = f"{len(stragglers)} orphaned process(es) stopped" if worker else "its tuner died before launching"
        recovered.append(f"trial {trial.number} ({trial_id or 'no launch'}): left RUNNING by a dead run, now closed "
                         f"(FAIL, interrupted); {what}; its point will be launched again")
    if recovered and backend.busy_threshold_bytes is not None:
        # A GPU with nothing on it reads (near) zero; host memory never does: there recover_orphans
        # already waited for the orphans' recorded baseline.
        gpumem.wait_released(backend, {g: 0 for g in spec.gpus}, spec.release_timeout_s)
    return recovered


def _live_elsewhere(worker: dict[str, Any], machine: str) -> bool:
    """The worker is on another host (or drives another simulated node), or is a live process here.
    Another host's dead worker is not ours to recover: its trial fails by heartbeat, and its
    server is stopped when that host's tuner comes back."""
    return bool(worker.get("host") != socket.gethostname() or worker.get("node", "") != machine
                or psutil.pid_exists(int(worker.get("pid", -1))))


def tell(study: optuna.Study, trial: optuna.trial.Trial, result: TrialResult, spec: Spec) -> None:
    trial.set_user_attr(store.RESULT_ATTR, result.to_dict())
    trial.set_user_attr("outcome", result.outcome.value)
    if result.outcome is Outcome.GPU_BUSY:
        study.tell(trial, state=optuna.trial.TrialState.FAIL)  # says nothing about the config
        return
    trial.set_constraint("fits", -1.0 if result.outcome.fits else 1.0)
    value = goal_mod.objective(result, spec.goal.order, spec.goal.required_features) if result.outcome.fits else 0.0
    study.tell(trial, value)


def run(spec: Spec, backend: GpuBackend, *, strategy: str | None = None, progress: Progress | None = None,
        study_name: str | None = None, certify: bool = False) -> RunSummary:
    """Search until converged or out of budget. One run per study on this host (`StudyLocked`
    otherwise); Ctrl-C and SIGTERM raise `Interrupted` with the running server already stopped.
    `certify`: certify the answer too (`certify.certify`, the record saved on the study), unless the
    run found none or stopped on a fault; with several slots its boots run at once on free slots,
    from as soon as the frontier has settled the answer (search/alongside.py)."""
    progress = progress or Progress()
    name = study_name or spec.study
    try:
        with runlock.study_lock(spec.storage, name, _machine(spec)), signals_interrupt():
            return _run_locked(spec, backend, strategy or spec.strategy, progress, name, certify)
    finally:
        progress.close()  # a live display gives the terminal back (cursor shown) on every way out


def _machine(spec: Spec) -> str:
    """The simulated node a run drives ('' on real GPUs): on one box, each node is a host of its own."""
    return str(spec.node_dir().resolve()) if spec.simulated is not None else ""


def _run_locked(spec: Spec, backend: GpuBackend, name: str, progress: Progress, study_name: str,
                certify: bool = False) -> RunSummary:
    space = space_of(spec.searched(), spec.fixed())
    strat = make_strategy(name, space, seed=spec.seed, concurrency=spec.goal.min_concurrency, start=spec.start,
                          per_concurrency="max_running_requests" in spec.goal.order, slots=spec.parallel)
    study = store.open_study(study_name, spec.storage, fingerprint(spec, backend), strat.sampler, spec_summary(spec))
    recovered = recover_interrupted(study, backend, spec)
    mirror = spec.study_dir / "trials.jsonl"
    repaired = store.repair_mirror(mirror, store.results(study))
    if repaired:
        recovered.append(repaired)
    progress.recovered(recovered)  # said before anything else happens, not at the end
    pool = SlotPool(slots_of_spec(spec))
    run = _Search(study, strat, space, _Serialized(progress) if spec.parallel > 1 else progress, backend,
                  mirror, time.monotonic(), spec.api_key(), pool=pool)
    if certify and spec.parallel > 1:
        run.along = Alongside(spec, backend, study, pool, run.interrupted)
    progress.run_started(spec, space, len(store.results(study)))
    if spec.parallel == 1:
        _search(run, spec)
    else:
        _search_in_slots(run, spec)
    results = store.results(study)
    best = goal_mod.best(results, spec.goal.order, spec.goal.required_features)
    along = run.along or Alongside(spec, backend, study, pool, run.interrupted)
    cert = _finish_certification(run, spec, along, results, certify and best is not None and not run.fault)
    summary = RunSummary(study.study_name, name, run.launched, len(results), run.stopped, best, results, recovered,
                         run.fault, run.cancelled, cert, along.launched)
    progress.run_finished(summary)
    return summary


@dataclass
class _Search:
    """What the slots of one run share (one slot: the plain loop)."""

    study: optuna.Study
    strat: Strategy
    space: Space
    progress: Progress
    backend: GpuBackend
    mirror: Path
    t0: float
    api_key: str | None
    launched: int = 0
    stopped: str = ""
    fault: bool = False
    interrupted: threading.Event = field(default_factory=threading.Event)
    pool: SlotPool = field(default_factory=lambda: SlotPool([()]))  # the slots search trials and boots take turns on
    along: Alongside | None = None  # certification alongside the search (several slots, `run(certify=True)`)
    active: dict[int, str] = field(default_factory=dict)  # slot -> trial tag of the trial it runs
    points: dict[int, dict[str, Any]] = field(default_factory=dict)  # slot -> the point it runs
    cancels: dict[int, str] = field(default_factory=dict)  # slot -> why its running point is being stopped
    cancelled: int = 0
    unexplained: int = 0  # launches in a row that ended with no error line (Budget.unexplained_crashes)
    model: dict[tuple[str, ...], tuple[Knowledge, EstimatorPredictor]] = field(default_factory=dict)
    lock: threading.RLock = field(default_factory=threading.RLock)
    changed: threading.Condition = field(init=False)  # a slot's trial ended: waiting slots ask again

    def __post_init__(self) -> None:
        self.changed = threading.Condition(self.lock)


def _search(run: _Search, spec: Spec) -> None:
    """Ask, launch, tell on a slot of the run's pool at a time until the run stops (any slot's stop
    reason stops all)."""
    assert spec.shape is not None  # unsized (unknown architecture) is fine: no predictions, see EstimatorPredictor
    study, totals = run.study, {g.index: g.total_bytes for g in run.backend.snapshot()}
    gpu_mem_gib = min(totals[i] for i in spec.gpus) / (1 << 30)
    while not run.stopped and not run.interrupted.is_set():
        results = store.results(study)
        if len(results) >= spec.budget.trials:
            run.stopped = run.stopped or f"trial budget ({spec.budget.trials}) spent"
            break
        if time.monotonic() - run.t0 > spec.budget.wall_time_s:
            run.stopped = run.stopped or f"wall-time budget ({spec.budget.wall_time_s:.0f} s) spent"
            break
        slot = run.pool.acquire(priority=True, timeout=WAIT_POLL_S)  # before a certification boot (search/slots.py)
        if slot is None:
            continue
        why = None
        try:
            with run.lock:  # a result told meanwhile judges the running points after this one is among them
                trial, others_running = _next_trial(study, run.strat, run.space, spec, gpu_mem_gib, run.model)
                if isinstance(trial, optuna.trial.Trial):
                    run.active[slot], run.points[slot] = _trial_id(study, trial), run.space.params_of(trial.params)
            if isinstance(trial, optuna.trial.Trial):
                on_slot = replace(spec, gpus=run.pool.gpus[slot]) if spec.parallel > 1 else spec
                result = _run_trial(study, trial, run.space, on_slot, on_slot.trial_settings(run.api_key),
                                    run.backend, run.progress, run, slot)
                with run.changed:  # before the slot is lent again: a cancel belongs to this launch
                    why = run.cancels.pop(slot, None)
                    run.changed.notify_all()
        finally:
            run.pool.release(slot)
        if trial is None and not others_running:
            run.stopped = run.stopped or run.strat.done
            break
        if not isinstance(trial, optuna.trial.Trial):  # WAIT, or done here while other workers' results may reopen it
            with run.changed:  # woken by this run's own slots at once; other workers' results are polled
                run.changed.wait(WAIT_POLL_S)
            continue
        if result is None:  # interrupted while another slot was being stopped
            break
        if why is not None:
            with run.lock:
                run.launched += result.launched
                run.cancelled += 1
                run.progress.trial_cancelled(trial.number, why)
            reason = _stop_reason(result, f"{study.study_name}-{store.study_tag(study)}-")
            if reason:
                run.stopped, run.fault = run.stopped or reason, True
            continue
        _cancel_pointless(run, spec, gpu_mem_gib)
        _certify_if_settled(run, spec, gpu_mem_gib)
        result = _mirror(run.mirror, result)
        results = store.results(study)
        with run.lock:
            run.launched += result.launched
            run.progress.trial_finished(result, goal_mod.best(results, spec.goal.order,
                                                              spec.goal.required_features),
                                        len(results), spec.budget.trials, note=pool_note(result, results))
        reason = _stop_reason(result, f"{study.study_name}-{store.study_tag(study)}-") or _unexplained(run, result, spec)
        if reason:
            run.stopped, run.fault = run.stopped or reason, True


def pool_note(result: TrialResult, results: list[TrialResult]) -> str:
    """On host memory (SGLang's CPU path), how this launch's pool compares with what the last earlier launch
    of the same configuration group predicted, and how far the box's memory moved between them ('' where
    there is nothing to compare)."""
    from autotune.estimate.host_pool import anchor_of, compare
    from autotune.search.model import same_group

    if not result.launched or not result.figures or anchor_of(result.figures, result.config.mem_fraction_static) is None:
        return ""
    for earlier in reversed(results):
        if earlier.trial_id == result.trial_id or not earlier.launched or not same_group(earlier.config, result.config):
            continue
        anchor = anchor_of(earlier.figures, earlier.config.mem_fraction_static)
        if anchor is not None:
            found = compare(anchor, result.figures, result.config.mem_fraction_static)
            return found.sentence() + f" (anchor: trial {earlier.trial_id})" if found else ""
    return ""


def _unexplained(run: _Search, result: TrialResult, spec: Spec) -> str:
    """Why the run stops after `spec.budget.unexplained_crashes` launches in a row ended with no error
    line: the launcher or the target is then the likely cause (a wrong launcher, a container that kills
    what it starts), and every further launch would say as little. '' while the run goes on."""
    if not result.launched or result.outcome is Outcome.GPU_BUSY:
        return ""  # nothing ran, or the GPUs' state: says nothing either way
    with run.lock:
        run.unexplained = run.unexplained + 1 if any(n.startswith(UNEXPLAINED) for n in result.notes) else 0
        if run.unexplained < spec.budget.unexplained_crashes:
            return ""
    where = spec.target.describe() if not spec.target.local else "this host"
    return (f"{run.unexplained} launches in a row ended with no error line in the log (the last, trial "
            f"{result.trial_id}: {result.outcome.value} at {result.phase.value}: {result.remedy}). That points at "
            f"the environment, not the configs: the launcher ({' '.join(spec.launcher)}) and where it runs "
            f"({where}). Read {result.log_path or 'the last log'}, try one launch with `autotune trial`, "
            f"then run again (budget.unexplained_crashes: {spec.budget.unexplained_crashes})")


def _cancel_pointless(run: _Search, spec: Spec, gpu_mem_gib: float) -> None:
    """After a result is in: stop the servers of this run's other slots whose points it made
    pointless (implied, dominated, or out of their group's open interval; Strategy.pointless).
    Their trials end FAIL with the reason in `cancelled` and teach nothing. A slot whose server
    has not started yet is stopped by its own phase callback (see `_run_trial`)."""
    if spec.parallel == 1:
        return
    with run.lock:
        others = {s: p for s, p in run.points.items() if s not in run.cancels}
        if not others:
            return
        knowledge, predictor = _model(run.study, run.space, spec, gpu_mem_gib, run.model)
        doomed = []
        for s, point in others.items():
            why = run.strat.pointless(point, knowledge, predictor)
            if why:
                run.cancels[s] = why
                doomed.append(run.active[s])
    for tag in doomed:  # outside the lock: a kill waits for the tree to die
        stop_tagged(tag, target_doc(spec.target))


def _search_in_slots(run: _Search, spec: Spec) -> None:
    """One thread per slot, each on its own GPUs (its own CUDA_VISIBLE_DEVICES, port, baseline,
    busy check and release wait, all per `slot spec.gpus`); a slot's failure touches only its own
    server. Ctrl-C/SIGTERM (raised in this thread): every slot's server is stopped, their trials
    are marked interrupted, not judged."""
    threads = [threading.Thread(target=_search, args=(run, spec), name=f"search-{i}", daemon=True)
               for i in range(len(run.pool))]
    for t in threads:
        t.start()
    try:
        while any(t.is_alive() for t in threads):
            for t in threads:
                t.join(0.2)
    except BaseException:
        _stop_everything(run, spec, threads)
        raise


def _stop_everything(run: _Search, spec: Spec, threads: Sequence[threading.Thread] = ()) -> None:
    """Ctrl-C/SIGTERM: every server this run started (search trials and certification boots) is
    stopped, here or inside the spec's target; their threads are given a minute to see it."""
    run.interrupted.set()
    for tag in {*run.active.values(), *run.pool.live.values()}:
        stop_tagged(tag, target_doc(spec.target))
    for t in [*threads, *([run.along.thread] if run.along and run.along.thread else [])]:
        t.join(60)


def _certify_if_settled(run: _Search, spec: Spec, gpu_mem_gib: float) -> None:
    """Start certifying the answer once nothing left to launch can beat it (`Strategy.settled`)."""
    if run.along is None or run.along.started or run.stopped:
        return
    with run.lock:
        results = store.results(run.study)
        best = goal_mod.best(results, spec.goal.order, spec.goal.required_features)
        if best is None:
            return
        knowledge, predictor = _model(run.study, run.space, spec, gpu_mem_gib, run.model)
        answer = goal_mod.key(best, spec.goal.order, spec.goal.required_features)
        if run.strat.settled(answer, spec.goal.order, spec.goal.required_features, knowledge, predictor):
            run.strat.answer_settled()
            run.along.start(results)


def _finish_certification(run: _Search, spec: Spec, along: Alongside, results: list[TrialResult],
                          wanted: bool) -> Certification | None:
    """The search has ended: certification's end (an early one waited for, else run now on the
    run's slots). An error in it (every slot busy with someone else's memory) stops the run as a fault."""
    try:
        return along.finish(results, certify=wanted)
    except AutotuneError as exc:
        run.stopped, run.fault = run.stopped or f"certification: {exc}", True
        return None
    except BaseException:
        _stop_everything(run, spec)
        raise


class _Serialized(Progress):
    """A Progress that slots share: one call at a time."""

    def __init__(self, inner: Progress) -> None:
        self._inner, self._lock = inner, threading.Lock()

    def __getattribute__(self, name: str) -> Any:
        if name.startswith("_"):
            return object.__getattribute__(self, name)
        method = getattr(self._inner, name)

        def call(*args: Any, **kwargs: Any) -> Any:
            with self._lock:
                return method(*args, **kwargs)
        return call


def _next_trial(study: optuna.Study, strat: Any, space: Space, spec: Spec, gpu_mem_gib: float,
                cache: dict[tuple[str, ...], tuple[Knowledge, EstimatorPredictor]] | None = None,
                ) -> tuple[optuna.trial.Trial | str | None, bool]:
    """The next trial to launch (or WAIT / None, see Strategy.propose), and whether trials of
    other workers are running. Chosen and asked under the study's claim (store.claim), with
    every RUNNING trial's point busy, so no point is launched twice across workers; trials of
    dead workers (no heartbeat for the grace period) are failed first, so their points return."""
    assert spec.shape is not None
    with store.claim(spec.storage, study.study_name):
        store.fail_stale(study)
        running = study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.RUNNING,))
        busy_keys = {spec.config(space.params_of(t.params)).key() for t in running if t.params}
        knowledge, predictor = _model(study, space, spec, gpu_mem_gib, cache)
        trial = strat.propose(study, knowledge, predictor, lambda point: spec.config(point).key() in busy_keys)
    # Without heartbeats (SQLite) a dead worker's trial never ends: wait only for this run's own slots.
    return trial, bool(running) and (store.has_heartbeats(study) or spec.parallel > 1)


def _model(study: optuna.Study, space: Space, spec: Spec, gpu_mem_gib: float,
           cache: dict[tuple[str, ...], tuple[Knowledge, EstimatorPredictor]] | None = None,
           ) -> tuple[Knowledge, EstimatorPredictor]:
    """What the finished trials say, and the estimator taught by them. `cache` keeps the last
    answer by the finished trials' ids: slots asking between two results (and the check for
    pointless points after one) share one model, predictions and all, instead of rebuilding it."""
    assert spec.shape is not None
    results = store.results(study)
    key = tuple(r.trial_id for r in results)
    if cache is not None and key in cache:
        return cache[key]
    knowledge = Knowledge(space, results, spec.shape.max_context)
    predictor = EstimatorPredictor(spec.shape, engine=spec.engine, engine_version=spec.engine_version,
                                   gpu_mem_gib=gpu_mem_gib, gpus=len(spec.gpus), concurrency=spec.goal.min_concurrency,
                                   config_of=spec.config, results=results)
    if cache is not None:
        cache.clear()
        cache[key] = knowledge, predictor
    return knowledge, predictor


def _trial_id(study: optuna.Study, trial: optuna.trial.Trial) -> str:
    return f"{study.study_name}-{store.study_tag(study)}-{trial.number:04d}"  # unique per host


def _run_trial(study: optuna.Study, trial: optuna.trial.Trial, space: Space, spec: Spec, settings: Any,
               backend: GpuBackend, progress: Progress, run: _Search, slot: int) -> TrialResult | None:
    point = space.params_of(trial.params)
    trial_id = _trial_id(study, trial)
    trial.set_user_attr(store.WORKER_ATTR, store.worker_identity(node=_machine(spec)))
    trial.set_user_attr(TRIAL_ID_ATTR, trial_id)
    progress.trial_started(trial.number, point, trial_id)
    on_phase = _phase_callback(run, slot, trial_id, spec, progress)
    extra_env = spec.trial_env(trial.number)
    if extra_env:
        settings = replace(settings, env={**settings.env, **extra_env})
        trial.set_user_attr("injected_env", extra_env)
    run.active[slot] = trial_id
    run.pool.live[slot] = trial_id
    start_s = time.time()
    try:
        with store.heartbeat(study, trial):
            result = run_trial(spec.config(point), settings, backend, trial_id, on_phase=on_phase)
        trial.set_user_attr(CLOCK_ATTR, {"slot": slot, "start_s": start_s, "end_s": time.time()})
    except BaseException:  # Ctrl-C, SIGTERM, or the tool's own error: the server is already stopped
        trial.set_user_attr("interrupted", True)
        study.tell(trial, state=optuna.trial.TrialState.FAIL)
        raise
    finally:
        with run.lock:
            run.active.pop(slot, None)
            run.points.pop(slot, None)
    if slot in run.cancels:  # stopped because a fresh result made its point pointless: no verdict on it
        trial.set_user_attr(store.CANCELLED_ATTR, run.cancels[slot])
        trial.set_user_attr("outcome", result.outcome.value)
        trial.set_user_attr(store.RESULT_ATTR, result.to_dict())  # for the report (results() reads COMPLETE only)
        study.tell(trial, state=optuna.trial.TrialState.FAIL)
        return result
    if run.interrupted.is_set():  # its server was stopped for the interrupt: no verdict on the config
        trial.set_user_attr("interrupted", True)
        study.tell(trial, state=optuna.trial.TrialState.FAIL)
        return None
    tell(study, trial, result, spec)
    return result


def _phase_callback(run: _Search, slot: int, trial_id: str, spec: Spec,
                    progress: Progress) -> Callable[[str, tuple[int, ...], tuple[int, ...]], None]:
    """The progress's phase callback, which also stops this slot's server once if its point was
    cancelled before the server had started (the canceller's kill found nothing to kill then)."""
    stopped = False

    def on_phase(phase: str, used_bytes: tuple[int, ...], totals: tuple[int, ...]) -> None:
        nonlocal stopped
        if slot in run.cancels and not stopped:
            stopped = True
            stop_tagged(trial_id, target_doc(spec.target))
        progress.phase(phase, used_bytes, totals)
    return on_phase


def _own_holders(evidence: tuple[str, ...], own_tag_prefix: str) -> list[str]:
    """'pid N (trial T)' for each memory holder named in `evidence` that carries this study's tag."""
    own = []
    for pid in sorted({int(p) for line in evidence for p in re.findall(r"\bpid (\d+)", line)}):
        try:
            tag = psutil.Process(pid).environ().get(TRIAL_ENV, "")
        except psutil.Error:
            continue
        if tag.startswith(own_tag_prefix):
            own.append(f"pid {pid} (trial {tag})")
    return own


def _mirror(path: Path, result: TrialResult) -> TrialResult:
    """Append to trials.jsonl; a full disk is noted on the result (the study already has it)."""
    try:
        store.append_jsonl(path, result.to_dict())
    except OSError as exc:
        return replace(result, notes=(*result.notes, f"{WRITE_FAILED}: {path}: {exc.strerror or exc}"))
    return result


def _stop_reason(result: TrialResult, own_tag_prefix: str) -> str:
    if result.outcome is Outcome.GPU_BUSY:
        own = _own_holders(result.evidence, own_tag_prefix)
        if own:  # not someone else's: this study's own server outlived its trial (or another command of it runs)
            return ("GPUs are busy with this study's own server(s), " + ", ".join(own) + ": another `autotune` "
                    "command on this study is running, or a server outlived its trial; stop it, then run again")
        return "GPUs are busy with someone else's memory: " + "; ".join(result.evidence)
    if not result.released:
        return "GPU memory was not released after a trial (" + "; ".join(result.notes) + "): stopping rather " \
               "than poisoning the next launches"
    failed_writes = [n for n in result.notes if n.startswith(WRITE_FAILED)]
    if failed_writes:
        return ("results could not be written (" + "; ".join(failed_writes) + "); the study database has every "
                "finished trial: free space, then run again to resume")
    return ""
