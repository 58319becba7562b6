#!/usr/bin/env bash
# The fused chain on a GPU: sweep the Triton launch (rows per program x warps) at hidden 1024,
# then record kernels.ceilings, kernels.fusion (eager, torch.compile) and triton.fused_chain
# (its Triton kernel beside the same eager and compile cases) with the best verified launch
# from the sweep; the CLI's results table at the end. Carry .parts (core wheels).
# $OUT gets fusion_explore.json, gpu_fusion.log and records-fusion.tar.gz.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
source bench/gpu_env.sh
unset TRITON_INTERPRET
triton_plugin_on_path
{
since=$(date -u +%Y-%m-%dT%H:%M:%S+00:00)
python3 bench/fusion_explore.py --hidden 1024 --best-params /tmp/fusion-best.txt | grep -v Warning
best=$(cat /tmp/fusion-best.txt)
echo "best launch: $best"
rc=0
# -p applies to each named workload that has the parameter: the launch goes to triton.fused_chain.
python3 -m suite run kernels.ceilings kernels.fusion triton.fused_chain --device cuda $best "$@" || rc=$?
echo "perfsuite run exit status: $rc"
python3 -m suite results --since "$since"
pack_records fusion
} 2>&1 | tee "$OUT/gpu_fusion.log"
