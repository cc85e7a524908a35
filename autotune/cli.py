"""The `autotune` command line. Commands are thin: parse, call one library function,
render, and map AutotuneError to exit status 1 with its hint."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from functools import wraps
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer

from autotune.errors import AutotuneError
from autotune.records import GIB

app = typer.Typer(help="Find the largest LLM-server launch config that fits your GPUs.", no_args_is_help=True,
                  pretty_exceptions_enable=False, add_completion=False)
sim_app = typer.Typer(help="The simulated GPU node (tests, demo, CI).", no_args_is_help=True)
app.add_typer(sim_app, name="sim")

F = TypeVar("F", bound=Callable[..., Any])
JsonOpt = Annotated[bool, typer.Option("--json", help="Machine-readable output (the stable contract).")]


def friendly(fn: F) -> F:
    """Map the tool's own errors to a message and exit status 1 (never a traceback)."""

    @wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except AutotuneError as exc:
            typer.echo(f"error: {exc}", err=True)
            raise typer.Exit(1) from None

    return wrapper  # type: ignore[return-value]


def echo_json(data: Any) -> None:
    typer.echo(json.dumps(data, indent=2, sort_keys=False))


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
    app(prog_name="autotune")


if __name__ == "__main__":
    sys.exit(main())
