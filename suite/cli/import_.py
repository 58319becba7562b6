"""``perfsuite import``: record files, a records folder or a submissions tree into the registry."""

from __future__ import annotations

from pathlib import Path

import click

from perfsuite.cli._common import fail, open_db, progress_bar
from perfsuite.cli.check import print_report, shown


@click.command("import")
@click.argument("files", nargs=-1, required=True, type=click.Path(exists=True, path_type=Path))
@click.option(
    "--progress",
    "show_progress",
    is_flag=True,
    help="Show a records folder's progress on stderr even when it is not a terminal (a line at each tenth).",
)
@click.pass_context
def import_cmd(ctx: click.Context, files: tuple[Path, ...], show_progress: bool) -> None:
    """Load record files into the registry, all or none: every file is checked (regular file,
    size limit, UTF-8, JSON, schema, sha256, figures within physics) before one transaction
    stores them. A directory is a records folder (the runner's <run_id>.json files: those the
    registry lacks are stored, streaming, in batches of their own transaction; each refused one
    named) or a submissions tree (checked as
    'perfsuite check' does, then loaded). A finished measurement left without a record by a
    runner that died (its folder under <records>/unrecorded/, or its result.json) is sealed
    into its record, as the runner would have, and stored. Idempotent by run id and hash."""
    from perfsuite.engine.lifeline import complete_result

    kept = [f for f in files if complete_result(f.parent if f.name == "result.json" else f) is not None]
    if kept:
        import_kept(ctx, kept)
        files = tuple(f for f in files if f not in kept)
        if not files:
            return
    if any(f.is_dir() for f in files):
        if len(files) != 1:
            fail("give record files, or one records folder or submissions directory")
        from perfsuite.registry.recovery import is_records_folder

        if is_records_folder(files[0]):
            return import_records_folder(ctx, files[0], show_progress)
        return import_directory(ctx, files[0])
    from perfsuite.registry import RecordInvalid, RegistryError
    from perfsuite.registry.bulk import BulkOutcome, prepare, store_prepared

    prepared, refused = [], []
    with progress_bar(len(files), "checking") as advance:
        for f in files:
            try:
                prepared.append(prepare(f))  # read and checked (file, size, UTF-8, JSON, schema, sha256, physics) once
            except RecordInvalid as exc:
                refused.append(f"{shown(f)}: {shown(exc)}")
            advance(1)
    if refused:
        for line in refused[:-1]:
            click.echo(f"Error: {line}", err=True)
        fail(f"{refused[-1]} (nothing imported: {len(refused)} of {len(files)} files refused)", 1)
    registry = open_db(ctx)
    outcome = BulkOutcome()
    try:
        registry.writable()
        existing = set(registry.stored_hashes([p.run_id for p in prepared]))
        with progress_bar(len(prepared), "storing") as advance:
            store_prepared(registry.engine, [prepared], outcome, atomic=True, progress=advance)
    except RegistryError as exc:
        fail(f"{exc} (nothing imported)", 1)
    for f, p in zip(files, prepared):
        click.echo(f"{'duplicate' if p.run_id in existing else 'stored'}: {p.run_id} ({shown(f)})")


def import_kept(ctx: click.Context, paths: list[Path]) -> None:
    """``perfsuite import <records>/unrecorded/RUN_ID``: seal each kept result into its record
    (written into the records folder) and store it, one line each; exit 1 on a refusal."""
    from perfsuite.engine.unrecorded import NotRecoverable, recover
    from perfsuite.registry import RecordInvalid, RegistryError, records_dir

    registry = open_db(ctx)
    for path in paths:
        try:
            record, outcome = recover(registry, path, records_dir())
        except (NotRecoverable, RecordInvalid, RegistryError, OSError) as exc:
            fail(f"{shown(path)}: {shown(exc)} (not imported)", 1)
        click.echo(f"{outcome}: {record['run_id']} (recovered from {shown(path)})")


def _progress(total: int, what: str, shown_anyway: bool):
    """The progress bar on stderr when it is a terminal or ``--progress`` asks; else nothing
    (the summary line says what was done)."""
    import contextlib
    import sys

    if sys.stderr.isatty() or shown_anyway:
        return progress_bar(total, what)
    return contextlib.nullcontext(lambda _done: None)


def import_records_folder(ctx: click.Context, folder: Path, show_progress: bool = False) -> None:
    """``perfsuite import RECORDS``: store the folder's records the registry lacks, streaming
    (checked in worker processes, stored in batches of their own transaction: memory stays
    bounded, and a run cut off keeps what it stored); each file refused is one line (the others
    are stored); exit 1 if any was refused."""
    from perfsuite.engine.unrecorded import find, prune
    from perfsuite.registry import RegistryError
    from perfsuite.registry.bulk import store_files
    from perfsuite.registry.recovery import record_files

    registry = open_db(ctx)
    files = record_files(folder)
    try:
        with _progress(len(files), "importing", show_progress) as advance:
            done = store_files(registry, files, progress=advance)
        prune(registry, folder)  # kept results whose record is now stored
        waiting = find(registry, folder)
    except RegistryError as exc:
        fail(f"{exc} (nothing imported)", 1)
    if waiting:
        import_kept(ctx, [k.path for k in waiting])
    for path, why in done.refused:
        click.echo(f"Error: {shown(Path(path))}: {shown(why)}", err=True)
    refused = f", {len(done.refused)} refused" if done.refused else ""
    click.echo(f"{shown(folder)}: {done.stored} stored, {done.duplicate} already there{refused}")
    if done.refused:
        raise SystemExit(1)


def import_directory(ctx: click.Context, directory: Path) -> None:
    """``perfsuite import DIR``: check the tree, then load it (idempotent). Every problem is
    one line, as 'perfsuite check' prints it; exit 1 on any."""
    from perfsuite.publish.submissions.tree import check_tree, import_tree, record_files
    from perfsuite.registry import RegistryError

    with progress_bar(len(record_files(directory)), "checking") as advance:
        report = check_tree(directory, progress=advance)
    if not report.ok:
        print_report(report)
        fail(f"{directory} does not check clean: nothing imported", 1)
    try:
        registry = open_db(ctx)
        registry.writable()
        with progress_bar(len(report.records), "storing") as advance:
            counts = import_tree(registry, directory, progress=advance, checked=report)
    except RegistryError as exc:
        fail(str(exc), 1)
    click.echo(
        f"{shown(directory)}: {counts['stored']} stored, {counts['duplicate']} already there, "
        f"{counts['systems']} systems"
    )
