"""Kernel results placed on their device's measured roofline (what ``perfsuite roofline``
prints; the plot is :mod:`perfsuite.analysis.roofline_plot`, the command :mod:`perfsuite.cli.roofline`).

For each case of a kernel record with a ``tflops`` and/or ``gbps`` metric:

- arithmetic intensity I = FLOPs / bytes per call, exact from ``details["work"]`` (which
  every built-in kernel workload stores), else from the two metrics (TFLOP/s / GB/s);
- the roof = min(peak of its ``matmul.<dtype>`` ceiling, I x memory bandwidth), both from
  the device's latest ``kernels.ceilings`` record; the case is memory-bound where the
  slope is the lower of the two, compute-bound where the peak is;
- cases that do no FLOPs (copies, fused elementwise chains) sit at I = 0, where a log
  roofline has no place: they are judged by their GB/s against their bandwidth ceiling
  (``memory`` or the resource they name) and drawn in a second panel of the plot.

The math is plain functions on record dicts, tested without a registry.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from perfsuite.measure.roofline import CEILINGS_WORKLOAD, ceiling_table

if TYPE_CHECKING:
    from rich.console import JustifyMethod

MEMORY = "memory"


@dataclass(frozen=True)
class Roof:
    """A device's measured ceilings: matmul peaks (TFLOP/s) and bandwidths (GB/s)."""

    device_key: str
    run_id: str
    peaks_tflops: dict[str, float]
    bandwidths_gbps: dict[str, float]

    @classmethod
    def from_record(cls, record: dict) -> "Roof":
        peaks: dict[str, float] = {}
        bands: dict[str, float] = {}
        for resource, metric in ceiling_table(record).items():
            (peaks if resource.startswith("matmul.") else bands)[resource] = float(metric["value"])
        return cls(record["environment"]["measured_device"]["key"], record["run_id"], peaks, bands)

    @property
    def memory_gbps(self) -> float | None:
        return self.bandwidths_gbps.get(MEMORY)

    def ridge(self, resource: str) -> float | None:
        """Intensity (FLOP/B) where the memory slope meets ``resource``'s peak."""
        peak, bw = self.peaks_tflops.get(resource), self.memory_gbps
        return peak * 1e3 / bw if peak and bw else None


@dataclass
class Point:
    """One case of one record on the roofline."""

    workload: str
    run_id: str
    case: str
    resource: str | None  # the ceiling the case names (matmul.bf16, memory ...)
    intensity: float | None  # FLOP/B; 0 for cases that do no FLOPs; None if unknown
    tflops: float | None  # achieved
    gbps: float | None  # achieved
    bound: str | None  # "memory", "compute", or the bandwidth resource that limits it
    roof: float | None  # the roof at this intensity, in roof_unit
    roof_unit: str | None
    fraction: float | None  # achieved / roof
    note: str = ""

    @property
    def bandwidth_only(self) -> bool:
        return self.intensity == 0


def _metric_values(record: dict) -> dict[tuple[str, str], dict]:
    return {(m["case"], m["name"]): m for m in record["metrics"]}


def place(record: dict, roof: Roof) -> list[Point]:
    """The cases of ``record`` that report TFLOP/s or GB/s, placed under ``roof``."""
    metrics = _metric_values(record)
    work = (record.get("details") or {}).get("work") or {}
    cases = list(dict.fromkeys(m["case"] for m in record["metrics"] if m["name"] in ("tflops", "gbps")))
    points = []
    for case in cases:
        tf_m, gb_m = metrics.get((case, "tflops")), metrics.get((case, "gbps"))
        tflops = float(tf_m["value"]) if tf_m else None
        gbps = float(gb_m["value"]) if gb_m else None
        resource = next((m["roofline"]["resource"] for m in (tf_m, gb_m) if m and m.get("roofline")), None)
        per_call = work.get(case)
        if per_call is not None:
            flops, nbytes = float(per_call["flops"]), float(per_call["bytes"])
            intensity = flops / nbytes if nbytes > 0 else (None if flops > 0 else 0.0)
            note = ""
        elif tflops is not None and gbps:
            intensity, note = tflops * 1e3 / gbps, "intensity from the TFLOP/s and GB/s metrics"
        elif tflops is None:
            intensity, note = 0.0, ""
        else:
            intensity, note = None, "no work per call recorded: intensity unknown"
        point = Point(
            record["workload"]["name"],
            record["run_id"],
            case,
            resource,
            intensity,
            tflops,
            gbps,
            None,
            None,
            None,
            None,
            note,
        )
        if intensity == 0:
            _judge_bandwidth(point, roof)
        else:
            _judge_compute(point, roof)
        points.append(point)
    return points


