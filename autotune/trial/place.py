"""Where a trial's server runs: this machine (`Here`) or a target (`InTarget`, through its `Transport`).

The trial asks both the same questions, so it reads the same wherever its server runs: is a port
taken there, what the engine needs in its environment there, start the server there (a `Server`:
a `Supervisor` here, a `RemoteSupervisor` in a target), how this side reaches its port, what
recovery needs to find it, what it left in /dev/shm, and, for recovery, stop what carries a trial's
tag there. What differs is said once, in the place that differs: here, the server's process group
is recorded for recovery and an engine's unmapped start-up files are swept; in a target, the
helper does the looking and the killing, and an orphan's log is copied back.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

from autotune.engines import Engine, get_engine
from autotune.errors import TransportError
from autotune.redact import MASK
from autotune.settings import Target
from autotune.target.relay import Relay
from autotune.target.transport import RUN_ROOT, Transport, Tunnel, transport_for
from autotune.trial import oomkill, shm
from autotune.trial.ports import port_in_use
from autotune.trial.remote import HOSTREAD_TEXT, RemoteSupervisor, stop_there, sweep_there
from autotune.trial.supervisor import StopReport, Supervisor, kill_tagged
from autotune.trial.watch import ServerTree

ORPHAN_LOG_HEAD_BYTES = 32 << 20  # as a live trial's LogSink keeps: its head and its tail
ORPHAN_LOG_TAIL_BYTES = 16 << 20


class Server(ServerTree, Protocol):
    """One server's process tree, wherever it runs (the watcher's `ServerTree` and what the trial
    asks besides). Not thread-safe; one owner."""

    log_path: Path
    reconnects: int  # how often its log stream was reconnected (a target's; a local pipe never is)

    @property
    def removed_segments(self) -> Sequence[str]:
        """The /dev/shm segments its stop removed where it ran (a target's; here the trial removes them)."""
        ...

    @property
    def pid(self) -> int: ...

    @property
    def exit_unknown(self) -> bool:
        """It ended and nobody recorded its exit status (then `poll()` still says it ended)."""
        ...

    def start(self) -> None: ...

    def may_run(self) -> bool:
        """Whether a stop may still find something of it (the teardown stops only then)."""
        ...

    def cmdline(self) -> list[str]:
        """The running server's argv (psutil.NoSuchProcess once it is gone)."""
        ...

    def mapped_segments(self) -> set[str]:
        """The /dev/shm segments (here) its tree maps now: noted before a stop, removed after it."""
        ...

    def workers(self) -> dict[int, str] | None:
        """Its processes that hold a model's worth of memory now (pid: title); None where they cannot be read now."""
        ...

    def stop(self, *, grace_s: float = 10.0, kill_now: bool = False) -> StopReport: ...

    def clean_up(self, notes: list[str]) -> threading.Thread | None:
        """Once stopped: remove what it leaves where it ran, in a thread beside the release wait
        (None when nothing is left), appending to `notes` what could not be removed."""
        ...


class Place(Protocol):
    """Where a trial's server runs."""

    def preflight(self) -> None:
        """Before anything is launched: can the place be reached (TransportError naming the field)."""
        ...

    def known_taken(self, host: str, port: int) -> bool:
        """Whether `port` is taken there, where that is known without a round trip (a drawn port's
        first check; `port_in_use` asks before the launch)."""
        ...

    def port_in_use(self, host: str, port: int) -> bool: ...

    def engine_env(self, engine: Engine, launcher: Sequence[str]) -> dict[str, str]:
        """What `engine` needs in its server's environment there (beyond the spec's `env`)."""
        ...

    def server(self, argv: Sequence[str], *, trial_id: str, log_path: Path, env: Mapping[str, str],
               secrets: Sequence[str]) -> Server:
        """The server, not yet started; `env` is what crosses there on top of that side's own."""
        ...

    def reach(self, port: int, *, tag: str) -> Tunnel | Relay | None:
        """How this side reaches 127.0.0.1:`port` there: None when directly."""
        ...

    def recovery_record(self, server: Server) -> dict[str, Any]:
        """What `running.json` keeps of a started server for `stop_tagged` after this tuner dies."""
        ...

    def sweep_leftovers(self, engine: str, since: float) -> list[str]:
        """What `engine` leaves in /dev/shm unmapped since `since`, removed; their names."""
        ...

    def oom_kills(self) -> int | None:
        """The kernel's count of its OOM kills where the server runs (`oomkill.kills`); None where it is not read."""
        ...

    def stop_tagged(self, trial_id: str, pgids: Sequence[int] = (), log_to: Path | None = None,
                    secrets: Sequence[str] = (), said: list[str] | None = None) -> list[int]:
        """Kill what carries the tag there; the pids as that side sees them (see `run.stop_tagged`)."""
        ...


class Here:
    """This machine: a local process group, ports on this host, nothing to tunnel."""

    def preflight(self) -> None:
        return None  # the tool runs here: nothing to reach

    def known_taken(self, host: str, port: int) -> bool:
        return port_in_use(host, port)

    def port_in_use(self, host: str, port: int) -> bool:
        return port_in_use(host, port)

    def engine_env(self, engine: Engine, launcher: Sequence[str]) -> dict[str, str]:
        return engine.launch_env(launcher)  # what this machine has is checked by the engine itself

    def server(self, argv: Sequence[str], *, trial_id: str, log_path: Path, env: Mapping[str, str],
               secrets: Sequence[str]) -> Server:
        return Supervisor(argv, trial_id=trial_id, log_path=log_path, env={**os.environ, **env}, secrets=secrets)

    def reach(self, port: int, *, tag: str) -> Tunnel | Relay | None:
        return None

    def recovery_record(self, server: Server) -> dict[str, Any]:
        # The server's process group, for a recovery after this tuner dies: its members whose
        # tag a renamed process title has blanked are still found by it (supervisor module doc).
        return {"server_pgid": server.pid}

    def sweep_leftovers(self, engine: str, since: float) -> list[str]:
        """Its adapter's `shm_leftovers`, while no other server of that engine runs on this host."""
        adapter = get_engine(engine)
        if not adapter.shm_leftovers:
            return []
        from autotune.gpu.hostmem import processes_of

        return shm.sweep_leftovers(adapter.shm_leftovers, since, others_running=bool(processes_of(adapter)))

    def oom_kills(self) -> int | None:
        return oomkill.kills()

    def stop_tagged(self, trial_id: str, pgids: Sequence[int] = (), log_to: Path | None = None,
                    secrets: Sequence[str] = (), said: list[str] | None = None) -> list[int]:
        return kill_tagged(trial_id, pgids=list(pgids))  # the log here is the whole of it already


class InTarget:
    """A target reached through `transport`: the helper starts, finds and stops the server there."""

    def __init__(self, transport: Transport) -> None:
        self.transport = transport

    def preflight(self) -> None:
        self.transport.preflight()  # TransportError naming the field, before anything is launched
        self.transport.network()  # shared or the container's own (told once): how HTTP will reach it

    def known_taken(self, host: str, port: int) -> bool:
        return False  # asked in `port_in_use`: no round trip before the transport's own check

    def port_in_use(self, host: str, port: int) -> bool:
        return bool(self.transport.helper("port", host, str(port))["in_use"])

    def engine_env(self, engine: Engine, launcher: Sequence[str]) -> dict[str, str]:
        """For an engine that needs them, the target's driver facts, asked there once per transport."""
        driver = None
        if engine.needs_driver_facts:
            from autotune.engines.base import DriverFacts

            driver = DriverFacts.from_answer(self.transport.driver_facts(launcher[0]),
                                             f"in the target ({self.transport.target.describe()})")
        return engine.launch_env(launcher, local=False, driver=driver)

    def server(self, argv: Sequence[str], *, trial_id: str, log_path: Path, env: Mapping[str, str],
               secrets: Sequence[str]) -> Server:
        return RemoteSupervisor(self.transport, argv, trial_id=trial_id, log_path=log_path, env=env, secrets=secrets)

    def reach(self, port: int, *, tag: str) -> Tunnel | Relay | None:
        # it binds 127.0.0.1 there: reach it by an ssh tunnel, or a relay into a container's own network
        return self.transport.reach(port, tag=tag)

    def recovery_record(self, server: Server) -> dict[str, Any]:
        return {}  # found by its tag there (`target_doc` says where)

    def sweep_leftovers(self, engine: str, since: float) -> list[str]:
        """As `Here.sweep_leftovers`, run in the target by the helper (`remote.sweep_there`)."""
        adapter = get_engine(engine)
        if not adapter.shm_leftovers:
            return []
        return sweep_there(self.transport, adapter.shm_leftovers, time.time() - since, adapter.process_titles,
                           adapter.server_modules)

    def oom_kills(self) -> int | None:
        """The target's kernel's count, read there by the same code (None when the round trip fails)."""
        try:
            count = self.transport.helper("oomkills", stdin=HOSTREAD_TEXT)["oom_kills"]
        except (TransportError, KeyError, TypeError):
            return None
        return None if count is None else int(count)

    def stop_tagged(self, trial_id: str, pgids: Sequence[int] = (), log_to: Path | None = None,
                    secrets: Sequence[str] = (), said: list[str] | None = None) -> list[int]:
        """The trial's run directory goes too, once nothing tagged is left (its tuner, which would
        have removed it, is gone), its log copied to `log_to` first (see `copy_orphan_log`)."""
        answer = stop_there(self.transport, trial_id, 0, kill_now=True)
        if answer.get("shm_removed") and said is not None:
            said.append(f"removed {len(answer['shm_removed'])} /dev/shm segment(s) its processes mapped there")
        if trial_id and not answer.get("left"):
            run_dir = f"{RUN_ROOT}/{trial_id}"
            if log_to is not None:
                note = copy_orphan_log(self.transport, run_dir, log_to, secrets)
                if said is not None:
                    said.append(note)
            self.transport.helper("clean", run_dir, trial_id)
        return sorted(set(answer["terminated"]) | set(answer["killed"]))


def place_for(target: Target) -> Place:
    """This machine for a local target, else the target through its one transport."""
    return Here() if target.local else InTarget(transport_for(target))


def target_doc(target: Target) -> dict[str, Any] | None:
    """The target as running.json keeps it, so recovery reaches the same place. No secrets in it."""
    if target.local:
        return None
    return {"ssh": target.ssh, "ssh_options": list(target.ssh_options), "exec_prefix": list(target.exec_prefix),
            "python": target.python, "network": target.network}


def place_of(doc: Mapping[str, Any] | None) -> Place:
    """The place a `target_doc` names (None: here)."""
    if not doc:
        return Here()
    return place_for(Target(ssh=doc.get("ssh"), ssh_options=tuple(doc.get("ssh_options", ())),
                            exec_prefix=tuple(doc.get("exec_prefix", ())), python=doc.get("python", "python3"),
                            network=doc.get("network", "auto")))


def copy_orphan_log(transport: Transport, run_dir: str, dest: Path, secrets: Sequence[str]) -> str:
    """The target's log of a stopped orphan over its partial local copy (which ends where its dead
    tuner stopped reading): the target's is the whole of it. Bounded (head + tail, a marker line
    between), secrets scrubbed. Replaced at once, so a failed copy leaves the partial one. Returns
    a note for the user."""
    try:
        raw, _ = transport.helper_output("logcopy", run_dir, str(ORPHAN_LOG_HEAD_BYTES), str(ORPHAN_LOG_TAIL_BYTES),
                                         timeout_s=300.0)
    except TransportError as exc:
        return f"its log in the target could not be copied back ({exc})"
    for secret in secrets:
        if secret:
            raw = raw.replace(secret.encode(), MASK.encode())
    before = dest.stat().st_size if dest.exists() else 0
    tmp = dest.with_name(dest.name + ".recovered")
    try:
        tmp.write_bytes(raw)
        os.replace(tmp, dest)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        return f"its log could not be written to {dest}: {exc}"
    return f"its log copied back from the target ({len(raw)} bytes; {before} had been read before its tuner died)"
