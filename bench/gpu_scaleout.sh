#!/usr/bin/env bash
# GPU evidence for scale-out (issue 14) on one host of 4 or 8 GPUs (nvidia-h200-x4 / -x8),
# through the suite's own CLI, in two calls on the same warm machine (the registry in /tmp
# is shared between them). Carry .parts (core wheels, bench/gpu_env.sh) and, for the first
# call, .ref/nccl-tests (a copy of ../shared/reference/nccl-tests):
#
#   bash bench/gpu_scaleout.sh collectives   # ~8 minutes at 4 GPUs
#   bash bench/gpu_scaleout.sh training      # ~5 minutes at 4 GPUs without the weak runs (WEAK=0)
#
# collectives, every GPU of the machine as one rank each:
#   1. topology (nvidia-smi topo -m), then collectives.copy_bandwidth: the peer-copy ceiling;
#      bench/graph_probe.py: the nodes and cost per call of captured all_reduce loops;
#   2. build nccl-tests (bench/nccl_tests_build.sh);
#   3. perfsuite crosscheck of all_reduce, all_gather, reduce_scatter, all_to_all and
#      send_recv: fp32 8 B .. 1 GiB by x2, then bf16 8 B .. 1 GiB by x4 at 100 calls per loop,
#      eager (timing=loop), and fp32 8 B .. 64 MiB by x4 with --cuda-graph; nccl-tests (-t N -g 1,
#      -N repeats, NCCL_P2P_DIRECT_DISABLE=1) runs the same sweep in the same call (rank 0, after
#      the suite's);
#   4. bench/measure_summary.py: busbw beside nccl-tests per size, the targets met or not.
# training: kernels.ceilings (bf16 matmul: the MFU denominator), then training.gpt and
#   training.resnet (bf16, eager, global batch fixed) at 1, 2, 4 (and 8) GPUs, each with a
#   time budget; then (unless WEAK=0) the same at 2, 4 (and 8) GPUs with the 1-GPU batch on
#   each GPU (global batch x N), for throughput only (a shorter budget; time to target at
#   another batch is another race); bench/training_summary.py: samples/s per GPU and the
#   scaling efficiency at a fixed global batch and at a fixed batch per GPU.
# NVLink multicast stays off (bench/gpu_env.sh and the launcher set NCCL_NVLS_ENABLE=0 and co.).
# $OUT gets gpu_scaleout-PART.log, nccl-tests-build.txt, graph-probe.tar.gz, training_summary.json
# and records-scaleout-PART.tar.gz.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
PART=${1:-}
case "$PART" in collectives|training) shift ;; *) echo "usage: bash bench/gpu_scaleout.sh collectives|training" >&2; exit 2 ;; esac
: "${OUT:=$PWD/.device-out/gpu_scaleout}"
mkdir -p "$OUT"
export PERFSUITE_DB=${PERFSUITE_DB:-sqlite:////tmp/perfsuite/scaleout.db}
export PERFSUITE_RECORDS=${PERFSUITE_RECORDS:-/tmp/perfsuite/scaleout-records-$PART}
source bench/gpu_env.sh
source bench/nccl_tests_build.sh
export HF_HUB_OFFLINE=1
unset PERFSUITE_CROSSCHECK
N=$(nvidia-smi -L | wc -l)
SINCE=$(date -u +%Y-%m-%dT%H:%M:%S+00:00)
OPS=(all_reduce all_gather reduce_scatter all_to_all send_recv)
pcheck() {  # one cross-checked sweep, its records packed after it
  packed "scaleout-$PART" python3 -m suite crosscheck "$@" --device cuda --nproc-per-node "$N" --warmup 5 --timeout 300
}
# BRIEF=1 (a short device budget): fp32 by x4 only, no bf16 sweep, graph mode for all_reduce only.
# REST=1: what BRIEF left out (the bf16 sweep, graph mode for the other four collectives, and
# all_reduce again against nccl-tests one thread per GPU).
FP32_STEP=2; FP32_OPS=("${OPS[@]}"); BF16_OPS=("${OPS[@]}"); GRAPH_OPS=("${OPS[@]}")
if [ "${BRIEF:-0}" = 1 ]; then FP32_STEP=4; BF16_OPS=(); GRAPH_OPS=(all_reduce); fi
if [ "${REST:-0}" = 1 ]; then FP32_OPS=(); fi

run_collectives() {
  python3 -c 'import torch; print("torch", torch.__version__, "| NCCL", ".".join(map(str, torch.cuda.nccl.version())),
"|", torch.cuda.device_count(), "x", torch.cuda.get_device_name())'
  nvidia-smi topo -m
  env | grep -E '^(NCCL_NVLS_ENABLE|TORCH_SYMM_MEM_DISABLE_MULTICAST|NVSHMEM_DISABLE_NVLS)='
  if [ "${SHORT:-0}" != 1 ]; then  # SHORT=1: neither (a call's last minutes)
    step "peer-copy ceiling" prun collectives.copy_bandwidth "$@"
    step "graph capture probe" graph_probe "$N"
  fi
  step build-nccl-tests build_nccl_tests
  [ -x /tmp/nccl-tests-build/all_reduce_perf ] || { echo "nccl-tests did not build: stopping"; return 1; }
  export PERFSUITE_NCCL_TESTS=/tmp/nccl-tests-build
  for op in "${FP32_OPS[@]}"; do
    step "$op fp32 eager vs nccl-tests" pcheck "collectives.$op" -p min_bytes=8 -p max_bytes=1G -p step_factor=$FP32_STEP \
         -p dtype=fp32 -p iters=20 "$@"
  done
  for op in "${BF16_OPS[@]}"; do
    step "$op bf16 eager vs nccl-tests" pcheck "collectives.$op" -p min_bytes=8 -p max_bytes=1G -p step_factor=4 \
         -p dtype=bf16 -p iters=100 -p check=false "$@"
  done
  for op in "${GRAPH_OPS[@]}"; do
    step "$op fp32 graph vs nccl-tests -G 1" pcheck "collectives.$op" --cuda-graph -p min_bytes=8 -p max_bytes=64M \
         -p step_factor=4 -p dtype=fp32 -p iters=20 "$@"
  done
  echo; echo "== summary =="
  python3 bench/measure_summary.py "x$N" --since "$SINCE" || status=1
  python3 -m suite results --since "$SINCE" --limit 100
}

