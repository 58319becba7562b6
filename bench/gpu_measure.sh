#!/usr/bin/env bash
# GPU evidence for issue 9 (figures that agree with the reference tools), through the suite's
# own CLI, in one call per machine. Carry .parts (core wheels, see bench/gpu_env.sh) and, for
# x2, .ref/nccl-tests (a copy of ../shared/reference/nccl-tests), then:
#
#   bash bench/gpu_measure.sh x2   # on nvidia-h200-x2
#   bash bench/gpu_measure.sh x1   # on nvidia-h200
#   bash bench/gpu_measure.sh x2b  # on nvidia-h200-x2: the follow-up below
#
# x2: 1. build nccl-tests (make MPI=0 NCCL_HOME=<the nvidia-nccl wheel torch uses> src.build,
#        sm_90 only) into /tmp/nccl-tests-build;
#     1b. bench/graph_probe.py: the nodes, GPU trace and cost per call of captured all_reduce loops;
#     2. the NCCL transports between the GPUs, the suite's ranks' and nccl-tests' (NCCL_DEBUG=INFO),
#        and nccl-tests' all_gather with and without direct pointers to the peer's buffers;
#     3. perfsuite crosscheck collectives.{all_reduce,all_gather,reduce_scatter,all_to_all}
#        --nproc-per-node 2, 8 B .. 512 MiB x2, float sum, 200 calls per loop, 5 loops (the
#        default timing: one interval around the loop): rank 0 then runs the nccl-tests binary
#        (-t 2 -g 1, NCCL_P2P_DIRECT_DISABLE=1: the suite's transport) with the same sweep,
#        both tables in the record; all_gather again with nccl-tests' direct pointers;
#     4. all_reduce with --cuda-graph up to 64 MiB against nccl-tests -G 1;
#     5. a plain torch.distributed all_reduce loop (bench/dist_loop.py) timed the same way, 8 B .. 64 KiB;
#     6. summary: side-by-side busbw per size with ratios, small messages against the plain
#        loop, graph mode against nccl-tests; the issue's targets met / NOT met.
# x2b: nccl-tests built as in x2, then: all four collectives with --cuda-graph up to 1 MiB against
#     nccl-tests -G 1 (NCCL_GRAPH_MIXING_SUPPORT=0 on both sides, the suite's setting for graph
#     runs), all_reduce again with it =1 on both sides (NCCL's default); bench/alltoall_probe.py
#     (which NCCL calls and GPU operations torch's all_to_all_single makes, NCCL_DEBUG_SUBSYS=COLL);
#     the four eager sweeps 8 B .. 512 MiB at ITERS calls (default 500) and REPEATS loops (7) on
#     both sides; the summary.
# x2c: nccl-tests built as in x2, then probes of what is left between the two sides, and the
#     acceptance sweeps taking turns with nccl-tests:
#     1. bench/graph_sizes_probe.py (the 512 B / 1 KiB step of the first graph mode measured
#        there): all_gather and all_reduce as the sweep captures them, all_gather again with
#        NCCL_RUNTIME_CONNECT=0 and with every graph captured twice;
#     2. NCCL's own log (INIT, TUNING, ENV) of the suite's ranks and of nccl-tests for the same
#        reduce_scatter sizes (1-4 MiB): channels, algorithm and protocol per call on each side;
#     3. nccl-tests reduce_scatter and alltoall 1-32 MiB, 500 calls, -N 3, as the cross-check
#        runs it, with per-iteration CUDA events (-I 1: i_min, i_max, i_p99 per size), with
#        NCCL_GRAPH_MIXING_SUPPORT=0 and with one thread for both GPUs (-g 2);
#     4. the suite's reduce_scatter 1-32 MiB timed with its hold (timing=loop) and as Python
#        issues the calls (timing=host_loop: the GPU keeps up with Python from 8 MiB);
#     5. the eager sweeps 8 B .. 512 MiB of OPS (default: all four), ITERS calls (500) x
#        REPEATS loops (3) per round, ROUNDS rounds (3) taken in turns with nccl-tests (-N
#        REPEATS each); with all_reduce a plain torch.distributed loop at the same calls; the
#        summary of these sweeps. PROBES=0 leaves out 1-4 (a second call for the other OPS);
#        GRAPH_OPS: these collectives' --cuda-graph sweeps to 1 MiB, in rounds, beside -G 1;
#        CPUTIME_PROBE=1: nccl-tests' host issue time (-C 1) beside its time (-C 0) at 1-8 MiB;
#        LAYOUT_PROBE=1 (with MPICH's wheel carried in .ref, see bench/nccl_tests_build.sh):
#        nccl-tests' all_reduce, all_gather and alltoall at 256 KiB-32 MiB as one process per
#        GPU (its time and, -C 1, its host's) and as a thread per GPU, before the sweeps.
#     The sweeps' nccl-tests runs as one process per GPU under MPICH's mpiexec where the wheel
#     is carried (the suite's layout), else as a thread per GPU (NCCL_TESTS_LAYOUT).
# x1: 1. kernels.ceilings (burst at 3 shapes per precision, sustained 2 s; memory at 3 sizes);
#     2. perfsuite crosscheck kernels.gemm bf16 + fp8 8192^3: burst (--iterations 20) and
#        sustained (--min-time 2), each beside triton.testing.do_bench; both again with
#        --l2-flush, as do_bench flushes L2 between its calls (run the same way);
#     3. perfsuite results, perfsuite show of the sustained GEMM (power-capped flag), summary.
# NVLink multicast stays off (NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1
# NVSHMEM_DISABLE_NVLS=1, from bench/gpu_env.sh). Under 8 minutes per machine.
# $OUT gets: gpu_measure-<kind>.log, records-measure-<kind>.tar.gz; x2 also nccl-tests-build.txt,
# nccl-tests-raw.txt (nccl-tests' own output of each cross-check), dist_loop.json, graph-probe.tar.gz.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
KIND=${1:-}
case "$KIND" in x1|x2|x2b|x2c) ;; *) echo "usage: bash bench/gpu_measure.sh x1|x2|x2b|x2c" >&2; exit 2 ;; esac
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
pcheck_direct() { PERFSUITE_NCCL_TESTS_ENV= pcheck "$@"; }  # nccl-tests reaching the peer's buffers directly

