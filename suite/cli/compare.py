"""``perfsuite compare A B``: is B faster than A, between runs where each side has several, with
the statistics and the environment differences beside the verdict; a CI gate with
``--fail-on slower`` (exit 3 on a significant regression beyond ``--threshold``), a Markdown
table for ``$GITHUB_STEP_SUMMARY`` and JUnit XML for test reporters."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click

from perfsuite.cli._common import fail, fmt_p, open_db, pct, verdict_text
from perfsuite.cli._types import AsciiIntRange, Name
from perfsuite.engine.params import parse_float

# The exit status of a comparison whose verdict is one --fail-on names (errors stay 1, usage 2).
EXIT_REGRESSION = 3
DEFAULT_LAST = 5
FAIL_ON = {"slower": ("slower",), "faster": ("faster",), "change": ("slower", "faster"), "never": ()}


class Fraction(click.ParamType):
    """A relative change: ``5%`` or ``0.05``."""

    name = "fraction"

    def convert(self, value: Any, param: Any, ctx: Any) -> float:
        if isinstance(value, float):
            return value
        raw = str(value).strip()
        try:  # ASCII digits, finite (perfsuite.engine.params' rules for every number)
            number = parse_float(raw[:-1]) / 100.0 if raw.endswith("%") else parse_float(raw)
        except ValueError:
            self.fail(f"{value!r} is not a relative change (give 5% or 0.05)", param, ctx)
        if not 0.0 <= number < 1.0:
            self.fail(f"{value!r} is not a relative change between 0 and 100% (give 5% or 0.05)", param, ctx)
        return number


@click.command("compare")
@click.argument("runs", nargs=-1)
@click.option(
    "--workload", default=None, help="Compare runs of this workload (with --system or --commit twice: A, then B)."
)
@click.option(
    "--system",
    "systems",
    multiple=True,
    type=Name(),
    help="A system (submitted name, host or device key): give A then B.",
)
@click.option("--commit", "commits", multiple=True, help="A suite git commit (prefix): give A then B.")
@click.option(
    "--last",
    type=AsciiIntRange(min=1),
    default=DEFAULT_LAST,
    show_default=True,
    help="With --workload: the newest runs of each side with A's settings.",
)
@click.option(
    "--threshold",
    type=Fraction(),
    default=None,
    help="Smallest relative change called a change: 5% or 0.05 (default 2%).",
)
@click.option(
    "--fail-on",
    type=click.Choice(sorted(FAIL_ON)),
    default="never",
    show_default=True,
    help=f"Exit {EXIT_REGRESSION} when the verdict is this (change: slower or faster): a CI gate.",
)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["table", "markdown", "json"]),
    default="table",
    show_default=True,
    help="markdown: a GitHub table (for $GITHUB_STEP_SUMMARY).",
)
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output (--format json).")
@click.option(
    "--junit",
    "junit_path",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Also write JUnit XML: one test case per case and headline metric, failed where --fail-on says. "
    "A new name or a file perfsuite wrote there before: any other file, a device, FIFO or symlink is refused.",
)
@click.option("--parents", is_flag=True, help="Create the folders above --junit where they are missing.")
@click.pass_context
def compare_cmd(
    ctx: click.Context,
    runs: tuple[str, ...],
    workload: str | None,
    systems: tuple[str, ...],
    commits: tuple[str, ...],
    last: int,
    threshold: float | None,
    fail_on: str,
    fmt: str,
    as_json: bool,
    junit_path: Path | None,
    parents: bool,
) -> None:
    """Compare runs B against runs A (the baseline). A and B are run ids or prefixes, each side
    one run or several joined by commas (a repeat); or --workload W with two --system or two
    --commit, taking the newest --last runs of each side with the settings of A's newest run.

    With several runs a side the test is between runs (one value per run: Welch's t, a bootstrap
    CI of B/A over runs); with one run a side the figures are within run (over its calls) and
    say so."""
    from perfsuite.analysis.compare import DEFAULT_THRESHOLD, NotComparable, compare_runs
    from perfsuite.cli._common import emit_json

    threshold = DEFAULT_THRESHOLD if threshold is None else threshold
    side_a, side_b = _sides(ctx, runs, workload, systems, commits, last)
    try:
        result = compare_runs(side_a, side_b, threshold=threshold)
    except NotComparable as exc:
        fail(str(exc), 1)
    except ValueError as exc:
        fail(str(exc), 1)
    failing = result.verdict in FAIL_ON[fail_on] or any(
        m.headline and m.verdict in FAIL_ON[fail_on] for m in result.metrics
    )
    if junit_path is not None:
        from perfsuite.owned_output import OutputRefused

        try:
            write_junit(result, junit_path, FAIL_ON[fail_on], parents=parents)
        except OutputRefused as exc:
            fail(f"--junit: {exc}")
    if as_json or fmt == "json":
        emit_json({**result.to_dict(), "note": result.note, "fail_on": fail_on, "failed": failing})
    elif fmt == "markdown":
        click.echo(markdown(result))
    else:
        print_comparison(result, side_a[0], side_b[0])
    if failing:
        click.echo(f"compare: {result.verdict} (--fail-on {fail_on})", err=True)
        sys.exit(EXIT_REGRESSION)


def _sides(
    ctx: click.Context,
    runs: tuple[str, ...],
    workload: str | None,
    systems: tuple[str, ...],
    commits: tuple[str, ...],
    last: int,
) -> tuple[list[dict], list[dict]]:
    """The records of side A and side B, as the arguments name them."""
    from perfsuite.registry import RegistryError
    from perfsuite.registry.compare import latest_run, runs_of_key
    from perfsuite.schemas.comparability import comparability_key

    registry = open_db(ctx)
    try:
        if runs:
            if len(runs) != 2 or workload or systems or commits:
                fail("give two sides (run ids, several joined by commas), or --workload with two --system or --commit")
            a, b = ([registry.get(rid.strip()) for rid in side.split(",") if rid.strip()] for side in runs)
            return a, b
        if not workload or not (
            (len(systems) == 2 and not commits)
            or (len(commits) == 2 and not systems)
            or (len(systems) == 1 and len(commits) == 2)
        ):
            fail("give two run ids, or --workload W with --system A --system B or --commit A --commit B")
        sides = [
            dict(
                system=systems[i] if len(systems) == 2 else (systems[0] if systems else None),
                commit=commits[i] if commits else None,
            )
            for i in range(2)
        ]
        with registry.session() as session:
            key = comparability_key(latest_run(session, workload, **sides[0]))
            a = runs_of_key(session, workload, key, limit=last, **sides[0])
            b = runs_of_key(session, workload, key, limit=last, **sides[1])
        return a, b
    except RegistryError as exc:
        fail(str(exc), 1)
    raise AssertionError("not reached: fail() exits")  # for mypy, which sees the registry's session as Any


def _columns(result) -> list:
    from perfsuite.analysis.layout import Column

    p_col = "p (Welch, runs)" if result.basis == "between runs" else "p within run (calls)"
    n_col = "runs A/B" if result.basis == "between runs" else "calls A/B"
    # the ratio's CI is what a verdict rests on and the metric's name says what the row is: never
    # left out for the width (a long name breaks after an underscore); the counts and the p-value go first
    return [
        Column("case", wrap=True),
        Column("metric", split="_"),
        Column("median A", justify="right"),
        Column("median B", justify="right"),
        Column("unit"),
        Column("B/A", justify="right", wrap=True),  # at its narrowest the share under the ratio
        Column("95% CI of B/A", justify="right"),
        Column(p_col, justify="right", drop=2),
        Column(n_col, justify="right", drop=3),
        Column("verdict", wrap=True),
    ]


def _cells(m) -> list[str]:
    """One metric's row: both medians in the unit the first reads best in (perfsuite.analysis.units)."""
    from perfsuite.analysis.units import number, scale_for

    factor, unit = scale_for(m.median_a, m.unit) if m.unit != "fraction" else (100.0, "%")
    return [
        m.case,
        m.metric + (" *" if m.headline else ""),
        number(m.median_a * factor),
        number(m.median_b * factor),
        unit,
        f"{m.ratio:.4f} ({pct(m.ratio)})",
        f"{m.ratio_ci_low:.4f}–{m.ratio_ci_high:.4f}",
        fmt_p(m.p_value),
        f"{m.n_a}/{m.n_b}",
        m.verdict,
    ]


