#!/usr/bin/env bash
# Install SGLang (its CPU path) into a virtual environment of its own, outside the checkout, and build
# autotune's no-driver stand-in for libcuda.so.1 beside it.
#
# Usage: .ci/install_sglang_cpu.sh VERSION [PYTHON]
#
# Where: $AUTOTUNE_ENGINES/sglang-VERSION, AUTOTUNE_ENGINES defaulting to ~/.cache/autotune/engines
# (autotune/engines/sglang/cpu/install.py finds it by the same rule). Each environment is ~11 GB, so
# every clone on the machine shares the one install keyed by version instead of holding its own.
#
# Idempotent: VENV/.installed-VERSION marks a finished, import-checked install; with it present this
# does nothing. pip runs with --no-cache-dir: the CUDA builds of torch that SGLang pins would put ~8 GB
# more in pip's cache for nothing, since the stamp means a version is only ever installed once.
#
# The registry has SGLang only as CUDA builds (torch, the kernel package). They import here on the CPU
# once libcuda.so.1 can be loaded; on a machine with no GPU driver the stand-in built from
# autotune/engines/sglang/cpu/nodriver.c provides it, answering "no device" to every call. The
# stand-in lives in VENV/nodriver/ and autotune puts that folder on the engine's LD_LIBRARY_PATH only
# where no real driver loads.
set -euo pipefail

version="${1:?usage: install_sglang_cpu.sh VERSION [PYTHON]}"
python="${2:-python3}"
here="$(cd "$(dirname "$0")/.." && pwd)"
root="${AUTOTUNE_ENGINES:-${XDG_CACHE_HOME:-$HOME/.cache}/autotune/engines}"
venv="$root/sglang-$version"
stamp="$venv/.installed-$version"
quiet_pip() { "$@" 2> >(grep -v "^WARNING: Location 'file://" >&2); }

build_stand_in() {
    mkdir -p "$venv/nodriver"
    cc -shared -fPIC -O2 -Wall -Wextra -Wl,-soname,libcuda.so.1 \
        -o "$venv/nodriver/libcuda.so.1.tmp" "$here/autotune/engines/sglang/cpu/nodriver.c"
    mv "$venv/nodriver/libcuda.so.1.tmp" "$venv/nodriver/libcuda.so.1"
}

if [[ -f "$stamp" ]]; then
    # The stand-in is rebuilt when its source is newer (cheap, and a stale one is a silent lie).
    if [[ ! -f "$venv/nodriver/libcuda.so.1" || "$here/autotune/engines/sglang/cpu/nodriver.c" -nt "$venv/nodriver/libcuda.so.1" ]]; then
        build_stand_in
    fi
    echo "sglang $version already installed in $venv ($stamp)"
    exit 0
fi

start=$(date +%s)
mkdir -p "$root"
rm -rf "$venv"
"$python" -m venv "$venv"
quiet_pip "$venv/bin/pip" install --quiet --no-cache-dir --upgrade pip
quiet_pip "$venv/bin/pip" install --quiet --no-cache-dir "sglang==$version"
build_stand_in
# The import check the tool's launches depend on: the server module imports on the CPU, with the
# stand-in only where no real driver loads.
env_ld="$venv/nodriver"
if "$venv/bin/python" -c 'import ctypes; ctypes.CDLL("libcuda.so.1")' 2>/dev/null; then env_ld=""; fi
LD_LIBRARY_PATH="$env_ld${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" SGLANG_USE_CPU_ENGINE=1 \
    "$venv/bin/python" - <<'PY'
import importlib.metadata as md
import sglang.launch_server  # noqa: F401  (the module the tool launches)
import sglang.srt.server_args  # noqa: F401
print("sglang", md.version("sglang"), "imports fine on the CPU")
PY
touch "$stamp"
echo "sglang $version installed in $venv in $(( $(date +%s) - start )) s ($(du -sh "$venv" | cut -f1))"
