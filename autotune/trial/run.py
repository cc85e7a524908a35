"""One trial, start to finish: `run_trial(config, settings, backend) -> TrialResult`.

1. refuse busy GPUs (GPU_BUSY, nothing launched) and take a memory baseline;
2. check the argv against the engine's own flag table and the intent (CONFIG_ERROR or
   MISMATCH without spending a launch);
3. spawn in its own process group, watch log + GPUs + HTTP until the start-up is decided;
4. on READY: verify intent (process argv and /server_info), KV capacity against the goal
   (KV_TOO_SMALL), then the probe (OOM_RUNTIME when it kills the server);
5. stop the whole tree, wait for the memory to come back, record everything.
An OOM is a result, never an exception. Exceptions are for the tool's own trouble.
"""

from __future__ import annotations

import json
import os
import socket
import threading
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import psutil
import requests

from autotune import flagtable
from autotune.classifier.classify import LogClassifier
from autotune.config import LaunchConfig
from autotune.engines import ENGINES, Engine, get_engine, verify
from autotune.errors import LaunchError, TransportError
from autotune.gpu.base import GpuBackend
from autotune.records import (
    WORST_CASE_INFO_KEY,
    Classification,
    Need,
    Outcome,
    Phase,
    ProbeResult,
    TrialResult,
)
from autotune.redact import redact_argv, redact_text, secret_values
from autotune.settings import TrialSettings
from autotune.target.relay import Relay
from autotune.target.transport import Tunnel
from autotune.trial import gpumem, oomkill, shm, worstcase
from autotune.trial.place import Place, Server, place_for, place_of, target_doc
from autotune.trial.ports import PortLease
from autotune.trial.probe import run_probe
from autotune.trial.watch import PhaseCallback, Watcher


