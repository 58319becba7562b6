"""What a stored record may claim: figures a measurement can produce, and nothing beyond.

A record can follow the schema and still be impossible: a GEMM at 1e300 TFLOP/s, a latency
of -3 ms, a run that finished 8,000 years before it started. The registry refuses such a
record when it is stored or imported (:func:`problems` is called from the store), and
``perfsuite check`` names it in a submissions tree, so that nothing downstream (tables,
plots, the leaderboard) ever has to draw it.

The rules, each a statement about the physical world rather than about one workload:

- every number of a metric (value, samples, per-rank figures, statistics) is finite and
  below :data:`MAX_MAGNITUDE` in size, well clear of where a unit conversion overflows;
- durations (a metric in s, ms, us or ns) and rates (a unit per second) are never negative;
- a FLOP rate is at most :data:`PEAK_MULTIPLE` times the highest datasheet figure of the
  device it was measured on, per process of the launch, and a byte rate at most as many
  times its highest bandwidth (memory or NVLink); where the device has no datasheet here (a
  CPU, a part not in the table) the fastest part of the table stands in for it;
- a run finishes no earlier than it starts.
"""

from __future__ import annotations

import functools
import math
from datetime import datetime
from typing import Any

from perfsuite.schemas.datasheets import BANDWIDTH_FIELDS, FLOPS_FIELDS, SPECS, GpuSpec, highest, lookup

# Generous on purpose: a burst above the datasheet (boost clocks, L2-resident data, a
# datasheet rounded down) stays far below it, and a figure beyond it is a bug or a forgery.
PEAK_MULTIPLE = 10
MAX_MAGNITUDE = 1e30
TIME_UNITS = {"s", "ms", "us", "µs", "ns"}
# Rates compared with the datasheet, as factors to its units (TFLOP/s and GB/s).
FLOPS_UNITS = {"FLOP/s": 1e-12, "GFLOP/s": 1e-3, "TFLOP/s": 1.0, "PFLOP/s": 1e3}
BYTES_UNITS = {
    "B/s": 1e-9,
    "KB/s": 1e-6,
    "MB/s": 1e-3,
    "GB/s": 1.0,
    "TB/s": 1e3,
    "KiB/s": 1024 / 1e9,
    "MiB/s": 1024**2 / 1e9,
    "GiB/s": 1024**3 / 1e9,
}


@functools.lru_cache(maxsize=64)
def _bound(spec: GpuSpec | None, fields: tuple[str, ...]) -> float:
    """The device's highest datasheet figure among ``fields``, else the table's highest (cached:
    asked once per metric, of a handful of datasheets)."""
    own = highest(spec, fields) if spec is not None else None
    if own is not None:
        return own
    return max(f for f in (highest(s, fields) for s in SPECS) if f is not None)


def _samples(metric: dict, metrics: list) -> list:
    """A metric's samples as numbers: encoded ones (perfsuite.schemas.samples) decoded; ones
    that do not decode are left to the hash check, which refuses them."""
    samples = metric.get("samples")
    if not isinstance(samples, dict):
        return samples if isinstance(samples, list) else []
    from perfsuite.schemas.samples import SamplesError, metric_samples

    try:
        return metric_samples(metric, metrics)
    except (SamplesError, KeyError, TypeError, ValueError):
        return []


def _numbers(metric: dict, metrics: list) -> list[tuple[str, Any]]:
    """(where, number) for every number a metric holds."""
    out: list[tuple[str, Any]] = [("value", metric.get("value"))]
    out += [(f"samples[{i}]", v) for i, v in enumerate(_samples(metric, metrics))]
    out += [(f"per_rank[{i}]", v) for i, v in enumerate(metric.get("per_rank") or [])]
    statistics = metric.get("statistics") or {}
    if isinstance(statistics, dict):
        out += [(f"statistics.{k}", v) for k, v in sorted(statistics.items())]
    return [(where, v) for where, v in out if isinstance(v, (int, float)) and not isinstance(v, bool)]


def _finite(value: int | float) -> bool:
    # An integer of hundreds of digits is compared exactly: converting it to a float overflows.
    return abs(value) <= MAX_MAGNITUDE and (isinstance(value, int) or math.isfinite(value))


def _real(value: int | float) -> bool:
    """Finite (an integer too large for a float is compared exactly, never converted)."""
    return isinstance(value, int) or math.isfinite(value)


# The years a record can be stamped with. A date outside them (0001, 9999) was stamped by a clock
# that was wrong, and sits at the edge of what a datetime or a database column holds.
EARLIEST_YEAR, LATEST_YEAR = 2000, 2199


def _before(a: datetime, b: datetime) -> bool:
    """``a < b``, False where comparing them in UTC leaves the years a datetime holds (the
    range check names those)."""
    try:
        return a < b
    except OverflowError:
        return False


def _timestamp(text: Any) -> datetime | None:
    if not isinstance(text, str):
        return None
    try:
        value = datetime.fromisoformat(text[:-1] + "+00:00" if text.endswith("Z") else text)
    except ValueError:
        return None  # the schema's check names a malformed timestamp
    return value if value.tzinfo is not None else None


