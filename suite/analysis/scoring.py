"""MLPerf-style scores of repeated time-to-target runs (``perfsuite run --repeat N``).

MLPerf Training scores a benchmark by N runs with unique seeds: drop the fastest and the
slowest, average the rest (the olympic mean). A run that did not reach its target
(``aborted``, or one that failed or timed out) counts as the slowest, so it is the one
dropped; with more than one such run there is no score. A run whose goal is throughput
(``goal=throughput``: it trains for its budget, and spending it is its success) is never a
time-to-target run, scored or counted as one. The runs are grouped by their
comparability key, recomputed from each record (its world size is one of its settings), and a
self-test run (a harness parameter away from its default) is never scored.

Where the aggregate lives: it is derived, not stored. ``perfsuite run`` prints it after
the results of a repeat; :func:`scores` gives the same figures as data (the bench
scripts use it), with each run's own time beside the score.
"""

from __future__ import annotations

import math
from typing import Any

from perfsuite.measure.stats import olympic_mean
from perfsuite.schemas.comparability import comparability_key, is_self_test

TIME_METRIC = "time_to_target_s"
MIN_RUNS = 3


def _time_to_target(record: dict) -> float | None:
    if record["status"] != "success":
        return None
    found = [m["value"] for m in record["metrics"] if m["name"] == TIME_METRIC]
    return found[0] if found else None


def is_throughput_goal(record: dict) -> bool:
    """A training run whose goal is throughput (``goal=throughput``): it trains for its budget,
    so it is never scored as a time to target (nor needs the runs an olympic mean does)."""
    return (record["workload"].get("params") or {}).get("goal") == "throughput"


def _is_time_to_target(record: dict) -> bool:
    """A record of a time-to-target run: it has the metric, or stopped short of it; never a run
    whose goal is throughput, whatever its status."""
    if is_throughput_goal(record):
        return False
    return _time_to_target(record) is not None or record["status"] == "aborted"


def scores(records: list[dict]) -> list[dict]:
    """One score per (workload, comparability key, world size) among time-to-target records."""
    groups: dict[tuple, list[dict]] = {}
    for r in records:
        if _is_time_to_target(r) and not is_self_test(r):
            groups.setdefault((r["workload"]["name"], comparability_key(r), r["launch"]["world_size"]), []).append(r)
    out = []
    for (name, key, world), runs in groups.items():
        times = [_time_to_target(r) for r in runs]
        missed = sum(t is None for t in times)
        score, reason = None, None
        if len(runs) < MIN_RUNS:
            reason = f"an olympic mean needs at least {MIN_RUNS} runs ({len(runs)} here)"
        elif missed > 1:
            reason = f"{missed} of {len(runs)} runs did not reach the target (at most one may be dropped)"
        else:
            score = olympic_mean([math.inf if t is None else t for t in times])
        out.append(
            {
                "workload": name,
                "comparability_key": key,
                "world_size": world,
                "olympic_mean_s": score,
                "reason": reason,
                "runs": [
                    {"run_id": r["run_id"], "seed": r["controls"]["seed"], "status": r["status"], TIME_METRIC: t}
                    for r, t in zip(runs, times)
                ],
            }
        )
    return out


def print_scores(console: Any, records: list[dict]) -> None:
    """The scores of a repeat, as a table (nothing when no group has more than one run)."""
    from rich.table import Table

    rows = [s for s in scores(records) if len(s["runs"]) > 1]
    if not rows:
        return
    t = Table(title="time to target, MLPerf scoring (olympic mean: fastest and slowest dropped)")
    for col in ("workload", "world", "runs (s, by seed)", "olympic mean s"):
        t.add_column(col, overflow="fold")
    for s in rows:
        runs = ", ".join(
            f"{r['seed']}: {r[TIME_METRIC]:.2f}" if r[TIME_METRIC] is not None else f"{r['seed']}: {r['status']}"
            for r in s["runs"]
        )
        t.add_row(
            s["workload"],
            str(s["world_size"]),
            runs,
            f"{s['olympic_mean_s']:.2f}" if s["olympic_mean_s"] is not None else s["reason"],
        )
    console.print(t)
