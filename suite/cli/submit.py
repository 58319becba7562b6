"""``perfsuite submit``: file registry runs into a submissions tree (MLPerf's
``<org>/results/<system>/<workload>/<run_id>.json``), then check it. Everything is checked
before anything is written (:mod:`perfsuite.publish.submissions.filing`): the names, every path (a
symlink in the tree or a path leaving it), and the tree as it would be afterwards; a refusal
is one line and exit 2 with the tree as it was, and a write cut off half way is taken back."""

from __future__ import annotations

from pathlib import Path

import click

from perfsuite.cli._common import fail, open_db, price_per_hour_option
from perfsuite.cli.check import print_report, shown


@click.command("submit")
@click.argument("run_ids", nargs=-1, required=True)
@click.option("--org", required=True, help="The submitting organisation (a folder of the tree).")
@click.option("--system", required=True, help="The system's name (systems/<system>.json).")
@click.option(
    "--root",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("submissions"),
    show_default=True,
    help="The submissions tree (made where missing; the folder above it must exist).",
)
@click.option("--parents", is_flag=True, help="Create the folders above --root where they are missing.")
@click.option(
    "--status",
    type=click.Choice(["Available", "Preview", "Research"]),
    default="Available",
    show_default=True,
    help="Availability, for a new system file.",
)
@click.option(
    "--cooling",
    type=click.Choice(["air", "liquid", "immersion", "unknown"]),
    default="unknown",
    show_default=True,
    help="Cooling, for a new system file.",
)
@price_per_hour_option(
    "Price of one accelerator-hour, for a new system file: results without their own cost are priced at it."
)
@click.pass_context
def submit_cmd(
    ctx: click.Context,
    run_ids: tuple[str, ...],
    org: str,
    system: str,
    root: Path,
    parents: bool,
    status: str,
    cooling: str,
    price_per_hour: float | None,
) -> None:
    """Copy runs from the registry into ROOT/ORG/results/SYSTEM/<workload>/<run_id>.json (+ .mllog);
    write ROOT/ORG/systems/SYSTEM.json from the first run's fingerprint when missing. Then check,
    and print each run's cost (its own, else at the system file's price)."""
    from perfsuite.engine import mllog
    from perfsuite.owned_output import OutputRefused
    from perfsuite.publish.submissions.filing import submit_runs
    from perfsuite.publish.submissions.tree import check_tree, filed_cost
    from perfsuite.publish.submissions.writer import name_problem
    from perfsuite.registry import RegistryError, records_dir
    from perfsuite.schemas.cost import cost_text, validate_price

    for name, value in (("--org", org), ("--system", system)):
        problem = name_problem(value)
        if problem is not None:
            fail(f"{name} {value!r} {problem}: give a plain folder name")
    try:
        validate_price(price_per_hour)
    except ValueError as exc:
        fail(f"--price-per-hour: {exc}")
    registry = open_db(ctx)
    try:
        records = [registry.get(r) for r in run_ids]
        written = submit_runs(
            records,
            root,
            org,
            system,
            records_dir(),
            lambda record: "\n".join(mllog.lines(record)) + "\n",
            parents=parents,
            status=status,
            cooling=cooling,
            price_per_hour=price_per_hour,
        )
    except OutputRefused as exc:
        fail(str(exc))
    except RegistryError as exc:
        fail(str(exc), 1)
    except OSError as exc:  # the tree's filesystem: full, read-only, not permitted
        fail(f"cannot write into {root}: {exc.strerror or exc} (the submission was taken back: nothing written)")
    for path in written:
        click.echo(f"wrote {shown(path)}")
    report = check_tree(root)
    submitted = {r["run_id"] for r in records}
    for filed in report.records:
        text = cost_text(filed_cost(report, filed)) if filed.record["run_id"] in submitted else None
        if text:
            click.echo(f"cost of {filed.record['run_id']}: {text}")
    print_report(report)
    if not report.ok:
        raise SystemExit(1)
