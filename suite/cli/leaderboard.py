"""``perfsuite leaderboard --out DIR``: the static leaderboard site of the registry."""

from __future__ import annotations

import time
from pathlib import Path

import click


@click.command("leaderboard")
@click.option(
    "--out",
    "out_dir",
    required=True,
    type=click.Path(file_okay=False, path_type=Path),
    help="Folder to write the site into (replaced as a whole once the new site is complete).",
)
@click.option(
    "--submissions",
    "submissions",
    default=None,
    type=click.Path(file_okay=False, exists=True, path_type=Path),
    help="The submissions tree the records were imported from: each record's MLLOG is published beside it.",
)
@click.pass_context
def leaderboard_cmd(ctx: click.Context, out_dir: Path, submissions: Path | None) -> None:
    """Write the leaderboard as a static site: one table per benchmark (its configurations as tabs),
    its pictures and trends, a page per system with its roofline, system against system, a page
    per record, and the whole board as JSONL, CSV and Parquet. Opens from files, no network needed."""
    from perfsuite.cli._common import fail, open_db
    from perfsuite.registry.leaderboard import build_site

    registry = open_db(ctx)
    start = time.perf_counter()
    click.echo(f"building the site into {out_dir} ...", err=True)
    try:
        counts = build_site(registry, out_dir, submissions=submissions)
    except (
        OSError
    ) as exc:  # the site is staged beside --out: a folder that cannot take it leaves the old site as it was
        fail(f"cannot write the site to {out_dir}: {exc.strerror or exc}")
    click.echo(
        f"wrote {out_dir / 'index.html'}: {counts['workloads']} workloads, {counts['boards']} ranked tables, "
        f"{counts['systems']} systems, {counts['records']} records ({time.perf_counter() - start:.1f} s)"
    )
