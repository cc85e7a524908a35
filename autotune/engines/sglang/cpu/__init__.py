"""SGLang's CPU path (engine `sglang-cpu`): what it needs to run, what it cannot do, where it lives.

Facts measured on 0.5.9 and 0.5.23 from the registry (../shared/reference/sglang-cpu.md):
- the registry has SGLang only as CUDA builds; they import on a machine with no GPU driver once a
  `libcuda.so.1` can be loaded. `nodriver.c` beside this file is our own stand-in, answering "no
  device" to every driver call; `make sglang-cpu` builds it into `<environment>/nodriver/`. It goes on
  the engine's LD_LIBRARY_PATH only where no real driver loads: it never shadows one;
- `SGLANG_USE_CPU_ENGINE=1` (without it both versions die on a fallback that imports vLLM) and
  `--device cpu` are required; the tool sets both, the user does not;
- the idle scheduler spins a whole core: `--sleep-on-idle` brings it to ~1 %;
- the request-slot table, `max_running_requests x (context + 4) x 4` bytes, is outside the fraction:
  at SGLang's default of 4096 requests a 1M-token context takes 16 GB, so the tool always names the
  cap (`DEFAULT_MAX_RUNNING` when the space leaves it open);
- on a CPU without AMX, torch.compile and speculative decoding die or are refused (`UNSUPPORTED`).

Where the environments live: `$AUTOTUNE_ENGINES/sglang-<version>` (default
`~/.cache/autotune/engines`), one per version, shared by every clone on the machine.
"""

from __future__ import annotations

import ctypes
import os
from collections.abc import Mapping, Sequence
from functools import cache
from pathlib import Path

from autotune.engines.base import DriverFacts
from autotune.errors import SpecError

ENGINE_ENV = {"SGLANG_USE_CPU_ENGINE": "1"}
CPU_FLAGS = ("--device", "cpu")
SLEEP_FLAG = "--sleep-on-idle"
DEFAULT_MAX_RUNNING = 64  # SGLang's own default, 4096, sizes the slot table for 4096 full-context requests
STAND_IN = "libcuda.so.1"
STAND_IN_DIR = "nodriver"
SOURCE = Path(__file__).with_name("nodriver.c")

# Knobs the CPU path cannot run (on a CPU without AMX; measured with the small Llama at 0.05 / 4096), in
# the engine's own words. A CPU with AMX takes SGLang's AMX backend, whose graph runner may take
# torch.compile: not measured here, so the refusal says so.
UNSUPPORTED: dict[str, str] = {
    "torch_compile": (
        "torch.compile dies at start-up in SGLang's CPU graph runner, which wants the AMX attention backend "
        "(0.5.9: \"AttributeError: 'TorchNativeAttnBackend' object has no attribute "
        "'get_graph_seq_len_fill_value'\"; 0.5.23: \"... no attribute 'init_cpu_graph_state'\")"),
    "speculative": (
        "speculative decoding does not run on SGLang's CPU path (0.5.9: NGRAM refused, \"ValueError: Ngram "
        "speculative decoding only supports CUDA device.\", STANDALONE dies in Triton, \"RuntimeError: 0 active "
        "drivers ([]). There should only be one.\"; 0.5.23 takes both and dies building the pool, \"AttributeError: "
        "'_OpNamespace' 'sgl_kernel' object has no attribute 'copy_all_layer_kv_cache_cpu'\"; EAGLE/NEXTN need "
        "the same kernels)"),
}
AMX_NOTE = ("measured on a CPU without AMX; on one with AMX SGLang picks its AMX backend, which was not measured: "
            "search the knob there with engine `sglang` flags in extra_args at your own risk")


def engines_root(environ: Mapping[str, str] | None = None) -> Path:
    env = os.environ if environ is None else environ
    if env.get("AUTOTUNE_ENGINES"):
        return Path(env["AUTOTUNE_ENGINES"]).expanduser()
    cache_home = env.get("XDG_CACHE_HOME") or str(Path(env.get("HOME") or Path.home()) / ".cache")
    return Path(cache_home) / "autotune" / "engines"


def install_dir(version: str, environ: Mapping[str, str] | None = None) -> Path:
    """Where `make sglang-cpu` puts `version`'s environment."""
    return engines_root(environ) / f"sglang-{version}"


@cache
def real_driver_loads() -> bool:
    """Whether a real `libcuda.so.1` loads here (then the stand-in is never used). Ours, found through
    this process's own LD_LIBRARY_PATH, does not count: it answers every call with our marker text."""
    try:
        lib = ctypes.CDLL(STAND_IN)
    except OSError:
        return False
    return not is_stand_in(lib)


def is_stand_in(lib: ctypes.CDLL) -> bool:
    try:
        get = lib.cuGetErrorString
    except AttributeError:
        return False
    get.argtypes = [ctypes.c_int, ctypes.POINTER(ctypes.c_char_p)]
    text = ctypes.c_char_p()
    get(100, ctypes.byref(text))
    return b"autotune" in (text.value or b"")


def stand_in_dir(launcher: Sequence[str]) -> Path | None:
    """The stand-in's folder beside the launcher's environment (`<env>/bin/python` -> `<env>/nodriver`),
    or None when the launcher is not an environment's Python or the stand-in was not built there."""
    if not launcher or "/" not in launcher[0]:
        return None
    folder = Path(launcher[0]).parent.parent / STAND_IN_DIR  # not resolved: a venv's python is a symlink
    return folder if (folder / STAND_IN).is_file() else None


def local_facts(launcher: Sequence[str], environ: Mapping[str, str] | None = None) -> DriverFacts:
    """This machine's driver facts for `launcher` (what the helper answers in a target)."""
    folder = stand_in_dir(launcher)
    return DriverFacts(real_driver_loads(), str(folder) if folder else None,
                       (os.environ if environ is None else environ).get("LD_LIBRARY_PATH", ""))


def launch_env(launcher: Sequence[str], environ: Mapping[str, str] | None = None, *,
               driver: DriverFacts | None = None) -> dict[str, str]:
    """The environment SGLang's CPU path needs where its server runs (`driver`: that place's facts;
    this machine's when None): the CPU engine switch, and the stand-in's folder first on
    LD_LIBRARY_PATH (ahead of the one the server inherits there) where no real driver loads: a real
    driver is never shadowed. SpecError naming the launcher when neither a driver nor the stand-in is there."""
    facts = driver if driver is not None else local_facts(launcher, environ)
    env = dict(ENGINE_ENV)
    if facts.real_driver:
        return env
    if facts.stand_in is None:
        install = (f"`make sglang-cpu` installs SGLang with the stand-in (into {engines_root(environ)}/sglang-VERSION)"
                   if driver is None else "install SGLang there with the stand-in (.ci/install_sglang_cpu.sh VERSION run "
                   "inside the target)")
        raise SpecError("launcher", f"{' '.join(launcher[:1])}: no GPU driver {facts.where} and no "
                        f"{STAND_IN_DIR}/{STAND_IN} beside that environment, so SGLang's CUDA-built kernel package "
                        "cannot be imported", f"{install}; point `launcher` at that environment's python")
    current = facts.ld_library_path
    env["LD_LIBRARY_PATH"] = facts.stand_in + (":" + current if current else "")
    return env


def unsupported(searched: Mapping[str, Sequence[object]]) -> list[tuple[str, str]]:
    """(knob, the engine's reason) for each knob the space would turn on that this path cannot run."""
    out = []
    for knob, reason in UNSUPPORTED.items():
        if any(bool(v) for v in searched.get(knob, ())):
            out.append((knob, reason))
    return out
