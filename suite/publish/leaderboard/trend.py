"""A benchmark's figure over time, per system and case, with its change points marked: the
host's change-point rule (``perfsuite.analysis.history.change_points``) on the runs' headline values, one
value per run (runs are the unit that varies)."""

from __future__ import annotations

from .data import Config

MAX_POINTS = 200  # the latest runs of a series that a page carries


def trend_series(config: Config, systems: int | None = None) -> dict[str, dict[str, dict]]:
    """case -> system name -> {"t": epoch seconds, "v": values, "change": indices}, for the
    table's first ``systems`` rows (its leaders; all without it): a picture of fifty systems'
    histories is no picture, and a public round's would be megabytes a page."""
    from perfsuite.analysis.history import change_points

    out: dict[str, dict[str, dict]] = {}
    for row in config.rows[:systems]:
        for case, cell in row.cells.items():
            runs = cell.runs[-MAX_POINTS:]
            values = [r.value for r in runs]
            changes = [c.index for c in change_points(values)] if _may_step(values) else []
            out.setdefault(case, {})[row.system.name] = {
                "t": [r.started_at.timestamp() for r in runs],
                "v": values,
                "change": changes,
            }
    return out


def _may_step(values: list[float]) -> bool:
    """Whether the change-point rule can find a step at all: it needs two runs a side and a
    step between two sides' medians beyond its minimum, which no series whose spread is within
    that minimum has (every median lies between the series' extremes). Skipping those is exact,
    and spares a public round's thousands of steady series the search."""
    from perfsuite.analysis.history import DEFAULT_MIN_STEP

    if len(values) < 4:
        return False
    low, high = min(values), max(values)
    return not (low > 0 and high / low - 1.0 <= DEFAULT_MIN_STEP)
