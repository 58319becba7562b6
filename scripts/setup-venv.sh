#!/usr/bin/env bash
# Create (or reuse) .venv with the suite, torch and torchvision, Triton (for its CPU
# interpreter), transformers and MLPerf LoadGen (inference), the data family's set (Pillow,
# scikit-image's sample images, NVIDIA DALI, KvikIO), the separately packaged Triton
# plugin, and the extras asked for.
# Usage: scripts/setup-venv.sh [extra,extra...]
set -euo pipefail
cd "$(dirname "$0")/.."
extras=${1:-triton,plot,inference}
venv=${PERFSUITE_VENV:-.venv}
if [ ! -x "$venv/bin/python" ]; then
  python3 -m venv "$venv"
fi
"$venv/bin/python" -m pip install -q --upgrade pip
# torch 2.14.1 is a CUDA build that also runs on a machine without a GPU; torchvision only
# imports beside the build of torch it was made for (0.29.1 for 2.14.1). The data extras
# (data, dali, kvikio) are what the data workloads' CPU paths run on; without them those
# paths are skipped with the reason.
"$venv/bin/python" -m pip install -q --no-compile "torch==2.14.1" "torchvision==0.29.1" -e ".[$extras,data,dali,kvikio]" \
  ./plugins/perfsuite-triton
# Byte-compile the environment once per set of installed packages, and the suite's own sources.
# Where PYTHONDONTWRITEBYTECODE is set (as on this project's machine image) Python never caches
# what it compiles, and every process the suite starts (each rank, each worker) would compile
# torch from source again: 2.2 of the 4.5 s of `import torch` here, half of a CPU collective's run.
# A file of another Python's syntax (torch ships one for 3.12) stays uncompiled, and is named.
site=$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
installed=$("$venv/bin/python" -m pip freeze --all | sha256sum | cut -c1-64)
stamp="$venv/.bytecode-of-packages"
if [ "$(cat "$stamp" 2>/dev/null)" != "$installed" ]; then
  log=$(mktemp)
  if ! "$venv/bin/python" -m compileall -q -j 0 "$site" >"$log" 2>&1; then
    echo "note: not byte-compiled (not this Python's syntax):" \
      "$(sed -n "s/^\*\*\* Error compiling '\(.*\)'.*/\1/p" "$log" | tr '\n' ' ')" >&2
  fi
  rm -f "$log"
  echo "$installed" >"$stamp"
fi
"$venv/bin/python" -m compileall -q -j 0 suite registry schemas workloads