run_x2() {
  python3 -c 'import torch; print("torch", torch.__version__, "| NCCL", ".".join(map(str, torch.cuda.nccl.version())),
"|", torch.cuda.device_count(), "x", torch.cuda.get_device_name())'
  nvidia-smi topo -m
  env | grep -E '^(NCCL_NVLS_ENABLE|TORCH_SYMM_MEM_DISABLE_MULTICAST|NVSHMEM_DISABLE_NVLS)='
  step "graph capture probe" graph_probe 2
  step build-nccl-tests build_nccl_tests
  [ -x /tmp/nccl-tests-build/all_reduce_perf ] || { echo "nccl-tests did not build: stopping"; return 1; }
  export PERFSUITE_NCCL_TESTS=/tmp/nccl-tests-build
  # Which NCCL transport each side uses between the two GPUs: the suite's ranks are two
  # processes; nccl-tests is one process, where NCCL reaches the peer's user buffers directly
  # ("P2P/direct pointer") unless NCCL_P2P_DIRECT_DISABLE=1
  step "transports: suite ranks (NCCL_DEBUG=INFO)" bash -c "NCCL_DEBUG=INFO python3 -m torch.distributed.run \
       --nproc-per-node 2 bench/dist_loop.py --max-bytes 1024 --iters 5 --repeats 1 --out /tmp/transport.json \
       > /tmp/transport-suite.txt 2>&1; grep -o ' via .*' /tmp/transport-suite.txt | sort | uniq -c"
  for direct in "" "NCCL_P2P_DIRECT_DISABLE=1"; do
    step "transports and all_gather: nccl-tests -t 2 -g 1 -n 200 ${direct:-(direct pointers allowed)}" bash -c \
      "env $direct NCCL_DEBUG=INFO /tmp/nccl-tests-build/all_gather_perf -b 1M -e 32M -f 2 -t 2 -g 1 -n 200 -w 20 \
       -c 0 > /tmp/transport-nccl-tests.txt 2>&1; rc=\$?; grep -o ' via .*' /tmp/transport-nccl-tests.txt | sort | uniq -c;
       grep -E '^ +[0-9]+ ' /tmp/transport-nccl-tests.txt; exit \$rc"
  done
  # The acceptance sweep: nccl-tests one thread per GPU (the default) over the same transport as
  # the suite's two processes, 200 calls per loop on both sides (nccl-tests' host clock around
  # its loop holds a fixed cost that 20 calls do not amortise: 1 MiB all_reduce read 15.3 us at
  # 20-100 calls, 13.2 us at 200)
  local sweep=(--nproc-per-node 2 -p min_bytes=8 -p max_bytes=512M -p step_factor=2 -p dtype=fp32 -p iters=200
               --warmup 5 --timeout 300)
  for op in all_reduce all_gather reduce_scatter all_to_all; do
    step "$op eager vs nccl-tests -t 2 -g 1 ($PERFSUITE_NCCL_TESTS_ENV)" pcheck "collectives.$op" "${sweep[@]}" "$@"
  done
  step "all_gather eager vs nccl-tests -t 2 -g 1 (direct pointers allowed)" pcheck_direct collectives.all_gather \
       "${sweep[@]}" "$@"
  step "all_reduce graph vs nccl-tests -G 1" pcheck collectives.all_reduce --cuda-graph \
       --nproc-per-node 2 -p min_bytes=8 -p max_bytes=64M -p iters=20 --warmup 5 --timeout 300 "$@"
  step "plain torch.distributed loop" python3 -m torch.distributed.run --nproc-per-node 2 \
       bench/dist_loop.py --max-bytes 65536 --iters 200 --out "$OUT/dist_loop.json"
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

