"""``perfsuite results``: recorded runs, newest first, as a table, JSON or Markdown (for a CI
job's step summary: ``perfsuite results --format markdown >> "$GITHUB_STEP_SUMMARY"``)."""

from __future__ import annotations

import contextlib
import datetime as dt
import os

import click

from perfsuite.cli._common import console, emit_json, fail, open_db, run_id_prefixes
from perfsuite.cli._types import AsciiIntRange
from perfsuite.text import clean


def parse_since(since: str | None) -> dt.datetime | None:
    """``--since``: an ISO date or datetime, UTC where it names no zone; one line if it is not one."""
    if not since:
        return None
    try:
        since_dt = dt.datetime.fromisoformat(since)
    except ValueError:
        fail(f"--since {since!r} is not an ISO date")
    return since_dt if since_dt.tzinfo is not None else since_dt.replace(tzinfo=dt.UTC)


@click.command("results")
@click.option("--workload", default=None, help="Only this workload.")
@click.option("--since", default=None, metavar="DATE", help="ISO date or datetime (UTC), e.g. 2026-11-01.")
@click.option("--limit", type=AsciiIntRange(min=1), default=50, help="The newest N runs (default 50).")
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["table", "json", "markdown"]),
    default="table",
    help="markdown: a GitHub table, e.g. for $GITHUB_STEP_SUMMARY.",
)
@click.option("--json", "as_json", is_flag=True, help="Same as --format json.")
@click.pass_context
def results_cmd(
    ctx: click.Context, workload: str | None, since: str | None, limit: int, fmt: str, as_json: bool
) -> None:
    """List recorded runs, newest first."""
    registry = open_db(ctx)
    rows = registry.results(workload=workload, since=parse_since(since), limit=limit)
    if as_json or fmt == "json":
        emit_json(rows)
        notice_unstored(registry)
        return
    from perfsuite.analysis.export import records_by_id
    from perfsuite.analysis.tables import runs_table

    ids = [r["run_id"] for r in rows]
    records = records_by_id(registry, ids)
    # a ceiling's run named beside a figure is shown by its prefix too, as the runs are
    prefixes = run_id_prefixes(registry, [*ids, *ceiling_runs(records.values())])
    table = runs_table(rows, prefixes, records, nested=fmt != "markdown")
    if fmt == "markdown":
        click.echo(table.markdown(), nl=False)
    else:
        console().print(table)
    notice_unstored(registry)


def ceiling_runs(records) -> list[str]:
    """The run ids of the ceilings the records' figures are judged against."""
    found = (((m.get("roofline") or {}).get("ceiling_run_id")) for record in records for m in record["metrics"])
    return sorted({run for run in found if run})


def notice_unstored(registry) -> None:
    """One line on stderr when the records folder holds records the registry does not, and
    one for each finished measurement a runner that died left without a record."""
    from perfsuite.engine.unrecorded import find, finished_line
    from perfsuite.registry import records_dir
    from perfsuite.registry.recovery import unstored_notice, unstored_records

    folder = records_dir()
    checked = FolderChecked(registry, folder)
    if not checked.unchanged():
        missing = unstored_records(registry, folder)
        notice = unstored_notice(missing, folder)
        if notice:
            click.echo(clean(notice), err=True)
        else:
            checked.remember()
    for kept in find(registry, folder):
        click.echo(clean(f"Note: {finished_line(kept)}"), err=True)


# A folder modified this recently may still change within the same tick of its clock: a file
# created there after it was listed could leave its modification time as it was.
SETTLED_S = 2.0


class FolderChecked:
    """That the records folder held no record the registry lacked, remembered (a small file in
    perfsuite's data folder) until the folder (its modification time: a file added, renamed or
    removed) or the registry (:meth:`Registry.contents_stamp`: another database, a run stored
    or removed) changes: at 100,000 records, listing the folder and reading every stored id is
    a quarter of a second of each ``perfsuite results``. Remembered only for a folder that has
    settled (modified :data:`SETTLED_S` before it was listed); a stamp that cannot be read or
    written is a full check, nothing more."""

    def __init__(self, registry, folder) -> None:
        import hashlib
        import json
        import time

        from perfsuite.registry.db import data_dir

        self.stamp = None
        self.path = None
        try:
            found = os.stat(folder)
        except OSError:
            return  # no records folder: nothing in it, nothing to remember
        contents = registry.contents_stamp()
        if contents is None or time.time() - found.st_mtime < SETTLED_S:
            return
        self.stamp = json.dumps([str(folder), found.st_dev, found.st_ino, found.st_mtime_ns, contents], default=str)
        name = hashlib.sha256(f"{contents[0]}\0{folder}".encode()).hexdigest()[:24]
        self.path = data_dir() / "cache" / f"records-folder-{name}.json"

    def unchanged(self) -> bool:
        """Whether the stamp remembered matches the folder and the registry as they are."""
        import stat

        if self.stamp is None or self.path is None:
            return False
        try:
            if not stat.S_ISREG(os.lstat(self.path).st_mode):  # a FIFO there would block the read
                return False
            return self.path.read_text(encoding="utf-8") == self.stamp
        except (OSError, UnicodeDecodeError):
            return False  # none remembered (or unreadable): the full check

    def remember(self) -> None:
        from perfsuite.owned_output import OutputRefused, write_file

        if self.stamp is None or self.path is None:
            return
        # A data folder that cannot take the stamp costs the next call the full check, and the
        # notice this call printed was right: the refusal changes nothing the user reads.
        with contextlib.suppress(OutputRefused):
            write_file(self.path, self.stamp, parents=True)
