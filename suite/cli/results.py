"""``perfsuite results``: recorded runs, newest first, as a table, JSON or Markdown (for a CI
job's step summary: ``perfsuite results --format markdown >> "$GITHUB_STEP_SUMMARY"``)."""

from __future__ import annotations

import datetime as dt

import click

from perfsuite.cli._common import console, emit_json, fail, open_db, run_id_prefixes
from perfsuite.cli._types import AsciiIntRange
from perfsuite.text import clean


def parse_since(since: str | None) -> dt.datetime | None:
    """``--since``: an ISO date or datetime, UTC where it names no zone; one line if it is not one."""
    if not since:
        return None
    try:
        since_dt = dt.datetime.fromisoformat(since)
    except ValueError:
        fail(f"--since {since!r} is not an ISO date")
    return since_dt if since_dt.tzinfo is not None else since_dt.replace(tzinfo=dt.UTC)


@click.command("results")
@click.option("--workload", default=None, help="Only this workload.")
@click.option("--since", default=None, metavar="DATE", help="ISO date or datetime (UTC), e.g. 2026-11-01.")
@click.option("--limit", type=AsciiIntRange(min=1), default=50, help="The newest N runs (default 50).")
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["table", "json", "markdown"]),
    default="table",
    help="markdown: a GitHub table, e.g. for $GITHUB_STEP_SUMMARY.",
)
@click.option("--json", "as_json", is_flag=True, help="Same as --format json.")
@click.pass_context
def results_cmd(
    ctx: click.Context, workload: str | None, since: str | None, limit: int, fmt: str, as_json: bool
) -> None:
    """List recorded runs, newest first."""
    registry = open_db(ctx)
    rows = registry.results(workload=workload, since=parse_since(since), limit=limit)
    if as_json or fmt == "json":
        emit_json(rows)
        notice_unstored(registry)
        return
    from perfsuite.analysis.export import records_by_id
    from perfsuite.analysis.tables import runs_table

    ids = [r["run_id"] for r in rows]
    table = runs_table(rows, run_id_prefixes(registry, ids), records_by_id(registry, ids), nested=fmt != "markdown")
    if fmt == "markdown":
        click.echo(table.markdown(), nl=False)
    else:
        console().print(table)
    notice_unstored(registry)


def notice_unstored(registry) -> None:
    """One line on stderr when the records folder holds records the registry does not, and
    one for each finished measurement a runner that died left without a record."""
    from perfsuite.engine.unrecorded import find, finished_line
    from perfsuite.registry import records_dir
    from perfsuite.registry.recovery import unstored_notice, unstored_records

    folder = records_dir()
    notice = unstored_notice(unstored_records(registry, folder), folder)
    if notice:
        click.echo(clean(notice), err=True)
    for kept in find(registry, folder):
        click.echo(clean(f"Note: {finished_line(kept)}"), err=True)