run_x2b() {
  step build-nccl-tests build_nccl_tests
  [ -x /tmp/nccl-tests-build/all_reduce_perf ] || { echo "nccl-tests did not build: stopping"; return 1; }
  export PERFSUITE_NCCL_TESTS=/tmp/nccl-tests-build
  local graph=(--cuda-graph --nproc-per-node 2 -p min_bytes=8 -p max_bytes=1M -p iters=20 --warmup 5 --timeout 120)
  for op in all_reduce all_gather reduce_scatter all_to_all; do
    step "$op graph vs nccl-tests -G 1 (NCCL_GRAPH_MIXING_SUPPORT=0 both sides)" pcheck "collectives.$op" "${graph[@]}" "$@"
  done
  step "all_reduce graph vs nccl-tests -G 1 (NCCL_GRAPH_MIXING_SUPPORT=1 both sides)" \
       env NCCL_GRAPH_MIXING_SUPPORT=1 python3 -m suite crosscheck collectives.all_reduce "${graph[@]}" --device cuda "$@"
  step "all_to_all probe" bash -c "NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=COLL timeout -k 10 120 python3 -m \
       torch.distributed.run --nproc-per-node 2 bench/alltoall_probe.py --out $OUT/alltoall_probe.json \
       > /tmp/a2a.txt 2>&1; rc=\$?; grep -E '^all_to_all|failed' /tmp/a2a.txt;
       echo 'NCCL calls logged, both ranks, by kind:'; grep -oE 'NCCL INFO (AlltoAll|Send|Recv|AllGather|AllReduce)[^:]*: opCount [0-9a-f]+' /tmp/a2a.txt | awk '{print \$3}' | sort | uniq -c;
       exit \$rc"
  local sweep=(--nproc-per-node 2 -p min_bytes=8 -p max_bytes=512M -p step_factor=2 -p dtype=fp32
               -p iters="${ITERS:-500}" -p repeats="${REPEATS:-7}" --warmup 5 --timeout 240)
  for op in all_reduce all_gather reduce_scatter all_to_all; do
    step "$op eager vs nccl-tests -t 2 -g 1 ($PERFSUITE_NCCL_TESTS_ENV)" pcheck "collectives.$op" "${sweep[@]}" "$@"
  done
  echo; echo "== summary =="
  python3 bench/measure_summary.py x2 --since "$SINCE" || status=1
}