run_training() {
  step ceilings prun kernels.ceilings -p matmul_dtypes=bf16 -p matmul_shapes=8192x8192x8192 -p copy_sizes=256M \
       -p transfer_bytes=256M
  local counts=(1 2 4); [ "$N" -ge 8 ] && counts+=(8)
  for n in "${counts[@]}"; do
    step "gpt x$n" packed "scaleout-$PART" prun training.gpt -p precision=bf16 -p max_steps=5000 -p time_budget_s=35 --timeout 200 \
         --seed 1 --nproc-per-node "$n" "$@"
  done
  for n in "${counts[@]}"; do
    step "resnet x$n" packed "scaleout-$PART" prun training.resnet -p precision=bf16 -p max_steps=5000 -p time_budget_s=30 --timeout 200 \
         --seed 1 --nproc-per-node "$n" "$@"
  done
  if [ "${WEAK:-1}" = 1 ]; then  # the 1-GPU runs' batch per GPU: GPT 64 sequences, ResNet 512 images
    for n in "${counts[@]:1}"; do
      step "gpt x$n, batch 64 per GPU" packed "scaleout-$PART" prun training.gpt -p precision=bf16 -p max_steps=5000 \
           -p time_budget_s=12 -p global_batch=$((64 * n)) --timeout 150 --seed 1 --nproc-per-node "$n" "$@"
      step "resnet x$n, batch 512 per GPU" packed "scaleout-$PART" prun training.resnet -p precision=bf16 -p max_steps=5000 \
           -p time_budget_s=12 -p global_batch=$((512 * n)) --timeout 150 --seed 1 --nproc-per-node "$n" "$@"
    done
  fi
  echo; echo "== summary =="
  python3 bench/training_summary.py "$PERFSUITE_RECORDS" --json "$OUT/training_summary.json" || status=1
}

main() {
  echo "gpu_scaleout $PART on $N GPUs, started $SINCE"
  "run_$PART" "$@"
  pack_records "scaleout-$PART"
  echo "exit status: $status (any failed step, failed verification or target NOT met: 1)"
  return $status
}

main "$@" 2>&1 | tee "$OUT/gpu_scaleout-$PART.log"
exit "${PIPESTATUS[0]}"
