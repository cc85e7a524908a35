"""The `autotune` command line. Commands are thin: parse, call one library function,
render, and map AutotuneError to exit status 1 with its hint."""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import wraps
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer

from autotune.errors import AutotuneError
from autotune.interrupts import EXIT_INTERRUPTED, interrupted_by, signals_interrupt
from autotune.records import GIB
from autotune.settings import DEFAULT_STRATEGY, StrategyName

# Plain click help: rich's panels cut option help ("…") at 80 columns off a terminal (a pipe, a file),
# where click would also assume 80 columns: 120 there, unless COLUMNS says otherwise.
_HELP = {"rich_markup_mode": None,
         "context_settings": {"max_content_width": 120, "terminal_width": shutil.get_terminal_size((120, 24)).columns,
                              "help_option_names": ["-h", "--help"]}}
app = typer.Typer(help="Find the largest LLM-server launch config that fits your GPUs.", no_args_is_help=True,
                  pretty_exceptions_enable=False, add_completion=False, **_HELP)  # type: ignore[arg-type]
sim_app = typer.Typer(help="The simulated GPU node (tests, demo, CI).", no_args_is_help=True,
                      **_HELP)  # type: ignore[arg-type]
app.add_typer(sim_app, name="sim")
STRATEGY_HELP = " | ".join(s.value + " (default)" * (s.value == DEFAULT_STRATEGY) for s in StrategyName)


def _version(value: bool) -> None:
    if value:
        from autotune import __version__

        typer.echo(f"autotune {__version__}")
        raise typer.Exit()


@app.callback()
def _main_options(
    version: Annotated[bool, typer.Option("--version", callback=_version, is_eager=True,
                                          help="Print the version and exit.")] = False,
) -> None:
    """Find the largest LLM-server launch config that fits your GPUs."""


F = TypeVar("F", bound=Callable[..., Any])
JsonOpt = Annotated[bool, typer.Option("--json", help="Machine-readable output (the stable contract).")]


def friendly(fn: F) -> F:
    """Map the tool's own errors to a message and exit status 1 (never a traceback);
    Ctrl-C and SIGTERM end with the server already stopped, and say so (exit 130)."""
    return friendly_exit(1)(fn)


def friendly_exit(error_exit: int) -> Callable[[F], F]:
    """`friendly`, with the tool's own errors mapped to `error_exit` (`run`: 2, bad input)."""

    def decorate(fn: F) -> F:
        @wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            try:
                return fn(*args, **kwargs)
            except AutotuneError as exc:
                typer.echo(f"error: {exc}", err=True)
                raise typer.Exit(error_exit) from None
            except sqlalchemy_error() as exc:
                typer.echo(f"error: the results database failed: {str(exc).splitlines()[0]}\n  hint: another process "
                           "may hold a lock on it (or the disk is full); every finished trial is in the study: "
                           "fix that and run the same command again", err=True)
                raise typer.Exit(error_exit) from None
            except KeyboardInterrupt as exc:  # autotune.interrupts.Interrupted too (SIGTERM)
                _say_interrupted(exc)
                raise typer.Exit(EXIT_INTERRUPTED) from None

        return wrapper  # type: ignore[return-value]

    return decorate


def _say_interrupted(exc: BaseException) -> None:
    typer.echo(f"interrupted ({interrupted_by(exc)}): the server was stopped; run the same command again "
               "to resume", err=True)


def sqlalchemy_error() -> type[Exception]:
    from sqlalchemy.exc import SQLAlchemyError

    return SQLAlchemyError


def echo_json(data: Any) -> None:
    typer.echo(json.dumps(data, indent=2, sort_keys=False))


@contextmanager
def _sigterm_interrupts() -> Iterator[None]:
    """SIGTERM unwinds like Ctrl-C, so the running trial's server is stopped on the way out."""
    with signals_interrupt():
        yield


def parse_sets(sets: list[str]) -> dict[str, Any]:
    """`key=value` pairs; values read as YAML scalars (true, 0.85, [8, 16])."""
    import yaml

    out: dict[str, Any] = {}
    for item in sets:
        if "=" not in item:
            raise AutotuneError(f"--set {item!r} is not key=value", hint="e.g. --set mem_fraction_static=0.8")
        key, _, value = item.partition("=")
        out[key.strip()] = yaml.safe_load(value)
    return out


