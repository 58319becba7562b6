"""``perfsuite import``: record files or a submissions tree into the registry, all or none."""

from __future__ import annotations

from pathlib import Path

import click

from perfsuite.cli._common import fail, open_db, progress_bar
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
    from perfsuite.registry import RecordInvalid, RegistryError
    from perfsuite.registry.bulk import BulkOutcome, prepare, store_prepared

    prepared, refused = [], []
    with progress_bar(len(files), "checking") as advance:
        for f in files:
            try:
                prepared.append(prepare(f))  # read and checked (size, UTF-8, JSON, schema, sha256) once
            except RecordInvalid as exc:
                refused.append(f"{f}: {exc}")
            advance(1)
    if refused:
        for line in refused[:-1]:
            click.echo(f"Error: {clean(line)}", err=True)
        fail(f"{refused[-1]} (nothing imported: {len(refused)} of {len(files)} files refused)", 1)
    registry = open_db(ctx)
    outcome = BulkOutcome()
    try:
        existing = _stored(registry, [p.run_id for p in prepared])
        with progress_bar(len(prepared), "storing") as advance:
            store_prepared(registry.engine, [prepared], outcome, atomic=True, progress=advance)
    except RegistryError as exc:
        fail(f"{exc} (nothing imported)", 1)
    for f, p in zip(files, prepared):
        click.echo(f"{'duplicate' if p.run_id in existing else 'stored'}: {p.run_id} ({clean(f)})")


def _stored(registry, run_ids: list[str]) -> set[str]:
    """Which of ``run_ids`` the registry already holds (so that the import can say so)."""
    from sqlalchemy import select

    from perfsuite.registry.models import Run

    found: set[str] = set()
    with registry.session() as session:
        for start in range(0, len(run_ids), 1000):
            chunk = run_ids[start : start + 1000]
            found.update(session.execute(select(Run.run_id).where(Run.run_id.in_(chunk))).scalars())
    return found


def import_directory(ctx: click.Context, directory: Path) -> None:
    """``perfsuite import DIR``: check the tree, then load it (idempotent). Exit 1 on any problem."""
    from perfsuite.registry import RegistryError
    from perfsuite.registry.submissions import check_tree, import_tree, record_files

    with progress_bar(len(record_files(directory)), "checking") as advance:
        report = check_tree(directory, progress=advance)
    try:
        with progress_bar(len(report.records), "storing") as advance:
            counts = import_tree(open_db(ctx), directory, progress=advance, checked=report)
    except RegistryError as exc:
        fail(str(exc), 1)
    click.echo(
        f"{directory}: {counts['stored']} stored, {counts['duplicate']} already there, {counts['systems']} systems"
    )
