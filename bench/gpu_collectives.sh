#!/usr/bin/env bash
# GPU evidence for the collectives family (workloads/collectives) on a machine with 2 GPUs
# (nvidia-h200-x2), through the suite's own CLI. Carry .parts (the core wheels, see
# bench/gpu_env.sh), then:
#   bash bench/gpu_collectives.sh [extra 'perfsuite run' options, e.g. --repeat 3]
#  1. the software and the topology: torch, NCCL, nvidia-smi topo -m;
#  2. collectives.copy_bandwidth: GPU0 -> GPU1 peer copy (p2p) and pinned host-to-device,
#     256 MiB copies: the ceiling busbw is read against;
#  3. the full nccl-tests sweep, 8 B .. 1 GiB by x2, float32 (nccl-tests' default type),
#     sum, 5 warm-up and 20 timed calls per size, out-of-place and in-place where torch has
#     them, #wrong checked at every size, for all_reduce, all_gather, reduce_scatter and
#     all_to_all, 2 ranks through torchrun (NCCL);
#  4. the same all_reduce up to 64 MiB with the timed loop captured in a CUDA graph;
#  5. pytest -m gpu tests/test_collectives.py;
#  6. the nccl-tests tables (perfsuite show, per run) and perfsuite results (one line per run:
#     its headline busbw, or the copy's GB/s) as the summary; the same as JSON in summary.json.
# NVLink multicast stays off (NCCL_NVLS_ENABLE=0, TORCH_SYMM_MEM_DISABLE_MULTICAST=1,
# NVSHMEM_DISABLE_NVLS=1): exported by bench/gpu_env.sh and set again by the launcher for every rank.
# $OUT gets: gpu_collectives.log, summary.json, records-collectives.tar.gz.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
: "${OUT:=$PWD/.device-out/gpu_collectives}"
mkdir -p "$OUT"
source bench/gpu_env.sh
# The run ids of the successful sweeps in 'perfsuite results --json' on stdin, oldest first.
run_ids_of_sweeps() {
  python3 -c 'import json, sys
print(*[r["run_id"] for r in reversed(json.load(sys.stdin))
        if r["workload"] != "collectives.copy_bandwidth" and r["status"] == "success"])'
}
SWEEP=(-p min_bytes=8 -p max_bytes=1G -p step_factor=2 -p dtype=fp32 -p iters=20 --warmup 5)

main() {
since=$(date -u +%Y-%m-%dT%H:%M:%S+00:00)
python3 -c 'import torch; print("torch", torch.__version__, "| NCCL", ".".join(map(str, torch.cuda.nccl.version())),
"|", torch.cuda.device_count(), "x", torch.cuda.get_device_name())'
nvidia-smi topo -m || true
env | grep -E '^(NCCL_NVLS_ENABLE|TORCH_SYMM_MEM_DISABLE_MULTICAST|NVSHMEM_DISABLE_NVLS)='
step copy-bandwidth prun collectives.copy_bandwidth "$@"
for op in all_reduce all_gather reduce_scatter all_to_all; do
  step "$op" prun "collectives.$op" --nproc-per-node 2 "${SWEEP[@]}" "$@"
done
step all_reduce-cuda-graph prun collectives.all_reduce --nproc-per-node 2 --cuda-graph -p max_bytes=64M "$@"
step pytest-gpu python3 -m pytest -m gpu tests/test_collectives.py -q -p no:cacheprovider

echo; echo "== nccl-tests tables (perfsuite show of each sweep) =="
for id in $(python3 -m suite results --since "$since" --limit 100 --json | run_ids_of_sweeps); do
  python3 -m suite show "$id"
done

echo; echo "== summary (perfsuite results: headline per run; the p2p copy is the busbw ceiling) =="
step results python3 -m suite results --since "$since" --limit 100
python3 -m suite results --since "$since" --limit 100 --json > "$OUT/summary.json"
pack_records collectives
echo "exit status: $status (any failed step or failed verification: 1)"
return $status
}

main "$@" 2>&1 | tee "$OUT/gpu_collectives.log"
exit "${PIPESTATUS[0]}"