def _read_config(name: str) -> tuple[str, str]:
    """The text of `--config FILE` (`-`: stdin) and how to name it in an error."""
    import sys

    from autotune import spec as spec_mod
    from autotune.errors import SpecError

    if name == "-":
        if sys.stdin.isatty():
            raise SpecError("--config", "- reads the config from stdin, which is a terminal",
                            "pipe it in: autotune best SPEC --format json | autotune trial SPEC --config -")
        return sys.stdin.read(), "stdin"
    return spec_mod.read_text(Path(name), "--config", "a JSON file (or - for stdin)"), name


def render_result(result: Any) -> None:
    typer.echo(f"trial {result.trial_id}  {result.engine} {result.engine_version}  "
               f"outcome: {result.outcome.value}  (phase: {result.phase.value})")
    if result.remedy:
        typer.echo(f"remedy:   {result.remedy}")
    typer.echo("evidence:")
    for line in result.evidence:
        typer.echo(f"  | {line}")
    if result.figures:
        typer.echo("figures:  " + ", ".join(f"{k}={v:g}" for k, v in result.figures.items()))
    if result.kv_tokens is not None:
        typer.echo(f"KV pool:  {result.kv_tokens} tokens")
    for g in result.gpus:
        bound = "" if g.peak_exact else "≥ "  # sampled: a lower bound of the true peak
        typer.echo(f"GPU {g.index}:    peak {bound}{g.peak_bytes / GIB:.2f} GiB of {g.total_bytes / GIB:.2f} "
                   f"(baseline {g.baseline_bytes / GIB:.2f}, after {g.final_bytes / GIB:.2f})")
    for note in result.notes:
        typer.echo(f"note:     {note}")
    typer.echo(f"time:     {result.gpu_s:.0f} s GPU time (engine clock), {result.wall_s:.1f} s wall")
    if result.log_path:
        typer.echo(f"log:      {result.log_path}")
    typer.echo("argv:     " + " ".join(result.argv))


# -- trial -----------------------------------------------------------------------------------


@app.command("trial")
@friendly
def trial_cmd(
    spec_path: Annotated[Path, typer.Argument(metavar="SPEC", help="Tuning spec (YAML).")],
    sets: Annotated[list[str], typer.Option("--set", help="key=value for a space parameter (repeatable); a list "
                                                          "field takes a JSON list: extra_args='[\"--a\", \"b\"]'.")] = [],  # noqa: B006
    config_file: Annotated[str | None, typer.Option(
        "--config", metavar="FILE", help="A whole config to launch, as `autotune best --format json` prints it (or "
                                         "its \"config\" object); - reads it from stdin. --set applies over it.")] = None,
    as_json: JsonOpt = False,
    allow_busy: Annotated[bool, typer.Option(help="Launch even if the GPUs hold memory.")] = False,
) -> None:
    """Run one trial: the spec's start config (or --config's) with --set overrides. Prints the TrialResult."""
    from autotune import spec as spec_mod
    from autotune.machine import check_launcher, prepare_backend
    from autotune.trial.run import recover_orphans, run_trial, secrets_of

    whole = spec_mod.read_trial_config(*_read_config(config_file)) if config_file is not None else None
    spec, params = spec_mod.load_trial(spec_path, parse_sets(sets), {"allow_busy_gpus": True} if allow_busy else None,
                                       config=whole)
    config = spec.config(params)
    check_launcher(spec)
    backend = prepare_backend(spec)
    for line in recover_orphans(spec.study_dir / "trials", backend, spec.release_timeout_s,
                                secrets_of(spec.trial_settings(spec.api_key()))):
        typer.echo(f"recovered {line}", err=True)
    with _sigterm_interrupts():
        result = run_trial(config, spec.trial_settings(spec.api_key()), backend)
    if as_json:
        echo_json(result.to_dict())
    else:
        render_result(result)


# -- classify ------------------------------------------------------------------------------------


