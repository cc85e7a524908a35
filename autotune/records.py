"""What a launch ends as, and the evidence it carries.

`Outcome` is the verdict taxonomy of DESIGN.md; `OUTCOMES` holds each outcome's facts (its
side for the search, plot marker, implied phase, default remedy), written once and read by every
consumer; `Phase` is how far a launch got; `Classification` is what the log alone says;
`TrialResult` is the whole record of one launch. All are plain values with JSON round-trips, so a result written at
3 a.m. can be read back by `report`, `best` and `regress`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from autotune.config import LaunchConfig

GIB = 1 << 30
MIB = 1 << 20


# Where a server says it takes the worst case as one description (the simulator does; a real engine
# never): `/server_info`[WORST_CASE_INFO_KEY] is the path (trial/worstcase.py, sim/http_api.py).
WORST_CASE_INFO_KEY = "autotune_worst_case_path"


class Outcome(str, Enum):
    READY = "READY"
    KV_TOO_SMALL = "KV_TOO_SMALL"
    OOM_WEIGHTS = "OOM_WEIGHTS"
    OOM_KV_POOL = "OOM_KV_POOL"
    OOM_CUDA_GRAPH = "OOM_CUDA_GRAPH"
    OOM_RUNTIME = "OOM_RUNTIME"
    GPU_BUSY = "GPU_BUSY"
    CONFIG_ERROR = "CONFIG_ERROR"
    MISMATCH = "MISMATCH"
    CRASH = "CRASH"
    TIMEOUT = "TIMEOUT"

    @property
    def facts(self) -> OutcomeFacts:
        return OUTCOMES[self]

    @property
    def fits(self) -> bool:
        return self.facts.side is Side.FITS

    @property
    def is_oom(self) -> bool:
        return self.value.startswith("OOM_")

    @property
    def judges_config(self) -> bool:
        """True when the outcome says something about the config's memory fit (its side is known).

        GPU_BUSY is about the machine, MISMATCH about the adapter, CRASH and
        TIMEOUT about nothing we can tell: none of them may teach the search
        that a config does or does not fit.
        """
        return self.facts.side is not Side.UNKNOWN


class Phase(str, Enum):
    """Launch phases in the order a server goes through them."""

    SPAWN = "spawn"
    ARGS = "args"
    INIT = "init_dist"
    WEIGHTS = "load_weights"
    KV_POOL = "kv_pool"
    CUDA_GRAPH = "cuda_graph"
    HTTP = "http"
    WARMUP = "warmup"
    READY = "ready"
    PROBE = "probe"

    @property
    def rank(self) -> int:
        return _PHASE_ORDER.index(self)


_PHASE_ORDER = list(Phase)


class Need(str, Enum):
    """What a failed launch needs to fit, as the search reads it (None: no single lever)."""

    MORE_FRACTION = "more_fraction"  # a larger memory fraction (SGLang mem_fraction_static, vLLM utilization)
    LESS_FRACTION = "less_fraction"  # a smaller one: the slack outside the pool ran out
    SHORTER_CONTEXT = "shorter_context"  # the context is above what the model or engine allows


class Side(str, Enum):
    """Which way a launch's config lies from the boundary of what fits, as the search reads it
    (`search.knowledge`): what it rules in or out of the configs never launched."""

    FITS = "fits"
    LOW = "needs_more_fraction"
    HIGH = "needs_less_fraction"
    ANY = "fails_at_any_fraction"
    CONTEXT = "context_too_long"
    UNKNOWN = "unknown"


@dataclass(frozen=True)
class OutcomeFacts:
    """What every consumer needs to know of one outcome.

    `side`: how the search reads it (`search.knowledge.side_of`), refined by what the log says the
    launch needs (`side_by_need`). `marker`, `color`: matplotlib's, in `autotune report`'s plots.
    `phase`: where it happened when no progress line says so (the classifier's verdict). `remedy`:
    the default wording, the same for every engine (templates as in `classifier.rules.Rule`); when
    there is none, `no_remedy` says who words it instead or why there is nothing to say.
    """

    side: Side
    marker: str
    color: str
    phase: Phase | None = None
    remedy: tuple[str, ...] = ()
    no_remedy: str = ""
    side_by_need: Mapping[Need | None, Side] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if bool(self.remedy) == bool(self.no_remedy):
            raise TypeError("an outcome has a default remedy or says why it has none (OutcomeFacts.no_remedy)")


_BY_ENGINE = "the engine words it with its own flags (EngineLog.fallbacks, or its special wording)"
_BY_TRIAL = "the trial words it from what it checked or measured (trial/run.py)"

OUTCOMES: dict[Outcome, OutcomeFacts] = {
    Outcome.READY: OutcomeFacts(Side.FITS, "o", "tab:green", no_remedy="it fits: nothing to remedy"),
    Outcome.KV_TOO_SMALL: OutcomeFacts(Side.LOW, "v", "tab:olive", no_remedy=_BY_TRIAL),
    Outcome.OOM_WEIGHTS: OutcomeFacts(Side.ANY, "X", "black", Phase.WEIGHTS, no_remedy=_BY_ENGINE),
    Outcome.OOM_KV_POOL: OutcomeFacts(Side.LOW, "s", "tab:orange", Phase.KV_POOL, no_remedy=_BY_ENGINE,
                                      side_by_need={Need.LESS_FRACTION: Side.HIGH}),
    Outcome.OOM_CUDA_GRAPH: OutcomeFacts(Side.HIGH, "^", "tab:red", Phase.CUDA_GRAPH, no_remedy=_BY_ENGINE),
    Outcome.OOM_RUNTIME: OutcomeFacts(Side.HIGH, "D", "tab:purple", Phase.READY, no_remedy=_BY_ENGINE),
    Outcome.GPU_BUSY: OutcomeFacts(Side.UNKNOWN, "+", "tab:blue", Phase.INIT, remedy=(
        "the GPU was already full before the weights loaded: another process holds memory; free the "
        "GPUs or wait; this says nothing about the config",)),
    Outcome.CONFIG_ERROR: OutcomeFacts(Side.ANY, "P", "tab:gray", Phase.ARGS, no_remedy=_BY_ENGINE,
                                       side_by_need={Need.SHORTER_CONTEXT: Side.CONTEXT}),
    Outcome.MISMATCH: OutcomeFacts(Side.UNKNOWN, "h", "tab:cyan", no_remedy=_BY_TRIAL),
    Outcome.CRASH: OutcomeFacts(Side.UNKNOWN, "x", "tab:brown", remedy=(
        "the server died for a reason that is not memory (see the evidence)",)),
    # the trial words its own deadlines; this is for an engine's watchdog that gave up on a hang (the classifier)
    Outcome.TIMEOUT: OutcomeFacts(Side.UNKNOWN, "*", "tab:pink", remedy=(
        "the launch hung and timed out (see the evidence): not memory; find what never finished",)),
}
if OUTCOMES.keys() != set(Outcome):  # a new outcome without its row fails here, not in a report at 3 a.m.
    raise TypeError(f"records.OUTCOMES has no row for {sorted(o.value for o in set(Outcome) - OUTCOMES.keys())}")


@dataclass(frozen=True)
class Classification:
    """The classifier's reading of a (possibly partial, possibly damaged) log.

    `outcome` is None while nothing decisive has been seen. `figures` hold what the
    engine logged, keys carry their unit (`weights_gib`, `kv_tokens`, ...).
    """

    outcome: Outcome | None
    phase: Phase
    remedy: str = ""
    evidence: tuple[str, ...] = ()
    figures: Mapping[str, float] = field(default_factory=dict)
    confidence: str = "high"
    needs: Need | None = None
    # What the log lacks that would decide it ("" when the deciding line is there): a cut log
    # (an excerpt that ends inside a traceback, an OOM with no phase around it) still gets its
    # most likely outcome, with confidence "low", and this says what was not seen.
    missing: str = ""
    # Other classes the log supports as well, each with why (a log that is ambiguous between two
    # readings says both). `outcome` is the most likely; the search reads the launch by the more
    # conservative of them all (`search.knowledge.side_of`). Carried to a TrialResult as the
    # figures `alt_<OUTCOME>` (that reading's mfs direction).
    alternatives: tuple[tuple[Outcome, str], ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "outcome": self.outcome.value if self.outcome else None,
            "alternatives": [{"outcome": o.value, "why": why} for o, why in self.alternatives],
            "missing": self.missing,
            "needs": self.needs.value if self.needs else None,
            "remedy": self.remedy,
            "phase": self.phase.value,
            "evidence": list(self.evidence),
            "figures": dict(self.figures),
            "confidence": self.confidence,
        }


@dataclass(frozen=True)
class GpuMemory:
    """Per-GPU memory of one trial, in bytes, as the backend saw it.

    `peak_exact`: True when `peak_bytes` is the backend's recorded high-water mark (the simulated
    node); False when it is the largest of ~10 Hz samples, a lower bound of the true peak (an
    allocation freed within a sample period, such as a prefill chunk's activations, is missed).
    """

    index: int
    total_bytes: int
    baseline_bytes: int
    peak_bytes: int
    final_bytes: int
    peak_exact: bool = False

    def to_dict(self) -> dict[str, int | bool]:
        return dataclasses.asdict(self)


@dataclass(frozen=True)
class ProbeResult:
    """What the post-ready load probe did. `ok` False means the server died or erred."""

    ok: bool
    long_request_tokens: int
    burst_requests: int
    burst_ok: int
    elapsed_s: float
    error: str = ""
    timed_out: int = 0  # requests still unanswered at the deadline (worst case): slowness, not a memory verdict

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def to_jsonable(value: Any) -> Any:
    """Plain-JSON form of records (enums by value, tuples as lists)."""
    if isinstance(value, Enum):
        return value.value
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: to_jsonable(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, Mapping):
        return {str(k): to_jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [to_jsonable(v) for v in value]
    return value


# The figures a log can yield, by name. Units are in the names. Classifiers fill what the
# log shows (SGLang or vLLM); the estimator learns from them; reports print them.
FIGURES: dict[str, str] = {
    "init_mem_usage_gib": "memory taken by CUDA context + NCCL before weights (SGLang 'mem usage' at dist init)",
    "avail_before_weights_gib": "free GiB when target weights begin loading (min over ranks): SGLang's pre_model_load F",
    "weights_gib": "target weights, GiB per GPU ('Load weight end ... mem usage', vLLM 'Model loading took')",
    "draft_weights_gib": "draft (MTP/EAGLE/NextN) weights, GiB per GPU",
    "avail_after_weights_gib": "free GiB after the last weight load (min over ranks)",
    "weights_load_s": "seconds the target weights took to load",
    "kv_tokens": "KV pool capacity in tokens (SGLang #tokens / max_total_num_tokens, vLLM GPU KV cache size)",
    "kv_gib": "KV pool size per GPU, GiB (K+V, target pool)",
    "kv_cell_bytes": "KV bytes per token per GPU, derived from kv_gib and kv_tokens",
    "mamba_slots": "hybrid models: recurrent-state slots (max_mamba_cache_size)",
    "mamba_gib": "hybrid models: state pool GiB per GPU (conv + ssm + intermediate)",
    "pool_end_avail_gib": "free GiB after the (target) memory pool was allocated",
    "graph_gib": "CUDA graph memory per GPU, GiB (sum of capture 'mem usage')",
    "graph_s": "seconds spent capturing CUDA graphs (incl. torch.compile)",
    "max_running_requests": "resolved max running requests",
    "context_len": "resolved context length",
    "chunked_prefill_size": "resolved chunked prefill size",
    "available_gpu_mem_gib": "free GiB after start-up (SGLang summary line)",
    "mem_fraction_static": "the fraction the engine ran with (from its own lines)",
    "min_mem_fraction_static": "engine-stated lower bound: 'Raise --mem-fraction-static above X'",
    "oom_tried_gib": "CUDA OOM: the allocation that failed",
    "oom_free_gib": "CUDA OOM: free GiB on the device at that moment",
    "oom_total_gib": "CUDA/NPU OOM: the device's total capacity as the message states it",
    "oom_allocated_gib": "CUDA/NPU OOM: GiB PyTorch itself had allocated when it failed",
    "oom_own_gib": "CUDA/NPU OOM: GiB the failing process held (torch's 'this process has', or PyTorch's reserved)",
    "kv_avail_gib": "vLLM: available KV cache memory, GiB",
    "gpu_memory_utilization": "vLLM: the utilisation it ran with",
    "max_context_fit_tokens": "vLLM: the context length the available KV memory holds ('estimated maximum model length')",
    "kv_short_of_context_tokens": "SGLang 0.5.23 'KV pool holds N tokens, fewer than --context-length L': L - N",
    "mfs_direction": "+1: more memory fraction would help; -1: less would help; 0: the fraction is not the lever",
    # One per class a log may also support (Classification.alternatives): that reading's mfs direction.
    **{f"alt_{o.value}": f"the log also supports {o.value} (Classification.alternatives): that reading's mfs_direction"
       for o in Outcome},
}


# What `autotune best --format json|yaml` prints (report.command.as_record writes every key, in this order);
# `autotune trial --config` reads it back and refuses any other key.
BEST_RECORD_KEYS = ("argv", "engine", "engine_version", "config", "kv_tokens", "trial_id", "outcome", "gpu_peak_bytes",
                    "certification")


@dataclass(frozen=True)
class TrialResult:
    """Everything one launch did, with the evidence. JSON round-trips through to_dict/from_dict.

    `launched` is False when the verdict needed no launch (busy GPUs, flags the engine's own
    parser rejects). `gpu_s` is how long the launch held the GPUs by the engine's own log
    clock (real seconds on real hardware, modelled seconds on the simulator), `wall_s` what
    the tool waited. `released` says whether GPU memory was back to its baseline afterwards.
    """

    trial_id: str
    config: LaunchConfig
    engine: str
    engine_version: str
    outcome: Outcome
    phase: Phase
    remedy: str
    evidence: tuple[str, ...]
    figures: Mapping[str, float]
    argv: tuple[str, ...]
    log_path: str
    exit_code: int | None
    launched: bool
    wall_s: float
    gpu_s: float
    gpus: tuple[GpuMemory, ...]
    kv_tokens: int | None
    resolved: Mapping[str, Any]
    mismatches: tuple[str, ...] = ()
    probe: ProbeResult | None = None
    released: bool = True
    verdict_latency_s: float | None = None
    notes: tuple[str, ...] = ()
    started_at: str = ""
    needs: Need | None = None  # the search's direction for a failure (records.Need)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = to_jsonable(self)
        out["config"] = self.config.to_dict()
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> TrialResult:
        d = dict(data)
        probe = d.get("probe")
        return cls(
            trial_id=d["trial_id"], config=LaunchConfig.from_dict(d["config"]), engine=d["engine"],
            engine_version=d["engine_version"], outcome=Outcome(d["outcome"]), phase=Phase(d["phase"]),
            remedy=d["remedy"], evidence=tuple(d["evidence"]), figures=dict(d["figures"]), argv=tuple(d["argv"]),
            log_path=d["log_path"], exit_code=d["exit_code"], launched=d["launched"], wall_s=d["wall_s"],
            gpu_s=d["gpu_s"], gpus=tuple(GpuMemory(**g) for g in d["gpus"]), kv_tokens=d["kv_tokens"],
            resolved=dict(d["resolved"]), mismatches=tuple(d.get("mismatches", ())),
            probe=ProbeResult(**probe) if probe else None, released=d.get("released", True),
            verdict_latency_s=d.get("verdict_latency_s"), notes=tuple(d.get("notes", ())),
            started_at=d.get("started_at", ""), needs=_needs(d),
        )


def _needs(d: Mapping[str, Any]) -> Need | None:
    """The stored direction; records written before `needs` existed carry it as a figure."""
    if d.get("needs"):
        return Need(d["needs"])
    direction = (d.get("figures") or {}).get("mfs_direction", 0)
    return Need.MORE_FRACTION if direction > 0 else Need.LESS_FRACTION if direction < 0 else None
