"""``perfsuite roofline``: reads the registry, places kernel results on the device's
measured roofline (:mod:`perfsuite.analysis.roofline_report`), prints a table or JSON and writes the
plot (:mod:`perfsuite.analysis.roofline_plot`). Attached to the CLI in :mod:`perfsuite.cli`."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import click

from perfsuite.analysis.roofline_report import render_table, report
from perfsuite.cli._common import owned_file_options
from perfsuite.cli._types import AsciiIntRange
from perfsuite.measure.roofline import CEILINGS_WORKLOAD


def select_records(
    registry: Any, device_key: str | None, run_ids: tuple[str, ...], limit: int
) -> tuple[str, list[dict]]:
    """The device and its records: the named runs, else the newest run of each distinct
    kernel measurement (comparability key) among the last ``limit`` runs."""
    if run_ids:
        records = [registry.get(r) for r in run_ids]
        keys = {r["environment"]["measured_device"]["key"] for r in records}
        if device_key is None and len(keys) > 1:
            raise click.ClickException(f"the runs were measured on {len(keys)} devices; pick one with --device-key")
        device_key = device_key or keys.pop()
        return device_key, [r for r in records if r["environment"]["measured_device"]["key"] == device_key]
    rows = [
        s
        for s in registry.results(limit=limit)
        if s["status"] == "success" and s["verification"] == "passed" and s["workload"] != CEILINGS_WORKLOAD
    ]
    if device_key is None:
        if not rows:
            raise click.ClickException("no passed runs in the registry; run some kernels first")
        device_key = rows[0]["device_key"]
    newest: dict[str, dict] = {}
    for s in rows:  # newest first
        if s["device_key"] == device_key:
            newest.setdefault(s["comparability_key"], s)
    return device_key, [registry.get(s["run_id"]) for s in newest.values()]


def require_matplotlib() -> None:
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise click.ClickException("plotting needs matplotlib: pip install 'perfsuite[plot]'") from None


@click.command("roofline")
@click.option(
    "--device-key",
    default=None,
    metavar="KEY",
    help="Device to show (environment.measured_device.key); default: that of the newest run.",
)
@click.option("--run", "run_ids", multiple=True, metavar="RUN_ID", help="Only these runs (repeatable).")
@click.option(
    "--limit",
    type=AsciiIntRange(min=1),
    default=200,
    show_default=True,
    help="Newest runs to consider when no --run is given.",
)
@click.option(
    "--out",
    "out_path",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Write the plot here (.png or .svg; needs matplotlib, perfsuite[plot]): a new name, or a plot "
    "perfsuite wrote there before (recorded beside it in .NAME.perfsuite.json). Any other file there is "
    "refused, and so are a device, FIFO or symlink.",
)
@owned_file_options("--out")
@click.option("--json", "as_json", is_flag=True, help="Print the placed points as JSON.")
@click.pass_context
def roofline_command(
    ctx: click.Context,
    device_key: str | None,
    run_ids: tuple[str, ...],
    limit: int,
    out_path: Path | None,
    parents: bool,
    replace: bool,
    as_json: bool,
) -> None:
    """Place kernel results on the device's measured roofline: intensity, achieved TFLOP/s
    and GB/s, what bounds each case, and its fraction of the roof."""
    from perfsuite.analysis import roofline_plot
    from perfsuite.registry import RegistryError, open_registry

    if out_path is not None:
        if out_path.suffix.lower() not in roofline_plot.PLOT_SUFFIXES:
            raise click.BadParameter(f"must end in {' or '.join(roofline_plot.PLOT_SUFFIXES)}", param_hint="--out")
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
        raise click.ClickException(
            f"no passed {CEILINGS_WORKLOAD} run of device {device_key} in the registry: "
            f"run 'perfsuite run {CEILINGS_WORKLOAD}' on it first"
        )
    data = report(records, ceilings)
    if out_path is not None:
        from perfsuite.cli._common import fail
        from perfsuite.owned_output import OutputRefused

        try:
            roofline_plot.plot(data, out_path, replace, parents)
        except OutputRefused as exc:
            fail(f"--out: {exc}")
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
        console.print(
            "cases without FLOPs sit at intensity 0: each is judged by its GB/s against its "
            "bandwidth ceiling (the plot's right panel), not on the log-log roofline"
        )
    if out_path is not None:
        console.print(f"plot written to {out_path}")