@app.command("classify")
@friendly
def classify_cmd(
    log: Annotated[Path, typer.Argument(help="A server log file (damaged or partial is fine).")],
    engine: Annotated[str, typer.Option(help="sglang | vllm | auto (the engine the log's own lines name; where "
                                             "they name none, each engine's reading, the one that decides)")] = "auto",
    exit_code: Annotated[int | None, typer.Option(help="The process's exit status, if known.")] = None,
    as_json: JsonOpt = False,
) -> None:
    """Classify a log alone: outcome, remedy, phase, the deciding lines and the logged figures."""
    from autotune.classifier.classify import ENGINE_LOGS, classify_lines, classify_unnamed

    if engine != "auto" and engine not in ENGINE_LOGS:
        raise AutotuneError(f"unknown engine {engine!r}", hint=f"one of: auto, {', '.join(sorted(ENGINE_LOGS))}")
    try:
        open(log, "rb").close()
    except OSError as exc:
        raise AutotuneError(f"cannot read {log}: {exc.strerror}", hint="give the path of a log file") from None

    def lines() -> Iterator[bytes]:
        with open(log, "rb") as fh:
            for raw in fh:  # line by line: a huge log never sits in memory
                yield raw.rstrip(b"\n")

    if engine == "auto":
        engine, said, result = classify_unnamed(lines, exit_code)
        how = ("its lines name it" if said else "its lines name no engine; read with each engine's rules, this "
               "one's reading decides; --engine to choose")
    else:
        result, how = classify_lines(lines(), engine, exit_code), "as asked"
    if as_json:
        echo_json({**result.to_dict(), "engine": engine})
        return
    typer.echo(f"engine:   {engine} ({how})")
    typer.echo(f"outcome:  {result.outcome.value if result.outcome else 'undecided'} "
               f"(phase {result.phase.value}, confidence {result.confidence})")
    if result.remedy:
        typer.echo(f"remedy:   {result.remedy}")
    if result.missing:
        typer.echo(f"missing:  {result.missing}")
    for other, why in result.alternatives:  # the log supports these too; the search reads the launch conservatively
        typer.echo(f"or:       {other.value}: {why}")
    for line in result.evidence:
        typer.echo(f"  | {line}")
    if result.figures:
        typer.echo("figures:  " + ", ".join(f"{k}={v:g}" for k, v in result.figures.items()))


# -- estimate ------------------------------------------------------------------------------------


@app.command("estimate")
@friendly
def estimate_cmd(
    model: Annotated[Path, typer.Option(help="Model directory (with config.json).")],
    gpu_mem_gib: Annotated[float, typer.Option(help="Memory per GPU, GiB.")],
    gpus: Annotated[int, typer.Option(help="GPUs on the machine.")] = 1,
    tp: Annotated[int, typer.Option(help="Tensor parallel size.")] = 1,
    engine: Annotated[str, typer.Option(help="sglang | vllm")] = "sglang",
    engine_version: Annotated[str | None, typer.Option(help="Engine version (default: the current release).")] = None,
    mem_fraction_static: Annotated[float | None, typer.Option(
        "--mem-fraction-static", "--mem-fraction", help="--mem-fraction-static / --gpu-memory-utilization.")] = None,
    context_length: Annotated[int | None, typer.Option(help="Context length (default: the model's max).")] = None,
    speculative: Annotated[bool, typer.Option(help="MTP/NextN speculative decoding on.")] = False,
    max_running_requests: Annotated[int | None, typer.Option(help="Max running requests.")] = None,
    kv_cache_dtype: Annotated[str, typer.Option("--kv-cache-dtype", "--kv-dtype", help="KV cache dtype.")] = "auto",
    concurrency: Annotated[int, typer.Option(help="Full-context requests the KV pool must hold.")] = 1,
    as_json: JsonOpt = False,
) -> None:
    """Predict, without launching, what a config needs per GPU and whether it fits."""
    from autotune.errors import SpecError
    from autotune.estimate import estimate

    try:
        est = estimate(model, gpu_mem_gib=gpu_mem_gib, gpus=gpus, tp=tp, engine=engine,
                       engine_version=engine_version or "", mem_fraction_static=mem_fraction_static,
                       context_length=context_length, speculative=speculative,
                       max_running_requests=max_running_requests, kv_cache_dtype=kv_cache_dtype,
                       concurrency=concurrency)
    except SpecError as exc:  # the estimator names its arguments; here they are this command's options
        option = "--" + exc.field.replace("_", "-")
        message = exc.message.replace(f"spec field '{exc.field}'", f"option {option}", 1)
        raise AutotuneError(message, exc.hint) from None
    if as_json:
        echo_json(est.to_dict())
        return
    d = est.to_dict()
    typer.echo(f"{engine} {est.engine_version}, TP {tp} on {gpus} x {gpu_mem_gib:g} GiB: {est.verdict.value}"
               f" — {est.reason}")
    for key in ("weights_gib_per_gpu", "draft_weights_gib_per_gpu", "kv_bytes_per_token", "state_bytes_per_request",
                "default_mem_fraction", "mem_fraction", "kv_tokens", "max_context_length", "min_mem_fraction",
                "max_mem_fraction"):
        typer.echo(f"  {key:<26} {d[key]}")
    for line in est.risks:
        typer.echo(f"  risk: {line}")
    for line in est.assumptions:
        typer.echo(f"  assumed: {line}")


