"""``perfsuite history --workload W``: a metric over time on one system, one series per
comparability key (a change of settings starts another series), each run with its CI, change
points beyond the between-run noise flagged, and a plot on request."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import click

from perfsuite.cli._common import fmt_p, owned_file_options, pct
from perfsuite.cli._types import FiniteFloat, Name


@click.command("history")
@click.option("--workload", required=True, type=Name(), help="The workload.")
@click.option("--case", default=None, type=Name(), help="Only this case (default: every case).")
@click.option("--metric", default=None, type=Name(), help="This metric (default: each case's headline metric).")
@click.option("--system", default=None, type=Name(), help="One system: submitted name, host name or device-key prefix.")
@click.option(
    "--min-step",
    type=FiniteFloat(low=0),
    default=None,
    help="Smallest step called a change point (default 0.05 = 5%), beside 3 times the runs' own noise.",
)
@click.option(
    "--all-versions", is_flag=True, help="Every workload version (default: the latest version's series only)."
)
@click.option(
    "--plot",
    "plot_path",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Write a plot (.svg or .png; needs matplotlib, the 'plot' extra) to a new name, or over a plot "
    "perfsuite wrote there before (recorded beside it in .NAME.perfsuite.json). Any other file there is "
    "refused, and so are a device, FIFO or symlink.",
)
@owned_file_options("--plot")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@click.pass_context
def history_cmd(
    ctx: click.Context,
    workload: str,
    case: str | None,
    metric: str | None,
    system: str | None,
    min_step: float | None,
    all_versions: bool,
    plot_path: Path | None,
    parents: bool,
    replace: bool,
    as_json: bool,
) -> None:
    """A metric of WORKLOAD over time, one series per comparability key, with change points."""
    from perfsuite.cli._common import console, emit_json, fail, open_db, run_id_prefixes
    from perfsuite.registry.history import metric_history

    if plot_path is not None and plot_path.suffix.lower() not in (".svg", ".png"):
        fail(f"--plot {plot_path}: give a .svg or .png file")
    registry = open_db(ctx)
    with registry.session() as session:
        points = metric_history(session, workload, case=case, metric=metric, system=system, samples=False)
    points = [p for p in points if "self_test" not in p.key_settings]  # self-tests are never a figure
    if points and not all_versions:
        latest = max(p.key_settings.get("version", 0) for p in points)
        points = [p for p in points if p.key_settings.get("version", 0) == latest]
    if not points:
        fail(
            f"no successful, verified runs of {workload}"
            + "".join(f" {k} {v}" for k, v in (("case", case), ("metric", metric), ("system", system)) if v),
            1,
        )
    found = _series(points, min_step)
    if plot_path is not None:
        _plot(_as_data(found), workload, plot_path, parents, replace)
    if as_json:
        emit_json(_as_data(found))
        return
    _print(found, workload, console(), run_id_prefixes(registry, [p.run_id for s in found for p in s["points"]]))
    if plot_path is not None:
        click.echo(f"wrote {plot_path}")


def _as_data(series: list[dict]) -> list[dict]:
    """The series with each point as a dict of its fields (but its samples and key settings, the
    series' own): made only for --json and --plot, a table reads the points as they are."""
    # vars, not dataclasses.asdict: asdict deep-copies every field (0.2 s at 5,000 points)
    dropped = ("samples", "key_settings")
    return [
        {**s, "points": [{k: v for k, v in vars(p).items() if k not in dropped} for p in s["points"]]} for s in series
    ]


def _series(points: list, min_step: float | None) -> list[dict]:
    """One entry per (key, case, metric, system): its points oldest first (the registry's Point
    objects: :func:`_as_data` makes them what ``--json`` prints and ``--plot`` draws) and its
    change points."""
    from dataclasses import asdict

    from perfsuite.analysis.history import DEFAULT_MIN_STEP, change_points

    series: dict[tuple, list] = defaultdict(list)
    for p in points:
        series[(p.comparability_key, p.case, p.metric, p.host_key)].append(p)
    out = []
    for (key, case_label, metric_name, _host), pts in series.items():
        found = change_points([p.median for p in pts], min_step=DEFAULT_MIN_STEP if min_step is None else min_step)
        out.append(
            {
                "comparability_key": key,
                "key_settings": pts[0].key_settings,
                "params": pts[0].params,
                "case": case_label,
                "metric": metric_name,
                "unit": pts[0].unit,
                "points": pts,
                "change_points": [{**asdict(c), "run_id": pts[c.index].run_id} for c in found],
            }
        )
    return out


def _print(out: list[dict], workload: str, con, ids: dict[str, str]) -> None:
    """Each series (as :func:`_series` gives it) as a table: its runs (ids as their unique
    prefixes), medians and CIs in the unit the series reads best in, and the change points."""
    from perfsuite.analysis.layout import Column, FittedTable, print_table
    from perfsuite.analysis.tables import started_minute
    from perfsuite.analysis.units import number, scale_for
    from perfsuite.schemas.comparability import settings_line

    for s in out:
        steps = {c["index"]: c for c in s["change_points"]}
        medians = [p.median for p in s["points"]]
        factor, unit = scale_for(sorted(medians)[len(medians) // 2], s["unit"]) if medians else (1.0, s["unit"])
        if s["unit"] == "fraction":
            factor, unit = 100.0, "%"
        t = FittedTable(
            (
                Column("run"),
                Column("started (UTC)", drop=2),
                Column(f"median ({unit})", justify="right"),
                Column("95% CI", justify="right", drop=1),
                Column("change point", wrap=True),
            ),
            title=f"{workload} {s['case']} {s['metric']} · key {s['comparability_key'][:12]}",
            caption=settings_line(s["key_settings"]) or None,
        )
        for i, p in enumerate(s["points"]):
            c = steps.get(i)
            flag = f"step {pct(c['ratio'])} (p {fmt_p(c['p_value'])} over runs)" if c else ""
            ci = f"{number(p.ci_low * factor)}–{number(p.ci_high * factor)}" if p.ci_low is not None else ""
            t.add_row(ids.get(p.run_id, p.run_id), started_minute(p.started_at), number(p.median * factor), ci, flag)
        print_table(con, t)


def _plot(series: list[dict], workload: str, path: Path, parents: bool, replace: bool) -> None:
    """The plot (perfsuite.analysis.history_plot: each series labelled by the settings that set it
    apart), drawn in memory and written as a regular file only, and only over a plot perfsuite
    wrote there before unless ``replace`` (a device, FIFO or symlink at ``path``, or a file of the
    user's, is refused: :func:`perfsuite.owned_file.write_owned_file`)."""
    from perfsuite.cli._common import fail
    from perfsuite.owned_file import write_owned_file
    from perfsuite.owned_output import OutputRefused

    try:
        import matplotlib  # noqa: F401 - the plot's one dependency
    except ImportError:
        fail("--plot needs matplotlib: pip install 'perfsuite[plot]'", 1)
    from perfsuite.analysis.history_plot import figure_bytes

    try:
        figure = figure_bytes(series, workload, path.suffix.lower().lstrip("."))
        write_owned_file(path, figure, command="history", parents=parents, replace=replace, replace_option="--replace")
    except OutputRefused as exc:
        fail(f"--plot: {exc}")
