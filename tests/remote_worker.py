"""A tuner process for the fault tests: `python -m tests.remote_worker NODE TRIALS_DIR SSH OPTIONS_JSON PREFIX_JSON`.

Runs one long trial of the simulated server through the target, printing `launched` once the
server runs, so the test can SIGKILL this process (the tuner) or stop sshd mid-trial. With
AUTOTUNE_TEST_API_KEY set, the server gets that API key (it prints it in its log, as SGLang does).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from autotune.config import LaunchConfig
from autotune.errors import AutotuneError
from autotune.gpu.nvidiasmi import NvidiaSmiBackend
from autotune.settings import Deadlines, ProbeSpec, Target, TrialSettings
from autotune.target.transport import transport_for
from autotune.trial import remote
from autotune.trial.run import run_trial

LLAMA8 = str(Path(__file__).resolve().parents[1] / "configs" / "models" / "Meta-Llama-3.1-8B")


def main(argv: list[str]) -> int:
    node, trials, ssh, options, prefix = argv[0], Path(argv[1]), argv[2], json.loads(argv[3]), json.loads(argv[4])
    remote.RECONNECT_S = 3.0  # give a lost connection up quickly (the default waits 30 s)
    target = Target(ssh=ssh, ssh_options=tuple(options), exec_prefix=tuple(prefix))
    transport = transport_for(target)
    env = {"AUTOTUNE_SIM_NODE": node, "AUTOTUNE_SIM_TIME_SCALE": "0.05"}  # slow enough to interrupt
    settings = TrialSettings(launcher=(sys.executable, "-m", "autotune.sim.sglang"), env=env, trials_dir=trials,
                             deadlines=Deadlines(startup_s=120, no_progress_s=60, compile_no_progress_s=60,
                                                 ready_health_s=60), grace_s=2.0, release_timeout_s=10.0,
                             probe=ProbeSpec(burst=2, burst_tokens=256), target=target,
                             api_key=os.environ.get("AUTOTUNE_TEST_API_KEY") or None)
    backend = NvidiaSmiBackend(transport.command(["env", f"AUTOTUNE_SIM_NODE={node}", sys.executable, "-m",
                                                  "autotune.sim.nvidia_smi"]))

    said: list[str] = []

    def on_phase(phase: str, *_: object) -> None:  # the watcher's first word: the server runs
        if not said:
            said.append(phase)
            print("launched", flush=True)

    try:
        result = run_trial(LaunchConfig(model_path=LLAMA8, mem_fraction_static=0.85, context_length=8192), settings,
                           backend, on_phase=on_phase)
    except AutotuneError as exc:
        print(f"error {type(exc).__name__}: {exc}", flush=True)
        return 3
    print(f"result {result.outcome.value}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
