"""``perfsuite plans``: the run plans shipped with perfsuite (``perfsuite run --plan NAME``), each
with its description and entries; ``--show NAME`` prints one as TOML to copy and edit."""

from __future__ import annotations

import click

from perfsuite.cli._common import console, emit_json, fail


@click.command("plans")
@click.option("--show", "show_name", default=None, metavar="NAME", help="Print this plan's TOML.")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def plans_cmd(show_name: str | None, as_json: bool) -> None:
    """List the shipped run plans, or print one (--show NAME) to copy and edit."""
    from perfsuite.engine.plan import PlanError, load, locate, shipped

    if show_name is not None:
        try:
            click.echo(locate(show_name)[1], nl=False)
        except PlanError as exc:
            fail(str(exc))
        return
    plans = [load(name, lambda _name, value: value) for name in shipped()]
    rows = [{"name": p.name, "description": p.description, "runs": [r.label for r in p.runs]} for p in plans]
    if as_json:
        emit_json(rows)
        return
    from perfsuite.analysis.layout import Column, FittedTable

    t = FittedTable(
        (Column("name"), Column("description", wrap=True), Column("entries", wrap=True)),
        title="run plans (perfsuite run --plan NAME; perfsuite plans --show NAME)",
    )
    for r in rows:
        t.add_row(r["name"], r["description"], "; ".join(r["runs"]))
    console().print(t)
