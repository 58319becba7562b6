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
#  6. the nccl-tests tables (perfsuite show) and a summary: per collective peak and average
#     busbw, #wrong, and the ratio of all_reduce's peak busbw to the measured p2p copy.
# NVLink multicast stays off (NCCL_NVLS_ENABLE=0, TORCH_SYMM_MEM_DISABLE_MULTICAST=1,
# NVSHMEM_DISABLE_NVLS=1): exported here and set again by the launcher for every rank.
# $OUT gets: gpu_collectives.log, summary.json, records-collectives.tar.gz.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
: "${OUT:=$PWD/.device-out/gpu_collectives}"
mkdir -p "$OUT"
source bench/gpu_env.sh
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
status=0
step() {  # step NAME CMD...: run, report its exit status, remember any failure
  local name=$1; shift
  echo; echo "== $name =="
  local t0=$SECONDS
  "$@"; local rc=$?
  echo "-- $name: exit $rc ($((SECONDS - t0)) s)"
  [ "$rc" = 0 ] || status=1
}
prun() { python3 -m suite run "$@" --device cuda; }
SWEEP=(-p min_bytes=8 -p max_bytes=1G -p step_factor=2 -p dtype=fp32 -p iters=20 --warmup 5)

main() {
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

echo; echo "== nccl-tests tables =="
python3 - <<'EOF'
import subprocess, sys
from registry import open_registry

with open_registry() as reg:
    rows = [r for r in reg.results(limit=200) if r["workload"].startswith("collectives.")]
for r in reversed(rows):
    if r["workload"] != "collectives.copy_bandwidth" and r["status"] == "success":
        subprocess.run([sys.executable, "-m", "suite", "show", r["run_id"]], check=False)
EOF

echo; echo "== summary =="
python3 - "$OUT/summary.json" <<'EOF' || status=1
import json, sys
from registry import open_registry

with open_registry() as reg:
    rows = [r for r in reg.results(limit=200) if r["workload"].startswith("collectives.")]
    records = [reg.get(r["run_id"]) for r in reversed(rows)]
ok = True
p2p = None
summary = {"collectives": []}
for rec in records:
    if rec["workload"]["name"] == "collectives.copy_bandwidth" and rec["status"] == "success":
        figs = {m["case"]: m["value"] for m in rec["metrics"] if m["name"] == "gbps"}
        p2p = figs.get("p2p")
        summary["copy_bandwidth"] = {"gbps": figs, "p2p_access": rec["details"].get("p2p_access")}
        print(f"copy bandwidth: p2p {figs.get('p2p', float('nan')):.1f} GB/s, h2d.pinned "
              f"{figs.get('h2d.pinned', float('nan')):.1f} GB/s, peer access {rec['details'].get('p2p_access')}")
print(f"{'collective':16} {'graph':5} {'mode':12} {'peak busbw GB/s':>15} {'at size':>12} {'avg busbw':>10} "
      f"{'#wrong':>7} {'NCCL':>8} {'verified':>9}")
for rec in records:
    name = rec["workload"]["name"]
    if name == "collectives.copy_bandwidth":
        continue
    if rec["status"] != "success":
        print(f"{name:16} {rec['status']}: {rec['error']}")
        ok = False
        continue
    d = rec["details"]
    graph = "yes" if d["cuda_graph"] else "no"
    ok &= rec["verification"]["status"] == "passed"
    for mode, peak in d["peak"].items():
        label = {"oop": "out-of-place", "ip": "in-place"}[mode]
        avg = next(m["value"] for m in rec["metrics"] if m["case"] == label and m["name"] == "avg_busbw_gbps")
        print(f"{d['collective']:16} {graph:5} {label:12} {peak['busbw_gbps']:15.1f} {peak['size_bytes']:12d} "
              f"{avg:10.1f} {d.get('wrong_total', 'N/A')!s:>7} {d['nccl_version']!s:>8} "
              f"{rec['verification']['status']:>9}")
        entry = {"collective": d["collective"], "cuda_graph": d["cuda_graph"], "mode": label,
                 "peak_busbw_gbps": peak["busbw_gbps"], "peak_size_bytes": peak["size_bytes"],
                 "avg_busbw_gbps": avg, "wrong_total": d.get("wrong_total"), "nccl_version": d["nccl_version"],
                 "max_bytes": rec["workload"]["params"]["max_bytes"], "run_id": rec["run_id"]}
        summary["collectives"].append(entry)
full_ar = [e for e in summary["collectives"] if e["collective"] == "all_reduce" and not e["cuda_graph"]]
if full_ar and p2p:
    best = max(full_ar, key=lambda e: e["peak_busbw_gbps"])
    ratio = best["peak_busbw_gbps"] / p2p
    summary["all_reduce_peak_busbw_over_p2p"] = ratio
    print(f"\nall_reduce peak busbw {best['peak_busbw_gbps']:.1f} GB/s ({best['mode']}, "
          f"{best['peak_size_bytes']} B) / p2p copy {p2p:.1f} GB/s = {ratio:.2f}")
else:
    print("\nno all_reduce / p2p pair to compare")
    ok = False
json.dump(summary, open(sys.argv[1], "w"), indent=1)
raise SystemExit(0 if ok else 1)
EOF
pack_records collectives
echo "exit status: $status (any failed step or failed verification: 1)"
return $status
}

main "$@" 2>&1 | tee "$OUT/gpu_collectives.log"
exit "${PIPESTATUS[0]}"
