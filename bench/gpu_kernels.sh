#!/usr/bin/env bash
# GPU evidence for the built-in kernel workloads (workloads/kernels), in one go, through the
# suite's own CLI on a CUDA GPU. Carry .parts (the core wheels, see bench/gpu_env.sh), then:
#   bash bench/gpu_kernels.sh [extra 'perfsuite run' options, e.g. --repeat 3]
#  1. kernels.ceilings (this GPU's roof), then kernels.gemm at 8192^3 in fp32/tf32/bf16/fp16/fp8,
#     kernels.memory copy + triad (1 GiB buffers), kernels.attention (B8 H16 S4096 D128 bf16,
#     every SDPA backend, non-causal and causal), kernels.fusion (eager / torch.compile),
#     kernels.launch (eager / CUDA graph); each run prints the CLI's results table (% of
#     ceiling, speed-up against the workload's baseline case); records stored in a throwaway
#     registry and packed into $OUT;
#  2. pytest -m gpu tests/test_kernels_gpu.py (verification on the GPU, broken kernels caught);
#  3. bench/crosscheck_gpu.py: suite timing vs triton.testing.do_bench (GEMM, within 3%) and
#     vs plain CUDA events (copy, within 5%);
#  4. perfsuite roofline: table, $OUT/roofline.png and $OUT/roofline.json;
#  5. perfsuite results: one line per run of this script with its headline metric.
# What to read against: the ceilings measured in shared/DESIGN.md (an H200: bf16 773 TFLOP/s,
# copy 4.24 TB/s, a launch ~8.7 us eager and ~0.9 us in a CUDA graph).
# $OUT gets: gpu_kernels.log, crosscheck.json, roofline.png, roofline.json, records-kernels.tar.gz.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
: "${OUT:=$PWD/.device-out/gpu_kernels}"
mkdir -p "$OUT"
# Its own registry by default, so the summary and the roofline see this script's runs only.
export PERFSUITE_DB=${PERFSUITE_DB:-sqlite:////tmp/perfsuite/kernels.db}
export PERFSUITE_RECORDS=${PERFSUITE_RECORDS:-/tmp/perfsuite/kernels-records}
source bench/gpu_env.sh
export KERNELS_SINCE=$(date -u +%Y-%m-%dT%H:%M:%S+00:00)
unset TRITON_INTERPRET

main() {
python3 -c 'import torch, triton; print("torch", torch.__version__, "triton", triton.__version__, "|", torch.cuda.get_device_name())'
step ceilings prun kernels.ceilings "$@"
step gemm prun kernels.gemm -p dtypes=bf16,fp32,tf32,fp16,fp8 "$@"
step memory prun kernels.memory "$@"
step attention prun kernels.attention "$@"
step attention-causal prun kernels.attention -p causal=true "$@"
step fusion prun kernels.fusion "$@"
step launch prun kernels.launch "$@"
step pytest-gpu python3 -m pytest -m gpu tests/test_kernels_gpu.py -q -p no:cacheprovider
step crosscheck python3 bench/crosscheck_gpu.py --json "$OUT/crosscheck.json"
step roofline python3 -m suite roofline --out "$OUT/roofline.png"
python3 -m suite roofline --json > "$OUT/roofline.json"

echo; echo "== summary: the runs of this script, headline metric each (perfsuite results) =="
step results python3 -m suite results --since "$KERNELS_SINCE" --limit 100
pack_records kernels
echo "exit status: $status (any failed step or failed verification: 1)"
return $status
}

main "$@" 2>&1 | tee "$OUT/gpu_kernels.log"
exit "${PIPESTATUS[0]}"
