#!/usr/bin/env bash
# On a GPU machine (2 GPUs or more): a torchrun run of a collective, and a kill -9 of the
# runner in the middle of a GPU run and in the middle of a torchrun run, leave no
# perfsuite-* and no torchelastic_* folder in TMPDIR, and every measuring process ends.
# Prints each check as "ok" or "LEFT: <names>"; exit 1 if anything was left.
#
#   bash tools/gpu_leftovers.sh            # uses the perfsuite on PATH and a fresh registry
set -uo pipefail

work=$(mktemp -d)
export TMPDIR="$work/tmp" PERFSUITE_DB="sqlite:///$work/registry.db" PERFSUITE_RECORDS="$work/records"
mkdir -p "$TMPDIR"
status=0

left() {  # $1: what was done
  sleep 5  # the lifeline polls every 0.2 s; the janitor acts at once
  local names
  names=$(find "$TMPDIR" -maxdepth 1 \( -name 'perfsuite-*' -o -name 'torchelastic_*' \) -printf '%f ' 2>/dev/null)
  local procs
  procs=$(pgrep -f "perfsuite.engine.worker|torch.distributed.run" | tr '\n' ' ')
  if [[ -z "$names" && -z "$procs" ]]; then
    echo "ok    $1"
  else
    echo "LEFT  $1: folders: ${names:-none}; processes: ${procs:-none}"
    status=1
  fi
}

perfsuite run collectives.all_reduce --device cuda --nproc-per-node 2 --quick >/dev/null 2>&1
left "torchrun run of collectives.all_reduce on 2 GPUs, finished"

perfsuite run kernels.gemm --device cuda --min-time 60 >/dev/null 2>&1 &
sleep 25 && kill -9 $! ; wait $! 2>/dev/null
left "kill -9 of 'perfsuite run kernels.gemm' while it measures"

perfsuite run collectives.all_reduce --device cuda --nproc-per-node 2 --min-time 60 >/dev/null 2>&1 &
sleep 30 && kill -9 $! ; wait $! 2>/dev/null
left "kill -9 of a torchrun run of collectives.all_reduce on 2 GPUs while it measures"

perfsuite import "$PERFSUITE_RECORDS" 2>&1 | tail -1
rm -rf "$work"
exit $status
