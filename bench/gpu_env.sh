# Sourced by the bench scripts on the GPU machine: core wheels (carried as .parts/part-00),
# the repo on PYTHONPATH, a throwaway registry, NVLink multicast off.
if [ ! -d /tmp/site/sqlalchemy ]; then
  mkdir -p /tmp/wh && tar -x -C /tmp/wh -f .parts/part-00
  python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site /tmp/wh/whl/*.whl
fi
export PYTHONPATH=/tmp/site:$PWD${PYTHONPATH:+:$PYTHONPATH}
export PERFSUITE_DB=${PERFSUITE_DB:-sqlite:////tmp/perfsuite/registry.db}
export PERFSUITE_RECORDS=${PERFSUITE_RECORDS:-/tmp/perfsuite/records}
export PYTHONUNBUFFERED=1 COLUMNS=200
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
mkdir -p /tmp/perfsuite
pack_records() {  # the records come back as one archive ($OUT takes 8 files at most)
  tar -C "$(dirname "$PERFSUITE_RECORDS")" -czf "$OUT/records-${1:-run}.tar.gz" "$(basename "$PERFSUITE_RECORDS")"
}
status=0  # any failed step: 1 (the scripts exit with it)
step() {  # step NAME CMD...: run, report its exit status and time, remember any failure
  local name=$1; shift
  echo; echo "== $name =="
  local t0=$SECONDS
  "$@"; local rc=$?
  echo "-- $name: exit $rc ($((SECONDS - t0)) s)"
  [ "$rc" = 0 ] || status=1
}
prun() { python3 -m suite run "$@" --device cuda; }  # one perfsuite run on the GPU
packed() {  # packed NAME CMD...: run CMD, then pack the records (a call cut off at its limit keeps them)
  local name=$1; shift
  "$@"; local rc=$?
  pack_records "$name"
  return $rc
}
triton_plugin_on_path() {  # the Triton plugin's entry point and source on PYTHONPATH, without pip
  local site=/tmp/plugin-site/perfsuite_triton-0.1.0.dist-info
  mkdir -p "$site"
  printf 'Metadata-Version: 2.1\nName: perfsuite-triton\nVersion: 0.1.0\n' > "$site/METADATA"
  printf '[perfsuite]\ntriton = perfsuite_triton.plugin\n' > "$site/entry_points.txt"
  export PYTHONPATH=/tmp/plugin-site:$PWD/plugins/perfsuite-triton:$PYTHONPATH
}
graph_probe() {  # graph_probe NPROC: what a captured loop of all_reduce calls holds and costs
  # (bench/graph_probe.py), bounded: a probe whose rank fails must not hold the others in a
  # collective for the rest of the call
  timeout -k 10 180 python3 -m torch.distributed.run --nproc-per-node "$1" bench/graph_probe.py \
    --out /tmp/graph-probe/default || return
  # again without NCCL's EVENT_RECORD node after each captured kernel (nothing else uses NCCL here)
  NCCL_GRAPH_MIXING_SUPPORT=0 timeout -k 10 180 python3 -m torch.distributed.run --nproc-per-node "$1" \
    bench/graph_probe.py --out /tmp/graph-probe/no-mixing || return
  # again without NCCL registering the captured calls' user buffers
  NCCL_GRAPH_REGISTER=0 timeout -k 10 180 python3 -m torch.distributed.run --nproc-per-node "$1" \
    bench/graph_probe.py --out /tmp/graph-probe/no-register || return
  tar -C /tmp -czf "$OUT/graph-probe.tar.gz" graph-probe
}
