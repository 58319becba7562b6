"""``perfsuite list``: every workload, with its availability here and the reason when not."""

from __future__ import annotations

import click

from perfsuite.cli._common import console, default_device, emit_json, load_host
from perfsuite.text import plain


@click.command("list")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@click.option(
    "--device",
    type=click.Choice(["cpu", "cuda"]),
    default=None,
    help="Judge availability for this device (default: cuda if a GPU is visible).",
)
def list_cmd(as_json: bool, device: str | None) -> None:
    """List workloads, with availability and the reason when unavailable."""
    from perfsuite.controls import Controls
    from perfsuite.engine import params as params_mod
    from perfsuite.engine.launcher import LaunchOptions
    from perfsuite.engine.runner import RunRequest, static_unmet
    from perfsuite.plugins import conflict_text

    host = load_host()
    device = device or default_device()
    rows = []
    for name in sorted(host.workloads):
        e = host.workloads[name]
        nproc = max(1, e.cls.requirements.min_world_size)
        req = RunRequest(e, None, False, Controls(device=device), LaunchOptions(nproc_per_node=nproc))
        reason = static_unmet(req)
        rows.append(
            {
                "name": name,
                "category": e.cls.category,
                "version": e.cls.version,
                "description": e.cls.description,
                "plugin": {"name": e.plugin.name, "distribution": e.plugin.distribution, "version": e.plugin.version},
                "available": reason is None,
                "reason": reason,
                "params": params_mod.describe(e.cls.Params),
                "quick": dict(e.cls.quick),
            }
        )
    errors = [{"plugin": p.name, "error": p.error} for p in host.errors()]
    if as_json:
        emit_json(rows if not errors else rows + [{"plugin_error": e} for e in errors])
        return
    from rich.table import Table

    t = Table(title=f"workloads (device: {device})")
    for col in ("name", "category", "v", "plugin", "available", "description"):
        t.add_column(col)
    for r in rows:
        avail = "yes" if r["available"] else f"no: {r['reason']}"
        plugin = r["plugin"]["distribution"] or r["plugin"]["name"]
        t.add_row(
            *map(
                plain,
                (
                    r["name"],
                    r["category"],
                    str(r["version"]),
                    f"{plugin} {r['plugin']['version'] or ''}",
                    avail,
                    r["description"],
                ),
            )
        )
    out = console()
    out.print(t)
    for e in errors:
        out.print(plain(f"plugin {e['plugin']} failed to load: ", style="red") + plain(e["error"]))
    for name, owners in host.conflicts.items():
        out.print(plain(f"workload {name!r} disabled: {conflict_text(owners)}", style="yellow"))
