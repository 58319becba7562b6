#!/usr/bin/env bash
# GPU evidence for issue 15 (pre-flight checks, profiler traces, cost), through the suite's own
# CLI, on nvidia-h200 (one GPU). Carry .parts (core wheels, see bench/gpu_env.sh), then:
#
#   bash bench/gpu_preflight.sh
#
# 1. perfsuite doctor --json > $OUT/doctor.json (and the table);
# 2. kernels.gemm (bf16, 8192^3, --iterations 50) and kernels.fusion (its full size, 262144 x 1024
#    bf16, eager and torch.compile in its default mode), each three ways:
#    no profile, --profile torch, --profile ncu (ncu from the PATH or /usr/local/cuda/bin; where
#    there is none the run is refused in one line and the summary says so);
#    every run with --price-per-hour 3.5 (an example price, stated as such in the record's source);
# 3. perfsuite show of the profiled runs, then the summary (bench/preflight_summary.py): per
#    workload and case, the median time per call and 95% CI of each mode, whether a profiled
#    median lies within the unprofiled run's CI (or within 2%), and each profile's top 3 entries.
# Under 4 minutes. $OUT gets: gpu_preflight.log, doctor.json, runs-*.json (each run's --json),
# records-preflight.tar.gz (records with the traces and ncu logs under artifacts/).
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
: "${OUT:=$PWD/.device-out/gpu_preflight}"
mkdir -p "$OUT"
export PERFSUITE_DB=${PERFSUITE_DB:-sqlite:////tmp/perfsuite/preflight.db}
export PERFSUITE_RECORDS=${PERFSUITE_RECORDS:-/tmp/perfsuite/preflight-records}
source bench/gpu_env.sh
unset TRITON_INTERPRET PERFSUITE_CROSSCHECK
if ! command -v ncu >/dev/null && [ -x /usr/local/cuda/bin/ncu ]; then
  export PATH=$PATH:/usr/local/cuda/bin
fi
prun() {  # prun TAG ARGS...: one perfsuite run, its records as JSON in $OUT/runs-TAG.json
  local tag=$1; shift
  python3 -m suite run "$@" --device cuda --price-per-hour 3.5 --timeout 240 --json > "$OUT/runs-$tag.json"
}

main() {
  echo "gpu_preflight  started $(date -u +%FT%TZ)"
  python3 -c 'import torch, psutil; print("torch", torch.__version__, "| psutil", psutil.__version__, "|", torch.cuda.get_device_name())'
  echo "ncu: $(command -v ncu || echo 'not found')"; command -v ncu >/dev/null && ncu --version | tail -1
  echo; echo "== perfsuite doctor =="
  python3 -m suite doctor --json > "$OUT/doctor.json"; echo "doctor exit $? (1: a check failed)"
  python3 -m suite doctor
  local gemm=(kernels.gemm -p dtypes=bf16 -p m=8192 -p n=8192 -p k=8192 --iterations 50)
  # Full size: at --quick's 66 us per call the eager chain is launch-bound, and ncu, which
  # intercepts every launch of the process it runs, moved its median (0.067 -> 0.52 ms).
  local fusion=(kernels.fusion -p compile_mode=default)
  step "gemm, no profile" prun gemm-none "${gemm[@]}"
  step "gemm, --profile torch" prun gemm-torch "${gemm[@]}" --profile torch
  step "gemm, --profile ncu" prun gemm-ncu "${gemm[@]}" --profile ncu
  step "fusion, no profile" prun fusion-none "${fusion[@]}"
  step "fusion, --profile torch" prun fusion-torch "${fusion[@]}" --profile torch
  step "fusion, --profile ncu" prun fusion-ncu "${fusion[@]}" --profile ncu
  for tag in gemm-torch gemm-ncu; do
    local id
    id=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))[0]["run_id"])' "$OUT/runs-$tag.json" 2>/dev/null) \
      && { echo; echo "== perfsuite show ($tag) =="; python3 -m suite show "$id" | tail -40; }
  done
  echo; echo "== summary =="
  python3 bench/preflight_summary.py "$OUT" || status=1
  pack_records preflight
  echo "exit status: $status (a failed step or a profiled median outside the unprofiled CI and 2%: 1)"
  return $status
}

main "$@" 2>&1 | tee "$OUT/gpu_preflight.log"
exit "${PIPESTATUS[0]}"
