"""Certification against the simulated server: the worst case the flags permit (real
concurrent requests charging memory while they run), cold boots that differ, the step down
when the answer does not hold, the record and the CLI."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest
import yaml

from autotune import spec as spec_mod
from autotune import store
from autotune.config import LaunchConfig
from autotune.errors import SpecError
from autotune.records import Outcome, TrialResult
from autotune.search import certify as certify_mod
from autotune.search import goal as goal_mod
from autotune.search import slots as slots_mod
from autotune.settings import Deadlines, ProbeSpec, TrialSettings
from autotune.sim.backend import SimulatedBackend
from autotune.sim.node import SimNode
from autotune.trial.run import run_trial
from autotune.trial.supervisor import tagged_processes
from tests.conftest import MODELS, REPO, SIM_SGLANG
from tests.test_sim_vllm import SIM_SPEC

QWEN8 = str(MODELS / "Qwen3-8B")
# Passes the probe (one long request, a small burst) on a 24 GiB GPU, but 256 running requests
# holding their decode memory under a full 8192-token prefill chunk do not fit the slack.
TIGHT = LaunchConfig(model_path=QWEN8, mem_fraction_static=0.89, context_length=32768, cuda_graph_max_bs=64,
                     max_running_requests=256, chunked_prefill_size=8192)


@pytest.fixture
def node24(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> SimNode:
    sim = SimNode.create(tmp_path / "node24", gpus=1, gpu_mem_gib=24, gpu_name="NVIDIA Simulated 24G")
    monkeypatch.setenv("AUTOTUNE_SIM_NODE", str(sim.root))
    return sim


def settings(node: SimNode, tmp_path: Path, *, worst_case: bool, jitter_mib: float = 0, connections: bool = False,
             time_scale: float = 0.001) -> TrialSettings:
    """`connections`: the simulator takes the worst case as real concurrent connections (what a real
    engine gets) rather than as one description."""
    env = {"AUTOTUNE_SIM_NODE": str(node.root), "AUTOTUNE_SIM_SGLANG_VERSION": "0.5.23",
           "AUTOTUNE_SIM_TIME_SCALE": str(time_scale)}
    if jitter_mib:
        env["AUTOTUNE_SIM_BOOT_JITTER_MIB"] = str(jitter_mib)
    if connections:
        env["AUTOTUNE_SIM_WORST_CASE_CONNECTIONS"] = "1"
    return TrialSettings(launcher=SIM_SGLANG, gpus=(0,), env=env, trials_dir=tmp_path / "trials",
                         deadlines=Deadlines(startup_s=30, no_progress_s=5, compile_no_progress_s=5, ready_health_s=10),
                         grace_s=2.0, release_timeout_s=5.0,
                         probe=ProbeSpec(burst=8, burst_tokens=1024, worst_case=worst_case))


def launch(node: SimNode, tmp_path: Path, config: LaunchConfig, **kw: object):  # type: ignore[no-untyped-def]
    result = run_trial(config, settings(node, tmp_path, **kw), SimulatedBackend(node.root))  # type: ignore[arg-type]
    assert not tagged_processes(result.trial_id), "processes of the trial survived it"
    assert all(g.used_bytes == 0 for g in node.snapshot()), "simulated memory still held"
    return result


def test_probe_passes_but_the_worst_case_kills_it(node24: SimNode, tmp_path: Path) -> None:
    probed = launch(node24, tmp_path, TIGHT, worst_case=False)
    assert probed.outcome is Outcome.READY and probed.probe is not None and probed.probe.ok
    # as a real engine gets it: 255 running requests and the long one, each on its own connection
    worst = launch(node24, tmp_path, TIGHT, worst_case=True, connections=True)
    assert worst.outcome is Outcome.OOM_RUNTIME, (worst.outcome, worst.evidence)
    assert worst.probe is not None and not worst.probe.ok and worst.probe.burst_requests == 255
    log = Path(worst.log_path).read_text()
    assert "CUDA out of memory" in log and "#running-req: 0" in log  # it died with requests running
    # with more slack the same worst case is served, and it peaks above what the probe reached
    roomy = launch(node24, tmp_path, replace(TIGHT, mem_fraction_static=0.86), worst_case=True)
    assert roomy.outcome is Outcome.READY and roomy.probe is not None and roomy.probe.ok
    # the full-context prompt was prefilled chunk by chunk while the whole batch ran beside it (the
    # cap, 256, counts it): taken as one description, the batch is all running, not some of it
    running = re.findall(r"#new-seq: 1, #new-token: 8192, .*#running-req: (\d+),", Path(roomy.log_path).read_text())
    assert running and max(map(int, running)) == 255, running


def test_cold_boots_differ_only_with_the_jitter_knob(node24: SimNode, tmp_path: Path) -> None:
    config = replace(TIGHT, mem_fraction_static=0.85, max_running_requests=8)
    plain = {launch(node24, tmp_path, config, worst_case=False).kv_tokens for _ in range(2)}
    assert len(plain) == 1  # deterministic by default
    jittered = {launch(node24, tmp_path, config, worst_case=False, jitter_mib=512).kv_tokens for _ in range(3)}
    assert len(jittered) > 1 and max(jittered) <= min(plain)  # jitter only ever takes memory


def write_spec(tmp_path: Path, **over: object) -> Path:
    raw = yaml.safe_load((REPO / "configs" / "certify-scenario.yaml").read_text())
    raw.update(model=QWEN8, results_dir=str(tmp_path / "results"),
               simulated={"gpus": 1, "gpu_mem_gib": 24, "time_scale": 0.001, "node_dir": str(tmp_path / "node")},
               budget={"trials": 16, "wall_time_s": 600})
    raw["space"].update(context_length=[32768], mem_fraction_static={"min": 0.855, "max": 0.895, "step": 0.005})
    raw.update(over)
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(raw))
    return path


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "autotune.cli", *args], capture_output=True, text=True, timeout=600,
                          cwd=REPO)


def test_run_certifies_steps_down_and_reports(tmp_path: Path) -> None:
    """`autotune run` ends with certification: the probe-passing answer dies under its worst case,
    a config further down holds on every boot, and the report, `best` and `certify` say so."""
    path = write_spec(tmp_path, certify={"boots": 2})
    run = cli("run", str(path))
    assert run.returncode == 0, run.stdout + run.stderr
    assert "not certified" in run.stdout and "certified answer:" in run.stdout, run.stdout
    spec = spec_mod.load(path)
    study = store.load_study(spec.study, spec.storage)
    cert = certify_mod.load(study.user_attrs)
    assert cert is not None and cert.answer is not None and not cert.attempts[0].certified
    top = goal_mod.best(store.results(study), spec.goal.order, [])
    assert top is not None and top.trial_id == cert.attempts[0].source_trial  # it started from the answer
    assert "did not serve the worst case" in cert.attempts[0].why
    answer = cert.answer
    assert len(answer.boots) == 2 and all(b.served for b in answer.boots)
    assert all(min(b.headroom_bytes) > 0 and b.kv_tokens for b in answer.boots)
    assert answer.max_running_requests == 256  # the goal ranks concurrency first
    best = cli("best", str(path))
    assert best.returncode == 0 and f"--mem-fraction-static {answer.config.split('mfs=')[1].split()[0]}" in best.stdout
    # `best` says it is a step down, from what and why (stderr: stdout stays the command alone)
    assert best.stdout.count("\n") == 1 and "stepped down" in best.stderr, best.stderr
    assert cert.attempts[0].config in best.stderr and "did not serve the worst case" in best.stderr, best.stderr
    as_json = json.loads(cli("best", str(path), "--format", "json").stdout)
    assert as_json["certification"]["state"] == "stepped_down" and answer.config in as_json["certification"]["note"]
    report = (spec.study_dir / "report.md").read_text()
    assert "## Certification" in report and "not certified" in report and "variance" in report
    assert "Certification stepped down: the search's answer" in report.split("## Certification")[0], report
    # the report recommends what `best` prints, the certified answer, not the probe-passing one above it
    recommended = report.split("## Recommended")[1].split("## Certification")[0]
    assert f"--mem-fraction-static {answer.config.split('mfs=')[1].split()[0]} " in recommended, recommended
    assert "## Context × concurrency" in report
    # the trade-off table names the certified answer too, a step down no search trial ran included
    tradeoff = report.split("## Context × concurrency")[1].split("## Frontier")[0]
    certified_rows = [line for line in tradeoff.splitlines() if "| certified" in line]
    assert len(certified_rows) == 1, tradeoff
    assert f"| {answer.config.split('mfs=')[1].split()[0]} |" in certified_rows[0], tradeoff
    at64 = cli("best", str(path), "--concurrency", "64")
    assert at64.returncode == 0 and "--max-running-requests 64" in at64.stdout, at64.stdout + at64.stderr


def test_spec_fields_are_strict(tmp_path: Path) -> None:
    spec = spec_mod.load(write_spec(tmp_path, simulated={"gpus": 1, "gpu_mem_gib": 24, "boot_jitter_mib": 32.0}))
    assert spec.certify.boots == 3 and spec.certify.enabled and spec.simulated is not None
    assert spec.simulated.boot_jitter_mib == 32 and spec.goal.order[1] == "max_running_requests"
    assert spec.certify_env() == {"AUTOTUNE_SIM_BOOT_JITTER_MIB": "32.0"}
    for bad, field in (({"certify": {"boots": 0}}, "certify.boots"), ({"certify": {"boots": "3"}}, "certify.boots"),
                       ({"certify": {"safety_margin_gib": -1.0}}, "certify.safety_margin_gib"),
                       ({"certify": {"deadline_s": 0}}, "certify.deadline_s"),
                       ({"goal": {"order": ["concurrency"]}}, "goal.order")):
        with pytest.raises(SpecError) as err:
            spec_mod.load(write_spec(tmp_path, **bad))
        assert err.value.field == field


def test_worst_case_plan_fills_the_pool() -> None:
    from autotune.trial.worstcase import plan

    load = plan(kv_tokens=400_000, context_len=131072, max_running_requests=16, max_new_tokens=16)
    total = load.requests * (load.prompt_tokens + load.batch_new_tokens) + load.long_tokens + load.max_new_tokens
    assert load.long_tokens == 131072 - 24 and 399_000 <= total <= 400_000
    small = plan(kv_tokens=33_000, context_len=32768, max_running_requests=256, max_new_tokens=16)
    assert small.prompt_tokens >= 1 and small.requests == 255  # the long one is the 256th the engine runs
    alone = plan(kv_tokens=33_000, context_len=32768, max_running_requests=1, max_new_tokens=16)
    assert alone.requests == 0 and alone.long_tokens == 32768 - 24
    assert small.batch_new_tokens >= 1  # the pool throttles admission; the engine decides how many run at once


def test_worst_case_speaks_the_engine_neutral_completions_api() -> None:
    """The worst case goes where the probe goes: the adapter's OpenAI completions path, token-id
    prompts, the served model name. A server that answers nothing else (as vLLM's has no SGLang
    `/generate`) serves it; the old `/generate` body got 404 from such a server."""
    import json
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    from autotune.trial.worstcase import WorstCase, run_worst_case

    seen: list[tuple[str, dict[str, object]]] = []

    class OnlyCompletions(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
            seen.append((self.path, body))
            status = 200 if self.path == "/v1/completions" else 404
            self.send_response(status)
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"{}")

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), OnlyCompletions)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        load = WorstCase(requests=3, prompt_tokens=5, batch_new_tokens=7, long_tokens=11, max_new_tokens=2)
        got = run_worst_case(f"http://127.0.0.1:{server.server_address[1]}", load, deadline_s=10, model="served-name",
                             path="/v1/completions")
    finally:
        server.shutdown()
        thread.join()
        server.server_close()
    assert got.ok, got.error
    assert [p for p, _ in seen] == ["/v1/completions"] * 4
    bodies = sorted(seen, key=lambda s: len(s[1]["prompt"]))  # type: ignore[arg-type]
    assert [(len(b["prompt"]), b["max_tokens"]) for _, b in bodies] == [(5, 7)] * 3 + [(11, 2)]  # type: ignore[arg-type]
    assert all(b["model"] == "served-name" and b["ignore_eos"] is True for _, b in seen)
    assert all(isinstance(t, int) for _, b in seen for t in b["prompt"])  # type: ignore[union-attr]


def vllm_spec(tmp_path: Path) -> str:
    """test_sim_vllm's simulated-vLLM spec at one point, with a short output."""
    raw = yaml.safe_load(SIM_SPEC.format(model=MODELS / "tiny-llama-cpu", results=tmp_path / "results"))
    raw.update(study="vllm-worst", probe={"burst": 2, "burst_tokens": 256, "max_new_tokens": 4},
               space={"tp": 1, "mem_fraction_static": 0.2, "context_length": 16384, "max_running_requests": 4})
    return str(yaml.safe_dump(raw))


