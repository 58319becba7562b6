#!/usr/bin/env bash
# GPU evidence for plugins/perfsuite-triton, in one go. Needs a CUDA GPU, torch, triton
# (3.x) and the suite's core dependencies; no network, no pip install of the plugin:
#   1. bench/triton_gpu_check.py: each kernel against a float64 torch reference, timed with
#      triton.testing.do_bench next to torch eager and torch.compile (num_warps swept for the
#      row kernels, bf16 and fp16 matmul), with this GPU's copy bandwidth measured alongside;
#   2. perfsuite run triton.fused_chain triton.softmax triton.matmul --device cuda, at the
#      workloads' default sizes: records (metrics, checks, the autotuned config) into $OUT;
#   3. perfsuite results: the headline of each run. The run's own table (in run.txt) shows
#      GB/s or TFLOP/s per case, the roofline fraction where the registry holds a
#      kernels.ceilings record of this GPU (CEILINGS=1 measures one first), and each case's
#      speed-up against the torch_eager baseline.
# Usage: OUT=/some/dir bash bench/gpu_triton.sh [more 'perfsuite run' options, e.g. --repeat 3]
set -uo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
out=${OUT:-$repo/.device-out/gpu_triton}
py=${PYTHON:-python3}
mkdir -p "$out"
unset TRITON_INTERPRET  # the interpreter would run the kernels on the CPU

# The plugin discovered through its real entry point without pip: a .dist-info as pip
# writes it, first on PYTHONPATH, next to the plugin's source in this checkout.
dist="$out/plugin-site/perfsuite_triton-0.1.0.dist-info"
mkdir -p "$dist"
printf 'Metadata-Version: 2.1\nName: perfsuite-triton\nVersion: 0.1.0\n' > "$dist/METADATA"
printf '[perfsuite]\ntriton = perfsuite_triton.plugin\n' > "$dist/entry_points.txt"
export PYTHONPATH="$out/plugin-site:$repo/plugins/perfsuite-triton:$repo${PYTHONPATH:+:$PYTHONPATH}"
export PERFSUITE_DB=${PERFSUITE_DB:-sqlite:///$out/registry.db}
export PERFSUITE_RECORDS=${PERFSUITE_RECORDS:-$out/records}
unset PERFSUITE_PLUGINS
cd "$repo" || exit 2

echo "== 1. kernels vs torch (triton.testing.do_bench) =="
"$py" bench/triton_gpu_check.py --matmul-dtypes bf16,fp16 --json "$out/triton_gpu_check.json" \
  2>&1 | tee "$out/triton_gpu_check.txt"
check_rc=${PIPESTATUS[0]}

echo "== 2. perfsuite run (default sizes) =="
"$py" -m suite plugins 2>&1 | tee "$out/plugins.txt"
if [ "${CEILINGS:-0}" = 1 ]; then
  "$py" -m suite run kernels.ceilings --device cuda --json > "$out/ceilings.json" 2> "$out/ceilings.err"
  echo "kernels.ceilings: exit $? (stderr in $out/ceilings.err)"
fi
since=$(date -u +%Y-%m-%dT%H:%M:%S+00:00)
"$py" -m suite run triton.fused_chain triton.softmax triton.matmul --device cuda "$@" \
  > "$out/run.txt" 2> "$out/run.err"
run_rc=$?
cat "$out/run.txt"
tail -n 20 "$out/run.err"
"$py" -m suite results --since "$since" --json > "$out/records.json"

echo "== 3. results (perfsuite results; each case against torch_eager in the run's own table above) =="
"$py" -m suite results --since "$since"
echo "run summaries: $out/records.json  kernel check: $out/triton_gpu_check.txt"
echo "exit codes: kernel check $check_rc, perfsuite run $run_rc"
[ "$check_rc" = 0 ] && [ "$run_rc" = 0 ]
