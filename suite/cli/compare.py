"""``perfsuite compare A B``: is B faster than A, with the statistics and the environment
differences beside the verdict."""

from __future__ import annotations

import sys

import click

from perfsuite.cli._common import fmt_p, pct, text, verdict_text


@click.command("compare")
@click.argument("runs", nargs=-1)
@click.option(
    "--workload", default=None, help="Compare the latest runs of this workload (with --system or --commit twice)."
)
@click.option(
    "--system", "systems", multiple=True, help="A system (submitted name, host or device key): give A then B."
)
@click.option("--commit", "commits", multiple=True, help="A suite git commit (prefix): give A then B.")
@click.option(
    "--threshold",
    type=click.FloatRange(min=0),
    default=None,
    help="Smallest relative change called a change (default 0.02 = 2%).",
)
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@click.pass_context
def compare_cmd(
    ctx: click.Context,
    runs: tuple[str, ...],
    workload: str | None,
    systems: tuple[str, ...],
    commits: tuple[str, ...],
    threshold: float | None,
    as_json: bool,
) -> None:
    """Compare run B against run A (ids or prefixes): ratio of medians with its 95% CI, a
    Mann-Whitney U p-value, and a verdict per case and metric."""
    from perfsuite.analysis.compare import (
        DEFAULT_THRESHOLD,
        NotComparable,
        compare_records,
    )
    from perfsuite.cli._common import emit_json, fail, open_db
    from perfsuite.registry import RegistryError
    from perfsuite.registry.compare import latest_run

    threshold = DEFAULT_THRESHOLD if threshold is None else threshold
    registry = open_db(ctx)
    try:
        if runs:
            if len(runs) != 2 or workload or systems or commits:
                fail("give two run ids, or --workload with two --system or two --commit")
            a, b = registry.get(runs[0]), registry.get(runs[1])
        else:
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
                a = latest_run(session, workload, **sides[0])
                b = latest_run(session, workload, comparability_key=a["comparability_key"], **sides[1])
    except RegistryError as exc:
        fail(str(exc), 1)
    try:
        result = compare_records(a, b, threshold=threshold)
    except NotComparable as exc:
        fail(str(exc), 1)
    except ValueError as exc:
        fail(str(exc), 1)
    if as_json:
        emit_json(result.to_dict())
        return
    print_comparison(result, a, b)


def print_comparison(result, a: dict, b: dict, title: str | None = None) -> None:
    from rich.table import Table

    from perfsuite.cli._common import console

    out = console()
    t = Table(title=title or f"{result.workload}: B {result.run_b[:8]} against A {result.run_a[:8]}")
    for col, just in (
        ("case", "left"),
        ("metric", "left"),
        ("median A", "right"),
        ("median B", "right"),
        ("unit", "left"),
        ("B/A", "right"),
        ("95% CI of B/A", "right"),
        ("p (Mann-Whitney)", "right"),
        ("n A/B", "right"),
        ("verdict", "left"),
    ):
        t.add_column(col, justify=just)
    for m in result.metrics:
        t.add_row(
            text(m.case),
            text(m.metric + (" *" if m.headline else "")),
            f"{m.median_a:.6g}",
            f"{m.median_b:.6g}",
            text(m.unit),
            f"{m.ratio:.4f} ({pct(m.ratio)})",
            f"{m.ratio_ci_low:.4f}–{m.ratio_ci_high:.4f}",
            fmt_p(m.p_value),
            f"{m.n_a}/{m.n_b}",
            verdict_text(m.verdict),
        )
    out.print(t)
    from rich.text import Text

    line = Text("verdict: ")
    line.append_text(verdict_text(result.verdict))
    line.append(
        f"  (B against A on the headline metric (*) of each case; a change is called when "
        f"p < {result.alpha:g} and it exceeds {result.threshold * 100:g}%)"
    )
    out.print(line)
    if result.environment_differences:
        t = Table(title="environment differences")
        for col in ("fact", "A", "B"):
            t.add_column(col)
        for d in result.environment_differences:
            t.add_row(text(d["fact"]), text(d["a"]), text(d["b"]))
        out.print(t)
    else:
        out.print(Text("environment: no differences in driver, CUDA, NCCL, torch, clocks, power or host"))
    sys.stdout.flush()
