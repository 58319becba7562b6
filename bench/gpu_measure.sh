#!/usr/bin/env bash
# GPU evidence for issue 9 (figures that agree with the reference tools), through the suite's
# own CLI, in one call per machine. Carry .parts (core wheels, see bench/gpu_env.sh) and, for
# x2, .ref/nccl-tests (a copy of ../shared/reference/nccl-tests), then:
#
#   bash bench/gpu_measure.sh x2   # on nvidia-h200-x2
#   bash bench/gpu_measure.sh x1   # on nvidia-h200
#
# x2: 1. build nccl-tests (make MPI=0 NCCL_HOME=<the nvidia-nccl wheel torch uses> src.build,
#        sm_90 only) into /tmp/nccl-tests-build;
#     2. perfsuite crosscheck collectives.{all_reduce,all_gather,reduce_scatter,all_to_all}
#        --nproc-per-node 2, 8 B .. 512 MiB x2, float sum, -n 20 -w 5 (default timing: one
#        interval around the loop, 5 repeats): rank 0 runs the nccl-tests binary (-g 2) with the
#        same sweep after perfsuite's, both tables in the record; again with nccl-tests -t 2 -g 1
#        (one thread per GPU), at 20 and at 100 calls per loop; nccl-tests alone at 200 calls;
#     3. all_reduce with --cuda-graph up to 64 MiB against nccl-tests -G 1;
#     4. a plain torch.distributed all_reduce loop (bench/dist_loop.py) timed the same way, 8 B .. 64 KiB;
#     5. summary: side-by-side busbw per size with ratios, small messages against the plain
#        loop, graph mode against nccl-tests; the issue's targets met / NOT met.
# x1: 1. kernels.ceilings (burst at 3 shapes per precision, sustained 2 s; memory at 3 sizes);
#     2. perfsuite crosscheck kernels.gemm bf16 + fp8 8192^3: burst (--iterations 20) and
#        sustained (--min-time 2), each beside triton.testing.do_bench; both again with
#        --l2-flush, as do_bench flushes L2 between its calls (run the same way);
#     3. perfsuite results, perfsuite show of the sustained GEMM (power-capped flag), summary.
# NVLink multicast stays off (NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1
# NVSHMEM_DISABLE_NVLS=1, from bench/gpu_env.sh). Under 8 minutes per machine.
# $OUT gets: gpu_measure-<kind>.log, records-measure-<kind>.tar.gz; x2 also nccl-tests-build.txt,
# nccl-tests-raw.txt (nccl-tests' own output of each cross-check), dist_loop.json.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
KIND=${1:-}
case "$KIND" in x1|x2) ;; *) echo "usage: bash bench/gpu_measure.sh x1|x2" >&2; exit 2 ;; esac
shift
: "${OUT:=$PWD/.device-out/gpu_measure}"
mkdir -p "$OUT"
export PERFSUITE_DB=${PERFSUITE_DB:-sqlite:////tmp/perfsuite/measure-$KIND.db}
export PERFSUITE_RECORDS=${PERFSUITE_RECORDS:-/tmp/perfsuite/measure-$KIND-records}
source bench/gpu_env.sh
source bench/nccl_tests_build.sh
unset TRITON_INTERPRET PERFSUITE_CROSSCHECK
SINCE=$(date -u +%Y-%m-%dT%H:%M:%S+00:00)
pcheck() { python3 -m suite crosscheck "$@" --device cuda; }

run_x2() {
  python3 -c 'import torch; print("torch", torch.__version__, "| NCCL", ".".join(map(str, torch.cuda.nccl.version())),
"|", torch.cuda.device_count(), "x", torch.cuda.get_device_name())'
  nvidia-smi topo -m
  env | grep -E '^(NCCL_NVLS_ENABLE|TORCH_SYMM_MEM_DISABLE_MULTICAST|NVSHMEM_DISABLE_NVLS)='
  step build-nccl-tests build_nccl_tests
  [ -x /tmp/nccl-tests-build/all_reduce_perf ] || { echo "nccl-tests did not build: stopping"; return 1; }
  export PERFSUITE_NCCL_TESTS=/tmp/nccl-tests-build
  local sweep=(--nproc-per-node 2 -p min_bytes=8 -p max_bytes=512M -p step_factor=2 -p dtype=fp32 -p iters=20
               --warmup 5 --timeout 300)
  for op in all_reduce all_gather reduce_scatter all_to_all; do
    step "$op eager vs nccl-tests -g 2" pcheck "collectives.$op" "${sweep[@]}" "$@"
  done
  # nccl-tests with one thread per GPU (-t 2 -g 1), as the suite has one process per GPU and as
  # nccl-tests runs under MPI: -g 2's one thread launches for both GPUs, which bounds its 1-4 MiB
  # figures (the held loop is faster there). Then the same at 100 calls per loop: nccl-tests times
  # its loop on the host clock up to a stream sync, whose fixed cost 20 calls do not amortise.
  for op in all_reduce all_gather reduce_scatter all_to_all; do
    step "$op eager vs nccl-tests -t 2 -g 1" env PERFSUITE_NCCL_TESTS_THREADS=1 python3 -m suite crosscheck \
         "collectives.$op" --device cuda "${sweep[@]}" "$@"
  done
  for op in all_reduce all_gather reduce_scatter all_to_all; do
    step "$op eager vs nccl-tests -t 2 -g 1, 100 calls" env PERFSUITE_NCCL_TESTS_THREADS=1 python3 -m suite \
         crosscheck "collectives.$op" --device cuda "${sweep[@]}" -p iters=100 "$@"
  done
  # nccl-tests alone, all_reduce 1-16 MiB, three ways, 200 calls per loop: how far its own
  # launch and host timing move its figures where the modes differ
  for args in "-g 2" "-t 2 -g 1" "-g 2 -G 1"; do
    step "nccl-tests all_reduce $args -n 200" /tmp/nccl-tests-build/all_reduce_perf -b 1M -e 16M -f 2 $args \
         -n 200 -w 20 -c 0
  done
  step "all_reduce graph vs nccl-tests -G 1" pcheck collectives.all_reduce --cuda-graph \
       --nproc-per-node 2 -p min_bytes=8 -p max_bytes=64M -p iters=20 --warmup 5 --timeout 300 "$@"
  step "plain torch.distributed loop" python3 -m torch.distributed.run --nproc-per-node 2 \
       bench/dist_loop.py --max-bytes 65536 --out "$OUT/dist_loop.json"
  python3 - "$OUT/nccl-tests-raw.txt" <<'EOF'
import sys
from registry import open_registry
with open_registry() as reg, open(sys.argv[1], "w") as out:  # nccl-tests' own output of each cross-check
    for r in reversed(reg.results(limit=20)):
        rec = reg.get(r["run_id"])
        cc = rec["details"].get("crosscheck") or {}
        if cc.get("raw"):
            mode = "graph" if rec["controls"]["cuda_graph"] else "eager"
            out.write(f"==== {r['workload']} ({mode}) run {r['run_id'][:8]}: {' '.join(cc['argv'])}\n{cc['raw']}\n")
EOF
  echo; echo "== summary =="
  python3 bench/measure_summary.py x2 --since "$SINCE" --dist-loop "$OUT/dist_loop.json" || status=1
}

