#!/usr/bin/env bash
# GPU evidence for the run path (issues 7 and 8), through the CLI on CUDA. Carry .parts (the
# core wheels, see bench/gpu_env.sh), then on nvidia-h200 (one GPU: steps 1-3) or
# nvidia-h200-x2 (adds steps 4-5, NCCL through torchrun):
#   bash bench/gpu_run_path.sh
#  1. kernels.ceilings --quick, then kernels.memory --quick: the memory ceiling read from the
#     registry BEFORE the run (by device key) gives the copy case a roofline fraction;
#  2. kernels.memory -p size_bytes=999999999G: refused before it starts, naming the GPU's free
#     memory (NVML), exit 2;
#  3. kill -9 of 'perfsuite run kernels.gemm' mid-measurement (single process): no worker and
#     no /tmp/perfsuite-* folder of it 5 s later;
#  4. (2 GPUs) collectives.all_reduce --quick over NCCL: its record lists iterations,
#     min_time_s, max_iterations and l2_flush as not applied;
#  5. (2 GPUs) kill -9 of a hanging NCCL all_reduce (inject=hang): no torchrun, no rank, no
#     folder 5 s later.
# $OUT gets gpu_run_path.log and records-run_path.tar.gz. Runs in about 3-4 minutes.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
: "${OUT:=$PWD/.device-out/gpu_run_path}"
mkdir -p "$OUT"
export PERFSUITE_DB=${PERFSUITE_DB:-sqlite:////tmp/perfsuite/run_path.db}
export PERFSUITE_RECORDS=${PERFSUITE_RECORDS:-/tmp/perfsuite/run_path-records}
source bench/gpu_env.sh
declare -A RESULT
verdict() {  # verdict NAME OK(0/1) TEXT
  RESULT[$1]="$( [ "$2" = 0 ] && echo PASS || echo FAIL ): $3"
  [ "$2" = 0 ] || status=1
}
ours() {  # processes of this script's launches still alive (worker, torchrun, ranks)
  pgrep -f "perfsuite.engine.worker|perfsuite.engine.lifeline" | while read -r pid; do
    tr '\0' '\n' < /proc/$pid/environ 2>/dev/null | grep -qx "PERFSUITE_DB=$PERFSUITE_DB" && echo "$pid"
  done
}
kill9_check() {  # kill9_check NAME WAIT_S CMD...: start CMD, wait, kill -9 it, look 5 s later
  local name=$1 wait_s=$2; shift 2
  local before; before=$(ls -d /tmp/perfsuite-* 2>/dev/null | sort)
  "$@" > /dev/null 2>&1 &
  local pid=$!
  sleep "$wait_s"
  local during; during=$(ours | wc -l)
  kill -9 "$pid"; wait "$pid" 2>/dev/null
  sleep 5
  local left; left=$(ours | wc -l)
  local dirs; dirs=$(comm -13 <(echo "$before") <(ls -d /tmp/perfsuite-* 2>/dev/null | sort) | wc -l)
  [ "$during" -gt 0 ] && [ "$left" = 0 ] && [ "$dirs" = 0 ]
  verdict "$name" $? "$during process(es) measuring before kill -9; $left left and $dirs new folder(s) 5 s after"
  ours | xargs -r kill -9  # never leave a GPU busy for the next script
}

main() {
python3 -c 'import torch; print("torch", torch.__version__, "|", torch.cuda.get_device_name(), "x", torch.cuda.device_count())'
echo "== 1. ceilings before the run =="
python3 -m suite run kernels.ceilings kernels.memory --quick --device cuda --json > "$OUT/step1.json"
python3 - "$OUT/step1.json" <<'PY'
import json, sys
recs = {r["workload"]["name"]: r for r in json.load(open(sys.argv[1]))}
m = recs["kernels.memory"]
frac = [x["roofline"]["fraction"] for x in m["metrics"] if x["name"] == "gbps" and x["roofline"]]
print("memory status", m["status"], "roofline fractions", frac, "reasons",
      [x["roofline"]["reason"] for x in m["metrics"] if x["roofline"]])
raise SystemExit(0 if m["status"] == "success" and frac and all(f is not None for f in frac) else 1)
PY
verdict ceilings-read-before-run $? "kernels.memory --quick got roofline fractions from the ceilings stored just before"

echo "== 2. oversized refused =="
msg=$(python3 -m suite run kernels.memory -p size_bytes=999999999G --device cuda 2>&1); rc=$?
echo "$msg"
[ "$rc" = 2 ] && echo "$msg" | grep -q "of GPU memory per rank, more than the"
verdict oversized-refused $? "exit $rc: ${msg:0:150}"

echo "== 3. kill -9 of a single-process GEMM run =="
kill9_check kill9-single 25 python3 -m suite run kernels.gemm --device cuda --min-time 120 --timeout 600

if [ "$(python3 -c 'import torch; print(torch.cuda.device_count())')" -ge 2 ]; then
  echo "== 4. collectives record states the controls applied =="
  python3 -m suite run collectives.all_reduce --quick --device cuda --nproc-per-node 2 --json > "$OUT/step5.json"
  python3 - "$OUT/step5.json" <<'PY'
import json, sys
(r,) = json.load(open(sys.argv[1]))
c = r["controls"]
print("status", r["status"], "not_applied", c["not_applied"], "warmup", c["warmup"], "iterations", c["iterations"])
raise SystemExit(0 if r["status"] == "success" and c["not_applied"] == ["iterations", "min_time_s", "max_iterations", "l2_flush"] else 1)
PY
  verdict collectives-controls $? "all_reduce over NCCL: not_applied lists the four controls the sweep ignores"
  echo "== 5. kill -9 of a hanging NCCL run =="
  kill9_check kill9-torchrun 40 python3 -m suite run collectives.all_reduce --quick --device cuda --nproc-per-node 2 \
    -p inject=hang -p inject_rank=1 --timeout 600
else
  RESULT[collectives-controls]="SKIP: one GPU"; RESULT[kill9-torchrun]="SKIP: one GPU"
fi

echo; echo "== summary =="
for k in ceilings-read-before-run oversized-refused kill9-single collectives-controls kill9-torchrun; do
  printf '%-26s %s\n' "$k" "${RESULT[$k]:-not run}"
done
pack_records run_path
echo "exit status: $status"
return $status
}

main "$@" 2>&1 | tee "$OUT/gpu_run_path.log"
exit "${PIPESTATUS[0]}"
