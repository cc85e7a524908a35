"""The simulated SGLang server: `python -m autotune.sim.sglang <SGLang's own flags>`.

It parses SGLang's real flag table (0.5.23 by default, 0.5.9 with
`AUTOTUNE_SIM_SGLANG_VERSION=0.5.9`; argparse abbreviations and errors included),
reads `config.json` from `--model-path`, spawns one rank process per TP rank that holds
that rank's memory on the simulated node (`AUTOTUNE_SIM_NODE`), prints SGLang's log
lines in SGLang's order, serves SGLang's HTTP endpoints, and fails as SGLang fails:
a scheduler exception is printed by the ranks, which SIGQUIT the launcher, which logs
"Received sigquit from a child process" and SIGKILLs its whole tree, itself included.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from typing import Any, NoReturn

import psutil
from packaging.version import Version

from autotune import flagtable
from autotune.engines.sglang.traits import TRAITS, traits_for
from autotune.engines.versions import flag_table
from autotune.errors import AutotuneError, SpecError
from autotune.modelshape import ModelShape
from autotune.modelshape import load as load_shape
from autotune.sim import costs, sglang_frames
from autotune.sim import faults as sim_faults
from autotune.sim.node import SimNode
from autotune.sim.rank import emit
from autotune.sim.ranks import Clock, RankDied, RankIO, port_below_ephemeral, visible_gpus
from autotune.sim.sglang_args import LaunchFailure, Resolved, resolve
from autotune.sim.sglang_engine import SchedulerFailure, SglangEngine

ENV_VERSION = "AUTOTUNE_SIM_SGLANG_VERSION"


def launcher_traceback(version: str, exc_line: str, frames: tuple[str, ...]) -> list[str]:
    """What the launcher prints when it fails before spawning the schedulers (then exits 1)."""
    return ["Traceback (most recent call last):",
            *(f'  File "{frame}' for frame in ('/usr/lib/python3.12/runpy.py", line 198, in _run_module_as_main',
                                               *sglang_frames.frames(version, "launcher"), *frames)),
            *exc_line.split("\n")]


def scheduler_traceback(version: str, exc: SchedulerFailure, rank: int) -> list[str]:
    """What a failing rank prints after its prefix: SGLang's run_scheduler_process logs the
    traceback of what `Scheduler(...)` (start-up) or the event loop (serving) raised."""
    entry = sglang_frames.frames(version, "scheduler_serve" if exc.phase == "serve" else "scheduler_init")
    return ["Scheduler hit an exception: Traceback (most recent call last):",
            *(f'  File "{frame}' for frame in (*entry, *exc.frames)), *exc.line_for(rank).split("\n")]


class Launcher:
    """The launcher process: owns the ranks, the HTTP server and the failure path."""

    def __init__(self, version: str, argv: list[str]) -> None:
        self.version = version
        self.traits = traits_for(version)
        self.argv = argv
        self.faults = sim_faults.from_env()
        self.clock = Clock(sim_faults.time_scale())
        self.serving = False  # after uvicorn starts, SIGQUIT is handled by the "tokenizer manager"
        self.io: RankIO | None = None
        self.http: Any = None
        self.wakeup = -1  # read end of the signal wakeup pipe (install_signals)

    # -- process behaviour -----------------------------------------------------------------

    def install_signals(self) -> None:
        """Handlers for SIGQUIT/SIGTERM, and a wakeup pipe so that `wait_for_signals` cannot miss one."""
        read_end, write_end = os.pipe()
        os.set_blocking(write_end, False)
        signal.set_wakeup_fd(write_end, warn_on_full_buffer=False)
        self.wakeup = read_end
        signal.signal(signal.SIGQUIT, self.on_sigquit)
        if self.faults.on("ignore_sigterm"):
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
        else:
            signal.signal(signal.SIGTERM, self.on_sigterm)

    def log(self, message: str) -> None:
        if not self.faults.on("silent"):
            emit(f"[{self.clock.stamp()}] {message}")

    def wait_for_signals(self) -> NoReturn:
        """Block the main thread until a signal's handler ends the process.

        Waits on the wakeup pipe, to which CPython's C-level handler writes every signal, in whatever
        thread the kernel delivered it. `time.sleep`/`signal.pause` lose a signal that lands after the
        interpreter's last check and before the syscall, or that another thread takes: the handler
        then waits for the sleep to end (a launcher that outlived its own failure by a minute). A
        signal that came earlier is still a byte in the pipe, so this returns at once and the handler
        runs on the next bytecode.
        """
        assert threading.current_thread() is threading.main_thread() and self.wakeup >= 0
        while True:
            os.read(self.wakeup, 64)

    def on_sigquit(self, signum: int, frame: Any) -> None:
        if self.serving and self.traits.logs_kill_process_tree:
            self.log(f"SIGQUIT received. signum={signum}, frame=None. It usually means one child failed.")
        else:
            self.log("Received sigquit from a child process. It usually means the child failed.")
        self.kill_process_tree()

    def kill_process_tree(self) -> NoReturn:
        """SGLang's kill_process_tree(include_parent=True): SIGKILL every descendant, then itself."""
        me = os.getpid()
        if self.traits.logs_kill_process_tree:
            self.log(f"kill_process_tree called: parent_pid={me}, include_parent=True, pid={me}")
        for child in psutil.Process(me).children(recursive=True):
            try:
                child.kill()
            except psutil.Error:
                pass
        os.kill(me, signal.SIGKILL)
        raise SystemExit(137)  # not reached

    def on_sigterm(self, signum: int, frame: Any) -> None:
        if self.serving:
            for line in ("Shutting down", "Waiting for application shutdown.", "Application shutdown complete.",
                         f"Finished server process [{os.getpid()}]"):
                emit(f"INFO:     {line}")
        self.stop_children()
        os._exit(0)

    def stop_children(self) -> None:
        for child in psutil.Process().children(recursive=True):
            try:
                child.kill()
            except psutil.Error:
                pass

    def on_phase(self, phase: str) -> None:
        """Fault hooks, called as each phase begins."""
        kind = self.faults.at_phase(phase)
        if kind == "hang":
            while True:
                time.sleep(3600)
        if kind == "exit0":
            self.stop_children()
            os._exit(0)
        if kind == "crash":
            raise SchedulerFailure(
                "RuntimeError: CUDA error: an illegal memory access was encountered\n"
                "CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace "
                "below might be incorrect.", (), (0,), phase)
        if phase == "load_weights" and self.faults.on("flood"):
            for i in range(100_000):
                emit(f"[{self.clock.stamp()}] Loading safetensors checkpoint shards: {i % 100}% Completed | "
                     f"{i}/100000 [00:00<00:00, 1000.00it/s] " + "." * 64)
        if self.faults.on("bad_utf8"):
            emit(f"[{self.clock.stamp()}] phase {phase}: ".encode() + b"\xff\xfe\xc3(\xa0 invalid utf-8")

    # -- the launch ---------------------------------------------------------------------------

    def fail_schedulers(self, exc: SchedulerFailure) -> NoReturn:
        """Each failing rank prints its traceback and SIGQUITs us; the handler kills the tree.

        Called from the main thread (start-up) or the scheduler/warm-up threads (serving), where the
        main thread is already in `wait_for_signals`.
        """
        assert self.io is not None
        io = self.io
        tracebacks = {rank: scheduler_traceback(self.version, exc, rank) for rank in exc.ranks}
        sent = io.fail({rank: [f"{io.prefix(rank)} {tb[0]}", *tb[1:]] for rank, tb in tracebacks.items()})
        if not sent:  # the rank is gone: nobody will SIGQUIT us
            self.on_sigquit(signal.SIGQUIT, None)
        if threading.current_thread() is threading.main_thread():
            self.wait_for_signals()
        threading.Event().wait()  # the main thread's handler ends the process
        raise AssertionError("not reached")

    def run(self, ns: Any, shape: ModelShape, node: SimNode) -> None:
        try:
            args = resolve(ns, self.version, shape, min(g.total_bytes for g in node.gpus) >> 20, dict(os.environ))
        except LaunchFailure as exc:
            for line in launcher_traceback(self.version, exc.exc_line, exc.frames):
                emit(line)
            sys.exit(1)
        self.log(server_args_line(self.version, ns, args))
        for warning in args.warnings:
            self.log(warning)
        gpus = self.rank_gpus(ns, node, args.tp)
        # Real SGLang's store listens on every address; the simulator keeps to loopback (a port taken
        # on any address still refuses it there).
        host = "127.0.0.1"
        store = (host, int(ns.nccl_port) if ns.nccl_port is not None else port_below_ephemeral(host))
        self.io = RankIO(node, gpus, self.clock, self.faults, self.on_phase, store=store)
        engine = SglangEngine(shape, args, self.io, boot_jitter_bytes=costs.boot_jitter_bytes(os.environ))
        try:
            engine.start()
        except SchedulerFailure as exc:
            self.fail_schedulers(exc)
        except RankDied:
            self.log("Rank 0 scheduler is dead. Please check if there are relevant logs.")
            self.kill_process_tree()
        from autotune.sim.http_api import (
            serve_forever,  # imported late: only a started server needs it
        )

        serve_forever(self, ns, args, shape, engine)

    def rank_gpus(self, ns: Any, node: SimNode, tp: int) -> list[int]:
        visible = visible_gpus(node)
        wanted = [int(ns.base_gpu_id) + r * int(ns.gpu_id_step) for r in range(tp)]
        if max(wanted) >= len(visible) or any(v >= len(node.gpus) for v in visible):
            for line in launcher_traceback(self.version, "RuntimeError: CUDA error: invalid device ordinal", ()):
                emit(line)
            sys.exit(1)
        return [visible[w] for w in wanted]


