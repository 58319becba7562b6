"""``perfsuite results``: recorded runs, newest first."""

from __future__ import annotations

import datetime as dt

import click

from perfsuite.cli._common import console, emit_json, fail, open_db
from perfsuite.text import clean


@click.command("results")
@click.option("--workload", default=None, help="Only this workload.")
@click.option("--since", default=None, metavar="DATE", help="ISO date or datetime (UTC), e.g. 2026-11-01.")
@click.option("--limit", type=click.IntRange(min=1), default=50)
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def results_cmd(ctx: click.Context, workload: str | None, since: str | None, limit: int, as_json: bool) -> None:
    """List recorded runs, newest first."""
    since_dt: dt.datetime | None = None
    if since:
        try:
            parsed = dt.datetime.fromisoformat(since)
        except ValueError:
            fail(f"--since {since!r} is not an ISO date")
        since_dt = parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=dt.UTC)
    registry = open_db(ctx)
    rows = registry.results(workload=workload, since=since_dt, limit=limit)
    if as_json:
        emit_json(rows)
    else:
        from perfsuite.analysis.tables import runs_table

        console().print(runs_table(rows))
    notice_unstored(registry)


def notice_unstored(registry) -> None:
    """One line on stderr when the records folder holds records the registry does not."""
    from perfsuite.registry import records_dir
    from perfsuite.registry.recovery import unstored_notice, unstored_records

    folder = records_dir()
    notice = unstored_notice(unstored_records(registry, folder), folder)
    if notice:
        click.echo(clean(notice), err=True)
