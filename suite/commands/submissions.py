"""``perfsuite submit`` files registry runs into a submissions tree; ``perfsuite check``
validates a tree and lists every problem with its file. ``perfsuite import DIR`` loads a
checked tree (:func:`import_directory`, called by the ``import`` command)."""
from __future__ import annotations

import contextlib
import sys
from pathlib import Path
from typing import Callable, Iterator

import click


@contextlib.contextmanager
def progress_bar(total: int, what: str) -> Iterator[Callable[[int], None]]:
    """A progress bar with its ETA on stderr when it is a terminal, else (for 1,000 items or more)
    a line at each tenth; yields the function to call with the number of items just done."""
    if total < 1 or (total < 1000 and not sys.stderr.isatty()):
        yield lambda _done: None
        return
    if sys.stderr.isatty():
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

        columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn())
        with Progress(*columns, console=Console(stderr=True), transient=True) as bar:
            task = bar.add_task(what, total=total)
            yield lambda done: bar.advance(task, done)
        return
    state = {"done": 0, "shown": 0}

    def advance(done: int) -> None:
        state["done"] += done
        tenth = state["done"] * 10 // total
        if tenth > state["shown"]:
            state["shown"] = tenth
            click.echo(f"{what}: {state['done']} of {total}", err=True)

    yield advance


@click.command("submit")
@click.argument("run_ids", nargs=-1, required=True)
@click.option("--org", required=True, help="The submitting organisation (a folder of the tree).")
@click.option("--system", required=True, help="The system's name (systems/<system>.json).")
@click.option("--root", type=click.Path(file_okay=False, path_type=Path), default=Path("submissions"),
              show_default=True, help="The submissions tree.")
@click.option("--status", type=click.Choice(["Available", "Preview", "Research"]), default="Available",
              show_default=True, help="Availability, for a new system file.")
@click.option("--cooling", type=click.Choice(["air", "liquid", "immersion", "unknown"]), default="unknown",
              show_default=True, help="Cooling, for a new system file.")
@click.option("--price-per-hour", "price_per_hour", type=float, default=None, metavar="USD",
              help="Price of one accelerator-hour, for a new system file: results without their own cost "
                   "are priced at it.")
@click.pass_context
def submit_cmd(ctx: click.Context, run_ids: tuple[str, ...], org: str, system: str, root: Path, status: str,
               cooling: str, price_per_hour: float | None) -> None:
    """Copy runs from the registry into ROOT/ORG/results/SYSTEM/<workload>/<run_id>.json (+ .mllog);
    write ROOT/ORG/systems/SYSTEM.json from the first run's fingerprint when missing. Then check,
    and print each run's cost (its own, else at the system file's price)."""
    from registry import RegistryError, records_dir
    from registry.submissions import check_tree, filed_cost, submit_runs
    from schemas.cost import cost_text, validate_price
    from suite import mllog
    from suite.cli import fail, open_db

    for name, value in (("--org", org), ("--system", system)):
        if not value or "/" in value or value in (".", "..") or value.startswith("."):
            fail(f"{name} {value!r} must be a plain folder name")
    try:
        validate_price(price_per_hour)
    except ValueError as exc:
        fail(f"--price-per-hour: {exc}")
    registry = open_db(ctx)
    try:
        records = [registry.get(r) for r in run_ids]
        written = submit_runs(records, root, org, system, records_dir(), mllog.write, status=status, cooling=cooling,
                              price_per_hour=price_per_hour)
    except RegistryError as exc:
        fail(str(exc), 1)
    for path in written:
        click.echo(f"wrote {path}")
    report = check_tree(root)
    submitted = {r["run_id"] for r in records}
    for filed in report.records:
        text = cost_text(filed_cost(report, filed)) if filed.record["run_id"] in submitted else None
        if text:
            click.echo(f"cost of {filed.record['run_id']}: {text}")
    _print_report(report)
    if not report.ok:
        raise SystemExit(1)


def _print_report(report) -> None:
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
    from registry.submissions import check_tree, record_files
    from suite.cli import emit_json

    with progress_bar(len(record_files(path)), "checking") as advance:
        report = check_tree(path, progress=advance)
    if as_json:
        emit_json({"root": str(path), "ok": report.ok, "records": len(report.records),
                   "systems": len(report.systems),
                   "problems": [{"path": p.path, "message": p.message} for p in report.problems]})
    else:
        _print_report(report)
    if not report.ok:
        raise SystemExit(1)


def import_directory(ctx: click.Context, directory: Path) -> None:
    """``perfsuite import DIR``: check the tree, then load it (idempotent). Exit 1 on any problem."""
    from registry import RegistryError
    from registry.submissions import import_tree
    from suite.cli import fail, open_db

    from registry.submissions import check_tree, record_files

    with progress_bar(len(record_files(directory)), "checking") as advance:
        report = check_tree(directory, progress=advance)
    try:
        with progress_bar(len(report.records), "storing") as advance:
            counts = import_tree(open_db(ctx), directory, progress=advance, checked=report)
    except RegistryError as exc:
        fail(str(exc), 1)
    click.echo(f"{directory}: {counts['stored']} stored, {counts['duplicate']} already there, "
               f"{counts['systems']} systems")