def test_worst_case_reaches_a_vllm_server(tmp_path: Path) -> None:
    """Certification's load goes where the engine serves the probe: vLLM has no SGLang `/generate`
    (a 404 made every vLLM boot a CRASH), and serves no `max_running_requests`, so the running batch
    is the launch's own --max-num-seqs."""
    from autotune.machine import prepare_backend

    path = tmp_path / "spec.yaml"
    path.write_text(vllm_spec(tmp_path))
    spec = spec_mod.load(path)
    base = spec.trial_settings()
    settings = replace(base, probe=replace(base.probe, worst_case=True))
    config = spec.config({})
    result = run_trial(config, settings, prepare_backend(spec))
    assert result.outcome is Outcome.READY, (result.outcome, result.evidence, result.probe)
    assert result.probe is not None and result.probe.ok and result.probe.burst_requests == 3  # + the long one
    assert result.probe.long_request_tokens == 16384 - 4 - 8  # the full context, less the output and margin
    assert not tagged_processes(result.trial_id)


def test_an_unanswered_request_at_the_deadline_is_late_not_failed() -> None:
    """One deadline for the whole worst case: a request the server is still working on when it passes
    is counted as timed out (the machine is slow), apart from requests that failed (it erred or died)."""
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    from autotune.trial.worstcase import WorstCase, run_worst_case

    release = threading.Event()

    class SlowOnLong(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            if body.count(b",") > 50:  # the long prompt: still computing when the deadline passes
                release.wait(30)
            try:
                self.send_response(200)
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"{}")
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client gave up at its deadline: that is what this test drives

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), SlowOnLong)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        load = WorstCase(requests=3, prompt_tokens=5, batch_new_tokens=7, long_tokens=200, max_new_tokens=2)
        got = run_worst_case(f"http://127.0.0.1:{server.server_address[1]}", load, deadline_s=1.0, model="m")
    finally:
        release.set()
        server.shutdown()
        thread.join()
        server.server_close()
    assert not got.ok and got.timed_out == 1 and got.burst_ok == 3, got
    assert "unanswered at the 1 s deadline" in got.error and "200-token request" in got.error, got.error
    assert got.elapsed_s < 10


