"""What SIGTERM does to vLLM's CPU build while it starts (one probe per stage), then SIGKILL.

    .venv/bin/python scripts/probe_vllm_sigterm.py [--venv .venv-vllm]

For each stage (EngineCore spawned; worker loading the model) it launches the tiny model in its own
process group, sends SIGTERM to the group, waits 20 s for the group to be gone, then SIGKILLs what is
left and removes the /dev/shm entries the run created. Prints one JSON line per stage.
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
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from scripts.record_vllm_fixtures import MODEL, ROOT, free_port, group_members  # noqa: E402

STAGES = (("EngineCore spawned", "title", "VLLM::EngineCore"), ("worker loading", "log", "Starting to load model"))


def probe(venv: Path, how: str, needle: str) -> dict[str, object]:
    shm_before = set(os.listdir("/dev/shm"))
    argv = [str(venv / "bin" / "python"), "-m", "vllm.entrypoints.openai.api_server", "--model", str(MODEL),
            "--load-format", "dummy", "--skip-tokenizer-init", "--enforce-eager", "--max-num-seqs", "4",
            "--host", "127.0.0.1", "--port", str(free_port()), "--max-model-len", "4096",
            "--gpu-memory-utilization", "0.11"]
    env = dict(os.environ, SPT_NOENV="1", VLLM_NO_USAGE_STATS="1")
    log = Path(tempfile.mkdtemp()) / "vllm.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, start_new_session=True, env=env)
    t0 = time.monotonic()
    while time.monotonic() - t0 < 300:
        titles = " ".join(" ".join(m.cmdline()) for m in group_members(proc.pid))
        if needle in (titles if how == "title" else log.read_text(errors="replace")):
            break
        time.sleep(0.1)
    t_term = time.monotonic()
    os.killpg(proc.pid, signal.SIGTERM)
    gone_s = None
    while time.monotonic() - t_term < 20:
        if not group_members(proc.pid):
            gone_s = round(time.monotonic() - t_term, 2)
            break
        time.sleep(0.1)
    left = [" ".join(m.cmdline())[:60] for m in group_members(proc.pid)]
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait(timeout=30)
    while group_members(proc.pid):
        time.sleep(0.1)
    shm = sorted(set(os.listdir("/dev/shm")) - shm_before)
    for name in shm:
        Path("/dev/shm", name).unlink(missing_ok=True)
    return {"sigterm_at_s": round(t_term - t0, 1), "group_gone_after_sigterm_s": gone_s, "left_after_20s": left,
            "leader_returncode": proc.returncode, "shm_left": shm, "log": str(log)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--venv", type=Path, default=ROOT / ".venv-vllm")
    ns = ap.parse_args()
    for stage, how, needle in STAGES:
        print(stage, json.dumps(probe(ns.venv, how, needle)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