# The fields the tuner reads back, in each release's own order: 0.5.9 logs `f"{server_args=}"`,
# the ServerArgs dataclass's repr (fields in declaration order); 0.5.23 logs
# `server_args={resolved_dict()}`, a dict in `arg_groups/field_order.py` order. Both print every
# field; the simulator prints these.
_LOGGED_FIELDS = {
    "0.5.9": ("model_path", "context_length", "host", "port", "nccl_port", "kv_cache_dtype", "mem_fraction_static",
              "max_running_requests", "chunked_prefill_size", "tp_size", "api_key", "speculative_algorithm",
              "speculative_num_steps", "speculative_eagle_topk", "speculative_num_draft_tokens", "disable_cuda_graph",
              "enable_torch_compile"),
    "0.5.23": ("model_path", "context_length", "kv_cache_dtype", "mem_fraction_static", "max_running_requests",
               "chunked_prefill_size", "nccl_port", "tp_size", "host", "port", "api_key", "disable_cuda_graph",
               "enable_torch_compile", "speculative_algorithm", "speculative_num_steps", "speculative_eagle_topk",
               "speculative_num_draft_tokens"),
}


def server_args_line(version: str, ns: Any, args: Resolved) -> str:
    """SGLang's start-up `server_args=` line, with the resolved values."""
    values = dict(vars(ns))
    if "tensor_parallel_size" in values:  # 0.5.9's argparse dest; its ServerArgs field is tp_size
        values["tp_size"] = values.pop("tensor_parallel_size")
    values.update(mem_fraction_static=args.mem_fraction_static, context_length=args.context_len,
                  chunked_prefill_size=args.chunked_prefill_size, max_running_requests=args.max_running_requests,
                  speculative_algorithm=args.spec_algorithm)
    traits = traits_for(version)
    keys = [k for k in _LOGGED_FIELDS[traits.version] if k in values]
    if traits.legacy_log_wording:
        return "server_args=ServerArgs(" + ", ".join(f"{k}={values[k]!r}" for k in keys) + ")"
    return "server_args={" + ", ".join(f"{k!r}: {values[k]!r}" for k in keys) + "}"