def _verdict_sentence(result) -> str:
    return (
        f"B against A on the headline metric (*) of each case; a change is called when p < {result.alpha:g}, "
        f"the CI excludes 1 and it exceeds {result.threshold * 100:g}%"
    )


def print_comparison(result, a: dict, b: dict, title: str | None = None) -> None:
    from rich.text import Text

    from perfsuite.analysis.layout import Column, FittedTable
    from perfsuite.cli._common import console
    from perfsuite.schemas.comparability import settings_line

    out = console()
    columns = _columns(result)
    t = FittedTable(
        columns,
        title=title or f"{result.workload}: B {result.run_b} against A {result.run_a}",
        caption=settings_line(result.key_settings) or None,
    )
    for m in result.metrics:
        t.add_row(*_cells(m), cell_styles={len(columns) - 1: verdict_text(m.verdict).style})
    out.print(t)
    line = Text("verdict: ")
    line.append_text(verdict_text(result.verdict))
    line.append(f"  ({_verdict_sentence(result)})")
    out.print(line)
    out.print(Text(result.note))
    if result.no_ratio:
        out.print(Text(f"no ratio (the baseline's median is zero): {', '.join(result.no_ratio)}"))
    if result.environment_differences:
        env = FittedTable(
            (Column("fact"), Column("A", wrap=True), Column("B", wrap=True)), title="environment differences"
        )
        for d in result.environment_differences:
            env.add_row(d["fact"], d["a"], d["b"])
        out.print(env)
    else:
        out.print(Text("environment: no differences in driver, CUDA, NCCL, torch, clocks, power or host"))
    sys.stdout.flush()