nccl_choices() {  # nccl_choices DIR: the lines of NCCL's logs in DIR that say what it chose, per side
  local side
  for side in suite tests; do
    echo "-- nccl-$side (lines by count, the host:pid:tid prefix cut)"
    grep -hE 'Bytes ->|nChannels|Channel 0[0-9]/|P2P Chunksize|CC |workFifo|NCCL_[A-Z_]+ set|comm 0x' \
      "$1"/nccl-$side.*.log | sed -E 's/^.*NCCL INFO //; s/0x[0-9a-f]+/0x../g' | sort | uniq -c | sort -rn | head -40
  done
}

run_x2c() {
  step build-nccl-tests build_nccl_tests
  [ "$status" = 0 ] || { echo "nccl-tests did not build or its first run failed: stopping"; return 1; }
  export PERFSUITE_NCCL_TESTS=/tmp/nccl-tests-build
  [ "${PROBES:-1}" = 0 ] || x2c_probes
  [ -z "${LAYOUT_PROBE:-}" ] || layout_probe
  SINCE=$(date -u +%Y-%m-%dT%H:%M:%S+00:00)  # the summary reads the acceptance runs only
  # the acceptance: every collective's eager sweep taking turns with nccl-tests
  local sweep=(--nproc-per-node 2 -p min_bytes=8 -p max_bytes=512M -p step_factor=2 -p dtype=fp32
               -p iters="${ITERS:-500}" -p repeats="${REPEATS:-3}" --rounds "${ROUNDS:-3}" --warmup 5 --timeout 300)
  local op
  for op in ${OPS:-all_reduce all_gather reduce_scatter all_to_all}; do
    step "$op eager vs nccl-tests $NCCL_TESTS_LAYOUT, ${ROUNDS:-3} rounds" pcheck "collectives.$op" \
         "${sweep[@]}" "$@"
  done
  # graph mode below 64 KiB (GRAPH_OPS), taking turns with nccl-tests -G 1 as well
  for op in ${GRAPH_OPS:-}; do
    step "$op graph vs nccl-tests -G 1, ${ROUNDS:-3} rounds" pcheck "collectives.$op" --cuda-graph --nproc-per-node 2 \
         -p min_bytes=8 -p max_bytes=1M -p iters=20 --rounds "${ROUNDS:-3}" --warmup 5 --timeout 200 "$@"
  done
  # nccl-tests' host: the time to issue its calls (-C 1, before the stream is synchronised)
  # beside its usual figure (-C 0), where it and the suite part (1-8 MiB)
  if [ -n "${CPUTIME_PROBE:-}" ]; then
    local bin c
    for bin in reduce_scatter_perf all_gather_perf; do
      for c in 0 1; do
        step "nccl-tests $bin -C $c" bash -c "env NCCL_P2P_DIRECT_DISABLE=1 /tmp/nccl-tests-build/$bin -b 1M -e 8M \
             -f 2 -n 500 -w 5 -t 2 -g 1 -d float -N 3 -C $c | grep -E '^ +[0-9]+ |cputime|time'"
      done
    done
  fi
  local loop=()
  if [[ " ${OPS:-all_reduce} " == *" all_reduce "* ]]; then
    step "plain torch.distributed loop" python3 -m torch.distributed.run --nproc-per-node 2 \
         bench/dist_loop.py --max-bytes 65536 --iters "${ITERS:-500}" --repeats 9 --out "$OUT/dist_loop.json"
    loop=(--dist-loop "$OUT/dist_loop.json")
  fi
  echo; echo "== summary =="
  python3 bench/measure_summary.py x2 --since "$SINCE" "${loop[@]}" || status=1
}