class _Trial:
    """The state of one trial while it runs; `result()` freezes it into a TrialResult."""

    def __init__(self, config: LaunchConfig, settings: TrialSettings, backend: GpuBackend, trial_id: str) -> None:
        self.config, self.s, self.backend, self.trial_id = config, settings, backend, trial_id
        self.engine: Engine = get_engine(settings.engine)
        self.dir = settings.trials_dir / trial_id
        self.t0 = time.monotonic()
        self.wall_t0 = time.time()
        self.started_at = datetime.now(timezone.utc).isoformat(timespec="seconds")
        self.notes: list[str] = []
        self.place: Place = place_for(settings.target)
        self.oom_kills_before: int | None = None  # the kernel's OOM-kill count at the launch (`oomkill`)
        self.workers_at_ready: dict[int, str] | None = None  # the server's working processes at its ready line
        self.tunnel: Tunnel | Relay | None = None
        # Held until the trial ends (run_trial releases them): slots launching at once never share a port.
        # Drawn free where that is known without a round trip; `preflight` asks where the server runs.
        self.lease = PortLease()

        def taken(port: int) -> bool:
            return self.place.known_taken(settings.host, port)

        try:
            self.port = settings.port if settings.port is not None else self.lease.http(settings.host, taken)
            self.init_port = self.lease.init(taken)
            self.argv = self.engine.argv(config, version=settings.engine_version, launcher=list(settings.launcher),
                                         host=settings.host, port=self.port, init_port=self.init_port)
        except BaseException:
            self.lease.release()
            raise
        self.init_env = {self.engine.init_port_env: str(self.init_port)} if self.engine.init_port_env else {}
        # The key goes through the environment where the engine reads it there (never in `ps`).
        self.key_env = {self.engine.api_key_env: settings.api_key} if settings.api_key and self.engine.api_key_env \
            else {}
        if settings.api_key and not self.key_env:
            self.argv += ["--api-key", settings.api_key]
        self.secrets = [*secret_values(self.argv, settings.env), *([settings.api_key] if settings.api_key else [])]
        self.base_url = f"http://{'127.0.0.1' if settings.host in ('0.0.0.0', '::') else settings.host}:{self.port}"
        self.headers = {"Authorization": f"Bearer {settings.api_key}"} if settings.api_key else {}
        self.sup: Server | None = None
        self.watcher: Watcher | None = None
        self.trace: gpumem.MemoryTrace | None = None
        self.resolved: dict[str, Any] = {}
        self.worst_case_path: str | None = None  # where the server takes the worst case as one description
        self.kv_tokens: int | None = None
        self.mismatches: list[str] = []
        self.probe: ProbeResult | None = None
        self.released = True
        self.latency: float | None = None
        self.on_phase: PhaseCallback | None = None
        self.shm_segments: set[str] = set()  # /dev/shm paths the server's processes mapped when stopped

    # -- the verdict ------------------------------------------------------------------------

    def result(self, outcome: Outcome, phase: Phase, remedy: str, evidence: list[str] | tuple[str, ...],
               figures: Mapping[str, float] | None = None, exit_code: int | None = None,
               needs: Need | None = None) -> TrialResult:
        w = self.watcher
        wall = time.monotonic() - self.t0
        engine_s = w.state.engine_s if w else None
        return TrialResult(
            trial_id=self.trial_id, config=self.config, engine=self.s.engine, engine_version=self.s.engine_version,
            outcome=outcome, phase=phase, remedy=redact_text(remedy, self.secrets),
            evidence=tuple(redact_text(e, self.secrets) for e in evidence), figures=dict(figures or {}),
            argv=tuple(redact_argv(self.argv)), log_path=str(self.dir / "server.log") if self.sup else "",
            exit_code=exit_code, launched=self.sup is not None, wall_s=round(wall, 3),
            gpu_s=round(engine_s if engine_s is not None else (wall if self.sup else 0.0), 3),
            gpus=self.trace.summary() if self.trace else (), kv_tokens=self.kv_tokens,
            resolved=self.resolved, mismatches=tuple(self.mismatches), probe=self.probe, released=self.released,
            verdict_latency_s=self.latency, notes=tuple(self.notes), started_at=self.started_at, needs=needs,
        )

    def from_log(self, cls: Classification, exit_code: int | None) -> TrialResult:
        outcome = cls.outcome or Outcome.CRASH
        evidence = list(cls.evidence)
        if not evidence and self.watcher:
            evidence = list(self.watcher.state.tail)[-6:]
        remedy = cls.remedy or "look at the evidence and the log"
        if exit_code == 0 and cls.outcome is None:
            remedy = "the server exited 0 before it was ready; look at the log"
        return self.result(outcome, cls.phase, remedy, evidence, cls.figures, exit_code, cls.needs)

    # -- steps ------------------------------------------------------------------------------

    def preflight(self) -> TrialResult | None:
        s = self.s
        self.place.preflight()  # TransportError naming the field, before anything is launched
        if not s.allow_busy:
            reasons = gpumem.busy_reasons(self.backend, s.gpus)
            refusal = self.backend.start_refusal  # the engine's own check (None where the backend knows none)
            if refusal is not None and self.config.mem_fraction_static is not None:
                reasons += [r for g in gpumem.pick(self.backend.snapshot(), s.gpus)
                            if (r := refusal(g, self.config.mem_fraction_static))]
            if reasons:
                return self.result(Outcome.GPU_BUSY, Phase.SPAWN,
                                   "free the GPUs (or wait for them); a busy GPU says nothing about the config",
                                   reasons)
        if self.in_use(self.port):
            raise LaunchError(f"port {self.port} on {s.host} is already in use",
                              hint="leave the spec's port unset to pick a free port per trial")
        if self.in_use(self.init_port):  # taken since it was drawn: an outsider, this process holds it
            raise LaunchError(f"distributed-init port {self.init_port} on {s.host} was taken just before launch",
                              hint="run again; if it recurs, something on the host binds ports in 22000-29999")
        flags = self.engine.flags_of(self.argv)
        try:
            intent = self.engine.intent_from_argv(flags, s.engine_version)
        except flagtable.FlagError as exc:
            return self.result(Outcome.CONFIG_ERROR, Phase.ARGS,
                               f"the {s.engine} {s.engine_version} parser rejects the flags: fix the space or extra_args",
                               [str(exc)])
        self.mismatches = verify(intent, self.config, source="argv", init_port=self.init_port)
        if self.mismatches:
            return self.result(Outcome.MISMATCH, Phase.ARGS, "the command line does not say what the config says: "
                               "fix the adapter or the spec's extra_args/launcher", self.mismatches)
        return None

    def engine_env(self) -> dict[str, str]:
        """What the engine needs in its environment where its server runs."""
        return self.place.engine_env(self.engine, self.s.launcher)

    def in_use(self, port: int) -> bool:
        """Whether `port` is taken where the server runs."""
        return self.place.port_in_use(self.s.host, port)

    def launch(self) -> TrialResult:
        s = self.s
        self.trace = gpumem.start_trace(self.backend, s.gpus)
        base = self.trace.base
        # The engine's own needs first (SGLang's CPU path: its engine switch, the driver stand-in), then the
        # spec's: a VLLM_PORT the spec sets wins (the intent check cannot see env).
        env = {**self.init_env, **self.engine_env(), **s.env, **self.key_env}
        env.setdefault("CUDA_VISIBLE_DEVICES", ",".join(str(g) for g in s.gpus))
        env.setdefault("CUDA_DEVICE_ORDER", "PCI_BUS_ID")  # so CUDA's indices are NVML's
        self.sup = self.place.server(self.argv, trial_id=self.trial_id, log_path=self.dir / "server.log", env=env,
                                     secrets=self.secrets)
        running = self.dir / RUNNING_FILE
        state = {"trial_id": self.trial_id, "pid": os.getpid(), "host": socket.gethostname(),
                 "started_at": self.started_at, "started_epoch": self.wall_t0, "engine": self.s.engine, "target": target_doc(self.s.target),
                 "baseline_bytes": {str(i): b for i, b in base.items()}}
        running.write_text(json.dumps(state))
        self.oom_kills_before = self.place.oom_kills()
        try:  # whatever happens from here on (OOM, Ctrl-C, SIGTERM, a bug), the tree is stopped
            self.sup.start()
            self.tunnel = self.place.reach(self.port, tag=self.trial_id)
            if self.tunnel is not None:
                self.base_url = f"http://127.0.0.1:{self.tunnel.local_port}"
            running.write_text(json.dumps({**state, **self.place.recovery_record(self.sup)}))
            self.watcher = Watcher(self.sup, LogClassifier(self.engine.name), self.backend, self.trace, self.base_url,
                                   self.engine.health_path(), s.deadlines, self.headers, self.on_phase)
            result = self.follow()
        finally:
            self.teardown(base)
            running.unlink(missing_ok=True)
        return self._with_release(result)

    def follow(self) -> TrialResult:
        assert self.sup is not None and self.watcher is not None
        w = self.watcher
        state = w.until_started()
        if state in ("failed", "exited", "stopped"):
            self.stop(kill_now=True)  # a failed server has nothing to save
            if w.state.exit_code is None:
                self.notes.append("killed by the tool as soon as the log was decisive")
            w.step()  # what the dying ranks wrote after the decisive line (the cause can come below it)
            cls = w.classifier.classification(w.state.exit_code, log_complete=True)
            exit_code = self.exit_code()
            killed = self.killed_for_memory(cls)
            if killed is not None:  # a SIGKILL writes no line: what the log says is the other processes' echo
                self.notes.append("the kernel's OOM killer ended a process during the launch")
                return self.from_log(killed, exit_code)
            if state == "stopped" and cls.outcome in (None, Outcome.CRASH, Outcome.READY):  # its engine built, unready
                return self.from_log(replace(cls, outcome=Outcome.CRASH, remedy=STOPPED_FROM_OUTSIDE), exit_code)
            if cls.outcome in (None, Outcome.CRASH) and not w.classifier.decisive:
                self.notes.append(f"{UNEXPLAINED}: the server ended without an error line the classifier knows "
                                  "(a verdict on the environment more likely than on the config)")
                if self.sup.exit_unknown:
                    cls = replace(cls, remedy="it vanished before it was ready with no exit status and no error "
                                  "in the log: the waiter the target's helper left with it died too (killed from "
                                  "outside the tool, or by the host's OOM killer)")
            return self.from_log(cls, exit_code)
        if state == "timeout":
            self.stop(kill_now=False)
            cls = w.classifier.classification(None)
            return self.result(Outcome.TIMEOUT, cls.phase, f"{w.state.timed_out}: raise the deadline if the "
                               "engine is just slow, else look at the log's last lines", list(w.state.tail)[-6:],
                               cls.figures)
        return self.when_ready()

    def when_ready(self) -> TrialResult:
        assert self.sup is not None and self.watcher is not None
        self.workers_at_ready = self.sup.workers()
        cls = self.watcher.classifier.classification(None)
        figures = dict(cls.figures)
        figures["startup_wall_s"] = round(time.monotonic() - self.t0, 3)
        if self.watcher.state.engine_s is not None:
            figures["startup_engine_s"] = round(self.watcher.state.engine_s, 3)
        try:
            info = requests.get(self.base_url + self.engine.info_path(), headers=self.headers, timeout=10).json()
        except (requests.RequestException, ValueError) as exc:
            info = {}
            self.notes.append(f"{self.engine.info_path()} unreadable: {exc}")
        self.mismatches = self.verify_running(info)
        self.kv_tokens = self.engine.kv_tokens(info) or _int(figures.get("kv_tokens"))
        context = self.config.context_length or _int(info.get("context_length")) or _int(figures.get("context_len"))
        self.resolved = {k: info.get(k) for k in ("mem_fraction_static", "context_length", "max_running_requests",
                                                  "chunked_prefill_size", "speculative_algorithm") if k in info}
        described = info.get(WORST_CASE_INFO_KEY)  # the simulator takes the worst case as one description
        self.worst_case_path = described if isinstance(described, str) else None
        if self.mismatches:
            return self.result(Outcome.MISMATCH, Phase.READY, "what runs is not what was asked: fix the adapter",
                               self.mismatches, figures)
        need = (context or 0) * self.s.required_concurrency
        if self.kv_tokens is not None and context and self.kv_tokens < need:
            return self.result(Outcome.KV_TOO_SMALL, Phase.READY,
                               f"KV pool holds {self.kv_tokens} tokens < {need} needed (context {context} x "
                               f"{self.s.required_concurrency}): raise mem_fraction_static or lower the context",
                               [f"max_total_num_tokens={self.kv_tokens}"], figures)
        if self.s.probe.enabled:
            probed = self.run_probe(context or 4096)
            if probed is not None:
                return probed
        return self.result(Outcome.READY, Phase.PROBE if self.s.probe.enabled else Phase.READY, "",
                           [f"ready: /health 200, max_total_num_tokens={self.kv_tokens}"], figures)

    def verify_running(self, info: Mapping[str, Any]) -> list[str]:
        assert self.sup is not None
        problems: list[str] = []
        try:
            flags = self.engine.flags_of(self.sup.cmdline())
            problems += verify(self.engine.intent_from_argv(flags, self.s.engine_version), self.config,
                               source="process argv", init_port=self.init_port)
        except (psutil.Error, flagtable.FlagError) as exc:
            problems.append(f"process argv unreadable: {exc}")
        if info:
            problems += verify(self.engine.intent_from_server_info(info), self.config, source="server_info",
                               init_port=self.init_port)
        if self.sup.log_path.is_file():  # vLLM prints the args it was given; an engine that does not answers None
            intent = self.engine.intent_from_log(self.sup.log_path.read_text(errors="replace"), self.s.engine_version)
            if intent is not None:
                problems += verify(intent, self.config, source="server log")
        return problems

    def run_probe(self, context: int) -> TrialResult | None:
        assert self.sup is not None and self.watcher is not None
        w = self.watcher
        stop = threading.Event()

        def keep_watching() -> None:
            while not stop.is_set() and w.alive_and_clean():
                time.sleep(w.deadlines.poll_s)

        thread = threading.Thread(target=keep_watching, daemon=True)
        thread.start()
        try:
            if self.s.probe.worst_case:
                # the running batch the server took (SGLang serves it), else the one the launch asked for
                # and verify_running confirmed from the argv (vLLM serves no such figure)
                running = _int(self.resolved.get("max_running_requests")) or self.config.max_running_requests or 1
                load = worstcase.plan(kv_tokens=self.kv_tokens or context, context_len=context,
                                      max_running_requests=running, max_new_tokens=self.s.probe.max_new_tokens)
                self.probe = worstcase.run_worst_case(self.base_url, load, deadline_s=self.s.probe.timeout_s,
                                                      model=self.config.model_path, path=self.engine.probe_path(),
                                                      headers=self.headers,
                                                      description_path=self.worst_case_path,
                                                      body=self.engine.probe_body)
            else:
                self.probe = run_probe(self.base_url, self.s.probe, context_len=context,
                                       kv_tokens=self.kv_tokens or context, model=self.config.model_path,
                                       path=self.engine.probe_path(), headers=self.headers,
                                       body=self.engine.probe_body)
        finally:
            stop.set()
            thread.join()
        if self.probe.ok and self.sup.poll() is None and not w.classifier.decisive:
            return None
        w.step()
        if self.sup.poll() is None and not w.classifier.decisive:
            lost = self.worker_lost()  # its front end answers, the process that served is gone
            if lost is not None:
                return lost
            if self.probe.timed_out:
                return self.too_slow()
        deadline = time.monotonic() + 10.0  # let a dying server finish writing why
        while self.sup.poll() is None and not w.classifier.decisive and time.monotonic() < deadline:
            w.step()
            time.sleep(w.deadlines.poll_s)
        self.stop(kill_now=True)
        w.step()
        cls = w.classifier.classification(self.sup.poll(), log_complete=True)
        outcome = Outcome.OOM_RUNTIME if cls.outcome and cls.outcome.is_oom else Outcome.CRASH
        evidence = list(cls.evidence) or [self.probe.error if self.probe else "probe failed"]
        remedy = cls.remedy if outcome is Outcome.OOM_RUNTIME else f"the server failed under the probe: {self.probe.error if self.probe else ''}"
        return self.result(outcome, Phase.PROBE, remedy or "lower mem_fraction_static or the chunked prefill size",
                           evidence, cls.figures, self.exit_code())

    def killed_for_memory(self, cls: Classification) -> Classification | None:
        """`cls` read again by the kernel's OOM-kill count where the server runs, since the launch (`oomkill.reading`)."""
        return oomkill.reading(cls, self.oom_kills_before, self.place.oom_kills(),
                               host_device=self.engine.device == "host")

    def worker_lost(self) -> TrialResult | None:
        """The probe failed or went unanswered while the server's front end stayed up, and a working process of it that
        was there at the ready line is gone (SGLang 0.5.9 says nothing when its scheduler dies: tests/data/launch-census,
        kill-ready): a crash, named, not a slow machine or a request's error; the kernel's OOM killer, when its count
        grew, an out-of-memory. None when every working process is there, or they could not be read (a target's round
        trip failed)."""
        assert self.probe is not None and self.sup is not None and self.watcher is not None
        before, now = self.workers_at_ready, self.sup.workers()
        if before is None or now is None:
            return None
        lost = {pid: title for pid, title in before.items() if pid not in now}
        if not lost:
            return None
        self.stop(kill_now=True)  # what is left of it serves nothing
        self.watcher.step()
        cls = self.watcher.classifier.classification(self.sup.poll(), log_complete=True)
        gone = "; ".join(f"pid {pid} ({title})" for pid, title in lost.items())
        evidence = [self.probe.error, f"gone since the ready line: {gone}", *cls.evidence]
        killed = self.killed_for_memory(replace(cls, outcome=None, phase=Phase.READY))
        if killed is not None and killed.outcome is not None:
            return self.result(killed.outcome, Phase.PROBE, killed.remedy, evidence, cls.figures, self.exit_code())
        return self.result(Outcome.CRASH, Phase.PROBE,
                           f"a process of the server died while it served ({gone}) and its front end stayed up, so "
                           f"the probe went unanswered ({self.probe.error}): a crash, not a slow machine. The log "
                           "says why unless a SIGKILL ended it (from outside the tool, or the host's OOM killer)",
                           evidence, cls.figures, self.exit_code())

    def too_slow(self) -> TrialResult:
        """The worst case outlived its deadline on a server that is up and printed no OOM: a verdict
        on the machine's speed, not on the config's memory (TIMEOUT judges nothing)."""
        assert self.probe is not None and self.sup is not None and self.watcher is not None
        self.stop(kill_now=False)  # a healthy server, only busy: the usual SIGTERM, grace, SIGKILL
        self.watcher.step()
        figures = self.watcher.classifier.classification(self.sup.poll(), log_complete=True).figures
        deadline = self.s.probe.timeout_s
        return self.result(Outcome.TIMEOUT, Phase.PROBE,
                           f"{self.probe.error}; the server was still up with no out-of-memory line, "
                           f"so this is compute speed, not memory. Allow longer: certify.deadline_s in the spec or "
                           f"`autotune certify --deadline-s N` (now {deadline:g} s)",
                           [self.probe.error], figures, self.exit_code())

    def exit_code(self) -> int | None:
        """The server's exit status for the record: None while it runs, and where none was recorded."""
        assert self.sup is not None
        code = self.sup.poll()
        return None if self.sup.exit_unknown else code

    # -- teardown -------------------------------------------------------------------------------

    def stop(self, *, kill_now: bool) -> None:
        assert self.sup is not None and self.watcher is not None
        decided = self.watcher.state.decisive_line_read_at
        self.note_segments()
        report = self.sup.stop(grace_s=self.s.grace_s, kill_now=kill_now)
        if decided is not None and self.latency is None:
            self.latency = round(time.monotonic() - decided, 3)
        if report.swept_pids:
            self.notes.append(f"swept tagged stragglers outside the process group: {report.swept_pids}")

    def note_segments(self) -> None:
        """Remember the shared-memory segments the server's tree maps, before it is killed."""
        assert self.sup is not None
        self.shm_segments |= self.sup.mapped_segments()

    def teardown(self, base: dict[int, int]) -> None:
        if self.tunnel is not None:
            self.tunnel.close()
            if self.tunnel.reopened:
                what = "relay" if isinstance(self.tunnel, Relay) else "tunnel"
                self.notes.append(f"the {what} to the server was re-opened {self.tunnel.reopened} time(s): "
                                  "the connection to the target dropped")
        assert self.sup is not None
        if self.sup.reconnects:
            self.notes.append(f"the log stream reconnected {self.sup.reconnects} time(s) (from its byte offset)")
        if self.sup.may_run():
            self.note_segments()
            if self.watcher is None:
                self.sup.stop(grace_s=self.s.grace_s)
            else:
                self.stop(kill_now=False)
        cleaner = self.sup.clean_up(self.notes)  # beside the release wait: each is a round trip in a target
        removed = shm.remove_unmapped(self.shm_segments) + list(self.sup.removed_segments)  # here, or there
        # and what the engine leaves unmapped (SGLang's start-up files)
        try:
            removed += self.place.sweep_leftovers(self.s.engine, self.wall_t0)
        except TransportError as exc:  # the target went away: what it left there is said, not lost silently
            self.notes.append(f"could not sweep /dev/shm in the target for what the server left: {exc}")
        if removed:  # memory too: a segment keeps its pages until unlinked
            self.notes.append(f"removed {len(removed)} shared-memory segment(s) the server left in /dev/shm: "
                              + ", ".join(removed[:5]) + (" ..." if len(removed) > 5 else ""))
        ok, used = gpumem.wait_released(self.backend, base, self.s.release_timeout_s)
        if self.trace is not None:
            self.trace.add(time.monotonic() - self.t0, self.backend.snapshot())
        if not ok:
            self.released = False
            self.notes.append("GPU memory not back to baseline after stop: " + ", ".join(
                f"GPU {i}: {used[i] - base[i]} B above" for i in base if used[i] > base[i]))
        elif any(used[i] > base[i] + self.backend.release_tolerance_bytes for i in base):
            self.notes.append("no engine process holds memory any more; the device reads " + ", ".join(
                f"{i}: {(used[i] - base[i]) / (1 << 20):.0f} MiB" for i in base if used[i] > base[i])
                + " above its baseline, taken by other work on this host")
        if cleaner is not None:
            cleaner.join()

    def _with_release(self, result: TrialResult) -> TrialResult:
        if self.sup is not None and self.sup.sink is not None and self.sup.sink.write_error:
            self.notes.append(f"{WRITE_FAILED}: {self.sup.sink.write_error} (the log stopped there; the "
                              "verdict read every line)")
        if self.sup is not None and self.sup.sink is not None and self.sup.sink.unclassified_lines:
            self.notes.append(f"{self.sup.sink.unclassified_lines} flooded lines were not classified")
        return replace(result, released=self.released, notes=tuple(self.notes),
                       verdict_latency_s=self.latency, gpus=self.trace.summary() if self.trace else ())


