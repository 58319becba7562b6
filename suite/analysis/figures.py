"""How a figure is judged in a table: its fraction of the measured ceiling (never shown above
100%: the ceiling is then understated and its run must be redone), its fraction of the
datasheet peak where the device is known, and whether NVML saw the clocks held down by a
power cap or heat while it was measured. Plain functions of a record dict, used by the
results table, ``perfsuite show`` and ``perfsuite results``."""

from __future__ import annotations

from collections.abc import Mapping

from perfsuite.measure import specs
from perfsuite.schemas.throttle import record_summary, throttle_flag

CEILINGS_WORKLOAD = "kernels.ceilings"
THROUGHPUT_OF = {"tflops": "matmul.", "gbps": ""}


def understated(metric: dict) -> bool:
    """A result above its ceiling: the ceiling, not the result, is wrong."""
    roof = metric.get("roofline")
    return bool(roof and roof.get("fraction") is not None and roof["fraction"] > 1.0)


def ceiling_cell(metric: dict, long: bool = False, ids: Mapping[str, str] | None = None) -> str:
    """'87.3% matmul.bf16', or the understated-ceiling warning, or (long) why there is none.
    ``ids``: run id -> the prefix that names it in the registry, where the caller knows it."""
    roof = metric.get("roofline")
    if not roof:
        return ""
    if roof.get("fraction") is None:
        return (roof.get("reason") or "") if long else ""
    run = roof.get("ceiling_run_id") or ""  # whole, unless the caller knows which prefix is unique
    run = (ids or {}).get(run, run)
    if understated(metric):
        return f"ceiling understated: above {roof['resource']} of run {run}; redo {CEILINGS_WORKLOAD}"
    pct = f"{roof['fraction'] * 100:.1f}%"
    if long:
        unit = roof.get("ceiling_unit") or ""
        return f"{pct} of {roof['resource']} {_num(roof.get('ceiling'))} {unit} (run {run})"
    return f"{pct} {roof['resource']}"


def spec_resource(record: dict, metric: dict) -> str | None:
    """The datasheet resource a metric is compared with: its roofline's, or for a ceilings
    record the case itself (a measured ceiling against the datasheet)."""
    roof = metric.get("roofline")
    if roof:
        return roof["resource"]
    if (
        record["workload"]["name"] == CEILINGS_WORKLOAD
        and metric["name"] in THROUGHPUT_OF
        and metric["case"].startswith(THROUGHPUT_OF[metric["name"]])
    ):
        return metric["case"]
    return None


def spec_cell(record: dict, metric: dict) -> str:
    """'78.1% of H200 SXM bf16' where the device's datasheet is known, else ''."""
    resource = spec_resource(record, metric)
    if resource is None:
        return ""
    device = ((record.get("environment") or {}).get("measured_device") or {}).get("name")
    found = specs.spec_fraction(device, resource, float(metric["value"]))
    if found is None:
        return ""
    fraction, spec = found
    return f"{fraction * 100:.1f}% of {spec.name}"


def throttle_cell(record: dict, case: str) -> str:
    """'power-capped (SM 1455-1980 MHz)' when NVML saw a power or thermal event while
    ``case`` was timed, else ''."""
    return throttle_summary_cell(record_summary(record, case))


def throttle_summary_cell(summary: dict | None) -> str:
    """:func:`throttle_cell` of one NVML summary (what the registry's run summaries carry)."""
    flag = throttle_flag(summary)
    if not flag or summary is None:
        return ""
    lo, hi = summary.get("sm_clock_mhz_min"), summary.get("sm_clock_mhz_max")
    return f"{flag} (SM {_num(lo)}-{_num(hi)} MHz)" if lo is not None else flag


def _num(v: float | None) -> str:
    if v is None:
        return "?"
    return f"{v:,.0f}" if abs(v) >= 100 else f"{v:.3g}"
