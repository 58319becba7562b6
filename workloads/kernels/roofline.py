"""``perfsuite roofline``: kernel results placed on their device's measured roofline.

For each case of a kernel record with a ``tflops`` and/or ``gbps`` metric:

- arithmetic intensity I = FLOPs / bytes per call, exact from ``details["work"]`` (which
  every built-in kernel workload stores), else from the two metrics (TFLOP/s / GB/s);
- the roof = min(peak of its ``matmul.<dtype>`` ceiling, I x memory bandwidth), both from
  the device's latest ``kernels.ceilings`` record; the case is memory-bound where the
  slope is the lower of the two, compute-bound where the peak is;
- cases that do no FLOPs (copies, fused elementwise chains) sit at I = 0, where a log
  roofline has no place: they are judged by their GB/s against their bandwidth ceiling
  (``memory`` or the resource they name) and drawn in a second panel of the plot.

The math is plain functions on record dicts (tested without a registry); the command
reads the registry, prints a table (or JSON) and writes a PNG/SVG with matplotlib.
"""
from __future__ import annotations

import os
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Iterable

import click

from suite.roofline import CEILINGS_WORKLOAD, ceiling_table

MEMORY = "memory"
PLOT_SUFFIXES = (".png", ".svg")


@dataclass(frozen=True)
class Roof:
    """A device's measured ceilings: matmul peaks (TFLOP/s) and bandwidths (GB/s)."""

    device_key: str
    run_id: str
    peaks_tflops: dict[str, float]
    bandwidths_gbps: dict[str, float]

    @classmethod
    def from_record(cls, record: dict) -> "Roof":
        peaks, bands = {}, {}
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
        point = Point(record["workload"]["name"], record["run_id"], case, resource, intensity, tflops, gbps,
                      None, None, None, None, note)
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
    return [r for r in records if r["workload"]["category"] == "kernels" and r["workload"]["name"] != CEILINGS_WORKLOAD
            and r["status"] == "success" and r["verification"]["status"] == "passed"]


def report(records: list[dict], ceilings: dict) -> dict:
    """The JSON-ready roofline of ``records`` under ``ceilings`` (a kernels.ceilings record)."""
    roof = Roof.from_record(ceilings)
    points = [p for r in kernel_records(records) for p in place(r, roof)]
    return {"device_key": roof.device_key, "device": ceilings["environment"]["measured_device"]["name"],
            "ceilings_run_id": roof.run_id, "peaks_tflops": roof.peaks_tflops,
            "bandwidths_gbps": roof.bandwidths_gbps, "points": [asdict(p) for p in points]}


# -- the plot ----------------------------------------------------------------------------------
def require_matplotlib() -> None:
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise click.ClickException("plotting needs matplotlib: pip install 'perfsuite[plot]'") from None


def plot(data: dict, path: Path) -> None:
    """Write the roofline as PNG or SVG (by ``path``'s suffix): the log-log roofline of cases
    with FLOPs, and beside it the GB/s of cases without FLOPs against their ceilings."""
    from matplotlib.figure import Figure

    points = [p for p in data["points"] if p["fraction"] is not None]
    compute = [p for p in points if p["intensity"]]
    bandwidth = [p for p in points if p["intensity"] == 0]
    panels = 1 + bool(bandwidth)
    fig = Figure(figsize=(7 * panels, 5.5), layout="constrained")
    ax = fig.add_subplot(1, panels, 1)
    bw = data["bandwidths_gbps"].get(MEMORY)
    xs = [p["intensity"] for p in compute]
    ridges = [peak * 1e3 / bw for peak in data["peaks_tflops"].values()] if bw else []
    lo = min(xs + ridges + [1.0]) / 8
    hi = max(xs + ridges + [1.0]) * 8
    colors = {}
    for resource, peak in sorted(data["peaks_tflops"].items(), key=lambda kv: kv[1]):
        ridge = peak * 1e3 / bw if bw else lo
        grid = [lo, max(lo, min(ridge, hi)), hi]
        (line,) = ax.plot(grid, [min(peak, x * bw / 1e3) if bw else peak for x in grid], lw=1.2,
                          label=f"{resource}: {_num(peak)} TFLOP/s")
        colors[resource] = line.get_color()
    if bw:
        ax.plot([lo, hi], [lo * bw / 1e3, hi * bw / 1e3], ls=":", color="grey", lw=0.8,
                label=f"{MEMORY}: {_num(bw)} GB/s")
    for p in compute:
        ax.scatter(p["intensity"], p["tflops"], zorder=3, color=colors.get(p["resource"], "black"))
        ax.annotate(f"{p['workload'].removeprefix('kernels.')}:{p['case']} {p['fraction']:.0%}",
                    (p["intensity"], p["tflops"]), textcoords="offset points", xytext=(4, 4), fontsize=7)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(lo, hi)
    ax.set_xlabel("arithmetic intensity (FLOP/byte)")
    ax.set_ylabel("TFLOP/s")
    ax.set_title(f"{data['device']}: roofline (ceilings run {data['ceilings_run_id'][:8]})", fontsize=9)
    ax.grid(True, which="both", lw=0.3)
    ax.legend(fontsize=7, loc="lower right")
    if bandwidth:
        bx = fig.add_subplot(1, panels, 2)
        labels = [f"{p['workload'].removeprefix('kernels.')}:{p['case']}" for p in bandwidth]
        bx.barh(labels, [p["gbps"] for p in bandwidth], color="tab:blue")
        for resource in dict.fromkeys(p["bound"] for p in bandwidth):
            ceiling = data["bandwidths_gbps"][resource]
            bx.axvline(ceiling, color="black", ls="--", lw=1, label=f"{resource} ceiling: {_num(ceiling)} GB/s")
        for i, p in enumerate(bandwidth):
            bx.annotate(f" {p['fraction']:.0%}", (p["gbps"], i), va="center", fontsize=7)
        bx.invert_yaxis()
        bx.legend(fontsize=7, loc="lower right")
        bx.set_xlabel("GB/s (bytes read + written)")
        bx.set_title("no FLOPs (intensity 0): GB/s against the bandwidth ceiling", fontsize=9)
    fig.savefig(path)


