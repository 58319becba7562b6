"""File GPU-run records into the submissions tree, after checking each one.

    python bench/file_records.py --org perfsuite --system h200-x1 RECORD.json...

Each record is validated against the result schema and its sha256 checked, then copied
(with its .mllog twin when one lies beside it) to
``submissions/<org>/results/<system>/<workload>/<run_id>.json``; the system description
``submissions/<org>/systems/<system>.json`` is written from the first record's environment.
"""
from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from registry import validate_record  # noqa: E402
from registry.records import check_sha256  # noqa: E402


def system_description(record: dict, name: str) -> dict:
    env = record["environment"]
    gpus = env["gpus"]
    return {
        "system_name": name,
        "host": env["host"],
        "accelerator_model_name": gpus[0]["name"] if gpus else None,
        "accelerators_per_node": len(gpus),
        "accelerator_memory_bytes": gpus[0]["memory_bytes"] if gpus else None,
        "accelerator_driver": gpus[0]["driver"] if gpus else None,
        "host_processor_model_name": env["cpu"]["model"],
        "host_processor_core_count": env["cpu"]["logical_cores"],
        "host_memory_bytes": env["memory_bytes"],
        "operating_system": env["os"],
        "python": env["python"],
        "runtime": env.get("runtime", {}),
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--org", required=True)
    ap.add_argument("--system", required=True)
    ap.add_argument("records", nargs="+", type=Path)
    args = ap.parse_args()
    root = REPO / "submissions" / args.org
    first = None
    for path in args.records:
        record = json.loads(path.read_text())
        validate_record(record)
        check_sha256(record)
        first = first or record
        dest = root / "results" / args.system / record["workload"]["name"] / f"{record['run_id']}.json"
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, dest)
        mllog = path.with_suffix(".mllog")
        if mllog.exists():
            shutil.copyfile(mllog, dest.with_suffix(".mllog"))
        print(f"{record['workload']['name']:28} {record['status']:8} {record['verification']['status']:8} -> "
              f"{dest.relative_to(REPO)}")
    systems = root / "systems"
    systems.mkdir(parents=True, exist_ok=True)
    (systems / f"{args.system}.json").write_text(json.dumps(system_description(first, args.system), indent=2) + "\n")


if __name__ == "__main__":
    main()
