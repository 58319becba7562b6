"""What a cross-check adds to a run, shared by ``perfsuite crosscheck`` and the cross-check
entries of a plan (``perfsuite run --plan``): its options, the variables that ask the
measuring process for the reference tools, and the table of both figures and their ratio."""

from __future__ import annotations

import os

import click

from perfsuite import crosscheck
from perfsuite.cli._types import AsciiIntRange
from perfsuite.crosscheck.aiperf import TOOLS as SERVING_TOOLS
from perfsuite.crosscheck.nccl_tests import ENV_DIR as NCCL_TESTS_ENV
from perfsuite.crosscheck.nccl_tests import ENV_MPIRUN as NCCL_TESTS_MPIRUN_ENV
from perfsuite.crosscheck.nccl_tests import mpirun as nccl_tests_launcher


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
        return [
            [
                name,
                f"{c['size_bytes']} B {mode[c['mode']]}",
                f"nccl-tests{placed} busbw GB/s",
                f"{c['suite_busbw_gbps']:.2f}",
                f"{c['nccl_tests_busbw_gbps']:.2f}",
                f"{c['busbw_ratio']:.3f}" if c["busbw_ratio"] is not None else "",
                c.get("verdict", ""),  # with the launch-bound side named (records before it have none)
            ]
            for c in found["compare"]
        ]
    if found.get("tool") in SERVING_TOOLS:
        return serving_rows(name, found)
    rows = []
    for case, c in found.items():
        if c.get("status") != "measured":
            rows.append([name, case, c.get("tool", ""), "", "", "", f"{c.get('status')}: {c.get('reason', '')}"])
            continue
        rows.append(
            [
                name,
                case,
                c.get("compared_with") or "do_bench median ms",  # training: the bare loop's ms per step
                f"{c['suite_median_ms']:.4g}",
                f"{c['reference_median_ms']:.4g}",
                f"{c['time_ratio']:.3f}",
                # the record's own line (which side ran at which clock where they were not timed
                # alike); records before it have none
                c.get("note") or ("agrees" if c["agrees"] else f"differs by more than {c['tolerance']:.0%}"),
            ]
        )
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
        note = (
            (
                "agrees"
                if ratio is not None and abs(ratio - 1) <= found["tolerance"]
                else f"differs by more than {found['tolerance']:.0%}"
            )
            if compared
            else "shown, not compared"
        )
        verdict = (found.get("verdicts") or {}).get(figure) or ""
        # the reference gave no figure, or the two sides' figures are of different answers: named, not a difference
        if verdict.startswith(("not produced", "not comparable")):
            note = verdict
        rows.append(
            [
                name,
                case,
                f"{tool} {figure}",
                "" if mine is None else f"{mine:.4g}",
                "" if theirs is None else f"{theirs:.4g}",
                "" if ratio is None else f"{ratio:.3f}",
                note,
            ]
        )
    if found.get("aiperf_not_used"):
        rows[-1][-1] += f" (AIPerf not used: {found['aiperf_not_used']})"
    return rows


CROSSCHECK_OPTIONS = [
    click.Option(
        ["--nccl-tests", "nccl_tests"],
        default=None,
        metavar="DIR",
        help=f"Directory of nccl-tests binaries (default: ${NCCL_TESTS_ENV}).",
    ),
    click.Option(
        ["--mpirun"],
        default=None,
        metavar="CMD",
        help="MPI launcher that runs nccl-tests (built with MPI=1) as one process per GPU, as the suite's "
        f"ranks run, e.g. 'mpirun' (default: ${NCCL_TESTS_MPIRUN_ENV}; without one, one process with a "
        "thread per GPU).",
    ),
    click.Option(
        ["--rounds"],
        type=AsciiIntRange(min=1),
        default=None,
        help=f"Rounds the suite and the reference take turns for, each side's figure the median over rounds "
        f"(default: ${crosscheck.ENV_ROUNDS} or {crosscheck.DEFAULT_ROUNDS}).",
    ),
]


def crosscheck_env(
    rounds: int | None = None, nccl_tests: str | None = None, mpirun: str | None = None
) -> dict[str, str]:
    """The measuring process's variables that ask for the reference tools, checked as the run
    will read them (a bad launcher or round count is a usage error before anything runs)."""
    env = {crosscheck.ENV_REQUEST: "1"}
    if rounds is not None:
        env[crosscheck.ENV_ROUNDS] = str(rounds)
    if nccl_tests:
        env[NCCL_TESTS_ENV] = nccl_tests
    if mpirun:
        env[NCCL_TESTS_MPIRUN_ENV] = mpirun
    merged = {**os.environ, **env}
    try:
        crosscheck.rounds(merged)
    except ValueError as exc:
        raise click.UsageError(str(exc)) from None
    try:
        nccl_tests_launcher(merged)  # the launcher's words, read as the run will read them
    except ValueError as exc:
        raise click.UsageError(f"{NCCL_TESTS_MPIRUN_ENV} / --mpirun: {exc}") from None
    return env


def print_crosscheck_table(records: list[dict]) -> None:
    """Both figures and their ratio, a row per case or size, for each record in order."""
    from rich.table import Table
    from rich.text import Text

    from perfsuite.cli._common import console

    names = {rec["workload"]["name"] for rec in records}
    one = len(names) == 1  # one workload (show, a plan of one): named in the title, not on every row
    title = "cross-check against the reference tools (ratio: perfsuite / reference)"
    t = Table(title=f"{next(iter(names))}: {title}" if one else title, caption=_rounds_caption(records))
    for col in ("workload", "case", "compared with", "perfsuite", "reference", "ratio", "note")[int(one) :]:
        t.add_column(col, overflow="fold")
    for rec in records:
        for row in crosscheck_rows(rec):
            t.add_row(*(Text(cell) for cell in row[int(one) :]))  # text from a run is data, never markup
    console().print(t)


def _rounds_caption(records: list[dict]) -> str | None:
    """How a serving cross-check's ratios were taken, said once under the table."""
    rounds = sorted(
        {
            len(found["rounds"])
            for rec in records
            if (found := (rec.get("details") or {}).get("crosscheck"))
            and found.get("tool") in SERVING_TOOLS
            and found.get("rounds")
        }
    )
    if not rounds:
        return None
    n = " or ".join(str(r) for r in rounds)
    return f"serving: each ratio is the median of the {n} rounds' own ratios (a round: both sides, in turn)"