# -- the command -------------------------------------------------------------------------------
def _num(v: float | None) -> str:
    """Three significant digits, thousands separated: 773, 4,240, 0.0211."""
    if v is None:
        return ""
    return f"{v:,.0f}" if abs(v) >= 100 else f"{v:.3g}"


def render_table(data: dict) -> Any:
    from rich.table import Table

    t = Table(title=f"roofline of {data['device']} (ceilings run {data['ceilings_run_id'][:8]})")
    for col, just in (("workload", "left"), ("case", "left"), ("intensity FLOP/B", "right"),
                      ("TFLOP/s", "right"), ("GB/s", "right"), ("bound", "left"), ("roof", "right"),
                      ("% of roof", "right"), ("run", "left"), ("note", "left")):
        t.add_column(col, justify=just)
    for p in data["points"]:
        intensity = "0 (no FLOPs)" if p["intensity"] == 0 else _num(p["intensity"])
        roof = f"{_num(p['roof'])} {p['roof_unit']}" if p["roof"] is not None else ""
        pct = f"{p['fraction'] * 100:.1f}%" if p["fraction"] is not None else ""
        t.add_row(p["workload"], p["case"], intensity, _num(p["tflops"]), _num(p["gbps"]), p["bound"] or "",
                  roof, pct, p["run_id"][:8], p["note"])
    return t


def select_records(registry: Any, device_key: str | None, run_ids: tuple[str, ...],
                   limit: int) -> tuple[str, list[dict]]:
    """The device and its records: the named runs, else the newest run of each distinct
    kernel measurement (comparability key) among the last ``limit`` runs."""
    if run_ids:
        records = [registry.get(r) for r in run_ids]
        keys = {r["environment"]["measured_device"]["key"] for r in records}
        if device_key is None and len(keys) > 1:
            raise click.ClickException(f"the runs were measured on {len(keys)} devices; pick one with --device-key")
        device_key = device_key or keys.pop()
        return device_key, [r for r in records if r["environment"]["measured_device"]["key"] == device_key]
    rows = [s for s in registry.results(limit=limit)
            if s["status"] == "success" and s["verification"] == "passed" and s["workload"] != CEILINGS_WORKLOAD]
    if device_key is None:
        if not rows:
            raise click.ClickException("no passed runs in the registry; run some kernels first")
        device_key = rows[0]["device_key"]
    newest: dict[str, dict] = {}
    for s in rows:  # newest first
        if s["device_key"] == device_key:
            newest.setdefault(s["comparability_key"], s)
    return device_key, [registry.get(s["run_id"]) for s in newest.values()]


@click.command("roofline")
@click.option("--device-key", default=None, metavar="KEY",
              help="Device to show (environment.measured_device.key); default: that of the newest run.")
@click.option("--run", "run_ids", multiple=True, metavar="RUN_ID", help="Only these runs (repeatable).")
@click.option("--limit", type=click.IntRange(min=1), default=200, show_default=True,
              help="Newest runs to consider when no --run is given.")
@click.option("--out", "out_path", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Write the plot here (.png or .svg); needs matplotlib (perfsuite[plot]).")
@click.option("--json", "as_json", is_flag=True, help="Print the placed points as JSON.")
@click.pass_context
def roofline_command(ctx: click.Context, device_key: str | None, run_ids: tuple[str, ...], limit: int,
                     out_path: Path | None, as_json: bool) -> None:
    """Place kernel results on the device's measured roofline: intensity, achieved TFLOP/s
    and GB/s, what bounds each case, and its fraction of the roof."""
    from registry import RegistryError, open_registry

    if out_path is not None:
        if out_path.suffix.lower() not in PLOT_SUFFIXES:
            raise click.BadParameter(f"must end in {' or '.join(PLOT_SUFFIXES)}", param_hint="--out")
        require_matplotlib()
    obj = ctx.find_root().obj or {}
    url = obj.get("db_url") or os.environ.get("PERFSUITE_DB")
    try:
        with open_registry(url) as registry:
            device_key, records = select_records(registry, device_key, run_ids, limit)
            ceilings = registry.latest_ceilings(device_key)
    except RegistryError as exc:
        raise click.ClickException(str(exc)) from None
    if ceilings is None:
        raise click.ClickException(f"no passed {CEILINGS_WORKLOAD} run of device {device_key} in the registry: "
                                   f"run 'perfsuite run {CEILINGS_WORKLOAD}' on it first")
    data = report(records, ceilings)
    if out_path is not None:
        plot(data, out_path)
        data["plot"] = str(out_path)
    if as_json:
        import json

        click.echo(json.dumps(data, indent=2, sort_keys=True))
        return
    from rich.console import Console

    console = Console(soft_wrap=False, width=max(120, int(os.environ.get("COLUMNS", "0") or 0)))
    if not data["points"]:
        console.print(f"no verified kernel runs with TFLOP/s or GB/s on device {device_key}")
    else:
        console.print(render_table(data))
    if any(p["intensity"] == 0 for p in data["points"]):
        console.print("cases without FLOPs sit at intensity 0: each is judged by its GB/s against its "
                      "bandwidth ceiling (the plot's right panel), not on the log-log roofline")
    if out_path is not None:
        console.print(f"plot written to {out_path}")
