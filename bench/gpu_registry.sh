#!/usr/bin/env bash
# GPU evidence for issue 10 (compare / reproduce / submit / check / leaderboard) on one H200,
# through the suite's own CLI. Carry .parts (the core wheels incl. jinja2 + markupsafe, see
# bench/gpu_env.sh), then:   bash bench/gpu_registry.sh
#  1. perfsuite check + import of the repository's submissions/ (a throwaway registry);
#  2. perfsuite reproduce of three stored H200 runs: kernels.ceilings 8f41180e, kernels.gemm
#     ed2e94d5 (8192^3, five dtypes), kernels.memory e0069b8a: same version, parameters,
#     controls and seed; verdict "reproduced" or "did not reproduce" with the ratio and the
#     environment differences (driver, clocks, power state);
#  3. perfsuite submit of the reproductions as system "h200-x1-repro" into $OUT/submissions,
#     perfsuite check of that tree, and perfsuite leaderboard of everything into $OUT/site;
#  4. a summary table: per reproduced run, its verdict and each case's headline ratio.
# $OUT gets: gpu_registry.log, reproduce-*.json, site.tar.gz, submissions.tar.gz, records-registry.tar.gz.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
: "${OUT:=$PWD/.device-out/gpu_registry}"
mkdir -p "$OUT"
export PERFSUITE_DB=${PERFSUITE_DB:-sqlite:////tmp/perfsuite/registry-issue10.db}
export PERFSUITE_RECORDS=${PERFSUITE_RECORDS:-/tmp/perfsuite/registry-records}
source bench/gpu_env.sh
pf() { python3 -m suite "$@"; }

main() {
python3 -c 'import torch; print("torch", torch.__version__, "|", torch.cuda.get_device_name())'
python3 -c 'import jinja2' || echo "jinja2 is not importable: the leaderboard step will fail (add jinja2 + markupsafe wheels to .parts)"
step check pf check submissions/
step import pf import submissions/
for run in 8f41180e ed2e94d5 e0069b8a; do
  echo; echo "== reproduce $run =="
  pf reproduce "$run" --json > "$OUT/reproduce-$run.json"; rc=$?
  echo "-- reproduce $run: exit $rc (1: did not reproduce, or the re-run failed)"
  [ "$rc" = 0 ] || status=1
  [ -s "$OUT/reproduce-$run.json" ] && pf compare "$run" "$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['reproduction'])" "$OUT/reproduce-$run.json")"
done
repro_ids=$(python3 - "$OUT" <<'PY'
import glob, json, sys
ids = []
for path in sorted(glob.glob(sys.argv[1] + "/reproduce-*.json")):
    try:
        ids.append(json.load(open(path))["reproduction"])
    except (ValueError, KeyError):
        pass
print(" ".join(ids))
PY
)
if [ -n "$repro_ids" ]; then
  step submit pf submit --org perfsuite --system h200-x1-repro --root "$OUT/submissions" $repro_ids
  step check-submitted pf check "$OUT/submissions"
fi
step leaderboard pf leaderboard --out /tmp/perfsuite/site
tar -C /tmp/perfsuite -czf "$OUT/site.tar.gz" site
[ -d "$OUT/submissions" ] && tar -C "$OUT" -czf "$OUT/submissions.tar.gz" submissions && rm -rf "$OUT/submissions"
pack_records registry

echo; echo "== summary =="
python3 - "$OUT" <<'PY'
import glob, json, sys
print(f"{'original':10} {'reproduction':14} {'verdict':20} headline ratios (new/stored) per case")
for path in sorted(glob.glob(sys.argv[1] + "/reproduce-*.json")):
    try:
        r = json.load(open(path))
    except ValueError:
        print(f"{path.split('-')[-1][:8]:10} {'-':14} {'re-run failed':20}")
        continue
    cases = ", ".join(f"{c['case']} {c['ratio']:.3f}{'' if c['reproduced'] else ' (!)'}" for c in r["cases"])
    print(f"{r['original'][:8]:10} {r['reproduction'][:8]:14} {r['verdict']:20} {cases}")
PY
return $status
}
main 2>&1 | tee "$OUT/gpu_registry.log"
exit ${PIPESTATUS[0]}