def main(argv: list[str] | None = None) -> None:
    argv = list(sys.argv[1:] if argv is None else argv)
    version = os.environ.get(ENV_VERSION, max(TRAITS, key=Version))
    try:  # a release we have no traits for runs as the nearest older one we know
        table = flag_table("sglang", version).known
        traits_for(version)
    except SpecError as exc:
        sys.exit(f"{ENV_VERSION}={version!r}: {exc.detail} (the simulator emulates SGLang {' and '.join(TRAITS)})")
    ns = flagtable.build_parser("sglang", table).parse_args(argv)  # exits 2 like the real parser
    launcher = Launcher(version, argv)
    if launcher.faults.on("hangup"):  # dies of it even under nohup, which leaves SIGHUP ignored in what it starts
        signal.signal(signal.SIGHUP, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGHUP)
    launcher.install_signals()
    if launcher.faults.on("silent"):
        threading.Event().wait()
    try:
        shape = load_shape(ns.model_path)
        node = SimNode.from_env()
    except AutotuneError as exc:
        for line in launcher_traceback(version, _model_error(exc, ns.model_path), ()):
            emit(line)
        sys.exit(1)
    launcher.run(ns, shape, node)


def _model_error(exc: AutotuneError, model_path: str) -> str:
    text = str(exc.message)
    if "cannot size architecture" in text:  # modelshape's UnsizedModelError for an unknown architecture
        arch = text.split("architecture ", 1)[1].split()[0]
        return f"ValueError: Model architectures ['{arch}'] are not supported for now."
    if "config.json" in text or "does not exist" in text:
        return (f"OSError: {model_path} does not appear to have a file named config.json. "
                "Checkout 'https://huggingface.co/None/tree/main' for available files.")
    return f"RuntimeError: {text}"


if __name__ == "__main__":
    main()
