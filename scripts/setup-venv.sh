#!/usr/bin/env bash
# Create (or reuse) .venv with the suite, the CPU build of torch, Triton (for its CPU
# interpreter), transformers and MLPerf LoadGen (inference), the separately packaged
# Triton plugin, and the test extras.
# Usage: scripts/setup-venv.sh [extra,extra...]
set -euo pipefail
cd "$(dirname "$0")/.."
extras=${1:-triton,plot,inference}
venv=${PERFSUITE_VENV:-.venv}
if [ ! -x "$venv/bin/python" ]; then
  python3 -m venv "$venv"
fi
"$venv/bin/python" -m pip install -q --upgrade pip
# torch 2.13.0 is the CPU build (900 MB); the kernels run on the CPU here, and on a GPU
# machine a CUDA build of torch is used as installed there.
"$venv/bin/python" -m pip install -q "torch==2.13.0" -e ".[$extras]" ./plugins/perfsuite-triton
