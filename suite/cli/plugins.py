"""``perfsuite plugins``: each plugin with its version, the hooks it implements, its workloads and
errors; part of the environment a record states."""

from __future__ import annotations

import click

from perfsuite.cli._common import console, emit_json, load_host


@click.command("plugins")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def plugins_cmd(as_json: bool) -> None:
    """List plugins: version, hooks implemented, workloads, load errors."""
    host = load_host()
    rows = [p.to_dict() for p in host.plugins.values()]
    if as_json:
        emit_json(rows)
        return
    from perfsuite.analysis.layout import Column, FittedTable

    t = FittedTable(
        (
            Column("name"),
            Column("distribution", drop=2),
            Column("version"),
            Column("hooks", wrap=True, drop=1),
            Column("workloads", wrap=True),
            Column("status", wrap=True),
        ),
        title="plugins",
    )
    for r in rows:
        status = [f"error: {r['error']}"] if r["error"] else []
        status += [f"disabled {name!r}: {host.disabled_text(name)}" for name in r["disabled"]]
        t.add_row(
            r["name"],
            r["distribution"] or "",
            r["version"] or "",
            ", ".join(r["hooks"]),
            ", ".join(r["workloads"]),
            "; ".join(status) or "ok",
        )
    console().print(t)
