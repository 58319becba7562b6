"""MLPerf-style MLLOG lines (``:::MLLOG {json}``) written beside each record, through
``mlperf_logging.mllog`` (MLCommons' own logger, the one MLPerf's reference implementations
use), in the format its compliance checker parses: namespace, time_ms, event_type, key,
value, metadata.

Two kinds of record:

- A record whose workload logged its own events as they happened (the training
  workloads put them in ``details["mllog"]``, rank 0's, with their real times): those
  events, after the ``submission_*`` keys that only the record knows (benchmark,
  division, platform, org, status). These are the lines MLPerf Training's compliance
  checker reads (see ``perfsuite.engine.mllog_compliance``).
- Any other record: a twin of the record itself (submission keys, seed, run_start, one
  ``result`` line per metric, run_stop with the status).

``mlperf_logging``'s ``get_mllogger()``/``config(filename=...)`` is one process-wide logger
(the ``logging`` module's global ``mllog_default``, printing to stdout): two runs written in
one process would share it, and its file. So every call here builds its own ``MLLogger`` over
a private ``logging.Logger`` (made directly, never registered with ``logging.getLogger``)
whose one handler collects the lines in memory; the shared logger is never used, nothing is
printed, and the lines reach their file through :func:`write` (atomic, beside the record).
"""

from __future__ import annotations

import datetime as dt
import logging
import os
from pathlib import Path
from typing import Any

from perfsuite.files import write_atomic

# Who submits: MLPerf's submission_org. The suite's own runs are the suite's unless told.
ORG_ENV = "PERFSUITE_ORG"
DEFAULT_ORG = "perfsuite"
# MLPerf's submission_status names the system's availability; a suite run measures a
# machine as it is, which MLPerf calls research/development/internal.
SUBMISSION_STATUS = "research"
# The call site mlperf_logging would record (this module's file and line) says nothing about
# the run: every line names the suite instead, as the lines did before mlperf_logging wrote them.
SITE = {"file": "perfsuite", "lineno": 0}

Event = tuple[float, str, str, Any, dict | None]  # (time_ms, event_type, key, value, metadata)


def _ms(iso: str) -> int:
    return int(dt.datetime.fromisoformat(iso).timestamp() * 1000)


class _Collect(logging.Handler):
    """The lines one MLLogger emits, in order. mlperf_logging reports trouble (a value it
    cannot encode, metadata that is not a dict) as WARNING/ERROR lines and drops the event:
    here that is an error, except the notice that SITE overrides the call site, on purpose."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        message = record.getMessage().lstrip("\n")
        if record.levelno == logging.INFO:
            self.lines.append(message)
        elif not message.startswith("Metadata fields overridden: "):
            raise ValueError(f"mlperf_logging could not log an MLLOG event: {message}")


def _encode(events: list[Event]) -> list[str]:
    """The MLLOG lines of ``events``, written by a fresh ``mlperf_logging.mllog.MLLogger``."""
    from mlperf_logging.mllog.mllog import MLLogger

    collect = _Collect()
    private = logging.Logger("perfsuite.mllog", logging.DEBUG)  # not in logging's registry
    private.propagate = False
    private.addHandler(collect)
    logger = MLLogger(logger=private, default_namespace="")
    log = {"POINT_IN_TIME": logger.event, "INTERVAL_START": logger.start, "INTERVAL_END": logger.end}
    for time_ms, event_type, key, value, metadata in events:
        if event_type not in log:
            raise ValueError(f"MLLOG event {key!r} has event_type {event_type!r}, not one of {', '.join(log)}")
        log[event_type](key, value, metadata={**SITE, **(metadata or {})}, time_ms=time_ms)
    if len(collect.lines) != len(events):  # logging.disable() elsewhere in the process drops lines
        raise RuntimeError(f"mlperf_logging wrote {len(collect.lines)} of {len(events)} MLLOG lines")
    return collect.lines


def _submission(record: dict, time_ms: float) -> list[Event]:
    w = record["workload"]
    return [
        (time_ms, "POINT_IN_TIME", "submission_benchmark", w["name"], None),
        (time_ms, "POINT_IN_TIME", "submission_org", os.environ.get(ORG_ENV) or DEFAULT_ORG, None),
        (time_ms, "POINT_IN_TIME", "submission_division", w["division"], None),
        (time_ms, "POINT_IN_TIME", "submission_status", SUBMISSION_STATUS, None),
        (time_ms, "POINT_IN_TIME", "submission_platform", _platform(record), None),
    ]


def _platform(record: dict) -> str:
    """MLPerf's platform: the device, with the count when several ranks ran (``2xNVIDIA H200``)."""
    name = record["environment"]["measured_device"]["name"]
    world = (record.get("launch") or {}).get("world_size", 1)
    return f"{world}x{name}" if world > 1 else name


def event_lines(record: dict, events: list[dict]) -> list[str]:
    """The workload's own events (already in order), after the submission keys."""
    out = _submission(record, events[0]["time_ms"])
    out += [(e["time_ms"], e["event_type"], e["key"], e["value"], e["metadata"]) for e in events]
    return _encode(out)


def lines(record: dict) -> list[str]:
    events = (record.get("details") or {}).get("mllog")
    if events:
        return event_lines(record, events)
    start, stop = _ms(record["started_at"]), _ms(record["finished_at"])
    w = record["workload"]
    out: list[Event] = [
        (start, "POINT_IN_TIME", "submission_benchmark", w["name"], None),
        (start, "POINT_IN_TIME", "submission_division", w["division"], None),
        (start, "POINT_IN_TIME", "submission_platform", record["environment"]["measured_device"]["name"], None),
        (start, "POINT_IN_TIME", "seed", record["controls"]["seed"], None),
        (start, "INTERVAL_START", "run_start", None, None),
    ]
    for m in record["metrics"]:
        about = {"case": m["case"], "metric": m["name"], "unit": m["unit"]}
        out.append((stop, "POINT_IN_TIME", "result", m["value"], about))
    status = {
        "status": "success" if record["status"] == "success" else "aborted",
        "verification": record["verification"]["status"],
    }
    out.append((stop, "INTERVAL_END", "run_stop", None, status))
    return _encode(out)


def write(record: dict, path: Path) -> None:
    write_atomic(path, "\n".join(lines(record)) + "\n")
