#!/usr/bin/env bash
# The main job: set up, run the quick suite on this machine into the default SQLite
# registry, and print the results table.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup-venv.sh triton,plot,training,inference,serving
venv=${PERFSUITE_VENV:-.venv}
# Triton kernels run through Triton's interpreter where there is no GPU.
if ! "$venv/bin/python" -c 'import sys, pynvml; pynvml.nvmlInit(); sys.exit(pynvml.nvmlDeviceGetCount() == 0)' 2>/dev/null; then
  export TRITON_INTERPRET=1
fi
exec "$venv/bin/perfsuite" run --plan quick "$@"
