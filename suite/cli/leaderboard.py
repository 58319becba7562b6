"""``perfsuite leaderboard --out DIR``: the static leaderboard site of the registry."""

from __future__ import annotations

from pathlib import Path

import click


@click.command("leaderboard")
@click.option(
    "--out",
    "out_dir",
    required=True,
    type=click.Path(file_okay=False, path_type=Path),
    help="Folder to write the site into (index.html, workloads/, systems/, records/).",
)
@click.pass_context
def leaderboard_cmd(ctx: click.Context, out_dir: Path) -> None:
    """Write the leaderboard as static HTML: workloads ranked by system, a page per system
    with its roofline, links to every record. Opens from files, no network needed."""
    from perfsuite.cli._common import open_db
    from perfsuite.registry.leaderboard import build_site

    counts = build_site(open_db(ctx), out_dir)
    click.echo(
        f"wrote {out_dir / 'index.html'}: {counts['workloads']} workloads, {counts['boards']} ranked tables, "
        f"{counts['systems']} systems, {counts['records']} records"
    )
