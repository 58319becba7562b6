"""A roofline plot as inline SVG (no plotting library, no network): each case that reports
both TFLOP/s and GB/s is a point at its arithmetic intensity (FLOP per byte moved), under
the roofs of the system's latest ``kernels.ceilings`` run (memory bandwidth and each
matrix rate). Text in the SVG is escaped."""

from __future__ import annotations

import math
from html import escape

WIDTH, HEIGHT, MARGIN = 640, 400, 56
X_RANGE = (0.01, 10000.0)  # FLOP/byte


def _log_scale(value: float, low: float, high: float, size: float) -> float:
    return (math.log10(value) - math.log10(low)) / (math.log10(high) - math.log10(low)) * size


def roofline_svg(
    points: list[tuple[str, float, float]], memory_gbps: float | None, peaks_tflops: dict[str, float]
) -> str | None:
    """``points``: (label, FLOP/byte, TFLOP/s). None when there is nothing to plot."""
    points = [p for p in points if p[1] > 0 and p[2] > 0]
    if not points:
        return None
    ys = [p[2] for p in points] + list(peaks_tflops.values())
    y_low = 10 ** math.floor(math.log10(min(ys) / 2))
    y_high = 10 ** math.ceil(math.log10(max(ys) * 1.5))
    x_low, x_high = X_RANGE
    x_low = min(x_low, 10 ** math.floor(math.log10(min(p[1] for p in points))))
    x_high = max(x_high, 10 ** math.ceil(math.log10(max(p[1] for p in points))))
    plot_w, plot_h = WIDTH - 2 * MARGIN, HEIGHT - 2 * MARGIN

    def xy(x: float, y: float) -> tuple[float, float]:
        return (
            MARGIN + _log_scale(x, x_low, x_high, plot_w),
            HEIGHT - MARGIN - _log_scale(min(max(y, y_low), y_high), y_low, y_high, plot_h),
        )

    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="roofline" width="{WIDTH}" height="{HEIGHT}" '
        f'viewBox="0 0 {WIDTH} {HEIGHT}" role="img" aria-label="roofline">',
        f'<rect x="{MARGIN}" y="{MARGIN}" width="{plot_w}" height="{plot_h}" fill="none" stroke="#999"/>',
    ]
    for exp in range(int(math.log10(x_low)), int(math.log10(x_high)) + 1):
        x, _ = xy(10**exp, y_low)
        out.append(f'<text x="{x:.1f}" y="{HEIGHT - MARGIN + 16}" font-size="11" text-anchor="middle">1e{exp}</text>')
    for exp in range(int(math.log10(y_low)), int(math.log10(y_high)) + 1):
        _, y = xy(x_low, 10**exp)
        out.append(f'<text x="{MARGIN - 6}" y="{y + 4:.1f}" font-size="11" text-anchor="end">1e{exp}</text>')
    out.append(
        f'<text x="{WIDTH / 2}" y="{HEIGHT - 12}" font-size="12" text-anchor="middle">'
        f"arithmetic intensity (FLOP/byte)</text>"
    )
    out.append(
        f'<text x="14" y="{HEIGHT / 2}" font-size="12" text-anchor="middle" '
        f'transform="rotate(-90 14 {HEIGHT / 2})">TFLOP/s</text>'
    )
    for name, peak in sorted(peaks_tflops.items(), key=lambda kv: kv[1]):
        if memory_gbps:
            knee = peak * 1e12 / (memory_gbps * 1e9)
            start = max(x_low, y_low * 1e12 / (memory_gbps * 1e9))  # where the slope enters the plot
            x0, y0 = xy(start, start * memory_gbps * 1e9 / 1e12)
            x1, y1 = xy(knee, peak)
            out.append(f'<line x1="{x0:.1f}" y1="{y0:.1f}" x2="{x1:.1f}" y2="{y1:.1f}" stroke="#c44"/>')
        else:
            x1, y1 = xy(x_low, peak)
        x2, y2 = xy(x_high, peak)
        out.append(
            f'<line x1="{x1:.1f}" y1="{y1:.1f}" x2="{x2:.1f}" y2="{y2:.1f}" stroke="#c44" stroke-dasharray="4 2"/>'
        )
        out.append(
            f'<text x="{x2 - 4:.1f}" y="{y2 - 4:.1f}" font-size="10" text-anchor="end">{escape(name)} {peak:.4g}</text>'
        )
    for label, x, y in points:
        px, py = xy(x, y)
        out.append(
            f'<circle cx="{px:.1f}" cy="{py:.1f}" r="4" fill="#36c"><title>{escape(label)}: '
            f"{x:.3g} FLOP/B, {y:.4g} TFLOP/s</title></circle>"
        )
    out.append("</svg>")
    return "\n".join(out)
