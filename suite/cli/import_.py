"""``perfsuite import``: record files or a submissions tree into the registry, all or none."""

from __future__ import annotations

from pathlib import Path

import click

from perfsuite.cli._common import fail, open_db
from perfsuite.text import clean


@click.command("import")
@click.argument("files", nargs=-1, required=True, type=click.Path(exists=True, path_type=Path))
@click.pass_context
def import_cmd(ctx: click.Context, files: tuple[Path, ...]) -> None:
    """Load record files into the registry, all or none: every file is checked (size limit,
    UTF-8, JSON, schema, sha256) before one transaction stores them. A directory is a
    submissions tree: checked (perfsuite check), then loaded. Idempotent by run id and hash."""
    if any(f.is_dir() for f in files):
        if len(files) != 1:
            fail("give record files, or one submissions directory")
        return import_directory(ctx, files[0])
    from perfsuite.registry import (
        RecordInvalid,
        RegistryError,
        check_record,
        load_record_file,
    )

    records, refused = [], []
    for f in files:
        try:
            record = load_record_file(f)
            check_record(record)
        except RecordInvalid as exc:
            refused.append(f"{f}: {exc}")
            continue
        records.append(record)
    if refused:
        for line in refused[:-1]:
            click.echo(f"Error: {clean(line)}", err=True)
        fail(f"{refused[-1]} (nothing imported: {len(refused)} of {len(files)} files refused)", 1)
    try:
        outcomes = open_db(ctx).store_all(records)
    except RegistryError as exc:
        fail(f"{exc} (nothing imported)", 1)
    for f, record, outcome in zip(files, records, outcomes):
        click.echo(f"{outcome}: {record['run_id']} ({clean(f)})")


def import_directory(ctx: click.Context, directory: Path) -> None:
    """``perfsuite import DIR``: check the tree, then load it (idempotent). Exit 1 on any problem."""
    from perfsuite.cli._common import fail, open_db
    from perfsuite.registry import RegistryError
    from perfsuite.registry.submissions import import_tree

    try:
        counts = import_tree(open_db(ctx), directory)
    except RegistryError as exc:
        fail(str(exc), 1)
    click.echo(
        f"{directory}: {counts['stored']} stored, {counts['duplicate']} already there, {counts['systems']} systems"
    )