def _md(cell: str) -> str:
    return cell.replace("|", "\\|").replace("\n", " ")


def markdown(result) -> str:
    """The comparison as GitHub-flavoured Markdown: a heading with the verdict, the table, the note."""
    from perfsuite.schemas.comparability import settings_line

    cols = _columns(result)
    lines = [
        f"### {_md(result.workload)}: {result.verdict}",
        "",
        f"B `{result.run_b}` against A `{result.run_a}` · {_md(settings_line(result.key_settings))}",
        "",
        "| " + " | ".join(c.header for c in cols) + " |",
        "| " + " | ".join("---:" if c.justify == "right" else "---" for c in cols) + " |",
    ]
    for m in result.metrics:
        cells = _cells(m)
        if m.verdict in ("slower", "faster"):
            cells[-1] = f"**{cells[-1]}**"
        lines.append("| " + " | ".join(_md(c) for c in cells) + " |")
    lines += ["", f"{_verdict_sentence(result)}. {result.note}."]
    if result.environment_differences:
        lines += ["", "| environment | A | B |", "| --- | --- | --- |"]
        lines += [
            f"| {_md(str(d['fact']))} | {_md(str(d['a']))} | {_md(str(d['b']))} |"
            for d in result.environment_differences
        ]
    return "\n".join(lines) + "\n"


def write_junit(result, path: Path, failing: tuple[str, ...], parents: bool = False) -> None:
    """JUnit XML: one test suite, one test case per case and headline metric; a verdict that
    ``failing`` names is a failure with the figures as its message. Written as a regular file
    only, and only over a file perfsuite wrote there before (:func:`perfsuite.owned_file.write_owned_file`,
    which raises ``OutputRefused``)."""
    import xml.etree.ElementTree as ET

    from perfsuite.owned_file import write_owned_file

    heads = [m for m in result.metrics if m.headline] or result.metrics
    suite = ET.Element(
        "testsuite",
        name=f"perfsuite compare {result.workload}",
        tests=str(len(heads)),
        failures=str(sum(m.verdict in failing for m in heads)),
    )
    for m in heads:
        case = ET.SubElement(suite, "testcase", classname=result.workload, name=f"{m.case} {m.metric}")
        summary = (
            f"{m.verdict}: B/A {m.ratio:.4f} ({pct(m.ratio)}), 95% CI {m.ratio_ci_low:.4f}-{m.ratio_ci_high:.4f}, "
            f"p {fmt_p(m.p_value)} ({m.basis}), threshold {result.threshold * 100:g}%"
        )
        if m.verdict in failing:
            ET.SubElement(case, "failure", message=summary, type=m.verdict).text = result.note
        else:
            ET.SubElement(case, "system-out").text = summary
    root = ET.Element("testsuites")
    root.append(suite)
    xml = ET.tostring(root, encoding="utf-8", xml_declaration=True)
    write_owned_file(path, xml, command="compare", parents=parents)
