"""Progress a person can watch: plain lines when not a terminal (logs, CI), a live panel when it is."""

from __future__ import annotations

import collections
import sys
from typing import Any, TextIO

from autotune.engines import get_engine
from autotune.records import GIB, TrialResult
from autotune.search.goal import context_of
from autotune.search.loop import Progress, RunSummary
from autotune.search.space import Space
from autotune.spec import Spec


def _point(point: dict[str, Any]) -> str:
    return " ".join(f"{k}={v}" for k, v in point.items())


def _best(best: TrialResult | None) -> str:
    if best is None:
        return "none yet"
    return f"ctx {context_of(best)}, {best.kv_tokens} KV tokens ({'+'.join(best.config.features()) or 'base'})"


class PlainProgress(Progress):
    def __init__(self, out: TextIO = sys.stdout) -> None:
        self.out = out
        self.last_phase = ""
        self.device = "GPU"  # "host" for an engine on host memory (its memory is the box's)
        self.verdicts: collections.Counter[str] = collections.Counter()

    def say(self, text: str) -> None:
        print(text, file=self.out, flush=True)

    def run_started(self, spec: Spec, space: Space, done: int) -> None:
        self.device = "host" if get_engine(spec.engine).device == "host" else "GPU"
        self.say(f"study {spec.study}: {spec.engine} {spec.engine_version}, {space.size()} points in the space, "
                 f"{done} trial(s) already done, strategy {spec.strategy}")
        if spec.shape is not None and spec.shape.unsized_reason:
            self.say(f"WARNING: {spec.shape.unsized_reason}: searching without predictions (bisecting the "
                     "fraction and the context by launches, learning from each launch's logged figures)")
        if spec.host not in ("127.0.0.1", "localhost", "::1"):
            self.say(f"WARNING: every server of this run listens on {spec.host}: reachable from other machines "
                     "(spec field 'host')")
        if spec.api_key_env and get_engine(spec.engine).api_key_env is None:
            self.say(f"note: {spec.engine} takes its API key only as --api-key on its command line: while a trial "
                     f"runs, other users of this machine can read ${spec.api_key_env}'s value with ps (it is kept "
                     "out of every record, log and report)")

    def trial_started(self, number: int, point: dict[str, Any], trial_id: str) -> None:
        self.last_phase = ""
        self.say(f"trial {number}: {_point(point)}")

    def phase(self, phase: str, used_bytes: tuple[int, ...], totals: tuple[int, ...]) -> None:
        if phase != self.last_phase:
            self.last_phase = phase
            mem = " ".join(f"{u / GIB:.1f}/{t / GIB:.0f}" for u, t in zip(used_bytes, totals, strict=True))
            self.say(f"    {phase:<14} {self.device} GiB {mem}")

    def trial_finished(self, result: TrialResult, best: TrialResult | None, done: int, budget: int,
                       note: str = "") -> None:
        self.verdicts[result.outcome.value] += 1
        why = "" if result.outcome.fits else f" - {result.remedy}"
        self.say(f"    => {result.outcome.value} ({result.phase.value}), KV {result.kv_tokens or '-'}{why}")
        if note:
            self.say(f"    {note}")
        counts = ", ".join(f"{k} {v}" for k, v in sorted(self.verdicts.items()))
        self.say(f"    [{done}/{budget}] {counts}; best: {_best(best)}")

    def trial_cancelled(self, number: int, why: str) -> None:
        self.say(f"trial {number}: stopped early, {why}")

    def recovered(self, lines: list[str]) -> None:
        for line in lines:  # before the run starts: what a dead run left behind was cleaned up
            self.say(f"recovered {line}")

    def run_finished(self, summary: RunSummary) -> None:
        self.say(f"stopped: {summary.stopped_because}")


class RichProgress(PlainProgress):
    """A live panel: current trial, phase, memory per GPU, verdicts so far, best so far."""

    def __init__(self) -> None:
        super().__init__()
        from rich.console import Console
        from rich.live import Live

        self.console = Console()
        self.live = Live(console=self.console, refresh_per_second=4, transient=False)
        self.current = ""
        self.memory: tuple[tuple[int, int], ...] = ()
        self.best: TrialResult | None = None
        self.done = (0, 0)

    def say(self, text: str) -> None:
        self.console.print(text, highlight=False)

    def _panel(self) -> Any:
        from rich.table import Table

        table = Table.grid(padding=(0, 2))
        table.add_row("trial", self.current)
        table.add_row("phase", self.last_phase or "-")
        for i, (used, total) in enumerate(self.memory):
            bar = "#" * int(30 * used / total) if total else ""
            table.add_row(f"GPU {i}", f"{bar:<30} {used / GIB:6.1f} / {total / GIB:.0f} GiB")
        table.add_row("verdicts", ", ".join(f"{k} {v}" for k, v in sorted(self.verdicts.items())) or "-")
        table.add_row("best", _best(self.best))
        table.add_row("budget", f"{self.done[0]}/{self.done[1]} trials")
        return table

    def run_started(self, spec: Spec, space: Space, done: int) -> None:
        super().run_started(spec, space, done)
        self.done = (done, spec.budget.trials)
        self.live.start()

    def trial_started(self, number: int, point: dict[str, Any], trial_id: str) -> None:
        self.current = f"{number}: {_point(point)}"
        super().trial_started(number, point, trial_id)
        self.live.update(self._panel())

    def phase(self, phase: str, used_bytes: tuple[int, ...], totals: tuple[int, ...]) -> None:
        self.last_phase = phase
        self.memory = tuple(zip(used_bytes, totals, strict=True))
        self.live.update(self._panel())

    def trial_finished(self, result: TrialResult, best: TrialResult | None, done: int, budget: int,
                       note: str = "") -> None:
        self.best, self.done = best, (done, budget)
        super().trial_finished(result, best, done, budget, note)
        self.live.update(self._panel())

    def run_finished(self, summary: RunSummary) -> None:
        self.live.stop()
        super().run_finished(summary)

    def close(self) -> None:
        self.live.stop()  # idempotent; shows the cursor again, also after Ctrl-C or an error


def for_terminal() -> Progress:
    return RichProgress() if sys.stdout.isatty() else PlainProgress()
