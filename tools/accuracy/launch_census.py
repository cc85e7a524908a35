"""Score the classifier on the tuner's own case: complete logs of real launches with one fault each.

The logs and what truly happened are in tests/data/launch-census (`runs.jsonl`, written by
`python -m tools.capture.launch_faults`, which registers each fault's outcome before any launch). Two
readings of each launch are scored against that truth:

- the log read whole with the exit status the launch had, as `autotune classify` reads a log;
- the trial's verdict, as `trial/run.py` forms it from the classifier fed line by line: a decisive line
  or the launcher's exit ends the start-up (the log read with its exit status), a ready server is READY
  (a server whose working child was killed once ready fails its probe: CRASH, or OOM_RUNTIME where the
  log says out of memory; one whose server stays up, the probe unanswered and nothing decisive in the log, is a CRASH
  by `worker_lost`, the killed child being gone; the same with the child stopped, not killed, is the probe's deadline,
  `too_slow`'s TIMEOUT, the child being there still), a launch the capture stopped at a deadline, never decided, is
  TIMEOUT unless it logged a stop its fault asked of it (the trial's "stopped", a crash), and one that died unexplained
  while the kernel's OOM killer acted is read again by `trial.oomkill`.

Each launch belongs to a census: 1, the faults registered first (the first round was written from its logs); 2, faults
registered after that round and before any of their launches, so its first figures are held out from the round.

    python -m tools.accuracy.launch_census      # the figures by build and fault, then each disagreement
"""

from __future__ import annotations

import json
import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from autotune.classifier.classify import LogClassifier, classify_text
from autotune.engines.registry import get_engine
from autotune.records import Outcome
from autotune.trial import oomkill

CENSUS = Path(__file__).resolve().parents[2] / "tests" / "data" / "launch-census"
ENGINES = {"sglang": "sglang-cpu", "vllm": "vllm-cpu"}  # a build's family: the engine the tool launches it as


@dataclass(frozen=True)
class Launch:
    build: str
    fault: str
    truth: Outcome
    exit_code: int | None
    stopped_at_deadline: bool  # never decided, stopped by the capture's deadline (the trial's TIMEOUT)
    ended_by_itself: bool  # the launcher exited before anyone stopped it
    oom_kills: int  # the kernel's OOM kills during it (the capture's memory cgroup counts them)
    text: str
    census: int = 1

    @property
    def engine(self) -> str:
        return ENGINES[self.build.split("-")[0]]

    signals: tuple[tuple[str, bool], ...] = ()  # the fault's own signals to the group's processes: (name, sent once up)

    @property
    def signalled_to_stop(self) -> bool:
        """The fault asked the server to stop from outside the tool before it was up (a SIGTERM or SIGINT to its
        working child or its launcher while it loads)."""
        return any(sig in ("SIGTERM", "SIGINT") and not up for sig, up in self.signals)

    @property
    def once_ready(self) -> str:
        """What the capture did to the working child once the server answered: "kill", "stop", "term" or ""."""
        sent = [sig for sig, up in self.signals if up]
        return sent[0].removeprefix("SIG").lower() if sent else ""


# The capture's own record of a signal the fault sent ("16.1s SIGSTOP to pid 17919 (sglang::scheduler)"); its stop of the
# whole group at a deadline reads "stop: SIGTERM to the group", and is the trial's, not the fault's
_SIGNAL_SENT = re.compile(r"^(?P<at>\d+(?:\.\d+)?)s (?P<sig>SIG[A-Z]+) to pid \d+")
_UP = re.compile(r"^(?P<at>\d+(?:\.\d+)?)s GET /health answered 200")


def _signals(events: list[str]) -> tuple[tuple[str, bool], ...]:
    up_at = next((float(m["at"]) for m in map(_UP.match, events) if m), None)
    return tuple((m["sig"], up_at is not None and float(m["at"]) >= up_at) for m in map(_SIGNAL_SENT.match, events) if m)


