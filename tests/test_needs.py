"""What a failure needs is a typed field of the result (records.Need), read by the search;
not a float in `figures`, nor the word "context" somewhere in the evidence."""

from __future__ import annotations

from dataclasses import replace

from autotune.classifier.classify import classify_text
from autotune.config import LaunchConfig
from autotune.records import Need, Outcome, Phase, Side, TrialResult
from autotune.search.knowledge import side_of


def _result(outcome: Outcome, evidence: tuple[str, ...] = (), needs: Need | None = None) -> TrialResult:
    return TrialResult(trial_id="t", config=LaunchConfig(model_path="m"), engine="sglang", engine_version="0.5.23",
                       outcome=outcome, phase=Phase.ARGS, remedy="", evidence=evidence, figures={}, argv=(),
                       log_path="", exit_code=1, launched=True, wall_s=1.0, gpu_s=1.0, gpus=(), kv_tokens=None,
                       resolved={}, needs=needs)


def test_the_classifier_says_what_each_failure_needs() -> None:
    context = ("ValueError: User-specified context_length (300000) is greater than the derived context_length "
               "(262144). This may lead to incorrect model outputs or CUDA errors.\n")
    pool = ("RuntimeError: Not enough memory. Please try to increase --mem-fraction-static. "
            "Current value: self.server_args.mem_fraction_static=0.85\n")
    assert classify_text(context, "sglang", exit_code=1).needs is Need.SHORTER_CONTEXT
    assert classify_text(pool, "sglang", exit_code=1).needs is Need.MORE_FRACTION


def test_a_config_error_that_merely_mentions_context_is_not_a_context_failure() -> None:
    """A misspelt flag is not a context too long: the text match sent the search to shorter contexts."""
    typo = _result(Outcome.CONFIG_ERROR, ("launch_server: error: unrecognized arguments: --context-lenght 8192",))
    assert side_of(typo) is Side.ANY
    assert side_of(replace(typo, needs=Need.SHORTER_CONTEXT)) is Side.CONTEXT


def test_pool_failures_follow_the_typed_direction() -> None:
    assert side_of(_result(Outcome.OOM_KV_POOL, needs=Need.MORE_FRACTION)) is Side.LOW
    assert side_of(_result(Outcome.OOM_KV_POOL, needs=Need.LESS_FRACTION)) is Side.HIGH


def test_needs_round_trips_and_old_records_keep_their_direction() -> None:
    r = _result(Outcome.OOM_KV_POOL, needs=Need.LESS_FRACTION)
    assert TrialResult.from_dict(r.to_dict()).needs is Need.LESS_FRACTION
    old = r.to_dict()
    del old["needs"]
    old["figures"] = {"mfs_direction": -1.0}  # how a record written before the field said it
    assert TrialResult.from_dict(old).needs is Need.LESS_FRACTION
