"""``perfsuite check``: validate a submissions tree and list every problem with its file."""

from __future__ import annotations

from pathlib import Path

import click

from perfsuite.cli._common import emit_json, progress_bar


def print_report(report) -> None:
    for problem in report.problems:
        click.echo(f"problem: {problem}", err=True)
    if report.ok:
        click.echo(f"ok: {report.root}: {len(report.records)} records, {len(report.systems)} systems")
    else:
        click.echo(f"{report.root}: {len(report.problems)} problem(s) in {len(report.records)} records", err=True)


@click.command("check")
@click.argument("path", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def check_cmd(path: Path, as_json: bool) -> None:
    """Check a submissions tree: schemas, record hashes, verification passed, required runs
    (training 5 per system and parameters, others 1), unique seeds, MLLOG keys of training
    runs, system files matching the records' GPUs, no path escaping the tree, no duplicate
    run ids. Lists every problem with its file; exit 1 if any."""
    from perfsuite.registry.submissions import check_tree, record_files

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
