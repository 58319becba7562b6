#!/usr/bin/env bash
# GPU evidence for the training workloads (workloads/training), through the suite's own CLI.
# Carry .parts (the core wheels, see bench/gpu_env.sh), then on the machine:
#   bash bench/gpu_training.sh x1          # nvidia-h200 (one GPU): both workloads, see below
#   bash bench/gpu_training.sh x1-resnet   # the same, ResNet only (one device call each, if
#   bash bench/gpu_training.sh x1-gpt      #   both do not fit in one call's 10 minutes)
#   bash bench/gpu_training.sh x2          # nvidia-h200-x2 (DDP at 2 GPUs and the 1-GPU run)
# One GPU: kernels.ceilings (bf16 and fp32 matmul: the MFU denominators), then, bf16, without
#   and with torch.compile, at sizes that keep the GPU busy for more than a minute before the
#   target: training.resnet (ResNet-50, 224x224 images, 64 classes, batch 512, target top-1
#   0.95) and training.gpt (GPT-2, 24 layers x 1024, 303M parameters, context 512, batch 96,
#   reverse task, target answer accuracy 0.98). (At the presets' sizes, 64x64 images and 113M
#   parameters with target 0.9, an H200 reached the targets in 10-35 s.)
# x2: kernels.ceilings, then training.gpt and training.resnet (eager, bf16) on 1 GPU and as DDP
#   over NCCL on 2 GPUs (global batch fixed): scaling efficiency = samples/s per GPU at 2 over 1.
# Each run has a time budget (it stops as 'aborted' when its target is not reached by then)
# and a timeout. With PERFSUITE_DALI=1 (DALI on the PYTHONPATH), x1 adds a ResNet run whose
# input comes through the DALI pipeline.
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
prun() {  # one run, its records packed after it
  packed training python3 -m suite run "$@" --device cuda --seed 1
}
# Time budgets (checked at each evaluation) bound each run: one that has not reached its
# target by then stops as aborted, and still reports throughput, MFU and goodput.
RESNET=(training.resnet -p precision=bf16 -p max_steps=5000 -p time_budget_s=60 --timeout 200)
GPT=(training.gpt -p precision=bf16 -p max_steps=5000 -p time_budget_s=60 --timeout 200)
# At ResNet-18 128x128 (target 0.97) and GPT 303M context 256 (target 0.98) an H200 reached
# the targets in 7-55 s (400 and 100 steps): the fill sizes are ResNet-50 at 224x224 and GPT
# 303M at context 512, global batch 96 (192 ran out of the H200's memory in eager mode). COMPILES picks the torch.compile settings to run.
RESNET_FILL=(training.resnet -p precision=bf16 -p depth=50 -p image_size=224 -p classes=64 -p train_samples=16384
             -p target_accuracy=0.95 -p eval_every=50 -p max_steps=20000 -p time_budget_s=200 --timeout 330)
GPT_FILL=(training.gpt -p precision=bf16 -p layers=24 -p width=1024 -p heads=16 -p context=512 -p global_batch=96
          -p target_accuracy=0.98 -p eval_every=25 -p max_steps=20000 -p time_budget_s=200 --timeout 330)
COMPILES=${COMPILES:-false true}

main() {
python3 -c 'import torch, torchvision, transformers; print("torch", torch.__version__, "torchvision", torchvision.__version__, "transformers", transformers.__version__, "|", torch.cuda.get_device_name(), "x", torch.cuda.device_count())'
step ceilings prun kernels.ceilings -p matmul_dtypes=bf16,fp32 -p matmul_shapes=8192x8192x8192 -p copy_sizes=256M -p transfer_bytes=256M
case "$mode" in
  x2)
    step gpt-1gpu prun "${GPT[@]}" -p time_budget_s=50
    step gpt-ddp2 prun "${GPT[@]}" -p time_budget_s=50 --nproc-per-node 2
    step resnet-1gpu prun "${RESNET[@]}" -p time_budget_s=50
    step resnet-ddp2 prun "${RESNET[@]}" -p time_budget_s=50 --nproc-per-node 2 ;;
  x1|x1-resnet|x1-gpt)
    if [ "$mode" != x1-gpt ]; then
      for c in $COMPILES; do step "resnet compile=$c" prun "${RESNET_FILL[@]}" -p compile="$c"; done
    fi
    if [ "$mode" != x1-resnet ]; then
      for c in $COMPILES; do step "gpt compile=$c" prun "${GPT_FILL[@]}" -p compile="$c"; done
    fi
    if [ "${PERFSUITE_DALI:-0}" = 1 ]; then
      step resnet-dali prun "${RESNET[@]}" -p pipeline=dali -p loader_workers=4 -p time_budget_s=30
    fi ;;
  *) echo "usage: bash bench/gpu_training.sh x1|x1-resnet|x1-gpt|x2" >&2; return 2 ;;
esac
echo; echo "== summary =="
python3 bench/training_summary.py "$PERFSUITE_RECORDS" --json "$OUT/training_summary.json" || status=1
pack_records training
echo "exit status: $status (any failed run: 1; an aborted run is reported, not a failure)"
return $status
}

main "$@" 2>&1 | tee "$OUT/gpu_training.log"
exit "${PIPESTATUS[0]}"
