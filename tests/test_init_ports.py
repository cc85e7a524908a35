"""Each trial's distributed-init port (SGLang --nccl-port, vLLM VLLM_PORT): drawn per trial, held
apart from every other live trial's, checked free, passed through the engine's adapter, held by
the simulated server's rank 0 as SGLang's TCPStore holds it, and a port taken in between is a
port failure, never a memory verdict."""

from __future__ import annotations

import random
import socket
import threading
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from autotune.classifier.classify import LogClassifier
from autotune.config import LaunchConfig
from autotune.engines import get_engine, verify
from autotune.records import Outcome
from autotune.sim.backend import SimulatedBackend
from autotune.sim.node import SimNode
from autotune.trial import place as place_mod
from autotune.trial import ports
from autotune.trial.run import run_trial
from autotune.trial.supervisor import tagged_processes
from tests.conftest import MODELS, free_port
from tests.test_trial import settings

LLAMA8 = str(MODELS / "Meta-Llama-3.1-8B")
CONFIG = LaunchConfig(model_path=LLAMA8, mem_fraction_static=0.85, context_length=8192)


@pytest.fixture
def held_port() -> Iterator[int]:
    """A port below the ephemeral range that a listening socket here holds (an outsider's)."""
    for port in random.sample(range(ports.INIT_LOW, ports.INIT_HIGH), 200):
        sock = socket.socket()
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            sock.close()
            continue
        sock.listen()
        try:
            yield port
        finally:
            sock.close()
        return
    pytest.skip("no free port below the ephemeral range")


def nccl_port(argv: tuple[str, ...] | list[str]) -> int:
    return int(argv[argv.index("--nccl-port") + 1])


def test_slots_drawing_in_the_same_instant_never_share_a_port(monkeypatch: pytest.MonkeyPatch) -> None:
    # every draw sees the same random order: only the lease's bookkeeping keeps the ports apart
    monkeypatch.setattr(ports.random, "sample", lambda population, k: list(population)[:k])
    leases = [ports.PortLease() for _ in range(4)]
    inits: list[int] = []
    https: list[int] = []
    start = threading.Barrier(len(leases))

    def draw(lease: ports.PortLease) -> None:
        start.wait()
        inits.append(lease.init(lambda p: ports.port_in_use("127.0.0.1", p)))
        https.append(lease.http("127.0.0.1", lambda p: ports.port_in_use("127.0.0.1", p)))

    threads = [threading.Thread(target=draw, args=(lease,)) for lease in leases]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    got = inits + https
    assert len(got) == 8 and len(set(got)) == 8
    assert all(ports.INIT_LOW <= p <= ports.INIT_HIGH for p in inits)
    for lease in leases:
        lease.release()
    assert not ports.held() & set(got)


def test_two_trials_at_once_launch_with_distinct_init_ports_their_servers_hold(node: SimNode, tmp_path: Path) -> None:
    backend = SimulatedBackend(node.root)
    bound: set[int] = set()  # init ports of live trials found bound (by their servers' rank 0) as they start
    results = {}

    def on_phase(phase: str, used: tuple[int, ...], totals: tuple[int, ...]) -> None:
        bound.update(p for p in ports.held() if ports.INIT_LOW <= p <= ports.INIT_HIGH
                     and ports.port_in_use("127.0.0.1", p))

    def one(gpu: int) -> None:
        results[gpu] = run_trial(CONFIG, settings(node, tmp_path / f"gpu{gpu}", gpus=(gpu,)), backend,
                                 on_phase=on_phase)

    threads = [threading.Thread(target=one, args=(g,)) for g in (0, 1)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert all(r.outcome is Outcome.READY for r in results.values()), [r.evidence for r in results.values()]
    a, b = (nccl_port(results[g].argv) for g in (0, 1))
    assert a != b and {a, b} <= bound
    for g, port in ((0, a), (1, b)):  # the server was told it, and said so (0.5.23's server_args dict)
        assert f"'nccl_port': {port}" in Path(results[g].log_path).read_text()
        assert not tagged_processes(results[g].trial_id)
    assert not ports.held() & {a, b}, "a finished trial still holds its ports"
    assert not ports.port_in_use("127.0.0.1", a) and not ports.port_in_use("127.0.0.1", b)


def test_the_simulated_server_holds_its_nccl_port_and_fails_like_sglang_when_it_is_taken(
        node: SimNode, start_server, held_port: int) -> None:  # type: ignore[no-untyped-def]
    server = start_server(["--model-path", LLAMA8, "--port", str(free_port()), "--nccl-port", str(held_port)])
    assert server.wait() == -9  # SGLang's failure path: the scheduler's SIGQUIT, kill_process_tree
    text = server.text()
    assert "Scheduler hit an exception" in text and "EADDRINUSE" in text and f"port: {held_port}" in text
    classifier = LogClassifier("sglang")
    for line in text.splitlines():
        classifier.feed(line)
    verdict = classifier.classification(-9, log_complete=True)
    assert verdict.outcome is Outcome.CRASH and "port" in verdict.remedy
    assert "Load weight begin" not in text  # it failed at the rendezvous, before any weights


def test_an_init_port_taken_between_the_check_and_the_bind_is_a_port_crash_not_oom(
        node: SimNode, tmp_path: Path, held_port: int, monkeypatch: pytest.MonkeyPatch) -> None:
    # the outsider took the drawn port after both checks passed (the race the lease cannot close)
    monkeypatch.setattr(ports.PortLease, "init", lambda self, in_use: held_port)
    real = place_mod.port_in_use
    monkeypatch.setattr(place_mod, "port_in_use", lambda host, port: port != held_port and real(host, port))
    result = run_trial(CONFIG, settings(node, tmp_path), SimulatedBackend(node.root))
    assert result.outcome is Outcome.CRASH and not result.outcome.is_oom
    assert "port" in result.remedy and any(str(held_port) in e for e in result.evidence)
    assert not tagged_processes(result.trial_id) and result.released


def test_the_intent_check_sees_the_init_port_and_refuses_one_the_trial_did_not_reserve(
        node: SimNode, tmp_path: Path) -> None:
    engine = get_engine("sglang")
    argv = engine.argv(CONFIG, version="0.5.23", launcher=["x"], host="127.0.0.1", port=30000, init_port=23456)
    intent = engine.intent_from_argv(engine.flags_of(argv), "0.5.23")
    assert intent.init_port == 23456 and verify(intent, CONFIG, source="argv", init_port=23456) == []
    assert "distributed-init port" in verify(intent, CONFIG, source="argv", init_port=23457)[0]
    assert engine.intent_from_server_info({"nccl_port": 23456}).init_port == 23456
    # extra_args pinning another --nccl-port overrides the reserved one: refused before any launch
    pinned = replace(CONFIG, extra_args=("--nccl-port", "29999"))
    result = run_trial(pinned, settings(node, tmp_path), SimulatedBackend(node.root))
    assert result.outcome is Outcome.MISMATCH and not result.launched
    assert "distributed-init port is 29999" in " ".join(result.evidence)


def test_vllm_gets_its_init_port_in_the_environment_not_on_the_command_line() -> None:
    engine = get_engine("vllm")
    argv = engine.argv(CONFIG, version="0.33.0", launcher=["x"], host="127.0.0.1", port=8000, init_port=23456)
    assert "23456" not in argv and engine.init_port_env == "VLLM_PORT"
