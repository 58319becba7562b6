"""``Case.baseline``: every other case of the run gets a ``speedup`` metric against the
baseline case (baseline median time / its own), stored in the record and shown in the
results table; the record names its baseline case and its headline metric."""

from __future__ import annotations

import time

import pytest
from rich.console import Console
from support.factories import make_metric, make_record

from perfsuite import Case, Work
from perfsuite.analysis.tables import results_table
from perfsuite.context import RunContext
from perfsuite.controls import Controls
from perfsuite.measure.speedup import BaselineSpeedups


def test_speedups_come_once_both_times_are_known_whatever_the_order():
    s = BaselineSpeedups()
    assert s.note("fast", False, [1.0, 2.0]) == []  # no baseline yet
    assert s.note("eager", True, [4.0, 4.0, 6.0]) == [("fast", [4.0, 2.0])]
    assert s.note("other", False, [8.0]) == [("other", [0.5])]
    assert s.baseline == "eager"
    with pytest.raises(ValueError, match="two baseline cases in one run: 'eager' and 'fast2'"):
        s.note("fast2", True, [1.0])


def _sleeper(seconds: float):
    return lambda: time.sleep(seconds)


def test_the_run_context_adds_a_speedup_per_case_and_names_the_baseline():
    ctx = RunContext(params=None, controls=Controls(device="cpu", iterations=3, warmup=0, min_time_s=None))
    ctx.measure(Case("fast", _sleeper(0.001), Work(items=1.0)))
    ctx.measure(Case("slow", _sleeper(0.004), Work(items=1.0), baseline=True))
    speedups = {m["case"]: m for m in ctx.metrics if m["name"] == "speedup"}
    assert set(speedups) == {"fast"} and ctx.details["baseline_case"] == "slow"
    fast = speedups["fast"]
    assert fast["unit"] == "x" and fast["higher_is_better"] and len(fast["samples"]) == 3
    assert fast["value"] > 1.5  # 4 ms against 1 ms, whatever the scheduler adds


def test_results_table_shows_each_case_against_the_baseline():
    metrics = [
        make_metric("eager", "time_ms", "ms", [2.0], higher_is_better=False),
        make_metric("eager", "gbps", "GB/s", [100.0], higher_is_better=True),
        make_metric("compile", "time_ms", "ms", [1.0], higher_is_better=False),
        make_metric("compile", "gbps", "GB/s", [200.0], higher_is_better=True),
        make_metric("compile", "speedup", "x", [2.0], higher_is_better=True),
    ]
    record = make_record(
        workload_name="kernels.fusion",
        metrics=metrics,
        details={"baseline_case": "eager"},
        workload={"primary_metric": "gbps"},
    )
    console = Console(width=250, record=True)
    console.print(results_table([record]))
    rows = {line.split()[1]: line for line in console.export_text().splitlines() if "kernels.fusion" in line}
    assert "baseline" in rows["eager"] and "2.00x eager" in rows["compile"]
    assert "200" in rows["compile"]  # the headline is the named metric, not the speed-up
