#!/usr/bin/env bash
# Set up and run the test suite (GPU tests skip cleanly without a GPU).
set -euo pipefail
cd "$(dirname "$0")/.."
# llama.cpp's llama-server, the serving tests' second engine, takes minutes to compile: start it
# now, beside the set-up, into the folder its tests use (they wait for it, or build it themselves
# and fail loudly where it cannot be built; tests/support/llama_cpp.py).
# Only for the whole suite: a run of chosen test files (an argument not starting with '-') may not need it.
whole=1
for arg in "$@"; do case $arg in -*) ;; *) whole=0 ;; esac; done
if [ "$whole" = 1 ]; then
  mkdir -p .pytest_cache
  # its own process group, stopped with its compilers if this script ends first (a failed set-up):
  # a half-done build is redone by the next start (it is done only once build-times.json is written)
  setsid python3 tests/support/llama_cpp.py > .pytest_cache/llama-server-prebuild.log 2>&1 &
  prebuild=$!
  trap 'if kill -0 "$prebuild" 2>/dev/null; then kill -- "-$prebuild" 2>/dev/null || kill "$prebuild"; fi' EXIT
fi
scripts/setup-venv.sh triton,plot,postgres,parquet,export,test,training,mlperf,inference,serving,dev,docs
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
# The SLURM tests start a one-node cluster from Debian's slurm-wlm and munge (tests/support/slurm_cluster.py):
# install them when missing and root can; otherwise say so, and those tests skip with the reason.
if [ ! -x /usr/sbin/slurmctld ] || [ ! -x /usr/sbin/slurmd ] || [ ! -x /usr/sbin/munged ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "installing slurm-wlm and munge for the SLURM tests" >&2
    if ! { apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q slurm-wlm munge; } >&2; then
      echo "warning: could not install slurm-wlm and munge (apt-get); the SLURM tests will skip" >&2
    fi
  else
    echo "note: slurm-wlm and munge are not installed and this is not root with apt-get: the SLURM tests will skip" >&2
  fi
fi
venv=${PERFSUITE_VENV:-.venv}
# Most tests wait on real subprocesses, servers and databases: three workers keep two cores busy.
# Each test file runs on one worker (its module fixtures built once); PERFSUITE_TEST_WORKERS=0 runs in-process.
# The tests marked `alone` judge timings against a reference client: they run after the others, by
# themselves, so that no other test crowds the cores they time on. Both passes always run.
status=0
"$venv/bin/python" -m pytest -n "${PERFSUITE_TEST_WORKERS:-3}" --dist loadfile --alone-tests=defer "$@" || status=$?
echo "== the tests that judge timings, alone (marked 'alone')"
alone=0
"$venv/bin/python" -m pytest -n 0 --alone-tests=only "$@" || alone=$?
if [ "$alone" -ne 0 ] && [ "$alone" -ne 5 ]; then  # 5: no test selected (none marked 'alone' among those asked for)
  status=$alone
fi
if [ "$status" -eq 5 ] && [ "$alone" -eq 0 ]; then  # every test asked for was one of the 'alone' ones
  status=0
fi
exit "$status"