def _int(value: Any) -> int | None:
    try:
        return int(value) if value is not None else None
    except (TypeError, ValueError):
        return None


RUNNING_FILE = "running.json"
WRITE_FAILED = "could not write"
STOPPED_FROM_OUTSIDE = ("the server logged a stop asked of it before it was ready, and not by this tool (a signal "
                        "from outside: an operator, a scheduler's preemption or time limit, a container's stop), then "
                        "stayed up unready: a launch ended from outside, which says nothing about the config. Find what "
                        "sends the signal")
UNEXPLAINED = "no deciding line"  # a note: the launch ended with no failure line the classifier knows


def recover_orphans(trials_dir: Path, backend: GpuBackend | None = None, release_timeout_s: float = 60.0,
                    secrets: Sequence[str] = ()) -> list[str]:
    """Trials whose tuner died (SIGKILL, reboot) on this host: stop what they left running.

    A trial directory holds `running.json` while its trial runs; if the tuner that wrote it
    is gone, every process still tagged with that trial id is killed and the trial is
    recorded as interrupted. In a target, the orphan's log there (all it wrote after its tuner
    died too) is copied back over the trial's `server.log` first, `secrets` scrubbed, bounded
    like a live trial's. Returns what was done, for the user.
    """
    done: list[str] = []
    killed: set[int] = set()
    baseline: dict[int, int] = {}  # per device, the lowest level recorded before an orphan's launch
    for state in sorted(trials_dir.glob(f"*/{RUNNING_FILE}")):
        try:
            info = json.loads(state.read_text())
        except (OSError, ValueError):
            info = {"trial_id": state.parent.name, "pid": -1, "host": socket.gethostname()}
        if info.get("host") != socket.gethostname() or psutil.pid_exists(int(info.get("pid", -1))):
            continue  # a live tuner's trial, or another host's
        for index, used in (info.get("baseline_bytes") or {}).items():
            baseline[int(index)] = min(int(used), baseline.get(int(index), int(used)))
        pgid = info.get("server_pgid")
        place = place_of(info.get("target"))
        copied: list[str] = []
        pids = place.stop_tagged(str(info["trial_id"]), pgids=[int(pgid)] if pgid else [],
                                 log_to=state.parent / "server.log", secrets=secrets, said=copied)
        killed.update(pids)
        if info.get("engine") in ENGINES:  # what it left in /dev/shm unmapped
            swept = place.sweep_leftovers(str(info["engine"]), float(info.get("started_epoch") or time.time()))
            if swept:
                copied.append(f"removed {len(swept)} /dev/shm file(s) it left: {', '.join(swept[:5])}")
        (state.parent / "interrupted.json").write_text(json.dumps({**info, "orphans_stopped": pids}))
        state.unlink(missing_ok=True)
        done.append(f"{info['trial_id']}: its tuner (pid {info.get('pid')}) died; "
                    f"{len(pids)} orphaned process(es) stopped" + "".join(f"; {c}" for c in copied))
    if done and backend is not None:
        gpumem.wait_gone(backend, killed, release_timeout_s)
        if baseline:  # back to where the device was before the orphans' launch (not to zero: a host never is)
            gpumem.wait_released(backend, baseline, release_timeout_s)
    return done


