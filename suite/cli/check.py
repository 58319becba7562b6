"""``perfsuite check``: validate a submissions tree and list every problem with its file."""

from __future__ import annotations

from pathlib import Path

import click

from perfsuite.cli._common import emit_json, progress_bar
from perfsuite.text import clean


def shown(value: object) -> str:
    """Text from a file system or a file as one inert line: control characters, a newline in
    a file name and bytes that are not UTF-8 are shown escaped (``\\x1b``, ``\\n``, ``\\udcff``)."""
    text = clean(value).replace("\n", "\\n").replace("\t", "\\t")
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def print_report(report) -> None:
    for problem in report.problems:
        click.echo(f"problem: {shown(problem.path)}: {shown(problem.message)}", err=True)
    if report.ok:
        click.echo(f"ok: {shown(report.root)}: {len(report.records)} records, {len(report.systems)} systems")
    else:
        click.echo(
            f"{shown(report.root)}: {len(report.problems)} problem(s) in {len(report.records)} records", err=True
        )


@click.command("check")
@click.argument("path", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def check_cmd(path: Path, as_json: bool) -> None:
    """Check a submissions tree: schemas, record hashes, figures within physics, verification
    passed, required runs (training 5 per system and parameters, others 1), unique seeds, MLLOG
    keys of training runs, system files matching the records' GPUs, no path escaping the tree,
    no symlink followed, no special file opened, no duplicate run ids. Lists every problem with
    its file, one per line; exit 1 if any."""
    from perfsuite.publish.submissions.tree import check_tree, record_files

    with progress_bar(len(record_files(path)), "checking") as advance:
        report = check_tree(path, progress=advance)
    if as_json:
        emit_json(
            {
                "root": str(path),
                "ok": report.ok,
                "records": len(report.records),
                "systems": len(report.systems),
                "problems": [{"path": p.path, "message": p.message} for p in report.problems],
            }
        )
    else:
        print_report(report)
    if not report.ok:
        raise SystemExit(1)