def test_a_worst_case_out_of_time_is_inconclusive_not_a_step_down(node24: SimNode, tmp_path: Path) -> None:
    """A machine too slow to finish the worst case by the deadline, the server up and no OOM, is not
    a memory verdict: certification says so, what was outstanding and what to raise, and does not
    step down to a smaller config (which would only be 'certified' for being quicker)."""
    top = launch(node24, tmp_path, replace(TIGHT, mem_fraction_static=0.86), worst_case=False)
    below = launch(node24, tmp_path, replace(TIGHT, mem_fraction_static=0.86, context_length=16384), worst_case=False)
    assert top.outcome is Outcome.READY and below.outcome is Outcome.READY
    # serving 1000x slower: the worst case's modelled ~16 s become ~16 s of real time at time_scale 0.001
    spec = spec_mod.load(write_spec(tmp_path, env={"AUTOTUNE_SIM_SERVE_SLOWDOWN": "1000"},
                                    simulated={"gpus": 1, "gpu_mem_gib": 24, "time_scale": 0.001,
                                               "node_dir": str(node24.root)},
                                    certify={"boots": 3, "deadline_s": 2.0}))
    cert = certify_mod.certify(spec, SimulatedBackend(node24.root), [top, below], boots=3, safety_margin_gib=0.0)
    assert cert.answer is None and len(cert.attempts) == 1, cert.attempts  # no step down
    attempt = cert.inconclusive
    assert attempt is not None and attempt.source_trial == top.trial_id and not attempt.certified
    boot = attempt.boots[0]
    assert len(attempt.boots) == 1 and boot.inconclusive and boot.outcome == "TIMEOUT" and not boot.served
    assert "unanswered at the 2 s deadline" in boot.why and "not memory" in boot.why, boot.why
    text = "\n".join(certify_mod.summary_lines(cert))
    assert "INCONCLUSIVE" in text and "--deadline-s" in text and "nothing was stepped down" in text, text
    assert all(g.used_bytes == 0 for g in node24.snapshot()), "simulated memory still held"
    assert not tagged_processes(boot.trial_id)


