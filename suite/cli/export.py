"""``perfsuite export``: the registry's results as CSV, Parquet or JSON Lines, one row per
metric and case with the comparability key, system and run settings (perfsuite.analysis.export
lists the columns and their fixed types); a collective's sweep as the JSON file nccl-tests writes
with ``-J`` (perfsuite.analysis.nccl_tests_json) with ``--format nccl-tests``."""

from __future__ import annotations

import json
from pathlib import Path

import click

from perfsuite.cli._common import fail, open_db, owned_file_options
from perfsuite.cli._types import AsciiIntRange
from perfsuite.cli.results import parse_since

FORMATS = ("csv", "parquet", "jsonl", "nccl-tests")


def write_out(out: Path | None, data: str | bytes, parents: bool = False, replace: bool = False) -> None:
    """To stdout, or to the regular file ``out`` through a temporary sibling renamed into place
    (:func:`perfsuite.owned_file.write_owned_file`): a reader never sees half a file, a device,
    FIFO or symlink at ``out`` is refused, a file there that perfsuite did not write (or that
    changed since) is refused unless ``replace``, and a failed export leaves what was there."""
    from perfsuite.owned_file import write_owned_file
    from perfsuite.owned_output import OutputRefused

    if out is None:
        click.echo(data if isinstance(data, str) else data.decode(), nl=False)
        return
    try:
        write_owned_file(out, data, command="export", parents=parents, replace=replace, replace_option="--replace")
    except OutputRefused as exc:
        fail(f"--out: {exc}")


@click.command("export")
@click.option("--format", "fmt", type=click.Choice(FORMATS), default="csv", show_default=True)
@click.option(
    "--out",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Write to this file (default: standard output; parquet needs a file): a new name, or a file "
    "perfsuite wrote there before (recorded beside it in .NAME.perfsuite.json). Any other file there is "
    "refused, and so are a device, FIFO or symlink.",
)
@owned_file_options("--out")
@click.option("--workload", default=None, help="Only this workload.")
@click.option("--since", default=None, metavar="DATE", help="ISO date or datetime (UTC), e.g. 2026-11-01.")
@click.option("--status", default=None, help="Only runs of this status (success, failed, invalid ...).")
@click.option("--limit", type=AsciiIntRange(min=1), default=None, help="The newest N runs (default: all).")
@click.option("--run", "run_id", default=None, metavar="RUN_ID", help="One run (id or unique prefix).")
@click.pass_context
def export_cmd(
    ctx: click.Context,
    fmt: str,
    out: Path | None,
    parents: bool,
    replace: bool,
    workload: str | None,
    since: str | None,
    status: str | None,
    limit: int | None,
    run_id: str | None,
) -> None:
    """Export results: one row per metric and case of each run (CSV, Parquet, JSON Lines), or a
    collective run's sweep as the JSON file nccl-tests writes with -J (--format nccl-tests --run RUN_ID)."""
    from perfsuite.analysis import export

    registry = open_db(ctx)
    if run_id is not None:
        if workload or since or status or limit:
            fail("--run names one run: give no --workload, --since, --status or --limit beside it")
        records = [registry.get(run_id)]
    else:
        records = export.stored_records(registry, workload, parse_since(since), limit, status)
    if fmt == "nccl-tests":
        sweeps = [r for r in records if export.is_sweep(r)]
        if run_id is None or not sweeps:
            fail("--format nccl-tests needs --run RUN_ID of a collectives run (one sweep per file)")
        from perfsuite.analysis.nccl_tests_json import document

        write_out(out, parents=parents, replace=replace, data=json.dumps(document(sweeps[0]), indent=1) + "\n")
        return
    rows = list(export.rows_of(records))
    if fmt == "csv":
        write_out(out, parents=parents, replace=replace, data=export.csv_text(rows, export.COLUMN_NAMES))
    elif fmt == "jsonl":
        write_out(
            out, parents=parents, replace=replace, data="".join(json.dumps(row, sort_keys=False) + "\n" for row in rows)
        )
    else:
        if out is None:
            fail("--format parquet writes a binary file: give --out FILE")
        try:
            import pyarrow  # noqa: F401 - the Parquet writer
        except ImportError:
            fail("--format parquet needs pyarrow: pip install 'perfsuite[export]'")
        write_out(out, parents=parents, replace=replace, data=export.parquet_bytes(rows))
