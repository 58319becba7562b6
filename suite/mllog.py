"""MLPerf-style MLLOG lines (``:::MLLOG {json}``) written beside each record, in the
format ``mlperf_logging``'s parser reads: namespace, time_ms, event_type, key, value, metadata."""
from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

from suite.files import write_atomic


def _ms(iso: str) -> int:
    return int(dt.datetime.fromisoformat(iso).timestamp() * 1000)


def _line(time_ms: int, event_type: str, key: str, value, metadata: dict | None = None) -> str:
    body = {"namespace": "", "time_ms": time_ms, "event_type": event_type, "key": key, "value": value,
            "metadata": {"file": "perfsuite", "lineno": 0, **(metadata or {})}}
    return ":::MLLOG " + json.dumps(body, sort_keys=True)


def lines(record: dict) -> list[str]:
    start, stop = _ms(record["started_at"]), _ms(record["finished_at"])
    w = record["workload"]
    out = [
        _line(start, "POINT_IN_TIME", "submission_benchmark", w["name"]),
        _line(start, "POINT_IN_TIME", "submission_division", w["division"]),
        _line(start, "POINT_IN_TIME", "submission_platform", record["environment"]["measured_device"]["name"]),
        _line(start, "POINT_IN_TIME", "seed", record["controls"]["seed"]),
        _line(start, "INTERVAL_START", "run_start", None),
    ]
    for m in record["metrics"]:
        out.append(_line(stop, "POINT_IN_TIME", "result", m["value"],
                         {"case": m["case"], "metric": m["name"], "unit": m["unit"]}))
    out.append(_line(stop, "INTERVAL_END", "run_stop", None,
                     {"status": "success" if record["status"] == "success" else "aborted",
                      "verification": record["verification"]["status"]}))
    return out


def write(record: dict, path: Path) -> None:
    write_atomic(path, "\n".join(lines(record)) + "\n")
