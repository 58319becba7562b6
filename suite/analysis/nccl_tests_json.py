"""A collective's sweep as the JSON file nccl-tests writes with ``-J``/``--output_file FILE.json``
(its JSON layout version 3, ``src/util.cu``), so that a script that reads nccl-tests' files
reads perfsuite's export unchanged: ``results`` holds one object per size with ``size``,
``count``, ``type``, ``redop``, ``root`` (a string, as nccl-tests writes it), then ``out_of_place``
and ``in_place``, each ``{"time": us, "alg_bw": GB/s, "bus_bw": GB/s, "nwrong": n}`` or null
where the collective has no such mode (torch's all_reduce is in place only), and
``actual_iterations``; ``out_of_bounds`` and ``average_bus_bandwidth`` close it as nccl-tests'
summary lines do.

Only what the record measured or states is written: nccl-tests' ``args`` and ``env`` (its
command line and environment) have no equivalent here and are left out, and ``nccl_version``
is null for a gloo run. A ``perfsuite`` object says which run the file came from."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from perfsuite.analysis.export import SWEEP_FIELDS, SWEEP_MODES
from perfsuite.schemas.comparability import comparability_key

# nccl-tests' JSON_FILE_VERSION: the layout these files follow.
LAYOUT_VERSION = 3
# nccl-tests' TIME_STRING_FORMAT (here in UTC: a record's times carry their offset, nccl-tests'
# are local).
TIME_FORMAT = "%Y-%m-%d %H:%M:%S"


def nccl_version_code(version: str | None) -> int | None:
    """'2.28.9' as NCCL's version code 22809 (what ``ncclGetVersion`` returns and nccl-tests
    writes), None where the run used no NCCL."""
    if not version:
        return None
    major, minor, patch = (int(part) for part in version.split(".")[:3])
    return major * 10000 + minor * 100 + patch


def _time(iso: str | None) -> str | None:
    if iso is None:
        return None
    return datetime.fromisoformat(iso).astimezone(UTC).strftime(TIME_FORMAT)


def _mode(measured: dict | None) -> dict[str, Any] | None:
    """One mode's figures under nccl-tests' names: time (us), alg_bw, bus_bw (GB/s), nwrong
    (a double in nccl-tests' files, so a float here too)."""
    if measured is None:
        return None
    out: dict[str, Any] = {}
    for field, key in SWEEP_FIELDS:
        v = measured.get(key)
        out[field] = None if v is None else float(v)
    return out


def _config(record: dict) -> dict[str, Any]:
    """nccl-tests' ``config`` object, the entries the record states: torch.distributed runs one
    process per device, one thread each, one call per timed iteration."""
    params = record["workload"].get("params") or {}
    d = record.get("details") or {}
    config: dict[str, Any] = {
        "nthreads": 1,
        "ngpus": 1,
        "minimum_bytes": params.get("min_bytes"),
        "maximum_bytes": params.get("max_bytes"),
    }
    if params.get("step_factor"):
        config["step_factor"] = params["step_factor"]
    config.update(
        {
            "warmup_iters": d.get("warmup_iters"),
            "iterations": d.get("iters"),
            "aggregated_iterations": 1,
            "validation": int(bool(d.get("check"))) if "check" in d else None,
            "graph": int(bool(d.get("cuda_graph"))) if "cuda_graph" in d else None,
        }
    )
    return config


def document(record: dict) -> dict[str, Any]:
    """The JSON object nccl-tests writes for one run of one collective, from a record whose
    ``details.rows`` hold its sweep (:func:`perfsuite.analysis.export.is_sweep`)."""
    d = record["details"]
    runtime = (record.get("environment") or {}).get("runtime") or {}
    results = []
    for r in d["rows"]:
        row: dict[str, Any] = {
            "size": r["size_bytes"],
            "count": r["count"],
            "type": r["dtype"],
            "redop": r["redop"],
            "root": str(r["root"]),
        }
        for mode, key in SWEEP_MODES:
            row[mode] = _mode(r.get(key))
        row["actual_iterations"] = d.get("iters")
        row["experiment_name"] = ""
        results.append(row)
    wrong = d.get("wrong_total")
    average = d.get("avg_busbw_gbps")
    return {
        "version": LAYOUT_VERSION,
        "start_time": _time(record.get("started_at")),
        "nccl_version": nccl_version_code(d.get("nccl_version") or runtime.get("nccl")),
        "config": _config(record),
        "results": results,
        "out_of_bounds": {"count": wrong, "okay": None if wrong is None else wrong == 0},
        "average_bus_bandwidth": {"bandwidth": None if average is None else float(average), "okay": "unchecked"},
        "end_time": _time(record.get("finished_at")),
        "perfsuite": {
            "run_id": record["run_id"],
            "workload": record["workload"]["name"],
            "collective": d.get("collective"),
            "backend": d.get("backend") or record["launch"].get("backend"),
            "world_size": record["launch"].get("world_size"),
            "comparability_key": comparability_key(record),
        },
    }
