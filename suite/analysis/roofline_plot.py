"""The roofline plot of a :func:`perfsuite.analysis.roofline_report.report`: matplotlib, imported only
when a plot is asked for (``perfsuite roofline --out FILE``)."""

from __future__ import annotations

from pathlib import Path

from perfsuite.analysis.roofline_report import MEMORY, num

PLOT_SUFFIXES = (".png", ".svg")


def plot(data: dict, path: Path, replace: bool = False, parents: bool = False) -> None:
    """Write the roofline as PNG or SVG (by ``path``'s suffix): the log-log roofline of cases
    with FLOPs, and beside it the GB/s of cases without FLOPs against their ceilings. A path
    that is not a new name or a plot perfsuite wrote there before (``replace``: or any regular
    file) is refused (``OutputRefused``: :func:`perfsuite.owned_file.write_owned_file`); a missing
    folder above it is created only with ``parents``."""
    from matplotlib.figure import Figure

    points = [p for p in data["points"] if p["fraction"] is not None]
    compute = [p for p in points if p["intensity"]]
    bandwidth = [p for p in points if p["intensity"] == 0]
    panels = 1 + bool(bandwidth)
    fig = Figure(figsize=(7 * panels, 5.5), layout="constrained")
    roofline_panel(fig.add_subplot(1, panels, 1), data, compute)
    if bandwidth:
        bandwidth_panel(fig.add_subplot(1, panels, 2), data, bandwidth)
    import io

    from perfsuite.owned_file import write_owned_file

    buffer = io.BytesIO()  # drawn in memory, then written as a regular file only (never a device or FIFO)
    fig.savefig(buffer, format=Path(path).suffix.lower().lstrip("."))
    write_owned_file(
        path, buffer.getvalue(), command="roofline", parents=parents, replace=replace, replace_option="--replace"
    )


def roofline_panel(ax, data: dict, compute: list[dict]) -> None:
    """The log-log roofline: one roof per matmul peak under the memory slope, and the cases."""
    bw = data["bandwidths_gbps"].get(MEMORY)
    xs = [p["intensity"] for p in compute]
    ridges = [peak * 1e3 / bw for peak in data["peaks_tflops"].values()] if bw else []
    lo = min(xs + ridges + [1.0]) / 8
    hi = max(xs + ridges + [1.0]) * 8
    colors = {}
    for resource, peak in sorted(data["peaks_tflops"].items(), key=lambda kv: kv[1]):
        ridge = peak * 1e3 / bw if bw else lo
        grid = [lo, max(lo, min(ridge, hi)), hi]
        (line,) = ax.plot(
            grid,
            [min(peak, x * bw / 1e3) if bw else peak for x in grid],
            lw=1.2,
            label=f"{resource}: {num(peak)} TFLOP/s",
        )
        colors[resource] = line.get_color()
    if bw:
        ax.plot(
            [lo, hi], [lo * bw / 1e3, hi * bw / 1e3], ls=":", color="grey", lw=0.8, label=f"{MEMORY}: {num(bw)} GB/s"
        )
    for p in compute:
        ax.scatter(p["intensity"], p["tflops"], zorder=3, color=colors.get(p["resource"], "black"))
        ax.annotate(
            f"{p['workload'].removeprefix('kernels.')}:{p['case']} {p['fraction']:.0%}",
            (p["intensity"], p["tflops"]),
            textcoords="offset points",
            xytext=(4, 4),
            fontsize=7,
        )
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(lo, hi)
    ax.set_xlabel("arithmetic intensity (FLOP/byte)")
    ax.set_ylabel("TFLOP/s")
    ax.set_title(f"{data['device']}: roofline (ceilings run {data['ceilings_run_id'][:8]})", fontsize=9)
    ax.grid(True, which="both", lw=0.3)
    ax.legend(fontsize=7, loc="lower right")


def bandwidth_panel(bx, data: dict, bandwidth: list[dict]) -> None:
    """Cases without FLOPs: their GB/s as bars against the bandwidth ceiling each names."""
    labels = [f"{p['workload'].removeprefix('kernels.')}:{p['case']}" for p in bandwidth]
    bx.barh(labels, [p["gbps"] for p in bandwidth], color="tab:blue")
    for resource in dict.fromkeys(p["bound"] for p in bandwidth):
        ceiling = data["bandwidths_gbps"][resource]
        bx.axvline(ceiling, color="black", ls="--", lw=1, label=f"{resource} ceiling: {num(ceiling)} GB/s")
    for i, p in enumerate(bandwidth):
        bx.annotate(f" {p['fraction']:.0%}", (p["gbps"], i), va="center", fontsize=7)
    bx.invert_yaxis()
    bx.legend(fontsize=7, loc="lower right")
    bx.set_xlabel("GB/s (bytes read + written)")
    bx.set_title("no FLOPs (intensity 0): GB/s against the bandwidth ceiling", fontsize=9)
