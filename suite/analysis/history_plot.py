"""The plot of ``perfsuite history --plot FILE``: one line per series (comparability key, case,
metric and system), each run's median with its 95% CI, change points dashed. Each series is
labelled by what sets it apart from the others on the plot (``m=128`` against ``m=256``,
``l2_flush=True``, ``regime=power-capped``), never by its key's hash, which no reader can
decode. matplotlib is imported only when a plot is asked for."""

from __future__ import annotations

import io
import textwrap
from datetime import datetime
from typing import Any

from perfsuite.schemas.comparability import flat_settings

# Settings that name the workload rather than a series of it: never a label.
NOT_LABELS = ("workload",)


def _text(value: Any) -> str:
    if isinstance(value, list):
        return ",".join(str(v) for v in value)
    return str(value)


def _short(name: str) -> str:
    """``param.m`` -> ``m``, ``timing.l2_flush`` -> ``l2_flush``: the setting as a user types it."""
    return name.split(".", 1)[1] if "." in name else name


def _facets(series: dict) -> dict[str, str]:
    """Everything that can tell one series from another, as text: its case and metric, every
    key setting (flattened: parameters, timing, world, regime) and its system."""
    flat = {k: v for k, v in flat_settings(series["key_settings"]).items() if k not in NOT_LABELS}
    facets = {"case": series["case"], "metric": series["metric"]}
    facets.update({k: _text(v) for k, v in flat.items()})
    hosts = sorted({p["host_key"] for p in series["points"] if p.get("host_key") is not None})
    if hosts:
        facets["system"] = ",".join(hosts)
    return facets


def series_labels(series: list[dict]) -> list[str]:
    """A legend label per series: ``name=value`` for each setting whose value differs between
    the series (in the order the settings first appear), the case and metric first. One series,
    or series that differ in nothing shown, read as their case and metric."""
    facets = [_facets(s) for s in series]
    names = list(dict.fromkeys(name for f in facets for name in f))
    differing = [n for n in names if len({f.get(n) for f in facets}) > 1]
    labels = []
    for s, f in zip(series, facets, strict=True):
        parts = []
        for name in differing:
            value = f.get(name)
            if name in ("case", "metric"):
                parts.append(value if value is not None else "")
            else:
                parts.append(f"{_short(name)}={value if value is not None else 'unset'}")
        labels.append(" ".join(p for p in parts if p) or f"{s['case']} {s['metric']}")
    return labels


def common_settings(series: list[dict]) -> str:
    """The settings every series shares, as one line (the plot's subtitle), so that what the
    labels leave out is still on the page: regime, timing and world first, then parameters;
    settings with no value, and the registry's system number (a name only where it tells
    series apart), are left out."""
    facets = [_facets(s) for s in series]
    shared = {
        n: v
        for n, v in facets[0].items()
        if n not in ("case", "metric", "system") and v != "None" and all(f.get(n) == v for f in facets[1:])
    }
    first = ("regime", "timing.", "world.", "device", "deterministic")
    order = sorted(shared, key=lambda n: next((i for i, p in enumerate(first) if n.startswith(p)), len(first)))
    return " · ".join(f"{_short(n)}={shared[n]}" for n in order)


def figure_bytes(series: list[dict], workload: str, fmt: str) -> bytes:
    """The plot as ``fmt`` (svg or png) bytes, drawn in memory on a figure of its own (no pyplot
    state shared with anything else in the process)."""
    import matplotlib
    from matplotlib.figure import Figure

    fig = Figure(figsize=(9, 4.8), layout="constrained")
    ax = fig.add_subplot()
    for s, label in zip(series, series_labels(series), strict=True):
        xs: list[Any] = [datetime.fromisoformat(p["started_at"]) for p in s["points"]]  # dates: matplotlib converts
        ys = [p["median"] for p in s["points"]]
        low = [p["median"] - p["ci_low"] if p["ci_low"] is not None else 0 for p in s["points"]]
        high = [p["ci_high"] - p["median"] if p["ci_high"] is not None else 0 for p in s["points"]]
        ax.errorbar(xs, ys, yerr=[low, high], marker="o", capsize=3, label=label)
        for c in s["change_points"]:
            ax.axvline(xs[c["index"]], color="red", linestyle="--", linewidth=1)
    ax.set_title(f"{workload}: history (dashed: change points)", fontsize=10)
    shared = common_settings(series)
    if shared:
        fig.suptitle("\n".join(textwrap.wrap(shared, 150)), fontsize=7, color="0.35")
    ax.set_ylabel(", ".join(sorted({s["unit"] for s in series})))
    ax.legend(fontsize=8)
    for tick in ax.get_xticklabels():
        tick.set_rotation(30)
        tick.set_horizontalalignment("right")
    buffer = io.BytesIO()
    with matplotlib.rc_context({"svg.fonttype": "none"}):  # an SVG's labels stay text: searchable, selectable
        fig.savefig(buffer, format=fmt)
    return buffer.getvalue()
