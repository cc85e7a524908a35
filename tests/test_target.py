"""Trials through a target: a real sshd on 127.0.0.1 and a PID-namespace container stand-in.

What must hold: the same verdicts as locally, the server detached from the ssh session (a dropped
connection neither stops it nor loses a log line), nothing tagged left in the target after a
trial or after recovery, GPU memory read through nvidia-smi's query mode inside the target, and
transport failures as their own error naming the field, before any launch.
"""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path

from autotune.config import LaunchConfig
from autotune.gpu.nvidiasmi import NvidiaSmiBackend
from autotune.records import Outcome
from autotune.settings import Target, TrialSettings
from autotune.sim.node import SimNode
from autotune.target.transport import Transport, transport_for
from autotune.trial.run import run_trial
from tests.conftest import MODELS
from tests.sshd import Container, Sshd, container_fixture, sshd_fixture  # noqa: F401 - fixtures
from tests.test_trial import settings as local_settings

LLAMA8 = str(MODELS / "Meta-Llama-3.1-8B")


def remote(sshd: Sshd, container: Container | None) -> Target:
    return Target(ssh=sshd.address, ssh_options=tuple(sshd.options),
                  exec_prefix=tuple(container.prefix) if container else ())


def smi(transport: Transport, node: SimNode) -> NvidiaSmiBackend:
    """The simulated node's nvidia-smi, run inside the target (where the server's PIDs make sense)."""
    return NvidiaSmiBackend(transport.command(["env", f"AUTOTUNE_SIM_NODE={node.root}", sys.executable, "-m",
                                               "autotune.sim.nvidia_smi"]))


def remote_settings(node: SimNode, tmp_path: Path, target: Target, **kw: object) -> TrialSettings:
    return replace(local_settings(node, tmp_path, **kw), target=target,
                   launcher=(sys.executable, "-m", "autotune.sim.sglang"))


def leftovers(transport: Transport, trial_id: str) -> list[object]:
    answer: list[object] = transport.helper("list", trial_id)
    return answer


def test_trial_through_ssh_and_container_matches_local(node: SimNode, tmp_path: Path, sshd: Sshd,
                                                       container: Container) -> None:
    target = remote(sshd, container)
    transport = transport_for(target)
    config = LaunchConfig(model_path=LLAMA8, mem_fraction_static=0.85, context_length=32768)
    r = run_trial(config, remote_settings(node, tmp_path, target), smi(transport, node))
    assert r.outcome is Outcome.READY, (r.outcome, r.evidence, r.notes)
    assert r.probe is not None and r.probe.ok and r.kv_tokens and r.kv_tokens > 32768
    assert not r.mismatches and r.released
    assert r.gpus[0].peak_bytes > 40 << 30  # memory seen through nvidia-smi inside the target
    assert leftovers(transport, r.trial_id) == []
