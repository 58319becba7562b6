"""MLPerf-style MLLOG lines (``:::MLLOG {json}``) written beside each record, in the
format ``mlperf_logging``'s parser reads: namespace, time_ms, event_type, key, value, metadata.

Two kinds of record:

- A record whose workload logged its own events as they happened (the training
  workloads put them in ``details["mllog"]``, rank 0's, with their real times): those
  events, after the ``submission_*`` keys that only the record knows (benchmark,
  division, platform, org, status). These are the lines MLPerf Training's compliance
  checker reads (see ``perfsuite.engine.mllog_compliance``).
- Any other record: a twin of the record itself (submission keys, seed, run_start, one
  ``result`` line per metric, run_stop with the status).
"""

from __future__ import annotations

import datetime as dt
import json
import os
from pathlib import Path

from perfsuite.engine.files import write_atomic

# Who submits: MLPerf's submission_org. The suite's own runs are the suite's unless told.
ORG_ENV = "PERFSUITE_ORG"
DEFAULT_ORG = "perfsuite"
# MLPerf's submission_status names the system's availability; a suite run measures a
# machine as it is, which MLPerf calls research/development/internal.
SUBMISSION_STATUS = "research"


def _ms(iso: str) -> int:
    return int(dt.datetime.fromisoformat(iso).timestamp() * 1000)


def _line(time_ms: float, event_type: str, key: str, value, metadata: dict | None = None) -> str:
    body = {
        "namespace": "",
        "time_ms": time_ms,
        "event_type": event_type,
        "key": key,
        "value": value,
        "metadata": {"file": "perfsuite", "lineno": 0, **(metadata or {})},
    }
    return ":::MLLOG " + json.dumps(body, sort_keys=True)


def _submission(record: dict, time_ms: float) -> list[str]:
    w = record["workload"]
    return [
        _line(time_ms, "POINT_IN_TIME", "submission_benchmark", w["name"]),
        _line(time_ms, "POINT_IN_TIME", "submission_org", os.environ.get(ORG_ENV) or DEFAULT_ORG),
        _line(time_ms, "POINT_IN_TIME", "submission_division", w["division"]),
        _line(time_ms, "POINT_IN_TIME", "submission_status", SUBMISSION_STATUS),
        _line(time_ms, "POINT_IN_TIME", "submission_platform", _platform(record)),
    ]


def _platform(record: dict) -> str:
    """MLPerf's platform: the device, with the count when several ranks ran (``2xNVIDIA H200``)."""
    name = record["environment"]["measured_device"]["name"]
    world = (record.get("launch") or {}).get("world_size", 1)
    return f"{world}x{name}" if world > 1 else name


def event_lines(record: dict, events: list[dict]) -> list[str]:
    """The workload's own events (already in order), after the submission keys."""
    out = _submission(record, events[0]["time_ms"])
    out += [_line(e["time_ms"], e["event_type"], e["key"], e["value"], e["metadata"]) for e in events]
    return out


def lines(record: dict) -> list[str]:
    events = (record.get("details") or {}).get("mllog")
    if events:
        return event_lines(record, events)
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
        out.append(
            _line(
                stop, "POINT_IN_TIME", "result", m["value"], {"case": m["case"], "metric": m["name"], "unit": m["unit"]}
            )
        )
    out.append(
        _line(
            stop,
            "INTERVAL_END",
            "run_stop",
            None,
            {
                "status": "success" if record["status"] == "success" else "aborted",
                "verification": record["verification"]["status"],
            },
        )
    )
    return out


def write(record: dict, path: Path) -> None:
    write_atomic(path, "\n".join(lines(record)) + "\n")