def load(folder: Path = CENSUS) -> list[Launch]:
    out = []
    for line in (folder / "runs.jsonl").read_text().splitlines():
        run: dict[str, Any] = json.loads(line)
        events = " ".join(run["events"])
        out.append(Launch(run["build"], run["fault"], Outcome(run["truth"]), run["exit_code"],
                          "stop:" in events and "before ready" in events or "boot deadline" in events,
                          "the launcher exited" in events, run.get("oom_kills") or 0,
                          (folder / run["build"] / f"{run['fault']}.log").read_bytes().decode("utf-8", "replace"),
                          run.get("census", 1), _signals(run["events"])))
    return out


def whole(launch: Launch) -> Outcome | None:
    return classify_text(launch.text, launch.engine, launch.exit_code).outcome


def trial_verdict(launch: Launch) -> Outcome | None:
    clf = LogClassifier(launch.engine)
    lines = iter(launch.text.splitlines())
    for line in lines:
        clf.feed(line)
        if clf.decisive or clf.ready_seen:
            break
    if clf.ready_seen:
        if not launch.once_ready:
            return Outcome.READY
        for line in lines:  # what it logged once up: the trial's watcher reads on while the probe runs
            clf.feed(line)
        if not launch.ended_by_itself and not clf.decisive:
            # the server is up, the probe failed: `worker_lost` where the capture's kill or stop signal took the child
            # that held the weights (trial/run.py); a stopped child is there still: the probe's deadline, `too_slow`
            return Outcome.TIMEOUT if launch.once_ready == "stop" else Outcome.CRASH
        got = whole(launch)
        return Outcome.OOM_RUNTIME if got is not None and got.is_oom else Outcome.CRASH
    if launch.stopped_at_deadline and not clf.decisive:
        # a server that logged a stop asked of it and stayed up: the trial's "stopped", a crash (watch.STOPPED_EXIT_S).
        # Only the fault's own SIGTERM counts: the capture's stop at its deadline is the trial's, after its verdict
        return Outcome.CRASH if launch.signalled_to_stop and clf.stop_requested else Outcome.TIMEOUT
    cls = classify_text(launch.text, launch.engine, launch.exit_code)
    killed = oomkill.reading(cls, 0, launch.oom_kills,  # the trial reads the kernel's count where the server runs
                             host_device=get_engine(launch.engine).device == "host")
    return (killed or cls).outcome


def main() -> int:
    launches = load()
    everything = [(launch, whole(launch), trial_verdict(launch)) for launch in launches]
    print(f"launch census: {len(everything)} real launches, one fault each ({CENSUS})")
    for census in sorted({launch.census for launch in launches}):
        report(census, [row for row in everything if row[0].census == census])
    return 0


def report(census: int, rows: list[tuple[Launch, Outcome | None, Outcome | None]]) -> None:
    print(f"census {census}: {len(rows)} launches")
    print(f"{'build':16} {'read whole':>11} {'trial':>7}")
    for build in sorted({r[0].build for r in rows}):
        mine = [r for r in rows if r[0].build == build]
        print(f"{build:16} {sum(g is r.truth for r, g, _ in mine):5}/{len(mine):<5} "
              f"{sum(t is r.truth for r, _, t in mine):3}/{len(mine)}")
    print(f"{'all':16} {sum(g is r.truth for r, g, _ in rows):5}/{len(rows):<5} "
          f"{sum(t is r.truth for r, _, t in rows):3}/{len(rows)}")
    by_truth: Counter[str] = Counter()
    right: Counter[str] = Counter()
    for launch, got, _ in rows:
        by_truth[launch.truth.value] += 1
        right[launch.truth.value] += got is launch.truth
    print("read whole, by outcome: " + ", ".join(f"{k} {right[k]}/{n}" for k, n in sorted(by_truth.items())))
    for launch, got, tool in rows:
        if got is not launch.truth or tool is not launch.truth:
            print(f"  {launch.build} {launch.fault}: truth {launch.truth.value}, read whole "
                  f"{got.value if got else None}, trial {tool.value if tool else None} (exit {launch.exit_code})")


if __name__ == "__main__":
    raise SystemExit(main())
