#!/usr/bin/env bash
# GPU evidence for the training workloads (workloads/training), through the suite's own CLI.
# Carry .parts (the core wheels, see bench/gpu_env.sh), then on the machine:
#   bash bench/gpu_training.sh        # nvidia-h200 (one GPU)
#   bash bench/gpu_training.sh x2     # nvidia-h200-x2 (DDP at 2 GPUs and the 1-GPU run)
# One GPU: kernels.ceilings (bf16 and fp32 matmul: the MFU denominators), then training.resnet
#   (ResNet-18, 64x64 images, 32 classes, batch 512) and training.gpt (GPT-2, 16 layers x 768,
#   113M parameters, context 256, batch 64, reverse task), bf16, without and with torch.compile;
#   then pytest -m gpu tests/test_training_gpu.py (quick presets in bf16, compile, DataLoader).
# x2: kernels.ceilings, then training.gpt and training.resnet (eager, bf16) on 1 GPU and as DDP
#   over NCCL on 2 GPUs (global batch fixed): scaling efficiency = samples/s per GPU at 2 over 1.
# Each run has a time budget (it stops as 'aborted' when its target is not reached by then)
# and a timeout; the whole script stays under 8 minutes. With PERFSUITE_DALI=1 (DALI on the
# PYTHONPATH), one more ResNet run takes its input through the DALI pipeline.
# Prints a summary table (bench/training_summary.py): time to target, tokens or samples/s,
# TFLOP/s per GPU and MFU, energy (NVML) and the goodput split; $OUT gets gpu_training.log,
# training_summary.json and records-training.tar.gz (records + MLLOG files).
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
: "${OUT:=$PWD/.device-out/gpu_training}"
mkdir -p "$OUT"
export PERFSUITE_DB=${PERFSUITE_DB:-sqlite:////tmp/perfsuite/training.db}
export PERFSUITE_RECORDS=${PERFSUITE_RECORDS:-/tmp/perfsuite/training-records}
source bench/gpu_env.sh
export HF_HUB_OFFLINE=1
mode=${1:-x1}
status=0
step() {  # step NAME CMD...: run, report its exit status, remember any failure
  local name=$1; shift
  echo; echo "== $name ($(date -u +%H:%M:%S)) =="
  "$@"; local rc=$?
  echo "-- $name: exit $rc"
  [ "$rc" = 0 ] || status=1
}
prun() { python3 -m suite run "$@" --device cuda --seed 1; }
# Time budgets (checked at each evaluation) keep the script inside 8 minutes: a run that has
# not reached its target by then stops as aborted, and still reports throughput, MFU and goodput.
RESNET=(training.resnet -p precision=bf16 -p max_steps=5000 -p time_budget_s=60 --timeout 200)
GPT=(training.gpt -p precision=bf16 -p max_steps=5000 -p time_budget_s=60 --timeout 200)

main() {
python3 -c 'import torch, torchvision, transformers; print("torch", torch.__version__, "torchvision", torchvision.__version__, "transformers", transformers.__version__, "|", torch.cuda.get_device_name(), "x", torch.cuda.device_count())'
step ceilings prun kernels.ceilings -p matmul_dtypes=bf16,fp32 -p matmul_shapes=8192x8192x8192 -p copy_sizes=256M -p transfer_bytes=256M
if [ "$mode" = x2 ]; then
  step gpt-1gpu prun "${GPT[@]}" -p time_budget_s=50
  step gpt-ddp2 prun "${GPT[@]}" -p time_budget_s=50 --nproc-per-node 2
  step resnet-1gpu prun "${RESNET[@]}" -p time_budget_s=50
  step resnet-ddp2 prun "${RESNET[@]}" -p time_budget_s=50 --nproc-per-node 2
else
  step resnet-eager prun "${RESNET[@]}" -p compile=false
  step resnet-compile prun "${RESNET[@]}" -p compile=true
  step gpt-eager prun "${GPT[@]}" -p compile=false
  step gpt-compile prun "${GPT[@]}" -p compile=true
  step pytest-gpu python3 -m pytest -m gpu tests/test_training_gpu.py -q -p no:cacheprovider
  if [ "${PERFSUITE_DALI:-0}" = 1 ]; then
    step resnet-dali prun "${RESNET[@]}" -p pipeline=dali -p loader_workers=4 -p time_budget_s=30
  else
    echo "resnet with pipeline=dali: skipped (PERFSUITE_DALI is not 1: DALI is not on this machine's path)"
  fi
fi
echo; echo "== summary =="
python3 bench/training_summary.py "$PERFSUITE_RECORDS" --json "$OUT/training_summary.json" || status=1
pack_records training
echo "exit status: $status (any failed run: 1; an aborted run is reported, not a failure)"
return $status
}

main "$@" 2>&1 | tee "$OUT/gpu_training.log"
exit "${PIPESTATUS[0]}"
