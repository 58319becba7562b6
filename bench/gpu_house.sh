#!/usr/bin/env bash
# GPU evidence for issue 8's "one home per thing" (one H200 is enough; a second GPU adds the
# peer copy). Carry .parts (the core wheels, see bench/gpu_env.sh), then:
#   bash bench/gpu_house.sh [extra 'perfsuite run' options]
#  1. kernels.ceilings, then kernels.fusion (eager, torch.compile) and triton.fused_chain
#     (Triton kernel, eager, torch.compile) at 262144 x 1024 bf16: both time the host's one
#     chain (perfsuite.fused_chain); torch.compile in its default mode to stay inside minutes;
#  2. kernels.launch (eager baseline, CUDA graph) and kernels.memory: the speed-up column
#     and a workload without a baseline;
#  3. collectives.copy_bandwidth (perfsuite.copy_case across a peer link) where 2 GPUs are seen;
#  4. pytest -m gpu tests/test_kernels_gpu.py: the quick presets of kernels.fusion and
#     kernels.launch and the graph-replay check (the full-size autotuned one is gpu_kernels.sh's);
#  5. perfsuite results (one line per run, each with its declared headline metric).
# Each run prints the CLI's results table, where every case but the baseline shows its
# speed-up ("vs baseline": "<ratio>x eager"). $OUT gets gpu_house.log and records-house.tar.gz.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
: "${OUT:=$PWD/.device-out/gpu_house}"
mkdir -p "$OUT"
export PERFSUITE_DB=${PERFSUITE_DB:-sqlite:////tmp/perfsuite/house.db}
export PERFSUITE_RECORDS=${PERFSUITE_RECORDS:-/tmp/perfsuite/house-records}
source bench/gpu_env.sh
unset TRITON_INTERPRET
triton_plugin_on_path

main() {
since=$(date -u +%Y-%m-%dT%H:%M:%S+00:00)
python3 -c 'import torch, triton; print("torch", torch.__version__, "triton", triton.__version__, "|",
torch.cuda.device_count(), "x", torch.cuda.get_device_name())'
step plugins python3 -m suite plugins
step ceilings prun kernels.ceilings "$@"
step fused-chain prun kernels.fusion triton.fused_chain -p compile_mode=default "$@"
step launch-memory prun kernels.launch kernels.memory "$@"
if [ "$(python3 -c 'import torch; print(torch.cuda.device_count())')" -ge 2 ]; then
  step copy-bandwidth prun collectives.copy_bandwidth "$@"
else
  echo "== copy-bandwidth: skipped, one GPU visible =="
fi
step pytest-gpu python3 -m pytest -m gpu tests/test_kernels_gpu.py -k "(fusion or launch) and not eager_and_compile" -q -p no:cacheprovider
echo; echo "== summary (perfsuite results) =="
step results python3 -m suite results --since "$since" --limit 50
pack_records house
echo "exit status: $status (any failed step or failed verification: 1)"
return $status
}

main "$@" 2>&1 | tee "$OUT/gpu_house.log"
exit "${PIPESTATUS[0]}"
