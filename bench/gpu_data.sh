#!/usr/bin/env bash
# GPU evidence for the data workloads (workloads/data), in one go, through the suite's own
# CLI on one CUDA GPU (nvidia-h200). Carry .parts (part-00: the core wheels, see
# bench/gpu_env.sh; plus scikit-image's cp312 wheel, whose sample photographs the JPEG data
# set is made from). DALI is used when PERFSUITE_DALI=1 and /tmp/site already holds it
# (carried in earlier calls); without it the DALI paths are skipped with the reason.
#   PERFSUITE_DALI=1 bash bench/gpu_data.sh [extra 'perfsuite run' options]
#  1. kernels.ceilings: this GPU's measured h2d.pinned link ceiling;
#  2. data.image_pipeline: 2,048 JPEGs of 500x375 -> 224x224, batch 64, every path side by side;
#  3. bench/dali_reference.py: the same DALI pipelines in a bare DALI loop (the reference);
#  4. data.host_to_device: pinned vs pageable, 64 KiB..1 GiB, 1 and 4 streams, % of the ceiling;
#  5. data.storage_read: 16 x 64 MiB .npy shards per path, GDS status and cuFile's reason;
#  6. data.loader_stall: share of a step (8 bf16 8192^3 matmuls) waiting for data, per path;
#  7. pytest -m gpu tests/test_data_gpu.py; 8. the summary table with the issue's targets.
# $OUT gets: gpu_data.log, dali_reference.json, records-data.tar.gz.
#   DALI_ROUNDS=N PERFSUITE_DALI=1 bash bench/gpu_data.sh   # only the DALI cross-check: N rounds,
#     each data.image_pipeline (DALI paths) and the bare loop, in turn first, DALI_EPOCHS (8) timed epochs each;
#     the medians compared (data_summary.py)
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
: "${OUT:=$PWD/.device-out/gpu_data}"
mkdir -p "$OUT"
export PERFSUITE_DB=${PERFSUITE_DB:-sqlite:////tmp/perfsuite/data.db}
export PERFSUITE_RECORDS=${PERFSUITE_RECORDS:-/tmp/perfsuite/data-records}
export PERFSUITE_CACHE=${PERFSUITE_CACHE:-/tmp/perfsuite/cache}
source bench/gpu_env.sh
if ! python3 -c 'import importlib.util as u, sys; sys.exit(u.find_spec("skimage") is None)' 2>/dev/null; then
  python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .parts/scikit_image-*.whl
fi
export DATA_SINCE=$(date -u +%Y-%m-%dT%H:%M:%S+00:00)

jpeg_dataset() {  # the folder of the 2,048 JPEGs data.image_pipeline reads (made once, cached)
  python3 -c 'from suite import datasets as d; print(d.jpeg_images(d.JpegSpec(count=2048)).root)'
}

dali_rounds() {  # the suite's DALI paths and the bare DALI loop, alternately, DALI_ROUNDS times
  local dataset refs=() DALI_EPOCHS=${DALI_EPOCHS:-8}  # timed epochs of each, both sides (a mixed epoch: ~0.14 s)
  dataset=$(jpeg_dataset)
  suite_round() {
    step "image_pipeline DALI, round $1" prun data.image_pipeline -p paths=dali_cpu,dali_mixed \
      -p epochs="$DALI_EPOCHS" "${@:2}"
  }
  bare_round() {
    step "bare DALI loop, round $1" python3 bench/dali_reference.py "$dataset" --decoder mixed --decoder cpu \
      --epochs "$DALI_EPOCHS" --json "$OUT/dali_reference-$1.json"
  }
  for i in $(seq 1 "$DALI_ROUNDS"); do
    # odd rounds run the suite first, even rounds the bare loop first: neither side always
    # inherits the other's warm page cache, clocks and host state (rounds vary by +-6% here)
    if [ $((i % 2)) = 1 ]; then suite_round "$i" "$@"; bare_round "$i"; else bare_round "$i"; suite_round "$i" "$@"; fi
    refs+=("$OUT/dali_reference-$i.json")
  done
  echo; echo "== summary =="
  python3 bench/data_summary.py "$PERFSUITE_RECORDS" --since "$DATA_SINCE" --dali-rounds "${refs[@]}" || status=1
  pack_records data
  return $status
}

main() {
if [ -n "${DALI_ROUNDS:-}" ]; then dali_rounds "$@"; return; fi
python3 -c 'import torch, torchvision; print("torch", torch.__version__, "torchvision", torchvision.__version__, "|", torch.cuda.get_device_name())'
python3 -c 'import nvidia.dali as d; print("DALI", d.__version__)' 2>&1 | tail -1
python3 -c 'import kvikio; print("KvikIO", kvikio.__version__)' 2>&1 | tail -1
[ "${PERFSUITE_DALI:-0}" = 1 ] || echo "PERFSUITE_DALI is not 1: the DALI paths are skipped with their reason"
step ceilings prun kernels.ceilings "$@"
step image_pipeline prun data.image_pipeline "$@"
dataset=$(jpeg_dataset)
if python3 -c 'import nvidia.dali' 2>/dev/null; then
  step dali_reference python3 bench/dali_reference.py "$dataset" --decoder mixed --decoder cpu \
    --json "$OUT/dali_reference.json"
fi
step host_to_device prun data.host_to_device "$@"
step storage_read prun data.storage_read "$@"
step loader_stall prun data.loader_stall "$@"
step pytest-gpu python3 -m pytest -m gpu tests/test_data_gpu.py -q -p no:cacheprovider -s
echo; echo "== summary =="
python3 bench/data_summary.py "$PERFSUITE_RECORDS" --since "$DATA_SINCE" --reference "$OUT/dali_reference.json" \
  || status=1
pack_records data
echo "exit status: $status (any failed step or failed verification: 1)"
return $status
}

main "$@" 2>&1 | tee "$OUT/gpu_data.log"
exit "${PIPESTATUS[0]}"
