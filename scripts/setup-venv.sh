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
# paths are skipped with the reason. --no-compile: byte-compiling 6 GB of packages costs more
# than compiling the modules actually imported, on first import.
"$venv/bin/python" -m pip install -q --no-compile "torch==2.14.1" "torchvision==0.29.1" -e ".[$extras,data,dali,kvikio]" \
  ./plugins/perfsuite-triton
