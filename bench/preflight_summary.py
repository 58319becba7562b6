"""Summary of bench/gpu_preflight.sh: does profiling leave the measured median alone?

Reads ``runs-<workload>-<mode>.json`` (``perfsuite run --json`` output) from the folder given
and prints, per workload and case, each mode's median time per call and 95% CI, whether a
profiled median lies within the unprofiled run's CI or within 2% of its median, then each
profile's top 3 entries. Exit 1 when a profiled median is outside both.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

MODES = ("none", "torch", "ncu")
TOLERANCE = 0.02


def load(folder: Path, workload: str, mode: str) -> dict | None:
    path = folder / f"runs-{workload}-{mode}.json"
    try:
        records = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        print(f"{workload} {mode}: no record ({type(exc).__name__}: {exc})")
        return None
    return records[0] if records else None


def times(record: dict) -> dict[str, dict]:
    return {m["case"]: m for m in record["metrics"] if m["name"] == "time_ms"}


def main(folder: Path) -> int:
    bad = 0
    rows = []
    profiles = []
    for workload in ("gemm", "fusion"):
        recs = {mode: load(folder, workload, mode) for mode in MODES}
        base = times(recs["none"]) if recs["none"] and recs["none"]["status"] == "success" else {}
        for mode in MODES:
            rec = recs[mode]
            if rec is None:
                continue
            if rec["status"] != "success":
                rows.append((workload, "", mode, "", "", f"{rec['status']}: {rec['error']}"))
                continue
            for case, m in times(rec).items():
                s = m["statistics"] or {}
                ci = f"{s.get('ci95_low', 0):.4f}-{s.get('ci95_high', 0):.4f}"
                verdict = ""
                if mode != "none" and case in base:
                    b = base[case]["statistics"]
                    inside = b["ci95_low"] <= m["value"] <= b["ci95_high"]
                    close = abs(m["value"] - base[case]["value"]) <= TOLERANCE * base[case]["value"]
                    verdict = "within CI" if inside else f"within {TOLERANCE:.0%}" if close else "MOVED"
                    bad += verdict == "MOVED"
                rows.append((workload, case, mode, f"{m['value']:.4f}", ci, verdict))
            for key, summary in (rec["details"].get("profile") or {}).items():
                profiles.append((workload, mode, key, summary))
            if rec["details"].get("profile_not_applied"):
                profiles.append((workload, mode, "-", {"error": rec["details"]["profile_not_applied"]}))
    print(f"{'workload':8} {'case':24} {'profile':7} {'median ms':>10} {'95% CI':>17}  vs unprofiled")
    for r in rows:
        print(f"{r[0]:8} {r[1]:24} {r[2]:7} {r[3]:>10} {r[4]:>17}  {r[5]}")
    print()
    for workload, mode, key, summary in profiles:
        print(f"{workload} --profile {mode} ({key}): " + (summary.get("error") or ""))
        for e in (summary.get("top") or [])[:3]:
            extra = ""
            if e.get("memory_throughput_pct") is not None or e.get("sm_throughput_pct") is not None:
                extra = f"  mem {e.get('memory_throughput_pct') or 0:.1f}%  SM {e.get('sm_throughput_pct') or 0:.1f}%"
            print(
                f"  {e['name'][:70]:70} calls {e['calls']:4}  {e['total_us']:10.1f} us  {100 * e['share']:5.1f}%{extra}"
            )
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1])))