layout_probe() {  # nccl-tests' own figures at 256 KiB-32 MiB as one process per GPU and as a thread per GPU
  [ -n "${PERFSUITE_NCCL_TESTS_MPIRUN:-}" ] || { echo "layout probe: no MPI build (carry .ref/mpich-*.whl)"; return 1; }
  local bin flags=(-b 256K -e 32M -f 2 -n 500 -w 5 -d float -N 3)
  for bin in all_reduce_perf all_gather_perf alltoall_perf; do
    step "nccl-tests $bin, mpiexec -n 2 -g 1" bash -c "$PERFSUITE_NCCL_TESTS_MPIRUN -n 2 /tmp/nccl-tests-build/$bin \
         ${flags[*]} -g 1 | grep -E '^ +[0-9]+ |Rank|nThread'"
    step "nccl-tests $bin, mpiexec -n 2 -g 1, host issue time (-C 1)" bash -c "$PERFSUITE_NCCL_TESTS_MPIRUN -n 2 \
         /tmp/nccl-tests-build/$bin ${flags[*]} -g 1 -C 1 | grep -E '^ +[0-9]+ '"
    step "nccl-tests $bin, -t 2 -g 1 NCCL_P2P_DIRECT_DISABLE=1" bash -c "env NCCL_P2P_DIRECT_DISABLE=1 \
         /tmp/nccl-tests-build/$bin ${flags[*]} -t 2 -g 1 | grep -E '^ +[0-9]+ '"
  done
}

x2c_probes() {
  local probe=/tmp/x2c-probes
  mkdir -p $probe
  gsp() {  # gsp [VAR=VALUE ...] ARGS: the graph sizes probe on both GPUs, bounded
    local envs=()
    while [[ "${1:-}" == *=* ]]; do envs+=("$1"); shift; done
    env "${envs[@]}" timeout -k 10 120 python3 -m torch.distributed.run --nproc-per-node 2 \
      bench/graph_sizes_probe.py "$@"
  }
  step "graph sizes: all_gather" gsp --op all_gather --out $probe/graph-default
  step "graph sizes: all_reduce" gsp --op all_reduce --out $probe/graph-default
  step "graph sizes: all_gather, NCCL_RUNTIME_CONNECT=0" gsp NCCL_RUNTIME_CONNECT=0 --op all_gather \
       --out $probe/graph-connect0
  step "graph sizes: all_gather, captured twice" gsp --op all_gather --recapture --out $probe/graph-recapture
  step "graph sizes: all_gather, in place first" gsp --op all_gather --modes ip,oop --out $probe/graph-ipfirst
  # NCCL's log of each side for the same calls: channels, algorithm and protocol (TUNING)
  local log=(NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,TUNING,ENV)
  step "NCCL log: suite reduce_scatter 1-4 MiB" env "${log[@]}" NCCL_DEBUG_FILE=$probe/nccl-suite.%p.log \
       python3 -m suite run collectives.reduce_scatter --device cuda --nproc-per-node 2 -p min_bytes=1M \
       -p max_bytes=4M -p iters=20 -p repeats=1 --warmup 5
  step "NCCL log: nccl-tests reduce_scatter 1-4 MiB" env "${log[@]}" NCCL_DEBUG_FILE=$probe/nccl-tests.%p.log \
       NCCL_P2P_DIRECT_DISABLE=1 /tmp/nccl-tests-build/reduce_scatter_perf -b 1M -e 4M -f 2 -t 2 -g 1 -n 20 -w 5
  step "NCCL log: what each side chose" nccl_choices $probe
  # nccl-tests as the cross-check runs it, then with per-iteration events, graph mixing off, one thread
  for bin in reduce_scatter_perf alltoall_perf; do
    for variant in "-t 2 -g 1" "-t 2 -g 1 -I 1" "-t 2 -g 1 NCCL_GRAPH_MIXING_SUPPORT=0" "-g 2"; do
      local flags=${variant%% NCCL_*} envs=""
      [[ "$variant" == *NCCL_* ]] && envs=${variant#* NCCL_} && envs="NCCL_$envs"
      step "nccl-tests $bin $variant" bash -c "env NCCL_P2P_DIRECT_DISABLE=1 $envs /tmp/nccl-tests-build/$bin \
           -b 1M -e 32M -f 2 -n 500 -w 5 $flags -d float -N 3 | grep -vE '^#? *$'"
    done
  done
  # the suite's hold against Python's own issuing, same sizes
  for timing in loop host_loop; do
    step "suite reduce_scatter 1-32 MiB timing=$timing" prun collectives.reduce_scatter --nproc-per-node 2 \
         -p min_bytes=1M -p max_bytes=32M -p iters=500 -p repeats=3 -p timing=$timing --warmup 5
  done
  tar -C /tmp -czf "$OUT/x2c-probes.tar.gz" x2c-probes
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
