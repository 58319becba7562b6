"""``perfsuite results``: recorded runs, newest first."""

from __future__ import annotations

import datetime as dt

import click

from perfsuite.cli._common import console, emit_json, fail, open_db


@click.command("results")
@click.option("--workload", default=None, help="Only this workload.")
@click.option("--since", default=None, metavar="DATE", help="ISO date or datetime (UTC), e.g. 2026-11-01.")
@click.option("--limit", type=click.IntRange(min=1), default=50)
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def results_cmd(ctx: click.Context, workload: str | None, since: str | None, limit: int, as_json: bool) -> None:
    """List recorded runs, newest first."""
    since_dt = None
    if since:
        try:
            since_dt = dt.datetime.fromisoformat(since)
        except ValueError:
            fail(f"--since {since!r} is not an ISO date")
        if since_dt.tzinfo is None:
            since_dt = since_dt.replace(tzinfo=dt.UTC)
    rows = open_db(ctx).results(workload=workload, since=since_dt, limit=limit)
    if as_json:
        emit_json(rows)
        return
    from perfsuite.analysis.tables import runs_table

    console().print(runs_table(rows))