def stop_tagged(trial_id: str, target: Mapping[str, Any] | None, pgids: Sequence[int] = (),
                log_to: Path | None = None, secrets: Sequence[str] = (), said: list[str] | None = None) -> list[int]:
    """Kill what carries the tag, here (and the server's recorded process group) or in the target the
    trial ran in (`target`, its `target_doc`; pids as that side sees them). In a target, the trial's
    run directory goes too, once nothing tagged is left (its tuner, which would have removed it, is
    gone), its log copied to `log_to` first (`place.copy_orphan_log`; what was done is appended to `said`)."""
    return place_of(target).stop_tagged(trial_id, pgids, log_to, secrets, said)


def secrets_of(settings: TrialSettings) -> list[str]:
    """The secret values any trial of these settings carries (the API key, secret env and launcher
    values): what a recovered log is scrubbed of. Never written anywhere."""
    return [*secret_values(list(settings.launcher), settings.env), *([settings.api_key] if settings.api_key else [])]


def new_trial_id() -> str:
    return datetime.now().strftime("%Y%m%d-%H%M%S-") + uuid.uuid4().hex[:6]


def run_trial(config: LaunchConfig, settings: TrialSettings, backend: GpuBackend,
              trial_id: str | None = None, on_phase: PhaseCallback | None = None) -> TrialResult:
    """Launch `config` once and come back with how it ended. Never leaves a process behind.

    `on_phase(phase, used_bytes, total_bytes)` is called as the launch moves through its phases
    (and about every second), for a person watching.
    """
    trial = _Trial(config, settings, backend, trial_id or new_trial_id())
    trial.on_phase = on_phase
    try:
        trial.dir.mkdir(parents=True, exist_ok=True)
        early = trial.preflight()
        result = early if early is not None else trial.launch()
    finally:  # the server is stopped (launch's teardown): its ports may go to the next trial
        trial.lease.release()
    try:
        (trial.dir / "result.json").write_text(json.dumps(result.to_dict(), indent=1) + "\n")
    except OSError as exc:  # the result still reaches the caller (and the study): only the file is lost
        result = replace(result, notes=(*result.notes, f"{WRITE_FAILED}: {trial.dir / 'result.json'}: "
                                                       f"{exc.strerror or exc}"))
    return result