def _plainly_possible(metric: dict, unit: str, spec: GpuSpec | None, world_size: int) -> bool:
    """True when every number of ``metric`` passes the rules at a glance: plain floats and
    integers, their sum finite (so each is), the smallest and largest within bounds. False
    only means "look number by number" (:func:`metric_problems` then names what is wrong): a
    record of a public round is checked in microseconds, not a Python loop per sample."""
    samples, per_rank = metric.get("samples"), metric.get("per_rank") or []
    statistics = metric.get("statistics") or {}
    if not isinstance(samples, list) or not isinstance(per_rank, list):
        return False
    figures = [metric.get("value"), *samples, *per_rank]
    if isinstance(statistics, dict):
        figures += [v for k, v in statistics.items() if k != "n"]
        count = statistics.get("n")
        numbers = figures if count is None else [*figures, count]
    else:
        numbers = figures
    if not set(map(type, numbers)) <= {float, int}:
        return False  # a bool, a string, a None: the number-by-number rules decide
    try:
        if not math.isfinite(math.fsum(numbers)):
            return False
    except OverflowError:
        return False
    low, high = min(numbers), max(numbers)
    if low < -MAX_MAGNITUDE or high > MAX_MAGNITUDE:
        return False
    if (unit in TIME_UNITS or unit.endswith("/s")) and low < 0:
        return False
    scale, fields = (
        (FLOPS_UNITS[unit], FLOPS_FIELDS) if unit in FLOPS_UNITS else (BYTES_UNITS.get(unit), BANDWIDTH_FIELDS)
    )
    if scale is not None and figures:
        return max(figures) * scale <= PEAK_MULTIPLE * max(1, world_size) * _bound(spec, fields)
    return True


def metric_problems(metric: dict, spec: GpuSpec | None, world_size: int, metrics: list | None = None) -> list[str]:
    """Every impossible figure of one metric, as ``name: why`` (``metrics``: the record's
    others, which encoded samples may refer to)."""
    unit = str(metric.get("unit"))
    if _plainly_possible(metric, unit, spec, world_size):
        return []
    name = f"{metric.get('case')}/{metric.get('name')}"
    numbers = _numbers(metric, metrics or [])
    compared = unit in FLOPS_UNITS or unit in BYTES_UNITS  # bounded by a datasheet below, far tighter
    bad = [where for where, v in numbers if not (_finite(v) or (compared and _real(v)))]
    if bad:
        return [f"{name}: {', '.join(bad[:3])} not a finite number below {MAX_MAGNITUDE:g} in size"]
    out = []
    if unit in TIME_UNITS or unit.endswith("/s"):
        # A spread (stdev, iqr) is never negative either; a negative figure of any other kind is impossible.
        negative = [where for where, v in numbers if v < 0]
        if negative:
            kind = "duration" if unit in TIME_UNITS else "rate"
            out.append(f"{name}: negative {kind} ({', '.join(negative[:3])}, in {unit})")
    scale, fields, what = None, None, ""
    if unit in FLOPS_UNITS:
        scale, fields, what = FLOPS_UNITS[unit], FLOPS_FIELDS, "TFLOP/s"
    elif unit in BYTES_UNITS:
        scale, fields, what = BYTES_UNITS[unit], BANDWIDTH_FIELDS, "GB/s"
    if scale is not None and fields is not None:
        limit = PEAK_MULTIPLE * max(1, world_size) * _bound(spec, fields)
        over = [(where, v) for where, v in numbers if where != "statistics.n" and v * scale > limit]
        if over:
            where, v = over[0]
            device = f"the {spec.name} datasheet" if spec else "the fastest datasheet known"
            out.append(
                f"{name}: {where} {v:.4g} {unit} is beyond {PEAK_MULTIPLE}x {device} "
                f"({limit:.4g} {what} for {max(1, world_size)} process(es))"
            )
    return out


def problems(record: dict) -> list[str]:
    """Every figure of a (schema-valid) record that no measurement can produce, one line each."""
    out = []
    started, finished = _timestamp(record.get("started_at")), _timestamp(record.get("finished_at"))
    if started is not None and finished is not None and _before(finished, started):
        out.append(f"$.finished_at {record['finished_at']} is before $.started_at {record['started_at']}")
    for field, stamp in (("started_at", started), ("finished_at", finished)):
        if stamp is not None and not EARLIEST_YEAR <= stamp.year <= LATEST_YEAR:
            out.append(
                f"$.{field} {record[field]} is outside the years {EARLIEST_YEAR} to {LATEST_YEAR} "
                "(the clock that stamped it was wrong)"
            )
    environment = record.get("environment") or {}
    device = environment.get("measured_device") or {}
    spec = lookup(device.get("name")) if device.get("kind") == "cuda" else None
    world = (record.get("launch") or {}).get("world_size")
    world_size = world if isinstance(world, int) and world > 0 else 1
    metrics = record.get("metrics") or []
    for i, metric in enumerate(metrics):
        if isinstance(metric, dict):
            out += [f"$.metrics[{i}] {p}" for p in metric_problems(metric, spec, world_size, metrics)]
    return out
