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
    help="Folder to write the site into: a new or empty one, or one a previous build wrote (its "
    ".perfsuite-manifest.json lists the files a rebuild replaces; anything else in it is kept).",
)
@click.option("--parents", is_flag=True, help="Create the folders above --out where they are missing.")
@click.option(
    "--submissions",
    "submissions",
    default=None,
    type=click.Path(file_okay=False, exists=True, path_type=Path),
    help="The submissions tree the records were imported from: each record's MLLOG is published beside it.",
)
@click.option(
    "--per-run",
    "per_run",
    is_flag=True,
    help="Also write the page of every ranked record, not only of those the tables link to (each "
    "cell's latest run): the stored record as it is, 850 MB for a round of 100,000 synthetic records.",
)
@click.pass_context
def leaderboard_cmd(ctx: click.Context, out_dir: Path, parents: bool, submissions: Path | None, per_run: bool) -> None:
    """Write the leaderboard as a static site: a page per benchmark (one table per configuration,
    its data in a file of its own, its pictures and trends), a front page of each benchmark's
    leaders, a page per system with its roofline, system against system, the pages of the
    records the tables link to (--per-run: every ranked record), and the whole board as JSONL,
    CSV and Parquet. Opens from files, no network needed."""
    from perfsuite.cli._common import fail, open_db
    from perfsuite.owned_output import OutputRefused
    from perfsuite.publish.leaderboard import build_site

    registry = open_db(ctx)
    start = time.perf_counter()
    click.echo(f"building the site into {out_dir} ...", err=True)
    try:
        counts = build_site(registry, out_dir, submissions=submissions, parents=parents, per_run=per_run)
    except OutputRefused as exc:  # the site is staged beside --out: what was there is as it was
        fail(str(exc))
    click.echo(
        f"wrote {out_dir / 'index.html'}: {counts['workloads']} workloads, {counts['boards']} ranked tables, "
        f"{counts['systems']} systems, {counts['records']} records, {counts['record_pages']} record pages"
        f"{'' if per_run else ' (the linked records; --per-run: every one)'} ({time.perf_counter() - start:.1f} s)"
    )
