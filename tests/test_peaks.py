"""Peak GPU memory is a stable figure: the simulated node records true peaks (high-water marks)
that a ~10 Hz sampler cannot see, sampled peaks are marked as lower bounds, and regress does not
call a row "changed" on sampling noise."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from autotune.config import LaunchConfig
from autotune.gpu.base import GpuState
from autotune.records import GIB, TrialResult
from autotune.regress import Row, compare
from autotune.sim.backend import SimulatedBackend
from autotune.sim.node import SimNode
from autotune.trial import gpumem
from tests.test_trial import LLAMA8, trial


def test_the_node_keeps_a_peak_that_a_sampler_misses(node: SimNode) -> None:
    node.allocate(0, 3 * GIB)
    node.allocate(0, 2 * GIB)  # a prefill chunk's activations: gone before any sample
    node.release(0, 2 * GIB)
    gpu = node.snapshot()[0]
    assert gpu.used_bytes == 3 * GIB and gpu.peak_bytes == 5 * GIB
    node.reset_peaks([0])
    assert node.snapshot()[0].peak_bytes == 3 * GIB and node.snapshot()[1].peak_bytes == 0
    node.release_all()


def test_the_trace_takes_exact_peaks_and_marks_sampled_ones_as_lower_bounds(node: SimNode) -> None:
    backend = SimulatedBackend(node.root)
    node.allocate(0, 4 * GIB)  # left from before the trial: the new peak starts from here
    node.release(0, 1 * GIB)
    trace = gpumem.start_trace(backend, [0])
    node.allocate(0, 1 * GIB)
    node.release(0, 1 * GIB)
    trace.add(0.1, backend.snapshot())
    (exact,) = trace.summary()
    assert exact.peak_bytes == 4 * GIB and exact.peak_exact and exact.baseline_bytes == 3 * GIB
    node.release_all()

    sampled = gpumem.MemoryTrace({0: 0}, {0: 48 * GIB})  # an NVML-like backend: no peak_bytes
    sampled.add(0.1, (GpuState(0, "x", 48 * GIB, 7 * GIB),))
    assert sampled.summary()[0].peak_bytes == 7 * GIB and not sampled.summary()[0].peak_exact


def test_identical_launches_record_identical_exact_peaks(node: SimNode, tmp_path: Path) -> None:
    config = LaunchConfig(model_path=LLAMA8, mem_fraction_static=0.85, context_length=32768)
    first = trial(node, tmp_path / "a", config)
    second = trial(node, tmp_path / "b", config)
    assert all(g.peak_exact for g in first.gpus + second.gpus)
    assert [g.peak_bytes for g in first.gpus] == [g.peak_bytes for g in second.gpus]
    assert not any(c.flagged for c in compare(first, second))
    assert Row("recommended", first, second, changes=compare(first, second)).verdict == "unchanged"


def _with_peak(result: TrialResult, gib: float, exact: bool) -> TrialResult:
    gpus = tuple(replace(g, peak_bytes=int(gib * GIB), peak_exact=exact) for g in result.gpus)
    return replace(result, gpus=gpus)


def _peak_flagged(before: TrialResult, after: TrialResult) -> bool:
    return next(c for c in compare(before, after) if c.name == "peak_gib").flagged


def test_regress_tells_sampling_noise_from_a_real_change(node: SimNode, tmp_path: Path) -> None:
    run = trial(node, tmp_path, LaunchConfig(model_path=LLAMA8, mem_fraction_static=0.85, context_length=32768))
    # the reported pair: the same config sampled at 46.06 and 47.54 GiB
    assert not _peak_flagged(_with_peak(run, 46.06, False), _with_peak(run, 47.54, False))
    assert not _peak_flagged(_with_peak(run, 47.54, False), _with_peak(run, 46.06, False))  # a lower bound fell
    assert not _peak_flagged(_with_peak(run, 46.06, True), _with_peak(run, 46.06, True))
    # past what sampling can explain, or between true peaks, it is a change
    assert _peak_flagged(_with_peak(run, 40.0, False), _with_peak(run, 44.0, False))
    assert _peak_flagged(_with_peak(run, 46.06, True), _with_peak(run, 47.54, True))
    assert _peak_flagged(_with_peak(run, 47.54, False), _with_peak(run, 44.0, True))  # true peak below the bound
