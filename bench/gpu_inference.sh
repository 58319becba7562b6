#!/usr/bin/env bash
# GPU evidence for the inference workloads (workloads/inference), through the suite's own CLI,
# on one GPU (nvidia-h200 or an H100). Carry .parts (the core wheels with LoadGen, see
# bench/gpu_env.sh), then:
#   bash bench/gpu_inference.sh [extra 'perfsuite run' options]
# inference.generate, a Llama-style decoder of 134M parameters (12 layers, hidden 768, vocab
# 32000) in bf16, generating 32 tokens greedily from 64 prompts of 32-256 tokens, under MLPerf
# LoadGen with token latencies, twice: cache=dynamic (eager decoding) and cache=static
# (transformers compiles decoding: torch.compile reduce-overhead, CUDA graphs). Each run:
# accuracy mode per scenario (every prompt once, tokens vs a float32 run), SingleStream,
# Server with find_peak (highest VALID target QPS, <= 5 LoadGen runs from 16 QPS; TTFT <= 2 s,
# TPOT <= 200 ms), Offline; 4 s minimum per LoadGen run and the p90 as the target percentile
# (a p99 needs >= 662 queries per run before early stopping can pass: minutes per step).
# Prints a table: Offline tokens/s, Server peak valid QPS with p99 TTFT/TPOT, SingleStream p90
# latency, tokens per joule, accuracy. $OUT gets gpu_inference.log, the records as JSON, and
# records-inference.tar.gz (records, MLLOG, LoadGen's logs under records/artifacts/<run_id>/).
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
: "${OUT:=$PWD/.device-out/gpu_inference}"
mkdir -p "$OUT"
export PERFSUITE_DB=${PERFSUITE_DB:-sqlite:////tmp/perfsuite/inference.db}
export PERFSUITE_RECORDS=${PERFSUITE_RECORDS:-/tmp/perfsuite/inference-records}
source bench/gpu_env.sh
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
# The 134M model is the workload's default size; these set the LoadGen run lengths and the search.
# accuracy_threshold: random weights give near-tied logits, and bf16 flips some greedy choices
# (then the rest of that sequence differs): on the CPU, bf16 vs float32 matched 0.84 of 256 tokens.
GEN=(-p scenarios=SingleStream,Server,Offline -p dtype=bf16 -p num_samples=64 -p min_prompt=32
     -p max_prompt=256 -p new_tokens=32 -p min_duration_ms=4000 -p min_query_count=64
     -p target_latency_percentile=0.9 -p max_batch=32 -p max_wait_ms=5 -p find_peak=true -p peak_steps=5
     -p target_qps=16 -p ttft_ms=2000 -p tpot_ms=200 -p accuracy_threshold=0.6 -p query_timeout_s=60)

main() {
python3 -c 'import torch, transformers, mlperf_loadgen; print("torch", torch.__version__, "transformers", transformers.__version__, "|", torch.cuda.get_device_name())' || return 1
# Each run is killed (and recorded as a timeout) past its limit, so the whole script stays
# under 8 minutes: dynamic is expected near 1.5 min, static near 2.5 (compiling included).
for cache in dynamic static; do
  limit=$([ "$cache" = static ] && echo 270 || echo 210)
  echo; echo "== inference.generate cache=$cache =="
  python3 -m suite run inference.generate "${GEN[@]}" -p cache=$cache --device cuda --seed 1 --timeout "$limit" \
    --json "$@" > "$OUT/generate-$cache.json"
  rc=$?; echo "-- cache=$cache: exit $rc"; [ "$rc" = 0 ] || status=1
done

echo; echo "== summary =="
python3 - "$OUT"/generate-dynamic.json "$OUT"/generate-static.json <<'PY' || status=1
import json, sys

def metric(rec, case, name):
    for m in rec["metrics"]:
        if m["case"] == case and m["name"] == name:
            return m["value"]
    return None

def fmt(v, spec):
    return f"{'-':>{spec.split('.')[0]}}" if v is None else format(v, spec)

ok = True
print(f"{'cache':8} {'status':8} {'verif':7} {'Offline tok/s':>13} {'Server peak QPS':>15} {'p99 TTFT ms':>11} "
      f"{'p99 TPOT ms':>11} {'SS p90 ms':>9} {'Offline tok/J':>13} {'Server tok/J':>12} {'token match':>11}")
for path in sys.argv[1:]:
    try:
        (rec,) = json.load(open(path))
    except (OSError, ValueError) as exc:
        print(f"{path}: no record ({exc})"); ok = False; continue
    p = rec["workload"]["params"]
    ok &= rec["status"] == "success" and rec["verification"]["status"] == "passed"
    acc = [metric(rec, s, "accuracy_score") for s in ("SingleStream", "Server", "Offline")]
    acc = min((a for a in acc if a is not None), default=None)
    print(f"{p['cache']:8} {rec['status']:8} {rec['verification']['status']:7} "
          f"{fmt(metric(rec, 'Offline', 'tokens_per_s'), '13.0f')} {fmt(metric(rec, 'Server', 'peak_valid_qps'), '15.2f')} "
          f"{fmt(metric(rec, 'Server', 'ttft_p99_ms'), '11.1f')} {fmt(metric(rec, 'Server', 'tpot_p99_ms'), '11.2f')} "
          f"{fmt(metric(rec, 'SingleStream', 'latency_p90_ms'), '9.1f')} {fmt(metric(rec, 'Offline', 'tokens_per_j'), '13.1f')} "
          f"{fmt(metric(rec, 'Server', 'tokens_per_j'), '12.1f')} {fmt(acc, '11.3f')}")
    if rec["error"]:
        print(f"   error: {rec['error']}")
    for c in rec["verification"]["checks"]:
        if not c["passed"]:
            print(f"   FAILED {c['label']}: {c['detail']}")
    inf = rec["details"].get("inference", {})
    peak = inf.get("scenarios", {}).get("Server", {}).get("find_peak")
    if peak:
        steps = ", ".join(f"{s['target_qps']:g}{'' if s['valid'] else '(INVALID)'}" for s in peak["steps"])
        print(f"   find_peak steps (QPS): {steps}")
    print(f"   model {rec['details'].get('model')}, warm-up {inf.get('warm_up_s', 0):.1f} s, artifacts {inf.get('artifact_dir')}")
raise SystemExit(0 if ok else 1)
PY
pack_records inference
echo "exit status: $status (any failed run or failed verification: 1)"
return $status
}

main "$@" 2>&1 | tee "$OUT/gpu_inference.log"
exit "${PIPESTATUS[0]}"
