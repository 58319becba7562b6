"""``perfsuite crosscheck WORKLOAD [-p ...]``: ``perfsuite run`` with the reference tool timing
the same callables in the same call (``suite.crosscheck``), then a table of both figures
and their ratio per case (kernels: triton's do_bench) or per size (collectives: nccl-tests).

It takes every option of ``perfsuite run`` (same controls, same parameters) plus
``--nccl-tests DIR``, a directory of nccl-tests binaries (default: ``PERFSUITE_NCCL_TESTS``),
``--mpirun CMD``, the MPI launcher that runs them as one process per GPU (default:
``PERFSUITE_NCCL_TESTS_MPIRUN``; ``suite.nccl_tests.layout``), and ``--rounds N``, the turns
the suite and the reference take (``suite.crosscheck.take_turns``).
"""
from __future__ import annotations

import os
import sys

import click

from suite import crosscheck
from suite.nccl_tests import ENV_DIR as NCCL_TESTS_ENV
from suite.nccl_tests import ENV_MPIRUN as NCCL_TESTS_MPIRUN_ENV
from suite.nccl_tests import mpirun as nccl_tests_launcher


def crosscheck_rows(record: dict) -> list[list[str]]:
    """Rows of the cross-check table for one record (plain text cells)."""
    name = record["workload"]["name"]
    found = (record.get("details") or {}).get("crosscheck")
    if not found:
        return [[name, "", "", "", "", "", f"no cross-check in this record ({record['status']})"]]
    if found.get("tool") == "nccl-tests":
        if found.get("status") != "measured":
            return [[name, "", "nccl-tests", "", "", "", f"{found.get('status')}: {found.get('reason', '')}"]]
        mode = {"oop": "out-of-place", "ip": "in-place"}
        # where nccl-tests' ranks lived (records before the MPI layout name none)
        placed = f" ({found['layout']})" if found.get("layout") else ""
        return [[name, f"{c['size_bytes']} B {mode[c['mode']]}", f"nccl-tests{placed} busbw GB/s",
                 f"{c['suite_busbw_gbps']:.2f}", f"{c['nccl_tests_busbw_gbps']:.2f}",
                 f"{c['busbw_ratio']:.3f}" if c["busbw_ratio"] is not None else "", ""]
                for c in found["compare"]]
    if found.get("tool") in ("aiperf", "bare asyncio reference"):
        return serving_rows(name, found)
    rows = []
    for case, c in found.items():
        if c.get("status") != "measured":
            rows.append([name, case, c.get("tool", ""), "", "", "", f"{c.get('status')}: {c.get('reason', '')}"])
            continue
        rows.append([name, case, "do_bench median ms", f"{c['suite_median_ms']:.4g}", f"{c['reference_median_ms']:.4g}",
                     f"{c['time_ratio']:.3f}", "agrees" if c["agrees"] else f"differs by more than {c['tolerance']:.0%}"])
    return rows


def serving_rows(name: str, found: dict) -> list[list[str]]:
    """inference.serving against AIPerf (or the bare reference): one row per compared figure."""
    tool = found["tool"] + (f" {found['tool_version']}" if found.get("tool_version") else "")
    if found.get("status") != "measured":
        return [[name, "", tool, "", "", "", f"{found.get('status')}: {found.get('reason', '')}"]]
    load = found["load"]
    case = f"rate {load['rate']:g}/s" if load.get("rate") else f"concurrency {load['concurrency']}"
    rows = []
    for figure in ("ttft_p50_ms", "ttft_p99_ms", "itl_p50_ms", "output_tokens_per_s"):
        mine, theirs, ratio = found["suite"].get(figure), found["reference"].get(figure), found["ratios"].get(figure)
        compared = figure in found["compared"]
        note = ("agrees" if ratio is not None and abs(ratio - 1) <= found["tolerance"]
                else f"differs by more than {found['tolerance']:.0%}") if compared else "shown, not compared"
        note += f" (ratio: median of {len(found['rounds'])} rounds' ratios)"
        rows.append([name, case, f"{tool} {figure}", "" if mine is None else f"{mine:.4g}",
                     "" if theirs is None else f"{theirs:.4g}", "" if ratio is None else f"{ratio:.3f}", note])
    if found.get("aiperf_not_used"):
        rows[-1][-1] += f" (AIPerf not used: {found['aiperf_not_used']})"
    return rows