# -- run / report / best ----------------------------------------------------------------------


def _study_of(spec_path: Path | None, study: str | None, storage: str | None) -> tuple[str, str, Path]:
    """(study name, storage URL, output directory) from a spec or from explicit options."""
    if spec_path is not None:
        spec = _load_spec(spec_path, study)
        return spec.study, storage or spec.storage, spec.study_dir
    if not study:
        raise AutotuneError("give a SPEC, or --study (with --storage unless it is the default SQLite file)",
                            hint="autotune report configs/demo.yaml")
    _check_option("--study", study)
    url = storage or f"sqlite:///{Path('results') / study / 'study.db'}"
    return study, url, Path("results") / study


def _check_option(option: str, value: str) -> None:
    """--study and --strategy obey the rules of the spec fields they replace."""
    from autotune import spec as spec_mod
    from autotune.errors import SpecError

    check = spec_mod.check_study_name if option == "--study" else spec_mod.check_strategy
    try:
        check(value)
    except SpecError as exc:
        raise AutotuneError(f"option {option}: {exc.detail}", exc.hint) from None


def _load_spec(spec_path: Path, study: str | None, storage: str | None = None) -> Any:
    """The spec, with --study (checked like the spec's own `study`) and --storage in place of its own."""
    from autotune import spec as spec_mod

    if study is not None:
        _check_option("--study", study)
    overrides = {k: v for k, v in (("study", study), ("storage", storage)) if v is not None}
    return spec_mod.load(spec_path, overrides or None)


@app.command("run")
@friendly_exit(2)
def run_cmd(
    spec_path: Annotated[Path, typer.Argument(metavar="SPEC", help="Tuning spec (YAML).")],
    strategy: Annotated[str | None, typer.Option(help=STRATEGY_HELP)] = None,
    study: Annotated[str | None, typer.Option(help="Study name (default: the spec's).")] = None,
    storage: Annotated[str | None, typer.Option(help="Optuna storage URL (default: the spec's).")] = None,
) -> None:
    """The main job: search until the largest fitting config is found and confirmed. Resumable.

    Exit status: 0 an answer (converged, or the budget spent with a fitting config); 1 no answer
    (nothing fitted) or stopped by a fault (GPUs busy, memory not released, disk full); 2 bad input
    or could not start (spec, launcher, storage, the study already being tuned); 130 interrupted."""
    from dataclasses import replace

    from autotune.machine import check_launcher, prepare_backend
    from autotune.progress import for_terminal
    from autotune.report import best_launch, write_report
    from autotune.report.command import as_shell
    from autotune.search.loop import run

    if strategy is not None:
        _check_option("--strategy", strategy)
    spec = _load_spec(spec_path, study, storage)
    if strategy is not None:
        spec = replace(spec, strategy=strategy)  # so the header and the record say the one in use
    check_launcher(spec)
    backend = prepare_backend(spec)
    summary = run(spec, backend, progress=for_terminal(), certify=spec.certify.enabled)
    if summary.certification is not None:  # certified in the run: on free slots, from once the answer settled
        from autotune.search.certify import header, summary_lines

        typer.echo(header(spec, spec.certify.boots, spec.certify.deadline_s))
        for line in summary_lines(summary.certification):
            typer.echo(line)
    md, png = write_report(summary.study, spec.storage, spec.results_dir / summary.study)
    _print_frontier(summary.study, spec.storage)
    typer.echo(f"report:  {md}\nplot:    {png}")
    if summary.best is not None:
        _, argv = best_launch(summary.study, spec.storage)
        typer.echo("recommended command:\n  " + as_shell(argv))
    if summary.exit_code:
        typer.echo(f"no answer: nothing fitted (stopped: {summary.stopped_because})" if summary.best is None else
                   f"stopped early: {summary.stopped_because}", err=True)
    raise typer.Exit(summary.exit_code)


