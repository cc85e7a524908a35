"""Plain settings shared by the spec (which builds them) and the trial (which uses them).

A low-level module on purpose: `spec` imports it without importing `trial`, so reading a
spec never pulls in the code that launches servers. Pure frozen dataclasses, no behaviour
beyond unit arithmetic. Each spec section's fields and defaults are written here only: the
spec's schema reads them (`spec.schema.section`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import Literal

GOAL_ORDER = ("features", "context_length", "kv_tokens")
GOAL_CRITERIA = (*GOAL_ORDER, "max_running_requests")  # what goal.order may name


class StrategyName(str, Enum):
    """What the spec's `strategy` (and `autotune run --strategy`) may name; `search.strategies.STRATEGIES`
    makes each (a test checks it has every one). Named here, below the spec, so that reading a spec
    never imports the search."""

    FRONTIER = "frontier"  # model-based (search/frontier.py)
    BISECT = "bisect"  # the frontier in its older one-slot order: bisection from the lowest candidate
    TPE = "tpe"  # Optuna's samplers, for comparison
    RANDOM = "random"
    GRID = "grid"


DEFAULT_STRATEGY = StrategyName.FRONTIER.value


@dataclass(frozen=True)
class SimulatedNode:
    gpus: int = 2
    gpu_mem_gib: float = 48.0
    gpu_name: str = "NVIDIA Simulated GPU"
    node_dir: Path | None = None
    time_scale: float = 0.01
    faults: str = ""
    release_delay_s: float = 0.0
    fault_rate: float = 0.0  # soak: the share of trials that get one random fault
    min_deadline_s: float = 10.0  # floor of the scaled timeouts (real overheads do not scale)
    boot_jitter_mib: float = 0.0  # each boot's CUDA context takes up to this much more (0: deterministic)


@dataclass(frozen=True)
class Goal:
    order: tuple[str, ...] = GOAL_ORDER
    required_features: tuple[str, ...] = ()
    min_concurrency: int = 1


@dataclass(frozen=True)
class CertifySpec:
    """Certification of the answer (search/certify.py): `boots` cold boots under the worst case,
    each leaving `safety_margin_gib` of headroom on every GPU. A worst case not answered within
    `deadline_s` (wall seconds, the whole load) on a server that stays up is inconclusive."""

    enabled: bool = True
    boots: int = 3
    safety_margin_gib: float = 0.0
    deadline_s: float = 1800.0


@dataclass(frozen=True)
class Budget:
    """`unexplained_crashes`: launches in a row that end with no error line the classifier knows
    before the run stops (the launcher or the target is then the likely cause, not the configs)."""

    trials: int = 40
    wall_time_s: float = 8 * 3600.0
    unexplained_crashes: int = 3


@dataclass(frozen=True)
class ProbeSpec:
    """The post-ready load probe: one long request, then a burst of concurrent ones."""

    enabled: bool = True
    long_request: bool = True
    burst: int = 8  # concurrent requests
    burst_tokens: int = 1024  # input tokens of each burst request
    max_new_tokens: int = 16
    timeout_s: float = 600.0
    worst_case: bool = False  # certification: send the worst case the config permits instead (trial/worstcase.py)


@dataclass(frozen=True)
class Deadlines:
    """Seconds. `no_progress_s` per phase (torch.compile can be silent for minutes)."""

    startup_s: float = 3600.0
    no_progress_s: float = 600.0
    compile_no_progress_s: float = 1800.0
    ready_health_s: float = 120.0
    poll_s: float = 0.02

    def scaled(self, factor: float, floor_s: float = 10.0) -> Deadlines:
        """Deadlines for a simulated engine whose modelled time runs `factor` times real time.

        Real overheads (process start-up, HTTP) do not scale, hence the floor.
        """
        def f(seconds: float) -> float:
            return max(floor_s, seconds * factor)

        return Deadlines(f(self.startup_s), f(self.no_progress_s), f(self.compile_no_progress_s),
                         f(self.ready_health_s), self.poll_s)


@dataclass(frozen=True)
class Target:
    """Where the server runs. Both fields empty: here, on this machine (the default)."""

    ssh: str | None = None  # user@host[:port]
    ssh_options: tuple[str, ...] = ()
    exec_prefix: tuple[str, ...] = ()
    python: str = "python3"  # the target's own Python, for the helper
    nvidia_smi: tuple[str, ...] = ("nvidia-smi",)  # the query command inside the target
    # "container": the exec prefix enters a network namespace of its own (LXC, Docker), so the server's
    # 127.0.0.1 is reached by a relay run through the prefix; "shared": the host's network (an ssh
    # tunnel, or directly when local); "auto": told once from the namespaces (Transport.network)
    network: Literal["auto", "shared", "container"] = "auto"

    @property
    def local(self) -> bool:
        return self.ssh is None and not self.exec_prefix

    def destination(self) -> tuple[str, int | None]:
        """(user@host, port) of `ssh`; the port is None when not given."""
        assert self.ssh is not None
        user_host, _, port = self.ssh.rpartition(":") if ":" in self.ssh else (self.ssh, "", "")
        return user_host, int(port) if port else None

    def describe(self) -> str:
        parts = [f"ssh {self.ssh}"] if self.ssh else []
        return " + ".join([*parts, *([" ".join(self.exec_prefix)] if self.exec_prefix else [])]) or "local"


@dataclass(frozen=True)
class TrialSettings:
    """How to launch and judge, the same for every trial of a run."""

    engine: str = "sglang"
    engine_version: str = "0.5.23"
    launcher: tuple[str, ...] = ("python", "-m", "sglang.launch_server")
    host: str = "127.0.0.1"
    port: int | None = None  # None: a free port per trial
    gpus: tuple[int, ...] = (0,)
    env: Mapping[str, str] = field(default_factory=dict)
    trials_dir: Path = Path("results/trials")
    deadlines: Deadlines = Deadlines()
    grace_s: float = 15.0
    release_timeout_s: float = 60.0
    allow_busy: bool = False
    required_concurrency: int = 1
    probe: ProbeSpec = ProbeSpec()
    api_key: str | None = None
    target: Target = Target()  # local unless the spec says where
