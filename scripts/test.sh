#!/usr/bin/env bash
# Set up and run the test suite (GPU tests skip cleanly without a GPU).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup-venv.sh triton,plot,postgres,test,training,mlperf,inference,serving
# The leaderboard's browser tests drive Debian's chromium through playwright (never a
# downloaded browser): install it when missing, and stop here if that fails.
chromium=${PERFSUITE_CHROMIUM:-/usr/bin/chromium}
if [ ! -x "$chromium" ]; then
  echo "installing chromium for the leaderboard's browser tests" >&2
  sudo=""; [ "$(id -u)" = 0 ] || sudo="sudo"
  if ! { $sudo apt-get update -q && $sudo apt-get install -y -q chromium; } >&2; then
    echo "error: could not install chromium (apt-get install chromium); the browser tests need it" >&2
    exit 1
  fi
fi
venv=${PERFSUITE_VENV:-.venv}
exec "$venv/bin/python" -m pytest "$@"
