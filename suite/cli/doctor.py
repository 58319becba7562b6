"""``perfsuite doctor``: the pre-flight checks as a table or JSON, with an overall verdict."""

from __future__ import annotations

import sys

import click

VERDICT_STYLE = {"ok": "green", "warn": "yellow", "fail": "bold red", "unknown": "dim"}


def findings_table(findings: list, title: str):
    from rich.table import Table
    from rich.text import Text

    t = Table(title=title)
    for col in ("scope", "check", "verdict", "value", "why"):
        t.add_column(col)
    for f in findings:
        # Values come from the machine (process names, NVML text): plain text, never markup.
        t.add_row(f.scope, f.check, Text(f.verdict, style=VERDICT_STYLE[f.verdict]), Text(f.value), Text(f.why))
    return t


@click.command("doctor")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def doctor_cmd(as_json: bool) -> None:
    """Check that this machine is quiet and set up for measuring (changes nothing).

    Exit status: 0 when no check failed, 1 when one did."""
    from perfsuite.cli._common import console, emit_json
    from perfsuite.doctor import overall, run_checks, to_dicts

    findings = run_checks()
    verdict = overall(findings)
    if as_json:
        emit_json({"verdict": verdict, "checks": to_dicts(findings)})
    else:
        console().print(findings_table(findings, f"doctor: {verdict}"))
    sys.exit(1 if verdict == "fail" else 0)
