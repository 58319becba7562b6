#!/usr/bin/env bash
# First look at a GPU machine: carry .parts/part-00 (the core wheels), then
#   bash bench/gpu_smoke.sh
# Installs the wheels, prints the fingerprint, runs ceilings/gemm/memory, packs records into $OUT.
set -euo pipefail
source bench/gpu_env.sh
python3 -m suite env --json > "$OUT/env.json"
rc=0; python3 -m suite run kernels.ceilings kernels.gemm kernels.memory --device cuda --min-time 0.5 || rc=$?
echo "run exit status: $rc"
python3 -m suite results
pack_records
