"""One line per collectives record in a records folder: collective, dtype, eager or CUDA graph,
status, the correctness check's elements compared and wrong, whether every size that differs
from nccl-tests names its launch-bound side, the sizes from 1 MiB up that differ with no side
named, and the cross-check's summary. For reading a scale-out plan's records before filing
them: a size listed as open is a finding to explain, not a record to file silently.

    python tools/collectives_verdicts.py RECORDS_DIR [--rejudge]

``--rejudge`` judges each record's stored per-size times again with the installed perfsuite's
rule (``perfsuite.crosscheck.launch_floor``) instead of printing the verdict stored with them:
how a record filed under an older rule reads under the current one.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

MIB = 1 << 20


KEYS = ("size_bytes", "mode", "suite_time_us", "nccl_tests_time_us", "suite_busbw_gbps", "nccl_tests_busbw_gbps")


def line(record: dict, rejudge: bool = False) -> str | None:
    name = (record.get("workload") or {}).get("name", "")
    if not name.startswith("collectives."):
        return None
    d = record.get("details") or {}
    cc = d.get("crosscheck") or {}
    verdict = cc.get("verdict") or {}
    if rejudge and cc.get("compare"):
        from perfsuite.crosscheck.launch_floor import attribute

        compare, verdict = attribute([{k: c[k] for k in KEYS} for c in cc["compare"]])
        cc = {**cc, "compare": compare}
    checks = (record.get("verification") or {}).get("checks") or [{}]
    check = checks[0]
    open_sizes = sorted(
        {
            c["size_bytes"]
            for c in cc.get("compare", [])
            if c["size_bytes"] >= MIB and c.get("verdict") != "agrees within 3%" and not c.get("launch_bound")
        }
    )
    if verdict:
        judged = "explained" if verdict.get("explained") else "NOT explained"
    else:
        judged = f"no verdict (cross-check {cc.get('status')})"
    return (
        f"{record.get('run_id', '')[:8]} {name} {d.get('dtype')} {'graph' if d.get('cuda_graph') else 'eager'} "
        f"{record.get('status')} elements checked {check.get('elements_checked')} wrong {check.get('elements_failed')} "
        f"{judged} open from 1 MiB: {[s // MIB for s in open_sizes]} MiB | {verdict.get('summary', '')}"
    )


def main(argv: list[str]) -> int:
    rejudge = "--rejudge" in argv
    dirs = [a for a in argv if a != "--rejudge"]
    if len(dirs) != 1 or not Path(dirs[0]).is_dir():
        print("usage: python tools/collectives_verdicts.py RECORDS_DIR [--rejudge]", file=sys.stderr)
        return 2
    for path in sorted(Path(dirs[0]).rglob("*.json")):
        try:
            record = json.loads(path.read_text())
        except (OSError, json.JSONDecodeError) as exc:
            print(f"{path}: unreadable ({exc})", file=sys.stderr)
            continue
        text = line(record, rejudge) if isinstance(record, dict) else None
        if text:
            print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