def test_the_worst_case_peak_does_not_depend_on_arrival_timing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The simulator's serving peak is a function of the load admitted: the same config under its
    worst case (2047 running requests and a 131072-token prefill: the load whose verdict flipped
    between runs on a loaded box) peaks at the same byte and reaches the same verdict on every
    boot, whether the server runs 20x faster or slower, or the client reaches it slowly."""
    import time

    from autotune.trial import worstcase

    node = SimNode.create(tmp_path / "node48", gpus=1, gpu_mem_gib=48, gpu_name="NVIDIA Simulated 48G")
    monkeypatch.setenv("AUTOTUNE_SIM_NODE", str(node.root))
    llama = str(MODELS / "Meta-Llama-3.1-8B")
    send = worstcase._send
    # either side of the boundary (the old simulator's OOM peak at 0.88 moved by 1.7 MB with the client's pace)
    for mfs, expected in ((0.87, Outcome.READY), (0.88, Outcome.OOM_RUNTIME)):
        config = LaunchConfig(model_path=llama, mem_fraction_static=mfs, context_length=131072)
        seen = set()
        for scale, gap_s in ((0.001, 0.0), (0.02, 0.0), (0.001, 0.002)):
            def late(*args: object, gap_s: float = gap_s) -> object:
                time.sleep(gap_s)  # the variable under test: a client slow to reach the server (a busy box)
                return send(*args)  # type: ignore[arg-type]

            monkeypatch.setattr(worstcase, "_send", late)
            result = run_trial(config, settings(node, tmp_path, worst_case=True, time_scale=scale),
                               SimulatedBackend(node.root))
            seen.add((result.outcome, max(g.peak_bytes for g in result.gpus)))
        assert len(seen) == 1 and next(iter(seen))[0] is expected, (mfs, seen)


def test_certify_cli_exits_3_when_the_worst_case_runs_out_of_time(tmp_path: Path) -> None:
    """`autotune certify --deadline-s`: out of time on a slow machine is exit 3 (not 1, "none held"),
    with what to raise; the record keeps the verdict for the report."""
    path = write_spec(tmp_path, env={"AUTOTUNE_SIM_SERVE_SLOWDOWN": "1000"}, probe={"enabled": False},
                      certify={"enabled": False}, budget={"trials": 1})
    raw = yaml.safe_load(path.read_text())
    raw["space"].update(mem_fraction_static=0.86, max_running_requests=256)
    path.write_text(yaml.safe_dump(raw))
    run = cli("run", str(path))
    assert run.returncode == 0, run.stdout + run.stderr
    done = cli("certify", str(path), "--deadline-s", "2")
    assert done.returncode == 3, done.stdout + done.stderr
    assert "INCONCLUSIVE" in done.stdout and "--deadline-s" in done.stdout and "stepped down" in done.stdout, done.stdout
    spec = spec_mod.load(path)
    cert = certify_mod.load(store.load_study(spec.study, spec.storage).user_attrs)
    assert cert is not None and cert.inconclusive is not None and cert.deadline_s == 2.0


def test_a_death_under_load_steps_down_the_fraction_in_doubling_steps_whether_or_not_the_search_ran_it() -> None:
    """The search confirms its optimum with few fits below it; stepping down only through those
    jumped from the answer to a smaller batch at once (mrr 64 where a lower fraction at 256 held)."""
    from autotune.search.certify import StepDown
    from tests.test_frontier_parallel import fitted

    def at(mfs: float, mrr: int, outcome: Outcome = Outcome.READY) -> TrialResult:
        r = fitted(mfs, False)
        return replace(r, config=replace(r.config, max_running_requests=mrr), outcome=outcome,
                       trial_id=f"t{mfs}-{mrr}")
    answer, smaller = at(0.89, 256), at(0.89, 64)
    fractions = [round(0.80 + 0.005 * i, 3) for i in range(21)]  # 0.80 .. 0.90
    steps = StepDown([answer, smaller], fractions, [answer, smaller])
    walked = []
    while (source := steps.next()) is not None:
        walked.append((source.config.mem_fraction_static, source.config.max_running_requests, source.trial_id))
        steps.failed(source, needs_slack=True)
    # one fraction down, two, four, eight, sixteen, then the lowest; made configs carry no trial; then mrr 64
    assert walked[:7] == [(0.89, 256, "t0.89-256"), (0.885, 256, ""), (0.88, 256, ""), (0.87, 256, ""),
                          (0.85, 256, ""), (0.81, 256, ""), (0.80, 256, "")]
    assert walked[7] == (0.89, 64, "t0.89-64")
    # a fraction the search found too small for its context ends the walk there; so does a failure not about slack
    low = at(0.88, 256, Outcome.KV_TOO_SMALL)
    steps = StepDown([answer, smaller], fractions, [answer, smaller, low])
    assert steps.next() == answer
    steps.failed(answer, needs_slack=True)
    one_down = steps.next()
    assert one_down is not None and one_down.config.mem_fraction_static == 0.885
    steps.failed(one_down, needs_slack=True)  # two down is 0.88: too little KV there
    assert steps.next() == smaller
    steps = StepDown([answer, smaller], fractions, [answer, smaller])
    steps.next()
    steps.failed(answer, needs_slack=False)
    assert steps.next() == smaller


def test_a_step_down_that_holds_steps_back_up_to_the_largest_fraction_that_holds(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """DeepSeek-R1 on 8 x 141 GiB, SGLang 0.5.9 (held-out scenario): the search's answer, mfs 0.96 at
    65536, dies under the worst case (4096 running requests), as do 0.95, 0.94 and 0.92; the
    doubling walk down reached 0.88, which held, and stopped there, recommending 0.88 while 0.91
    holds the same worst case (717,151 KV tokens against 653,416). Between a fraction that held and
    the failure above it, certification bisects back up (one boot each), then gives the highest
    that held the rest of its boots."""
    path = write_spec(tmp_path)
    spec = spec_mod.load(path)
    fractions = [round(0.60 + 0.01 * i, 2) for i in range(38)]  # 0.60 .. 0.97
    spec = replace(spec, space={**spec.space, "mem_fraction_static": fractions})
    holds = 0.91
    launched: list[float] = []

    def fake_run_trial(config: LaunchConfig, settings: object, backend: object, trial_id: str | None = None) -> TrialResult:
        from tests.test_frontier_parallel import fitted
        mfs = float(config.mem_fraction_static or 0)
        launched.append(mfs)
        r = replace(fitted(mfs, False), config=config, trial_id=f"boot{len(launched)}")
        if mfs > holds + 1e-9:
            return replace(r, outcome=Outcome.OOM_RUNTIME)
        from autotune.records import ProbeResult
        return replace(r, probe=ProbeResult(ok=True, long_request_tokens=1, burst_requests=1, burst_ok=1, elapsed_s=1.0))

    monkeypatch.setattr(slots_mod, "run_trial", fake_run_trial)
    answer = replace(fake_run_trial(TIGHT, None, None), trial_id="search-best")
    answer = replace(answer, config=replace(answer.config, mem_fraction_static=0.96),
                     outcome=Outcome.READY, probe=None)
    launched.clear()
    cert = certify_mod.certify(spec, None, [answer], boots=3, safety_margin_gib=0.0)  # type: ignore[arg-type]
    assert cert.answer is not None and "mfs=0.91" in cert.answer.config, certify_mod.summary_lines(cert)
    assert len(cert.answer.boots) == 3 and all(b.served for b in cert.answer.boots)
    # the walk down as before (0.96, 0.95, 0.94, 0.92, 0.88), then back up: 0.90, 0.91, the rest of 0.91's boots
    assert launched == [0.96, 0.95, 0.94, 0.92, 0.88, 0.90, 0.91, 0.91, 0.91], launched
    assert sum(a.certified for a in cert.attempts) == 1


def test_when_the_highest_step_down_fails_a_later_boot_the_next_highest_that_held_is_certified(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Cold boots differ: 0.91 held its first boot and died on its second. 0.90 held its one boot on
    the way up: it gets the rest of its boots, not a walk down from 0.91."""
    from autotune.records import ProbeResult
    from tests.test_frontier_parallel import fitted

    spec = spec_mod.load(write_spec(tmp_path))
    spec = replace(spec, space={**spec.space, "mem_fraction_static": [round(0.60 + 0.01 * i, 2) for i in range(38)]})
    launched: list[float] = []

    def fake_run_trial(config: LaunchConfig, settings: object, backend: object, trial_id: str | None = None) -> TrialResult:
        mfs = float(config.mem_fraction_static or 0)
        launched.append(mfs)
        r = replace(fitted(mfs, False), config=config, trial_id=f"boot{len(launched)}")
        if mfs > 0.91 + 1e-9 or (mfs > 0.905 and launched.count(mfs) == 2):
            return replace(r, outcome=Outcome.OOM_RUNTIME)
        return replace(r, probe=ProbeResult(ok=True, long_request_tokens=1, burst_requests=1, burst_ok=1, elapsed_s=1))

    monkeypatch.setattr(slots_mod, "run_trial", fake_run_trial)
    answer = replace(fitted(0.96, False), config=replace(TIGHT, mem_fraction_static=0.96), trial_id="search-best")
    cert = certify_mod.certify(spec, None, [answer], boots=3, safety_margin_gib=0.0)  # type: ignore[arg-type]
    assert launched == [0.96, 0.95, 0.94, 0.92, 0.88, 0.90, 0.91, 0.91, 0.90, 0.90], launched
    assert cert.answer is not None and "mfs=0.9 " in cert.answer.config + " " and len(cert.answer.boots) == 3
    assert sum(a.certified for a in cert.attempts) == 1
