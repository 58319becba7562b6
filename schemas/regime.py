"""The power regime a figure was measured in, from what NVML saw while it was timed: one rule
for every reader of records (the comparability key, the registry's columns, the leaderboard's
filters, ``perfsuite show``).

The same GEMM on one H200 gives 781-793 TFLOP/s in a 20-call burst from a cool GPU (SM clock
1980 MHz) and 669-679 TFLOP/s after two seconds of back-to-back calls, when the power
controller holds the SM clock near 1455 MHz. Those are two different figures, not noise
around one: they never pool. The regimes:

- ``power-capped``: NVML named a power cap or thermal slowdown among the clock events *and*
  the median SM clock of the timed loop stayed below :data:`CAPPED_CLOCK_FRACTION` of the
  GPU's maximum. A one-sample event (a 20-call fp8 burst flagged "software power cap" at
  1875 MHz) does not make a run power-capped: its clocks were not held down.
- ``sustained``: not capped, timed for at least :data:`SUSTAINED_S` (longer than the power
  controller takes to react: do_bench's 100 ms rounds already run below a 20-call burst).
- ``burst``: not capped, timed for less than that.
- ``unobserved``: nothing was sampled (a CPU run, no NVML, or a driver that samples its
  measurement elsewhere).

A record's regime is that of its most constrained observed case (power-capped, then
sustained, then burst): a record is one run on one GPU, and its cases ran back to back.
Plain functions on record dicts: the registry uses them without importing the host.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from perfsuite.schemas.throttle import RUN_WIDE

BURST, SUSTAINED, POWER_CAPPED, UNOBSERVED = "burst", "sustained", "power-capped", "unobserved"
REGIMES = (BURST, SUSTAINED, POWER_CAPPED, UNOBSERVED)
# Most constrained first: the order in which a record's cases decide its regime.
_PRECEDENCE = (POWER_CAPPED, SUSTAINED, BURST)
SUSTAINED_S = 0.25
CAPPED_CLOCK_FRACTION = 0.9


def _max_sm_clock(record: Mapping[str, Any], summary: Mapping[str, Any]) -> float | None:
    """The GPU's maximum SM clock as NVML reported it before the run, else the highest seen."""
    seen = [
        float(g["max_sm_clock_mhz"])
        for g in ((record.get("gpu_state") or {}).get("before") or [])
        if isinstance(g, Mapping) and isinstance(g.get("max_sm_clock_mhz"), (int, float))
    ]
    if seen:
        return float(max(seen))
    top = summary.get("sm_clock_mhz_max")
    return float(top) if isinstance(top, (int, float)) else None


def summary_regime(record: Mapping[str, Any], summary: Mapping[str, Any] | None) -> str:
    """The regime of one sampler summary (``details.throttle[case]``) of ``record``."""
    if not isinstance(summary, Mapping) or not summary.get("samples"):
        return UNOBSERVED
    if summary.get("power_capped") or summary.get("thermal_slowdown"):
        median, top = summary.get("sm_clock_mhz_median"), _max_sm_clock(record, summary)
        if isinstance(median, (int, float)) and top and median < CAPPED_CLOCK_FRACTION * top:
            return POWER_CAPPED
    duration = summary.get("duration_s")
    return SUSTAINED if isinstance(duration, (int, float)) and duration >= SUSTAINED_S else BURST


def case_regimes(record: Mapping[str, Any]) -> dict[str, str]:
    """Each sampled case's regime (``run`` for a driver's summary of its whole measurement)."""
    throttle = (record.get("details") or {}).get("throttle")
    if not isinstance(throttle, Mapping):
        return {}
    return {str(case): summary_regime(record, s) for case, s in throttle.items() if isinstance(s, Mapping)}


def case_regime(record: Mapping[str, Any], case: str | None) -> str:
    """The regime of one case: its own summary, else the run-wide one, else ``unobserved``."""
    regimes = case_regimes(record)
    found = regimes.get(case) if case is not None else None
    return found or regimes.get(RUN_WIDE) or UNOBSERVED


def regime(record: Mapping[str, Any]) -> str:
    """The record's regime: its most constrained observed case's."""
    seen = set(case_regimes(record).values())
    return next((r for r in _PRECEDENCE if r in seen), UNOBSERVED)