def _print_frontier(study: str, storage: str) -> None:
    from autotune.report import study_record
    from autotune.report.frontier import rows
    from autotune.search import goal as goal_mod
    from autotune.search.goal import context_of

    spec, _, results = study_record(study, storage)
    typer.echo("frontier (largest config that fits, per feature combination):")
    for row in rows(results, goal_mod.stored(spec)[0], []):
        b = row.best
        text = (f"context {context_of(b)}, mfs {b.config.mem_fraction_static}, {b.kv_tokens} KV tokens, "
                f"peak {row.peak_gib:.1f} GiB/GPU" if b else "nothing fitted")
        typer.echo(f"  {row.features:<28} {text}   [{row.launches} launches, {row.gpu_s:.0f} GPU-s]")


@app.command("certify")
@friendly_exit(2)
def certify_cmd(
    spec_path: Annotated[Path, typer.Argument(metavar="SPEC", help="Tuning spec (YAML) of a study that has run.")],
    boots: Annotated[int | None, typer.Option(min=1, help="Cold boots per config (default: the spec's, 3).")] = None,
    concurrency: Annotated[int | None, typer.Option(min=1, help="Certify the best config at this max_running_requests.")] = None,
    deadline_s: Annotated[float | None, typer.Option(min=0.001, help="Seconds each worst case may take before it is "
                                                                     "inconclusive (default: the spec's, 1800).")] = None,
    study: Annotated[str | None, typer.Option(help="Study name (default: the spec's).")] = None,
    storage: Annotated[str | None, typer.Option(help="Optuna storage URL (default: the spec's).")] = None,
) -> None:
    """Relaunch the answer cold N times under the worst case it permits; step down the frontier until one holds.

    A worst case still running at the deadline, on a server that stayed up, is inconclusive: no step down.
    Exit status: 0 a config certified; 1 none held; 2 bad input or no study; 3 inconclusive (out of time)."""
    from autotune.machine import check_launcher, prepare_backend
    from autotune.search.certify import run_certification

    spec = _load_spec(spec_path, study, storage)
    check_launcher(spec)
    cert = run_certification(spec, prepare_backend(spec), boots=boots, concurrency=concurrency, deadline_s=deadline_s,
                             say=typer.echo)
    raise typer.Exit(0 if cert.answer else 3 if cert.inconclusive else 1)


@app.command("report")
@friendly
def report_cmd(
    spec_path: Annotated[Path | None, typer.Argument(metavar="[SPEC]", help="The run's spec.")] = None,
    study: Annotated[str | None, typer.Option(help="Study name.")] = None,
    storage: Annotated[str | None, typer.Option(help="Optuna storage URL.")] = None,
    out: Annotated[Path | None, typer.Option(help="Output directory (default results/<study>).")] = None,
) -> None:
    """Write the Markdown report and the PNG plot of a study.

    Exit status 1, and nothing written, when the study does not exist."""
    from autotune.report import write_report

    name, url, out_dir = _study_of(spec_path, study, storage)
    md, png = write_report(name, url, out or out_dir)
    typer.echo(f"{md}\n{png}")


@app.command("best")
@friendly
def best_cmd(
    spec_path: Annotated[Path | None, typer.Argument(metavar="[SPEC]", help="The run's spec.")] = None,
    study: Annotated[str | None, typer.Option(help="Study name.")] = None,
    storage: Annotated[str | None, typer.Option(help="Optuna storage URL.")] = None,
    fmt: Annotated[str, typer.Option("--format", help="cmd | json | yaml")] = "cmd",
    concurrency: Annotated[int | None, typer.Option(min=1, help="The best (certified, if it was) at this "
                                                                "max_running_requests.")] = None,
) -> None:
    """The recommended launch command, every memory-relevant flag pinned: the certified answer
    where certification ran.

    Read-only. Exit status 1, and no file created, when the study does not exist."""
    import yaml

    from autotune.report import best_launch, best_standing
    from autotune.report.command import as_record, as_shell

    name, url, _ = _study_of(spec_path, study, storage)
    result, argv = best_launch(name, url, concurrency=concurrency)
    standing = best_standing(name, url, concurrency)
    if fmt == "cmd":
        typer.echo(as_shell(argv))
        typer.echo(f"# {standing['note']}", err=True)  # stdout stays the command alone
    elif fmt == "json":
        echo_json(as_record(result, argv, standing))
    elif fmt == "yaml":
        typer.echo(yaml.safe_dump(as_record(result, argv, standing), sort_keys=False).rstrip())
    else:
        raise AutotuneError(f"unknown format {fmt!r}", hint="cmd, json or yaml")


