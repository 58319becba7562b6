"""Whether a figure was measured with its clocks held down by a power cap or heat: one rule
for every reader of records (the run's results table, ``perfsuite show``, the registry's
summaries behind ``perfsuite results``).

A record keeps what NVML saw while a case was timed in ``details.throttle`` (the sampler
summaries of ``perfsuite.measure.nvml_sampler``: clocks, power, clock events and the two verdicts
``power_capped`` and ``thermal_slowdown``), under the case's label, or under ``run`` for
drivers that sample their whole measurement. Plain functions on record dicts: the registry
uses them without importing the host.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

RUN_WIDE = "run"  # the key of a summary that covers the whole measurement rather than one case
FLAGS = (("power_capped", "power-capped"), ("thermal_slowdown", "thermal slowdown"))


def case_summary(throttle: Mapping[str, Any] | None, case: str | None) -> dict | None:
    """What NVML saw while ``case`` was timed, from a record's ``details.throttle`` (None
    where it holds no summary for the case: ``details`` is free-form, so anything but a
    summary dict counts as none)."""
    if not isinstance(throttle, Mapping):
        return None
    found = (throttle.get(case) if case is not None else None) or throttle.get(RUN_WIDE)
    return found if isinstance(found, dict) else None


def record_summary(record: Mapping[str, Any], case: str | None) -> dict | None:
    """:func:`case_summary` of a whole record."""
    return case_summary((record.get("details") or {}).get("throttle"), case)


def throttle_flag(summary: Mapping[str, Any] | None) -> str | None:
    """'power-capped', 'thermal slowdown', both, or None: what a table shows beside a figure."""
    if not summary:
        return None
    return " + ".join(name for key, name in FLAGS if summary.get(key)) or None
