"""``perfsuite show RUN_ID``: one run with its statistics, verification, GPU state, details and
cross-check."""

from __future__ import annotations

import click

from perfsuite.cli._common import console, emit_json, fail, open_db, warn_plugin_problems_if_loaded


@click.command("show")
@click.argument("run_id")
@click.option("--json", "as_json", is_flag=True, help="Print the whole record.")
@click.pass_context
def show_cmd(ctx: click.Context, run_id: str, as_json: bool) -> None:
    """Show one run: metrics with statistics, verification, GPU state, details, cross-check."""
    from perfsuite.registry import RegistryError

    try:
        record = open_db(ctx).get(run_id)
    except RegistryError as exc:
        fail(str(exc), 1)
    if as_json:
        emit_json(record)
        return
    from perfsuite.analysis.tables import show_record
    from perfsuite.plugins import recorded_workload

    cls = recorded_workload(record["workload"])  # the plugins loaded only for a third party's run
    warn_plugin_problems_if_loaded()
    show_record(console(), record, cls)
    if (record.get("details") or {}).get("crosscheck"):  # its reference tool's figures and the ratios
        from perfsuite.cli._reference import print_crosscheck_table

        print_crosscheck_table([record])
