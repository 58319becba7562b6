"""``perfsuite crosscheck WORKLOAD [-p ...]``: ``perfsuite run`` with the reference tool timing
the same callables in the same call (``perfsuite.crosscheck``), then a table of both figures
and their ratio per case (kernels: triton's do_bench) or per size (collectives: nccl-tests).

It takes every option of ``perfsuite run`` (same controls, same parameters) plus
``--nccl-tests DIR``, a directory of nccl-tests binaries (default: ``PERFSUITE_NCCL_TESTS``),
``--mpirun CMD``, the MPI launcher that runs them as one process per GPU (default:
``PERFSUITE_NCCL_TESTS_MPIRUN``; ``perfsuite.crosscheck.nccl_tests.layout``), and ``--rounds N``, the turns
the suite and the reference take (``perfsuite.crosscheck.take_turns``).
"""

from __future__ import annotations

import os
import sys

import click

from perfsuite.cli._reference import CROSSCHECK_OPTIONS, crosscheck_env, print_crosscheck_table
from perfsuite.cli.run import run_cmd


@click.pass_context
def _crosscheck(ctx: click.Context, nccl_tests: str | None, mpirun: str | None, rounds: int | None, **kwargs) -> None:
    if not kwargs.get("names") and not kwargs.get("plan_name"):
        raise click.UsageError("name the workload(s) to cross-check")
    os.environ.update(crosscheck_env(rounds, nccl_tests, mpirun))  # the measuring processes inherit them
    code = 0
    try:
        ctx.invoke(run_cmd, **kwargs)
    except SystemExit as exc:  # run exits with its status: print the table first, then exit with it
        code = exc.code if isinstance(exc.code, int) else 1
    if not kwargs.get("as_json") and not kwargs.get("plan_name"):
        print_table(ctx, len(kwargs["names"]) * kwargs.get("repeat", 1))
    sys.exit(code)


# ``crosscheck`` takes its own options and every option of ``run``.
crosscheck_cmd = click.Command(
    "crosscheck",
    callback=_crosscheck,
    params=[*CROSSCHECK_OPTIONS, *run_cmd.params],
    help="Run workloads with their reference tool timing the same callables in the same call "
    "(kernels: triton.testing.do_bench; collectives: nccl-tests; inference.serving: AIPerf, else a bare "
    "asyncio client) and store both figures and "
    "their ratio in the record. Takes every option of 'run'.",
    short_help="Run beside the reference tool and store both figures and their ratio.",
)


def print_table(ctx: click.Context, runs: int) -> None:
    """The cross-check table of the newest ``runs`` records (those this command just ran)."""
    from perfsuite.registry import RegistryError, open_registry

    try:
        with open_registry(ctx.find_root().obj.get("db_url")) as reg:
            records = [reg.get(r["run_id"]) for r in reg.results(limit=runs)]
    except RegistryError as exc:
        raise click.ClickException(str(exc)) from None
    print_crosscheck_table(list(reversed(records)))
