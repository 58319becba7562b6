"""Whether an ``inference.serving`` rate step's throughput is a steady-state figure, read from
the fields a step row stores: one rule for the readers that may not import a workload (``perfsuite
export``'s ``steady_state`` column, the leaderboard's serving curves), which mark such steps
beside their figures and never drop or rewrite them.

The workload reads it too, through the public ``perfsuite.serving_steady`` (``perfsuite show``
and the window its rates are measured in). A step's rates are measured
in a window from its first request's end to its last scheduled arrival; it has a steady state
when that window holds at least :data:`STEADY_WINDOW_SHARE` of its arrivals' spread. A row
measured so states its verdict (``steady_state``); an older row has no first end, so it is
estimated by the requests' median E2E: a step whose arrivals last less than twice its requests'
median time (5 s steps of requests that take 4 to 24 s) has no steady state.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

# The share of a step's arrival spread its steady-state window must cover: less, and the first
# request ended after half the arrivals, so the window sees the step's tail, not its steady state.
STEADY_WINDOW_SHARE = 0.5


def arrival_spread_s(row: Mapping[str, Any]) -> float | None:
    """The step's arrivals, first to last: as recorded, else requests over the offered rate
    (rows filed before the spread was kept)."""
    spread = row.get("arrival_spread_s")
    if isinstance(spread, (int, float)) and spread > 0:
        return float(spread)
    load, requests = row.get("load"), row.get("requests")
    if isinstance(load, (int, float)) and load > 0 and isinstance(requests, (int, float)) and requests > 0:
        return float(requests) / float(load)
    return None


def step_rows(serving: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """Every step row of a record's ``details["serving"]`` (its sweeps and trace replay)."""
    rows: list[Mapping[str, Any]] = []
    for key in ("rate_sweep", "concurrency_sweep", "trace_replay"):
        sweep = serving.get(key)
        steps = sweep.get("steps") if isinstance(sweep, Mapping) else None
        rows += [row for row in steps or [] if isinstance(row, Mapping)]
    return rows


def no_steady_state(row: Mapping[str, Any]) -> str | None:
    """Why a rate step's throughput is not a steady-state figure (one line), or None where it is
    one, the step is not an open-loop rate step (a concurrency step, a trace replay), or an older
    row keeps neither its arrivals nor its requests' E2E to judge it by."""
    if row.get("mode") != "rate":
        return None
    spread = arrival_spread_s(row)
    p50_ms = (row.get("e2e_ms") or {}).get("p50")
    figures = (
        f"arrivals {spread:.3g} s, requests' E2E p50 {p50_ms / 1e3:.3g} s"
        if spread is not None and isinstance(p50_ms, (int, float))
        else "too few completed requests to judge"
    )
    if "steady_state" in row:  # measured: the row's own verdict on its window
        return None if row["steady_state"] is True else f"no steady state: {figures}"
    if spread is None or not isinstance(p50_ms, (int, float)):
        return None  # nothing to judge it by: not marked
    if p50_ms / 1e3 > spread * (1 - STEADY_WINDOW_SHARE):
        return f"no steady state: {figures} (estimated: filed before the window was measured)"
    return None


def case_marks(record: Mapping[str, Any]) -> dict[str, str]:
    """Each rate step's case (its metrics' case label) whose throughput is not a steady-state
    figure, with why; empty for any other record."""
    details = record.get("details")
    serving = details.get("serving") if isinstance(details, Mapping) else None
    if not isinstance(serving, Mapping):
        return {}
    marks = {}
    for row in step_rows(serving):
        why = no_steady_state(row)
        if why is not None and row.get("case"):
            marks[str(row["case"])] = why
    return marks
