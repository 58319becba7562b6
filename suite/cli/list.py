"""``perfsuite list``: every workload, with its availability here and the reason when not;
``perfsuite list NAME`` describes that workload (as ``perfsuite describe`` does)."""

from __future__ import annotations

import click

from perfsuite.analysis.layout import Column, FittedTable
from perfsuite.cli._common import console, default_device, emit_json, load_host
from perfsuite.text import plain


@click.command("list")
@click.argument("names", nargs=-1, metavar="[WORKLOAD]...")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@click.option(
    "--device",
    type=click.Choice(["cpu", "cuda"]),
    default=None,
    help="Judge availability for this device (default: cuda if a GPU is visible).",
)
def list_cmd(names: tuple[str, ...], as_json: bool, device: str | None) -> None:
    """List workloads, with availability and the reason when unavailable; with names,
    describe those workloads (as 'perfsuite describe')."""
    from perfsuite.cli.describe import describe, describe_or_fail
    from perfsuite.plugins import conflict_text

    if names:
        describe_or_fail(names, device, as_json)
        return
    host = load_host()
    device = device or default_device()
    rows = [describe(host, name, device) for name in sorted(host.workloads)]
    errors = [{"plugin": p.name, "error": p.error} for p in host.errors()]
    if as_json:
        for row in rows:  # the listing's JSON as it was: the rest is describe's
            for key in ("device", "requirements", "primary_metric", "controls_honoured", "controls_not_applied"):
                del row[key]
            del row["examples"]
        emit_json(rows if not errors else rows + [{"plugin_error": e} for e in errors])
        return
    t = _WorkloadTable(
        (
            Column("name"),
            Column("category", drop=4),
            Column("v", justify="right", drop=2),
            Column("plugin", drop=3),
            Column("available", wrap=True),
            Column("description", wrap=True),
        ),
        title=f"workloads (device: {device}); 'perfsuite describe NAME' for its parameters",
    )
    for r in rows:
        plugin = r["plugin"]["distribution"] or r["plugin"]["name"]
        available = "yes" if r["available"] else f"no: {r['reason']}"
        t.add_row(
            r["name"],
            r["category"],
            str(r["version"]),
            f"{plugin} {r['plugin']['version'] or ''}".strip(),
            available,
            r["description"],
        )
    out = console()
    out.print(t)
    for e in errors:
        out.print(plain(f"plugin {e['plugin']} failed to load: ", style="red") + plain(e["error"]))
    for name, owners in host.conflicts.items():
        out.print(plain(f"workload {name!r} disabled: {conflict_text(owners)}", style="yellow"))
    for line in host.shadowed_lines():
        out.print(plain(line, style="yellow"))


class _WorkloadTable(FittedTable):
    """The listing's table. What a reader picks a workload by is its name, whether it runs here
    and what it measures, so those three are always shown: the category (the name's first
    part), the plugin and the version are left out first as the terminal narrows. Where even
    the three do not fit side by side (about 90 columns), each workload is a block instead of
    a table row, its description indented under its name and availability, rather than the
    generic ``header  value`` stack, which would repeat six headers per workload."""

    def stacked(self):
        from rich.console import Group
        from rich.padding import Padding
        from rich.text import Text

        name, available, description = 0, 4, 5
        parts: list = [plain(self.title, style="bold")] if self.title else []
        for row in self.rows:
            parts.append(Text.assemble(plain(row[name], style="bold"), "  ", plain(row[available])))
            if row[description]:
                parts.append(Padding(plain(row[description]), (0, 0, 0, 2), expand=False))
        note = "category, v and plugin left out for the width: 'perfsuite list --json' gives them"
        parts.append(plain(note, style="dim"))
        return Group(*parts)