# -- regress -----------------------------------------------------------------------------------


@app.command("regress")
def regress_cmd(
    spec_path: Annotated[Path, typer.Argument(metavar="SPEC", help="The current setup (engine version, machine).")],
    baseline: Annotated[str, typer.Option(help="The baseline study (the run before the upgrade).")],
    baseline_storage: Annotated[str | None, typer.Option(help="Its storage URL (default: its SQLite file).")] = None,
    budget: Annotated[int | None, typer.Option(help="Re-launch at most this many configs.")] = None,
    research: Annotated[bool, typer.Option(help="After a regression, search the new frontier from the baseline.")] = False,
    sets: Annotated[list[str], typer.Option("--set", help="Override a spec field: engine_version=0.5.23.")] = [],  # noqa: B006
    as_json: JsonOpt = False,
) -> None:
    """Re-launch a baseline's recommended, frontier and boundary configs on the current engine.

    Exit status: 0 no regression, 1 regression, 2 could not run."""
    try:
        code = _regress(spec_path, baseline, baseline_storage, budget, research, as_json, parse_sets(sets))
    except KeyboardInterrupt as exc:  # Ctrl-C, SIGTERM: not a regression (1), not bad input (2)
        _say_interrupted(exc)
        raise typer.Exit(EXIT_INTERRUPTED) from None
    except AutotuneError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None
    except sqlalchemy_error() as exc:
        typer.echo(f"error: the results database failed: {str(exc).splitlines()[0]}", err=True)
        raise typer.Exit(2) from None
    raise typer.Exit(code)


def _regress(spec_path: Path, baseline: str, baseline_storage: str | None, budget: int | None, research: bool,
             as_json: bool, overrides: dict[str, Any]) -> int:
    from autotune import spec as spec_mod
    from autotune import store
    from autotune.machine import check_launcher, prepare_backend
    from autotune.regress import Row, run_regress
    from autotune.regress_render import as_json as report_json
    from autotune.regress_render import markdown
    from autotune.report.command import as_shell
    from autotune.search.loop import fingerprint

    spec = spec_mod.load(spec_path, overrides)
    if spec.study == baseline:  # the current run's artifacts must not land in the baseline's study
        spec = spec_mod.load(spec_path, {**overrides, "study": f"{baseline}-{spec.engine_version}"})
    url = baseline_storage or f"sqlite:///{spec.results_dir / baseline / 'study.db'}"
    store.load_study(baseline, url)  # a missing baseline fails here, before anything is created
    check_launcher(spec)
    backend = prepare_backend(spec)

    def show(row: Row) -> None:
        if not as_json:
            after = row.after.outcome.value if row.after else "not run"
            typer.echo(f"  {row.role:<48} {row.before.outcome.value:>14} -> {after:<14} {row.verdict}")

    if not as_json:
        typer.echo(f"re-launching {baseline}'s configs on {spec.engine} {spec.engine_version}:")
    with _sigterm_interrupts():
        report = run_regress(spec, baseline, url, backend, spec.trial_settings(spec.api_key()),
                             fingerprint(spec, backend), budget, on_row=show)
    data = report_json(report)
    if research and report.regressions:
        data["research"] = _research(spec, backend, report.rows[0].before.config, quiet=as_json)
    out = spec.study_dir
    out.mkdir(parents=True, exist_ok=True)
    (out / f"regress-vs-{baseline}.md").write_text(markdown(report))
    (out / f"regress-vs-{baseline}.json").write_text(json.dumps(data, indent=1) + "\n")
    if as_json:
        echo_json(data)
    else:
        typer.echo(f"{len(report.regressions)} regression(s); report: {out / f'regress-vs-{baseline}.md'}")
        if data.get("research", {}).get("argv"):
            typer.echo("new recommended command:\n  " + as_shell(data["research"]["argv"]))
    return report.exit_code


