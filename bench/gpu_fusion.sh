#!/usr/bin/env bash
# The fused chain on a GPU: sweep the Triton launch (rows per program x warps) at hidden 1024,
# then record kernels.ceilings, kernels.fusion and triton.fused_chain with the best verified
# launch from the sweep. Carry .parts (core wheels). $OUT gets fusion_explore.json,
# gpu_fusion.log and records-fusion.tar.gz.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
source bench/gpu_env.sh
unset TRITON_INTERPRET
site=/tmp/plugin-site/perfsuite_triton-0.1.0.dist-info  # the plugin's entry point, without pip
mkdir -p "$site"
printf 'Metadata-Version: 2.1\nName: perfsuite-triton\nVersion: 0.1.0\n' > "$site/METADATA"
printf '[perfsuite]\ntriton = perfsuite_triton.plugin\n' > "$site/entry_points.txt"
export PYTHONPATH=/tmp/plugin-site:$PWD/plugins/perfsuite-triton:$PYTHONPATH
{
python3 bench/fusion_explore.py --hidden 1024 | grep -v Warning
best=$(python3 - "$OUT/fusion_explore.json" <<'PY'
import json, sys
rows = [r for r in json.load(open(sys.argv[1]))["rows"]
        if r["variant"].startswith("triton R") and r["verified"] and not r.get("evict", False)]
b = max(rows, key=lambda r: r["gbps"])  # the workloads run the kernel without cache hints
print(f"-p rows_per_program={b['ROWS']} -p num_warps={b['num_warps']} -p erf={b.get('erf', 'as7126')}")
PY
)
echo "best launch: $best"
rc=0
python3 -m suite run kernels.ceilings kernels.fusion triton.fused_chain --device cuda $best "$@" || rc=$?
echo "perfsuite run exit status: $rc"
pack_records fusion
} 2>&1 | tee "$OUT/gpu_fusion.log"