run_x1() {
  python3 -c 'import torch, triton; print("torch", torch.__version__, "triton", triton.__version__, "|", torch.cuda.get_device_name())'
  nvidia-smi --query-gpu=name,power.limit,clocks.max.sm --format=csv
  step ceilings python3 -m suite run kernels.ceilings --device cuda "$@"
  step "gemm burst vs do_bench" pcheck kernels.gemm -p dtypes=bf16,fp8 --iterations 20 "$@"
  step "gemm sustained vs do_bench" pcheck kernels.gemm -p dtypes=bf16,fp8 --min-time 2 "$@"
  # do_bench overwrites L2 between calls: the suite's loop run the same way (--l2-flush)
  step "gemm burst vs do_bench, both flushing L2" pcheck kernels.gemm -p dtypes=bf16,fp8 --iterations 20 --l2-flush "$@"
  step "gemm sustained vs do_bench, both flushing L2" pcheck kernels.gemm -p dtypes=bf16,fp8 --min-time 2 --l2-flush "$@"
  echo; echo "== perfsuite results =="
  python3 -m suite results --limit 5
  local sustained
  sustained=$(python3 -m suite results --workload kernels.gemm --limit 1 --json | python3 -c 'import json,sys; print(json.load(sys.stdin)[0]["run_id"])')
  echo; echo "== perfsuite show $sustained (sustained GEMM: expect the power-capped flag) =="
  python3 -m suite show "$sustained"
  echo; echo "== summary =="
  python3 bench/measure_summary.py x1 --since "$SINCE" || status=1
}

main() {
  echo "gpu_measure $KIND  started $SINCE"
  "run_$KIND" "$@"
  pack_records "measure-$KIND"
  echo "exit status: $status (any failed step, failed verification or target NOT met: 1)"
  return $status
}

main "$@" 2>&1 | tee "$OUT/gpu_measure-$KIND.log"
exit "${PIPESTATUS[0]}"