def _judge_bandwidth(p: Point, roof: Roof) -> None:
    """A case without FLOPs: its GB/s against the bandwidth ceiling it names (memory by default)."""
    resource = p.resource if p.resource and not p.resource.startswith("matmul.") else MEMORY
    ceiling = roof.bandwidths_gbps.get(resource)
    p.bound = resource
    if ceiling is None or p.gbps is None:
        p.note = _join(p.note, f"no {resource!r} ceiling in run {roof.run_id}" if ceiling is None else "no GB/s")
        return
    p.roof, p.roof_unit, p.fraction = ceiling, "GB/s", p.gbps / ceiling


def _judge_compute(p: Point, roof: Roof) -> None:
    """A case with FLOPs: TFLOP/s against min(peak, intensity x memory bandwidth)."""
    peak = roof.peaks_tflops.get(p.resource) if p.resource else None
    slope = p.intensity * roof.memory_gbps / 1e3 if p.intensity is not None and roof.memory_gbps else None
    candidates = [(v, kind) for v, kind in ((peak, "compute"), (slope, "memory")) if v is not None]
    if p.tflops is None or not candidates:
        missing = [] if peak is not None else [f"no {p.resource!r} peak"]
        missing += [] if slope is not None else ["no memory ceiling or intensity"]
        p.note = _join(p.note, "; ".join(missing) + f" in run {roof.run_id}")
        return
    p.roof, p.bound = min(candidates)
    p.roof_unit, p.fraction = "TFLOP/s", p.tflops / p.roof
    if peak is None:
        p.note = _join(p.note, f"no {p.resource!r} peak: judged against the memory slope only")


def _join(a: str, b: str) -> str:
    return f"{a}; {b}" if a and b else a or b


def kernel_records(records: Iterable[dict]) -> list[dict]:
    """Records that belong on a roofline: kernel workloads other than the ceilings, run to
    the end and verified (a failed verification is never ranked)."""
    return [
        r
        for r in records
        if r["workload"]["category"] == "kernels"
        and r["workload"]["name"] != CEILINGS_WORKLOAD
        and r["status"] == "success"
        and r["verification"]["status"] == "passed"
    ]


def report(records: list[dict], ceilings: dict) -> dict:
    """The JSON-ready roofline of ``records`` under ``ceilings`` (a kernels.ceilings record)."""
    roof = Roof.from_record(ceilings)
    points = [p for r in kernel_records(records) for p in place(r, roof)]
    return {
        "device_key": roof.device_key,
        "device": ceilings["environment"]["measured_device"]["name"],
        "ceilings_run_id": roof.run_id,
        "peaks_tflops": roof.peaks_tflops,
        "bandwidths_gbps": roof.bandwidths_gbps,
        "points": [asdict(p) for p in points],
    }


# -- the table ---------------------------------------------------------------------------------
def num(v: float | None) -> str:
    """Three significant digits, thousands separated: 773, 4,240, 0.0211."""
    if v is None:
        return ""
    return f"{v:,.0f}" if abs(v) >= 100 else f"{v:.3g}"


def render_table(data: dict) -> Any:
    from rich.table import Table

    t = Table(title=f"roofline of {data['device']} (ceilings run {data['ceilings_run_id'][:8]})")
    columns: tuple[tuple[str, JustifyMethod], ...] = (
        ("workload", "left"),
        ("case", "left"),
        ("intensity FLOP/B", "right"),
        ("TFLOP/s", "right"),
        ("GB/s", "right"),
        ("bound", "left"),
        ("roof", "right"),
        ("% of roof", "right"),
        ("run", "left"),
        ("note", "left"),
    )
    for col, just in columns:
        t.add_column(col, justify=just)
    for p in data["points"]:
        intensity = "0 (no FLOPs)" if p["intensity"] == 0 else num(p["intensity"])
        roof = f"{num(p['roof'])} {p['roof_unit']}" if p["roof"] is not None else ""
        pct = f"{p['fraction'] * 100:.1f}%" if p["fraction"] is not None else ""
        if p["fraction"] is not None and p["fraction"] > 1:  # a ceiling is an upper bound: this one is wrong
            pct = f"ceiling understated: redo {CEILINGS_WORKLOAD} (run {data['ceilings_run_id'][:8]})"
        t.add_row(
            p["workload"],
            p["case"],
            intensity,
            num(p["tflops"]),
            num(p["gbps"]),
            p["bound"] or "",
            roof,
            pct,
            p["run_id"][:8],
            p["note"],
        )
    return t
