#!/usr/bin/env bash
# GPU evidence for inference.serving (workloads/inference/serving.py), through the suite's CLI,
# on one GPU (nvidia-h100-x1 or nvidia-h200): `transformers serve` with continuous batching in
# bf16 on a Llama of 120.8M parameters written from a config (12 layers, hidden 768, 12 heads,
# feed-forward 3072, the 4,902-word vocabulary of the synthetic prompts; no download), started
# by the suite, stopped with the run; prompts of 256 +- 64 words asking for 64 tokens each.
#
# Carry .parts (the core wheels, bench/gpu_env.sh) and .parts-serving (what `transformers serve`
# and the client need and that machine lacks, 12 MB), made here with
#   echo '/.parts-serving/' >> .git/info/exclude
#   bash ../shared/device/split-wheels.sh .parts-serving -- fastapi==0.165.0 starlette==1.10.0 \
#     uvicorn==0.54.0 openai==3.54.0 httpx2==2.16.2 httpcore2==2.16.2 jiter==0.19.0 sniffio==1.3.1 \
#     truststore==0.10.5 opentelemetry-api==1.45.2 pydantic==2.14.3 pydantic-core==2.50.4 \
#     annotated-types==0.8.0 typing-inspection==0.4.5 typing-extensions==4.16.0 httptools==0.9.0
# then, one call each (each starts its own server and stays under 10 minutes):
#   bash bench/gpu_serving.sh loadgen     # LoadGen SingleStream, Server (8 QPS), Offline; p90, >= 64 queries
#   bash bench/gpu_serving.sh sweep       # open-loop rates 2..128/s (64 requests each), find_peak from 4/s
#   bash bench/gpu_serving.sh crosscheck  # against AIPerf where carried (below), else the bare reference;
#                                         # 2 rounds of 128 requests, 16 in flight
# AIPerf there (optional): 68 wheels, 51 MiB, that machine lacks (aiperf==0.13.0 with its needs:
# `pip download aiperf==0.13.0` for cp312 manylinux less KINDS.md's list). With the tree at 43 MB
# a call carries about 20 MB more, so: split-wheels.sh .parts-aiperf 17 -- <that list>, three calls
# back to back, each `mkdir -p /tmp/aiperf-wh && tar -x -C /tmp/aiperf-wh -f .parts-aiperf/part-NN &&
# python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/aiperf-site /tmp/aiperf-wh/whl/*.whl`,
# then `crosscheck` in the next call finds /tmp/aiperf-site and runs AIPerf from it (python3 -m aiperf).
# Each prints `perfsuite show` of its record (LoadGen's verdicts, the latency-throughput table
# with TTFT/TPOT p50/p99 and goodput per rate, the peak within the SLOs) and the cross-check table;
# $OUT gets the log and records-<part>.tar.gz (records, MLLOG, server.log, LoadGen's logs, every
# request's row). The same runs as a plan: suite/plans/serving-gpu.toml.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
part=${1:-loadgen}
: "${OUT:=$PWD/.device-out/gpu_serving}"
mkdir -p "$OUT"
export PERFSUITE_DB=${PERFSUITE_DB:-sqlite:////tmp/perfsuite/serving.db}
export PERFSUITE_RECORDS=${PERFSUITE_RECORDS:-/tmp/perfsuite/serving-records}
source bench/gpu_env.sh
if [ ! -d /tmp/site/fastapi ]; then
  mkdir -p /tmp/whs && tar -x -C /tmp/whs -f .parts-serving/part-00
  python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site /tmp/whs/whl/*.whl
fi
export HF_HUB_OFFLINE=1 HF_HUB_DISABLE_UPDATE_CHECK=1
if [ -d /tmp/aiperf-site/aiperf ]; then  # AIPerf carried in earlier calls: its own path first
  mkdir -p /tmp/aiperf-bin
  printf '#!/bin/sh\nPYTHONPATH=/tmp/aiperf-site:/tmp/site exec python3 -m aiperf "$@"\n' > /tmp/aiperf-bin/aiperf
  chmod +x /tmp/aiperf-bin/aiperf
  export PERFSUITE_AIPERF=/tmp/aiperf-bin/aiperf
fi

SERVER='{python} -m transformers.cli.transformers serve {model_dir} --port {port} --host 127.0.0.1 --device cuda:0 --dtype bfloat16 --continuous-batching'
COMMON=(-p "server_command=$SERVER" -p build_model=true -p model_layers=12 -p model_hidden=768 -p model_heads=12
        -p model_intermediate=3072 -p num_prompts=512 -p input_tokens=256 -p input_stddev=64 -p output_tokens=64
        -p slo_ttft_ms=1000 -p slo_tpot_ms=100 -p goodput_target=0.9 -p error_budget=0.01 -p client_processes=2
        -p server_ready_timeout_s=300 -p request_timeout_s=120 -p stall_timeout_s=30 -p warmup_requests=8)

main() {
python3 -c 'import perfsuite' || { echo "perfsuite is not importable: bench/gpu_env.sh must put the checkout's package on the path" >&2; return 2; }
python3 -c 'import torch, transformers, mlperf_loadgen, httptools, fastapi, uvicorn, openai
from transformers.utils.import_utils import is_serve_available
assert is_serve_available(), "transformers serve is missing a dependency"
print("torch", torch.__version__, "transformers", transformers.__version__, "|", torch.cuda.get_device_name())' || return 1
case "$part" in
  loadgen)
    step "inference.serving: LoadGen SingleStream, Server, Offline" packed loadgen \
      python3 -m perfsuite run inference.serving "${COMMON[@]}" --device cuda \
        -p scenarios=SingleStream,Server,Offline -p target_qps=8 -p target_latency_percentile=0.9 \
        -p min_query_count=64 -p min_duration_ms=10000 --seed 1 --timeout 570 ;;
  sweep)
    step "inference.serving: request-rate sweep to saturation, find_peak" packed sweep \
      python3 -m perfsuite run inference.serving "${COMMON[@]}" --device cuda -p scenarios= \
        -p rates=2,4,8,16,32,64,128 -p sweep_requests=64 -p find_peak=true -p peak_start_rps=4 -p peak_steps=5 \
        --seed 1 --timeout 570 ;;
  crosscheck)
    step "inference.serving: cross-check" packed crosscheck \
      python3 -m perfsuite crosscheck inference.serving "${COMMON[@]}" -p scenarios= -p concurrencies=1,16 \
        -p sweep_requests=128 -p crosscheck_concurrency=16 -p crosscheck_requests=128 --rounds 2 \
        --device cuda --seed 1 --timeout 570 ;;
  *) echo "usage: bench/gpu_serving.sh loadgen|sweep|crosscheck" >&2; return 2 ;;
esac
run=$(python3 - <<'PY'
from perfsuite.registry import open_registry
with open_registry() as reg:
    print(reg.results(limit=1)[0]["run_id"])
PY
)
python3 -m perfsuite show "$run" || status=1
return $status
}
main 2>&1 | tee "$OUT/gpu_serving-$part.log"
exit "${PIPESTATUS[0]}"
