#!/usr/bin/env bash
# Set up and run the test suite (GPU tests skip cleanly without a GPU).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup-venv.sh triton,plot,postgres,test,training,mlperf
venv=${PERFSUITE_VENV:-.venv}
exec "$venv/bin/python" -m pytest "$@"
