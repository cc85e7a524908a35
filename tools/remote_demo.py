"""The demo through a target: ssh to a private sshd on 127.0.0.1 + a PID-namespace container prefix.

    .venv/bin/python -m tools.remote_demo [--net] [OUT_DIR]

Starts the test sshd and container stand-in (tests/sshd.py; with --net, one with its own network
namespace, reached through the relay), writes configs/demo.yaml with a `target:` block into
OUT_DIR, runs `autotune run` on it, and prints the frontier and the wall time.
Compare with `autotune run configs/demo.yaml` (the same frontier is the claim).
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

from tests.sshd import make_sshd, open_container
from tools import REPO


def main(out: Path, net: bool) -> int:
    out.mkdir(parents=True, exist_ok=True)
    server = make_sshd(out / "sshd")
    server.start()
    box = open_container(net)
    try:
        spec = yaml.safe_load((REPO / "configs" / "demo.yaml").read_text())
        spec["model"] = str(REPO / "configs" / "models" / "Qwen3.6-27B")
        spec["results_dir"] = str(out / "results")
        spec["target"] = {"ssh": server.address, "ssh_options": server.options, "exec_prefix": box.prefix}
        path = out / "demo-remote.yaml"
        path.write_text(yaml.safe_dump(spec, sort_keys=False))
        t0 = time.monotonic()
        done = subprocess.run([str(REPO / ".venv" / "bin" / "autotune"), "run", str(path)], capture_output=True,
                              text=True)
        wall = time.monotonic() - t0
        lines = done.stdout.splitlines()
        start = next((i for i, line in enumerate(lines) if line.startswith("frontier")), len(lines))
        print("\n".join(lines[start:start + 6]))
        print(f"exit {done.returncode}, wall {wall:.1f} s")
        if done.returncode:
            print(done.stderr[-3000:])
        return done.returncode
    finally:
        box.close()
        server.stop()


if __name__ == "__main__":
    args = [a for a in sys.argv[1:] if a != "--net"]
    raise SystemExit(main(Path(args[0]) if args else Path(tempfile.mkdtemp(prefix="remote-demo-")),
                          net="--net" in sys.argv[1:]))