def attach(cli: click.Group) -> None:
    """Add ``crosscheck`` to the CLI, with the options of its ``run`` command."""
    run_cmd = cli.commands["run"]

    @click.pass_context
    def callback(ctx: click.Context, nccl_tests: str | None, mpirun: str | None, rounds: int | None,
                 **kwargs) -> None:
        if not kwargs.get("names"):
            raise click.UsageError("name the workload(s) to cross-check")
        os.environ[crosscheck.ENV_REQUEST] = "1"
        if rounds is not None:
            os.environ[crosscheck.ENV_ROUNDS] = str(rounds)
        try:
            crosscheck.rounds()
        except ValueError as exc:
            raise click.UsageError(str(exc)) from None
        if nccl_tests:
            os.environ[NCCL_TESTS_ENV] = nccl_tests
        if mpirun:
            os.environ[NCCL_TESTS_MPIRUN_ENV] = mpirun
        try:
            nccl_tests_launcher()  # the launcher's words, read as the run will read them
        except ValueError as exc:
            raise click.UsageError(f"{NCCL_TESTS_MPIRUN_ENV} / --mpirun: {exc}") from None
        code = 0
        try:
            ctx.invoke(run_cmd, **kwargs)
        except SystemExit as exc:  # run exits with its status: print the table first, then exit with it
            code = exc.code if isinstance(exc.code, int) else 1
        if not kwargs.get("as_json"):
            print_table(ctx, len(kwargs["names"]) * kwargs.get("repeat", 1))
        sys.exit(code)

    params = [click.Option(["--nccl-tests", "nccl_tests"], default=None, metavar="DIR",
                           help=f"Directory of nccl-tests binaries (default: ${NCCL_TESTS_ENV})."),
              click.Option(["--mpirun"], default=None, metavar="CMD",
                           help="MPI launcher that runs nccl-tests (built with MPI=1) as one process per GPU, "
                                "as the suite's ranks run, e.g. 'mpirun' (default: "
                                f"${NCCL_TESTS_MPIRUN_ENV}; without one, one process with a thread per GPU)."),
              click.Option(["--rounds"], type=click.IntRange(min=1), default=None,
                           help=f"Rounds the suite and the reference take turns for, each side's figure the "
                                f"median over rounds (default: ${crosscheck.ENV_ROUNDS} or "
                                f"{crosscheck.DEFAULT_ROUNDS}).")]
    params += list(run_cmd.params)
    cli.add_command(click.Command(
        "crosscheck", callback=callback, params=params,
        help="Run workloads with their reference tool timing the same callables in the same call "
             "(kernels: triton.testing.do_bench; collectives: nccl-tests; inference.serving: AIPerf, else "
             "a bare asyncio client) and store both figures and "
             "their ratio in the record. Takes every option of 'run'.",
        short_help="Run beside the reference tool and store both figures and their ratio."))


def print_table(ctx: click.Context, runs: int) -> None:
    """The cross-check table of the newest ``runs`` records (those this command just ran)."""
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    from registry import RegistryError, open_registry

    try:
        with open_registry(ctx.find_root().obj.get("db_url")) as reg:
            records = [reg.get(r["run_id"]) for r in reg.results(limit=runs)]
    except RegistryError as exc:
        raise click.ClickException(str(exc)) from None
    t = Table(title="cross-check against the reference tools (ratio: perfsuite / reference)")
    for col in ("workload", "case", "compared with", "perfsuite", "reference", "ratio", "note"):
        t.add_column(col)
    for rec in reversed(records):
        for row in crosscheck_rows(rec):
            t.add_row(*(Text(cell) for cell in row))  # text from a run is data, never markup
    width = None if sys.stdout.isatty() else int(os.environ.get("COLUMNS", "0") or 0) or 160
    Console(soft_wrap=False, width=width).print(t)
