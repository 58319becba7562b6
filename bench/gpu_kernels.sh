#!/usr/bin/env bash
# GPU evidence for the built-in kernel workloads (workloads/kernels), in one go, through the
# suite's own CLI on a CUDA GPU. Carry .parts (the core wheels, see bench/gpu_env.sh), then:
#   bash bench/gpu_kernels.sh [extra 'perfsuite run' options, e.g. --repeat 3]
#  1. kernels.ceilings (this GPU's roof), then kernels.gemm at 8192^3 in fp32/tf32/bf16/fp16/fp8,
#     kernels.memory copy + triad (1 GiB buffers), kernels.attention (B8 H16 S4096 D128 bf16,
#     every SDPA backend, non-causal and causal), kernels.fusion (eager / torch.compile / the
#     perfsuite-triton kernel), kernels.launch (eager / CUDA graph); records stored in a
#     throwaway registry and packed into $OUT;
#  2. pytest -m gpu tests/test_kernels_gpu.py (verification on the GPU, broken kernels caught);
#  3. bench/crosscheck_gpu.py: suite timing vs triton.testing.do_bench (GEMM, within 3%) and
#     vs plain CUDA events (copy, within 5%);
#  4. perfsuite roofline: table, $OUT/roofline.png and $OUT/roofline.json;
#  5. a summary table with the issue's targets: attention fastest >= 45% of the bf16 matrix
#     ceiling, fusion triton and compile >= 70% of the memory ceiling, graph launch < 2 us.
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
export PYTHONPATH=$PWD/plugins/perfsuite-triton:$PYTHONPATH  # fusion's triton case imports it
unset TRITON_INTERPRET
status=0
step() {  # step NAME CMD...: run, report its exit status, remember any failure
  local name=$1; shift
  echo; echo "== $name =="
  "$@"; local rc=$?
  echo "-- $name: exit $rc"
  [ "$rc" = 0 ] || status=1
}
prun() { python3 -m suite run "$@" --device cuda; }

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

echo; echo "== summary =="
python3 - <<'EOF' || status=1
import datetime as dt
import os

from registry import open_registry

TARGETS = {  # workload -> (cases that must meet it, fraction of their ceiling, how many must)
    "kernels.attention": (None, 0.45, "fastest"),
    "kernels.fusion": (("triton", "compile"), 0.70, "each"),
}
with open_registry() as reg:
    since = dt.datetime.fromisoformat(os.environ["KERNELS_SINCE"])
    rows = [r for r in reg.results(since=since, limit=None) if r["workload"].startswith("kernels.")]
    records = [reg.get(r["run_id"]) for r in reversed(rows)]
ok = True
print(f"{'workload':18} {'variant':16} {'case':12} {'ms':>9} {'figure':>20} {'of ceiling':>11} {'check':>14}")
for rec in records:
    name, params = rec["workload"]["name"], rec["workload"]["params"]
    variant = "causal" if params.get("causal") else ""
    if rec["status"] != "success":
        print(f"{name:18} {variant:16} {rec['status']}: {rec['error']}")
        ok = False
        continue
    checks = {c["label"]: c for c in rec["verification"]["checks"]}
    cases = {}
    for m in rec["metrics"]:
        cases.setdefault(m["case"], {})[m["name"]] = m
    fractions = {}
    for case, ms in cases.items():
        fig = ms.get("tflops") or ms.get("gbps") or ms.get("us_per_launch") or ms.get("items_per_s")
        roof = fig.get("roofline") or {}
        frac = roof.get("fraction")
        fractions[case] = frac
        c = checks.get(case)
        check = "-" if c is None else f"{'pass' if c['passed'] else 'FAIL'} {c['error']:.1e}"
        ok &= c is None or c["passed"]
        print(f"{name:18} {variant:16} {case:12} {ms['time_ms']['value']:9.3f} {fig['value']:12.2f} {fig['unit']:7}"
              f" {'' if frac is None else f'{frac:.1%}':>11} {check:>14}")
    for case, reason in rec["details"].get("skipped_cases", {}).items():
        print(f"{'':18} {variant:16} {case:12} skipped: {reason[:150]}")
    if name in TARGETS:
        want, floor, how = TARGETS[name]
        got = {k: v for k, v in fractions.items() if want is None or k in want}
        if how == "fastest":
            best = max((v for v in got.values() if v is not None), default=None)
            met = best is not None and best >= floor
            print(f"  TARGET {name} {variant}: fastest backend {best if best is None else f'{best:.1%}'} "
                  f"of the bf16 matrix ceiling, >= {floor:.0%}: {'met' if met else 'NOT met'}")
        else:
            met = all(got.get(k) is not None and got[k] >= floor for k in want)
            shown = ", ".join(f"{k} {got.get(k) if got.get(k) is None else f'{got[k]:.1%}'}" for k in want)
            print(f"  TARGET {name}: {shown} of the memory ceiling, each >= {floor:.0%}: {'met' if met else 'NOT met'}")
    if name == "kernels.launch" and "graph" in cases:
        us = cases["graph"]["us_per_launch"]["value"]
        print(f"  TARGET kernels.launch: graph {us:.2f} us per launch < 2 us: {'met' if us < 2 else 'NOT met'}"
              f" (eager {cases['eager']['us_per_launch']['value']:.2f} us)")
raise SystemExit(0 if ok else 1)
EOF
pack_records kernels
echo "exit status: $status (any failed step or failed verification: 1)"
return $status
}

main "$@" 2>&1 | tee "$OUT/gpu_kernels.log"
exit "${PIPESTATUS[0]}"
