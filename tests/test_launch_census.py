"""The classifier and the trial on the tuner's own case: 114 real launches of SGLang 0.5.9, 0.5.23 and vLLM's CPU build
with one fault each (tests/data/launch-census, tools/accuracy/launch_census.py), each fault's outcome registered
before any launch (tools/capture/launch_faults.py): 14 faults first, 13 more after the first round (census 2), 11 more
after the second (census 3).

First scores: census 1 with the rules of 37e8f53, read whole 22/42 and the trial 25/42; census 2 with those of
ec173c4, 30/39 and 32/39; census 3 with those of e2e52d2, 16/33 and 18/33 (docs/corpus-protocol.md, "The launch
census"). Read whole, a log cannot say what only the trial sees: a process the kernel's OOM killer ended writes
nothing, a launch the tool stopped at its no-progress deadline ends on that stop, a working child stopped once the
server is up leaves a log that ends on the ready line, and SGLang 0.5.9 logs nothing when its scheduler dies once it
serves. For those, the trial's own facts decide
(`trial.oomkill`, its deadlines, `RunTrial.worker_lost`).
"""

from __future__ import annotations

import json

import pytest

from autotune.classifier.classify import LogClassifier
from autotune.records import Outcome
from tools.accuracy import launch_census as lc
from tools.capture.launch_faults import FAULTS

LAUNCHES = {f"{launch.build}/{launch.fault}": launch for launch in lc.load()}
# what only the trial can see, by fault, and what the log alone then says
ONLY_THE_TRIAL = {"stop-load": Outcome.CRASH, "oom-weights": Outcome.CRASH, "oom-kv": Outcome.CRASH,
                  "stop-ready": Outcome.READY}
SILENT = {"sglang-0.5.9/kill-ready": Outcome.READY,
          # a working child stopped once up by someone else's SIGTERM reads, whole, as a server the tool stopped: SGLang
          # 0.5.9 logs nothing of it; vLLM's EngineCore logs the signal, its shutdown, the API server's own
          "sglang-0.5.9/term-ready": Outcome.READY, "vllm-0.32.0/term-ready": Outcome.READY}
# Where the reading and the registered truth disagree, said here (none since SGLang's FlashInfer backend asked on a CPU,
# a raw NameError inside the backend's constructor, is read as that backend refused: `name_unbound`).
DISAGREED: dict[str, Outcome] = {}


def test_every_fault_of_every_build_was_launched_and_its_truth_is_the_registered_one() -> None:
    registered = {f.name: f.truth for f in FAULTS}
    builds = {launch.build for launch in LAUNCHES.values()}
    assert builds == {"sglang-0.5.9", "sglang-0.5.23", "vllm-0.32.0"}
    assert set(LAUNCHES) == {f"{b}/{f}" for b in builds for f in registered}
    runs = {f"{r['build']}/{r['fault']}": r for r in map(json.loads, (lc.CENSUS / "runs.jsonl").read_text().splitlines())}
    for name, launch in LAUNCHES.items():
        # a fault that turned out not to be one is READY, and only where its request was served
        assert launch.truth is (Outcome.READY if runs[name]["served"] else registered[launch.fault]), name
    # vLLM's CPU build takes FlashInfer; SGLang takes a config.json for the model's directory; no build stops at a SIGINT
    # to its launcher while it loads
    served = sorted(n for n, launch in LAUNCHES.items() if launch.truth is Outcome.READY)
    assert served == ["sglang-0.5.23/int-launcher-load", "sglang-0.5.23/model-is-file", "sglang-0.5.23/zero-requests",
                      "sglang-0.5.9/int-launcher-load", "sglang-0.5.9/model-is-file", "vllm-0.32.0/attn-flashinfer",
                      "vllm-0.32.0/int-launcher-load", "vllm-0.32.0/kv-fp8"], served
    assert all(runs[n]["oom_kills"] == 1 for n in LAUNCHES if n.endswith(("/oom-weights", "/oom-kv")))


@pytest.mark.parametrize("name", sorted(LAUNCHES))
def test_a_real_launch_read_whole_is_its_truth_where_the_log_can_say(name: str) -> None:
    launch = LAUNCHES[name]
    expected = DISAGREED.get(name) or SILENT.get(name) or ONLY_THE_TRIAL.get(launch.fault) or launch.truth
    assert lc.whole(launch) is expected


@pytest.mark.parametrize("name", sorted(LAUNCHES))
def test_a_real_launch_is_its_truth_as_the_trial_reads_it(name: str) -> None:
    assert lc.trial_verdict(LAUNCHES[name]) is DISAGREED.get(name, LAUNCHES[name].truth)


@pytest.mark.parametrize("name", sorted(n for n, launch in LAUNCHES.items()
                                        if launch.truth is Outcome.CONFIG_ERROR and n not in DISAGREED))
def test_a_refused_setting_is_never_read_as_memory_and_stays_refused_once_read(name: str) -> None:
    """Fed line by line as the trial's watcher feeds it: no prefix of the log is an out-of-memory (the search would
    learn a memory boundary from a setting the device cannot run), and once read as refused it stays so."""
    launch = LAUNCHES[name]
    clf = LogClassifier(launch.engine)
    refused = False
    for line in launch.text.splitlines():
        clf.feed(line)
        got = clf.classification(None)
        assert got.outcome is None or not got.outcome.is_oom, (line, got)
        refused = refused or got.outcome is Outcome.CONFIG_ERROR
        assert not refused or got.outcome is Outcome.CONFIG_ERROR, (line, got)
    final = clf.classification(launch.exit_code, log_complete=True)
    assert final.outcome is Outcome.CONFIG_ERROR and final.figures.get("mfs_direction", 0) == 0, final


def test_the_knobs_the_cpu_cannot_run_name_the_knob_to_turn_off() -> None:
    remedies = {name: lc.classify_text(launch.text, launch.engine, launch.exit_code).remedy
                for name, launch in LAUNCHES.items() if launch.fault in ("kv-fp8", "quant-fp8")}
    assert "--kv-cache-dtype auto" in remedies["sglang-0.5.23/kv-fp8"]
    assert "no --quantization" in remedies["sglang-0.5.23/quant-fp8"]
    assert "Float8_e4m3fn" in remedies["sglang-0.5.9/kv-fp8"]
    assert "turn that setting off" in remedies["sglang-0.5.9/quant-fp8"]
    assert "static_scaled_fp8_quant" in remedies["vllm-0.32.0/quant-fp8"]