def _research(spec: Any, backend: Any, start_from: Any, quiet: bool) -> dict[str, Any]:
    """Search the new frontier, starting from the baseline's recommended config."""
    import sys
    from dataclasses import replace

    from autotune.progress import PlainProgress, for_terminal
    from autotune.report import best_launch
    from autotune.search.loop import run

    start = {k: getattr(start_from, k) for k in spec.searched()}
    progress = PlainProgress(sys.stderr) if quiet else for_terminal()
    summary = run(replace(spec, start=start), backend, progress=progress)
    argv = best_launch(summary.study, spec.storage)[1] if summary.best is not None else []
    return {"study": summary.study, "launches": summary.launched_now, "stopped": summary.stopped_because,
            "argv": argv}


# -- sim -----------------------------------------------------------------------------------


@sim_app.command("init")
@friendly
def sim_init(
    directory: Path,
    gpus: Annotated[int, typer.Option(help="Number of GPUs.")] = 2,
    gpu_mem_gib: Annotated[float, typer.Option(help="Memory per GPU, GiB.")] = 48.0,
    gpu_name: Annotated[str, typer.Option(help="GPU name as NVML would report it.")] = "NVIDIA Simulated GPU",
    release_delay_s: Annotated[float, typer.Option(help="Delay before a dead process's memory is freed.")] = 0.0,
) -> None:
    """Create a simulated node in DIRECTORY. Processes find it through AUTOTUNE_SIM_NODE."""
    from autotune.sim.node import SimNode

    SimNode.create(directory, gpus=gpus, gpu_mem_gib=gpu_mem_gib, gpu_name=gpu_name, release_delay_s=release_delay_s)
    typer.echo(f"simulated node {directory}: {gpus} x {gpu_mem_gib:g} GiB ({gpu_name})")
    typer.echo(f"export AUTOTUNE_SIM_NODE={directory.resolve()}")


@sim_app.command("status")
@friendly
def sim_status(
    directory: Annotated[Path | None, typer.Argument(help="Node directory (default: $AUTOTUNE_SIM_NODE).")] = None,
    as_json: JsonOpt = False,
) -> None:
    """Per-GPU used/total memory and who holds it."""
    from autotune.sim.node import SimNode

    node = SimNode(directory) if directory else SimNode.from_env()
    gpus = node.snapshot()
    if as_json:
        echo_json({"gpus": [{"index": g.index, "name": g.name, "total_bytes": g.total_bytes, "used_bytes": g.used_bytes,
                             "processes": [{"pid": p.pid, "used_bytes": p.used_bytes, "name": p.name}
                                           for p in g.processes]} for g in gpus]})
        return
    for g in gpus:
        typer.echo(f"GPU {g.index} {g.name}: {g.used_bytes / GIB:.2f} / {g.total_bytes / GIB:.2f} GiB used")
        for p in g.processes:
            typer.echo(f"    pid {p.pid:>7}  {p.used_bytes / GIB:8.2f} GiB  {p.name}")


@sim_app.command("hold")
@friendly
def sim_hold(
    gpu: Annotated[int, typer.Option(help="GPU index.")],
    gib: Annotated[float, typer.Option(help="GiB to hold.")],
    seconds: Annotated[float | None, typer.Option(help="Hold this long, then exit (default: until killed).")] = None,
) -> None:
    """Hold memory on a simulated GPU as a foreign process would (needs AUTOTUNE_SIM_NODE)."""
    from autotune.sim import hold

    hold.main(["--gpu", str(gpu), "--gib", str(gib)] + (["--seconds", str(seconds)] if seconds else []))


def main() -> None:
    from autotune.interrupts import ignore_signals, install_once

    # From here to the end, SIGINT and SIGTERM unwind with the signal's name, once: a signal that
    # lands outside a command's own handling (start-up, shutdown) still exits 130, a later one is ignored.
    install_once()
    os.umask(0o022)  # results, logs and the study database are never world-writable
    try:
        app(prog_name="autotune")
    except KeyboardInterrupt as exc:
        _say_interrupted(exc)
        raise SystemExit(EXIT_INTERRUPTED) from None
    finally:
        ignore_signals()


if __name__ == "__main__":
    main()
