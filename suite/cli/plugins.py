"""``perfsuite plugins``: each plugin with its version, the hooks it implements, its workloads and
errors; part of the environment a record states."""

from __future__ import annotations

import click

from perfsuite.cli._common import console, emit_json, load_host
from perfsuite.text import plain


@click.command("plugins")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def plugins_cmd(as_json: bool) -> None:
    """List plugins: version, hooks implemented, workloads, load errors."""
    from perfsuite.plugins import conflict_text

    host = load_host()
    rows = [p.to_dict() for p in host.plugins.values()]
    if as_json:
        emit_json(rows)
        return
    from rich.table import Table

    t = Table(title="plugins")
    for col in ("name", "distribution", "version", "hooks", "workloads", "status"):
        t.add_column(col)
    for r in rows:
        status = [f"error: {r['error']}"] if r["error"] else []
        status += [f"disabled {name!r}: {conflict_text(host.conflicts[name])}" for name in r["disabled"]]
        t.add_row(
            *map(
                plain,
                (
                    r["name"],
                    r["distribution"] or "",
                    r["version"] or "",
                    ", ".join(r["hooks"]),
                    ", ".join(r["workloads"]),
                    "; ".join(status) or "ok",
                ),
            )
        )
    console().print(t)
