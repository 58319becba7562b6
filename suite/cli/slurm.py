"""``perfsuite run ... --slurm`` and ``perfsuite slurm status|wait|cancel JOB``: perfsuite's
runs as SLURM batch jobs that it writes, submits, watches and collects.

``run`` and ``crosscheck`` take the job's options (``--nodes``, ``--ntasks-per-node``,
``--gpus-per-node``, ``--partition`` ...); with ``--slurm`` the command is not run here but
written into an sbatch script (``perfsuite.engine.slurm.script``) whose step runs it once per
task, each task one rank. ``run --plan PLAN --slurm`` is a job array, one ``[[run]]`` per
index. The script is kept in the job's folder beside the records (``--dry-run`` prints it
instead); ``--wait`` (or ``slurm wait JOB``) follows the job and stores what it recorded;
``slurm resubmit JOB`` submits what an ended job did not finish as a new job.
A refusal by the scheduler is its own answer in one line, exit 2, and nothing is kept.

Exit codes of ``slurm status|wait|cancel|resubmit`` and ``run --slurm --wait``: 0 every run
finished and passed; 1 a run failed or did not finish; 2 a refusal (options, an unknown job,
the scheduler refused); 3 the scheduler did not answer within ``--retry-for`` (the job goes
on; the line says how to watch again); 4 ``--timeout`` passed before the job ended.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import functools
import os
import shlex
import shutil
import sys
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any, NoReturn

import click

from perfsuite.cli._common import EXIT_USAGE, console, emit_json, fail, load_host
from perfsuite.cli._types import AsciiIntRange, FiniteFloat, Name
from perfsuite.engine.launcher import default_nproc_per_node
from perfsuite.engine.slurm import jobs as jobs_mod
from perfsuite.engine.slurm import scheduler, stepwatch, watch
from perfsuite.engine.slurm.jobs import STORE_BESIDE, STORE_NAMED, ArrayTask, Job
from perfsuite.engine.slurm.script import JobOptions, render
from perfsuite.text import clean, plain

# The job's options as `run --slurm` takes them (dest -> JobOptions field).
JOB_FIELDS = {
    "nodes": "nodes",
    "ntasks": "ntasks",
    "ntasks_per_node": "ntasks_per_node",
    "gpus_per_node": "gpus_per_node",
    "partition": "partition",
    "account": "account",
    "qos": "qos",
    "time_limit": "time",
    "exclusive": "exclusive",
    "container_image": "container_image",
    "container_mounts": "container_mounts",
    "mpi": "mpi",
    "array_parallel": "array_parallel",
    "job_name": "job_name",
}
# run's own launch options (torchrun here) and their defaults: under --slurm the tasks are the ranks
LOCAL_LAUNCH = {
    "nproc_per_node": ("--nproc-per-node", None),
    "nnodes": ("--nnodes", 1),
    "node_rank": ("--node-rank", 0),
    "rdzv_endpoint": ("--rdzv-endpoint", None),
}
# what the job's own command never carries: the local launch, the plan (one entry per index)
# and how this command prints
NOT_PASSED_ON = {*LOCAL_LAUNCH, "plan_name", "as_json"}
NCCL_TESTS_MPIRUN_ENV = "PERFSUITE_NCCL_TESTS_MPIRUN"
WAIT_POLL_S = 1.0


def job_params() -> list[click.Parameter]:
    """``--slurm`` and the job's options, as ``run`` and ``crosscheck`` take them."""
    return [
        click.Option(
            ["--slurm"], is_flag=True, help="Submit as a SLURM batch job (one task per rank) instead of running here."
        ),
        click.Option(["--nodes"], type=AsciiIntRange(min=1), default=None, help="[--slurm] Nodes (default 1)."),
        click.Option(
            ["--ntasks"],
            type=AsciiIntRange(min=1),
            default=None,
            help="[--slurm] Tasks (ranks) of the job in all, instead of per node.",
        ),
        click.Option(
            ["--ntasks-per-node"],
            type=AsciiIntRange(min=1),
            default=None,
            help="[--slurm] Tasks (ranks) per node (default: one per GPU; on CPUs the workloads' world size).",
        ),
        click.Option(
            ["--gpus-per-node"],
            type=AsciiIntRange(min=1),
            default=None,
            help="[--slurm] GPUs per node (default: a plan's largest nproc_per_node); implies --device cuda.",
        ),
        click.Option(["--partition"], default=None, help="[--slurm] SLURM partition."),
        click.Option(["--account"], default=None, help="[--slurm] SLURM account."),
        click.Option(["--qos"], default=None, help="[--slurm] SLURM quality of service."),
        click.Option(
            ["--time", "time_limit"],
            default=None,
            metavar="LIMIT",
            help="[--slurm] The job's time limit, as sbatch reads it (30, 1:00:00, 1-0).",
        ),
        click.Option(["--exclusive"], is_flag=True, help="[--slurm] Whole nodes, shared with no other job."),
        click.Option(
            ["--container-image"],
            default=None,
            metavar="IMAGE",
            help="[--slurm] pyxis/enroot image the ranks run in (perfsuite installed in it).",
        ),
        click.Option(
            ["--container-mounts"],
            default=None,
            metavar="SRC:DST[,...]",
            help="[--slurm] pyxis mounts (the job's folder is mounted as well).",
        ),
        click.Option(
            ["--mpi"],
            default=None,
            metavar="TYPE",
            help="[--slurm] srun's --mpi for nccl-tests' ranks in a cross-check (default pmix).",
        ),
        click.Option(
            ["--array-parallel"],
            type=AsciiIntRange(min=1),
            default=None,
            help="[--slurm] With --plan: at most this many array tasks at once.",
        ),
        click.Option(["--job-name"], type=Name(), default=None, help="[--slurm] The job's name (default perfsuite)."),
        click.Option(
            ["--job-dir"],
            type=click.Path(file_okay=False, path_type=Path),
            default=None,
            help="[--slurm] Where job folders go, on storage the nodes share (default: <records>/slurm).",
        ),
        click.Option(["--dry-run"], is_flag=True, help="[--slurm] Print the sbatch script; submit nothing."),
        click.Option(["--wait"], is_flag=True, help="[--slurm] Follow the job to its end and store what it recorded."),
    ]


JOB_PARAM_FLAGS = {str(p.name): max(p.opts, key=len) for p in job_params()}


# -- from options to a job's commands -------------------------------------------------------------
def command_argv(command: click.Command, values: dict[str, Any], skip: set[str]) -> list[str]:
    """The arguments that give ``command`` these parsed ``values`` again: names first, then
    every option that differs from its default (``skip``: parameters not passed on)."""
    positional: list[str] = []
    options: list[str] = []
    for param in command.params:
        if param.name in skip or param.name not in values:
            continue
        value = values[param.name]
        if isinstance(param, click.Argument):
            positional += [str(v) for v in (value or ())] if param.nargs == -1 else [str(value)]
            continue
        if value is None or value is False or value == () or value == param.default:
            continue
        name = max(param.opts, key=len)
        if getattr(param, "is_flag", False):
            options.append(name)
        elif getattr(param, "multiple", False):
            for item in value:
                options += [name, str(item)]
        else:
            options += [name, str(value)]
    return positional + options


def _run_commands() -> dict[str, click.Command]:
    from perfsuite.cli.crosscheck import crosscheck_cmd
    from perfsuite.cli.run import run_cmd

    return {"run": run_cmd, "crosscheck": crosscheck_cmd}


def checked_task(
    root: click.Context,
    index: int,
    command_name: str,
    argv: list[str],
    where: str,
    ntasks_per_node: int | None = None,
) -> tuple[ArrayTask, list]:
    """One array index's command, checked here as the job will check it (options, workload
    names, parameters, the cross-check's launcher), so that a mistake is one line now rather
    than a failed job later; the task and the runs it will make."""
    from perfsuite.cli._reference import crosscheck_env
    from perfsuite.cli.run import RUN_DEFAULTS, build_requests

    command = _run_commands()[command_name]
    try:
        with command.make_context(command_name, list(argv), parent=root) as sub:
            values = dict(sub.params)
        if command_name == "crosscheck":
            crosscheck_env(values["rounds"], values["nccl_tests"], values["mpirun"])
    except click.ClickException as exc:
        fail(f"{where}{exc.format_message()}")
    options = {k: values[k] for k in RUN_DEFAULTS if k in values}
    requests = build_requests(load_host(), values["names"], values["param_items"], options)
    workloads = list(dict.fromkeys(r.entry.name for r in requests))
    return ArrayTask(index, command_name, list(argv), workloads, values["repeat"], ntasks_per_node), requests


def plan_entries(ctx: click.Context, plan_name: str, given: dict[str, Any]) -> list[tuple[str, list[str], int | None]]:
    """A plan's ``[[run]]`` entries as (command, arguments, ranks per node) for the job array,
    each entry's options under those ``given`` on the command line (as ``run --plan`` does).
    A plan's ``nproc_per_node`` is how many tasks per node its index starts."""
    from perfsuite.cli.run import load_plan

    commands = _run_commands()
    plan = load_plan(ctx, plan_name, given.get("repeat"))
    entries = []
    for run in plan.runs:
        options = {**run.options, **given}
        job_keys = sorted(set(run.options) & set(JOB_PARAM_FLAGS))
        if job_keys:
            fail(f"plan {plan.name}, {run.label}: {', '.join(job_keys)}: the job's options go on the command line")
        for dest, (flag, default) in LOCAL_LAUNCH.items():
            if dest != "nproc_per_node" and options.get(dest, default) != default:
                fail(f"plan {plan.name}, {run.label}: {flag} is for torchrun; under --slurm give --nodes")
        name = "crosscheck" if run.crosscheck else "run"
        values = {"names": run.workloads, "param_items": run.params, **options}
        entries.append((name, command_argv(commands[name], values, NOT_PASSED_ON), options.get("nproc_per_node")))
    return entries


def job_options(given: dict[str, Any], devices: set[str], min_world: int, most_ranks: int | None) -> JobOptions:
    """The job's options from the command line, with the defaults: GPUs per node as many as
    the runs use at most (``most_ranks``, a plan's largest ``nproc_per_node``), one task per
    GPU, or on CPUs as many tasks as the workloads' world size."""
    options = JobOptions(**{JOB_FIELDS[k]: v for k, v in given.items() if k in JOB_FIELDS and v not in (None, False)})
    if "cuda" in devices and options.gpus_per_node is None:
        if most_ranks is None:
            fail("runs on cuda need --gpus-per-node N: the job holds no GPU otherwise (one task per GPU by default)")
        options = dataclasses.replace(options, gpus_per_node=most_ranks)
    if options.ntasks is None and options.ntasks_per_node is None:
        per_node = options.gpus_per_node if options.gpus_per_node is not None else max(1, min_world)
        options = dataclasses.replace(options, ntasks_per_node=per_node)
    return options


def with_launcher(tasks: list[ArrayTask], options: JobOptions) -> list[ArrayTask]:
    """Cross-checks in the job run nccl-tests under srun (one process per GPU) unless the
    command or the environment names another launcher."""
    if os.environ.get(NCCL_TESTS_MPIRUN_ENV):
        return tasks
    for task in tasks:
        if task.command == "crosscheck" and "--mpirun" not in task.argv:
            task.argv += ["--mpirun", options.nccl_tests_launcher()]
    return tasks


def is_sqlite(url: str) -> bool:
    from sqlalchemy.engine import make_url

    return make_url(url).get_backend_name() == "sqlite"


# -- submitting ---------------------------------------------------------------------------------
def submit(
    ctx: click.Context,
    tasks: list[ArrayTask],
    options: JobOptions,
    given: dict[str, Any],
    plan: str | None = None,
    as_json: bool = False,
    resubmits: str | None = None,
) -> Job | None:
    """Write the job's script and submit it (or print it: ``--dry-run``: None); ``--wait``
    follows it. ``resubmits``: the job whose unfinished runs these tasks are."""
    from perfsuite.registry import RegistryError, check_url, default_url, records_dir

    db_url = ctx.find_root().obj.get("db_url") or default_url()
    store = STORE_BESIDE if is_sqlite(db_url) else STORE_NAMED
    job_root = (given.get("job_dir") or records_dir() / "slurm").absolute()
    job = Job(
        jobs_mod.new_folder(job_root), tasks, store, sbatch=dataclasses.asdict(options), plan=plan, resubmits=resubmits
    )
    program = ["perfsuite"] if options.container_image else [sys.executable, "-m", "perfsuite"]
    text = render(job, options, program)
    if given.get("dry_run"):
        click.echo(text, nl=False)
        return None
    try:
        scheduler.command("sbatch")
        if options.container_image and not scheduler.has_pyxis():
            fail(
                "--container-image: this cluster's srun has no --container-image (the pyxis plugin is not "
                "installed); run without a container, or where pyxis is"
            )
    except scheduler.SchedulerError as exc:
        fail(str(exc))
    env = {}
    if store == STORE_NAMED:
        try:
            check_url(db_url)
        except RegistryError as exc:
            fail(f"the registry cannot be used: {exc}")
        env["PERFSUITE_DB"] = db_url  # reaches the job through sbatch's environment, never the script
    try:
        job.logs.mkdir(parents=True)
        job.script.write_text(text)
        job.job_id = scheduler.submit(job.script, scheduler.environment_for(env))
    except scheduler.SchedulerError as exc:
        shutil.rmtree(job.folder, ignore_errors=True)  # a refused job leaves nothing behind
        fail(str(exc))
    except OSError as exc:
        shutil.rmtree(job.folder, ignore_errors=True)
        fail(f"the job's folder {job.folder} cannot be written: {exc.strerror or exc}")
    job.submitted_at = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
    job.save()
    click.echo(f"Submitted batch job {job.job_id}: {job.script}", err=as_json)
    if store == STORE_BESIDE:
        click.echo(
            f"Note: the registry {clean(db_url)} is a SQLite file the job's nodes may not reach: each index "
            f"stores beside its records in {job.folder}, and 'perfsuite slurm wait {job.job_id}' loads them "
            "into it",
            err=True,
        )
    if given.get("wait"):
        finish(ctx, job, lambda j: watch.follow(j, _progress, WAIT_POLL_S), as_json=as_json)
    return job


def _progress(line: str) -> None:
    click.echo(clean(line), err=True)


def finish(ctx: click.Context, job: Job, follow: Callable[[Job], watch.Outcome], as_json: bool) -> None:
    """Follow the job to its end, store its records in the registry named now, print the
    summary and what did not finish, and exit 0 only if every run finished and passed."""
    from perfsuite.registry import RecordInvalid, RegistryError, open_registry

    try:
        outcome = follow(job)
        stored = watch.collect(outcome, lambda: open_registry(ctx.find_root().obj.get("db_url")))
    except watch.SchedulerSilent as exc:
        stop_watching(job, str(exc), watch.EXIT_SCHEDULER_SILENT)
    except watch.WaitTimeout as exc:
        stop_watching(job, str(exc), watch.EXIT_STILL_RUNNING)
    except (scheduler.SchedulerError, RecordInvalid) as exc:
        fail(str(exc), 1)
    except RegistryError as exc:
        fail(f"{exc}; the job's records stay in {job.folder / 'records'} ('perfsuite import' loads them)", 1)
    if as_json:
        emit_json(
            {
                "job_id": job.job_id,
                "folder": str(job.folder),
                "ended": outcome.ended,
                "tasks": [dataclasses.asdict(s) for s in outcome.states.values()],
                "records": [r["run_id"] for r in outcome.all_records],
                "stored": stored,
                "unfinished": outcome.unfinished,
            }
        )
    else:
        from perfsuite.analysis.tables import results_table

        console().print(results_table(outcome.all_records))
        for record in outcome.all_records:
            if record["status"] in ("failed", "timeout"):
                click.echo(
                    f"Failed: {clean(record['workload']['name'])} {record['run_id'][:8]}: {clean(record['error'])}",
                    err=True,
                )
        for line in outcome.unfinished:
            click.echo(f"Not finished: {clean(line)}", err=True)
    sys.exit(outcome.exit_code)


def stop_watching(job: Job, why: str, code: int) -> NoReturn:
    """Stop watching a job that goes on: one line with why and the command that watches again."""
    again = ["perfsuite", "slurm", "wait", str(job.job_id), "--job-dir", str(job.folder.parent)]
    click.echo(f"Error: {clean(why)}; the job goes on: watch it again with: {shlex.join(again)}", err=True)
    sys.exit(code)


# -- run --slurm / crosscheck --slurm ----------------------------------------------------------
def _submit_command(ctx: click.Context, command: click.Command, values: dict[str, Any], given: dict[str, Any]) -> None:
    """``run``/``crosscheck`` with ``--slurm``: its own arguments become the job's command (one
    array index per ``[[run]]`` of a ``--plan``)."""
    for dest, (flag, default) in LOCAL_LAUNCH.items():
        if values.get(dest, default) != default:
            fail(
                f"{flag} is for torchrun here; under --slurm every task is one rank "
                "(give --nodes, --ntasks-per-node or --ntasks)"
            )
    device_default = ["--device", "cuda" if given.get("gpus_per_node") else "cpu"]  # the nodes', not this host's
    if values.get("plan_name"):
        if values["names"] or values["param_items"]:
            fail("--plan names its own workloads and parameters: give no NAMES or --param beside it")
        on_command_line = {
            name: value
            for name, value in values.items()
            if name not in NOT_PASSED_ON and ctx.get_parameter_source(name) == click.core.ParameterSource.COMMANDLINE
        }
        entries = plan_entries(ctx, values["plan_name"], on_command_line)
        plan = values["plan_name"]
    else:
        entries = [(command.name or "run", command_argv(command, values, NOT_PASSED_ON), None)]
        plan = None
    tasks, runs = [], []
    for index, (name, argv, ranks) in enumerate(entries):
        if "--device" not in argv:
            argv = argv + device_default
        where = f"plan {plan}, [[run]] {index + 1}: " if plan else ""
        task, requests = checked_task(ctx.find_root(), index, name, argv, where, ranks)
        tasks.append(task)
        runs += requests
    ranks_asked = [r for _, _, r in entries if r is not None]
    options = job_options(
        given,
        {r.controls.device for r in runs},
        max(default_nproc_per_node(r.entry.cls.requirements, "cpu", 0) for r in runs),
        max(ranks_asked) if ranks_asked else None,
    )
    submit(ctx, with_launcher(tasks, options), options, given, plan=plan, as_json=bool(values.get("as_json")))


def _with_job_options(command: click.Command) -> None:
    """Add ``--slurm`` and the job's options to ``command``; with ``--slurm`` it submits
    instead of running, and without it a job option is a usage error."""
    original = command.callback
    assert original is not None
    command.params += job_params()

    def callback(*args: Any, **kwargs: Any) -> Any:
        given = {name: kwargs.pop(name) for name in JOB_PARAM_FLAGS}
        if not given.pop("slurm"):
            stray = [name for name, value in given.items() if value not in (None, False)]
            if stray:
                raise click.UsageError(f"{JOB_PARAM_FLAGS[stray[0]]} needs --slurm")
            return original(*args, **kwargs)
        return _submit_command(click.get_current_context(), command, kwargs, given)

    command.callback = functools.update_wrapper(callback, original)


# -- perfsuite slurm ... ----------------------------------------------------------------------
@click.group("slurm")
def slurm_group() -> None:
    """Follow perfsuite's SLURM jobs (run --slurm) and collect what they stored."""


def _job(job_id: str, job_dir: Path | None) -> Job:
    from perfsuite.registry import records_dir

    try:
        return jobs_mod.find((job_dir or records_dir() / "slurm").absolute(), job_id)
    except jobs_mod.JobNotFound as exc:
        fail(str(exc))


JOB_DIR_OPTION = click.option(
    "--job-dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Where the job's folder is, if not under <records>/slurm.",
)


RETRY_FOR_OPTION = click.option(
    "--retry-for",
    "retry_for_s",
    type=FiniteFloat(low=0, high=7 * 86400),
    default=watch.RETRY_FOR_S,
    show_default=True,
    help="Seconds to keep asking a scheduler that does not answer (pauses of 1, 2, 4 ... 30 s); "
    "then exit 3, the job going on.",
)


@slurm_group.command("status")
@click.argument("job_id")
@JOB_DIR_OPTION
@RETRY_FOR_OPTION
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def status_cmd(job_id: str, job_dir: Path | None, retry_for_s: float, as_json: bool) -> None:
    """Each array index: the scheduler's state, the runs stored so far and the runs not yet."""
    from perfsuite.registry import RecordInvalid

    job = _job(job_id, job_dir)
    try:
        outcome = watch.look_retrying(job, _progress, retry_for_s)
    except watch.SchedulerSilent as exc:
        stop_watching(job, str(exc), watch.EXIT_SCHEDULER_SILENT)
    except RecordInvalid as exc:
        fail(str(exc), 1)
    rows: list[dict[str, Any]] = []
    for task in job.tasks:
        state = outcome.states.get(task.index)
        records = outcome.records[task.index]
        missing: Counter = jobs_mod.missing_runs(task, records)
        rows.append(
            {
                "index": task.index,
                "command": " ".join([task.command, *task.workloads]),
                "state": watch.state_text(state) if state else "unknown to the scheduler",
                "stored": len(records),
                "expected": sum(task.expected().values()),
                "not_yet": sorted(missing.elements()),
                "runs": [r["run_id"] for r in records],
            }
        )
    if as_json:
        emit_json({"job_id": job.job_id, "folder": str(job.folder), "tasks": rows})
        return
    from rich.table import Table

    table = Table(title=f"job {job.job_id} ({job.folder})")
    for col in ("index", "command", "state", "stored", "not yet"):
        table.add_column(col)
    for row in rows:
        cells = (row["index"], row["command"], row["state"], f"{row['stored']}/{row['expected']}", row["not_yet"])
        table.add_row(*map(plain, cells[:4]), plain(", ".join(cells[4])))
    console().print(table)


@slurm_group.command("wait")
@click.argument("job_id")
@JOB_DIR_OPTION
@click.option(
    "--timeout",
    "timeout_s",
    type=FiniteFloat(low=0, low_open=True, high=366 * 86400),
    default=None,
    help="Give up after this many seconds (exit 4; the job goes on).",
)
@RETRY_FOR_OPTION
@click.option("--json", "as_json", is_flag=True, help="Machine-readable summary.")
@click.pass_context
def wait_cmd(
    ctx: click.Context, job_id: str, job_dir: Path | None, timeout_s: float | None, retry_for_s: float, as_json: bool
) -> None:
    """Follow a job to its end (a line per change of state and per record stored), store its
    records in the registry and print them; name the runs that did not finish."""
    job = _job(job_id, job_dir)
    finish(ctx, job, lambda j: watch.follow(j, _progress, WAIT_POLL_S, timeout_s, retry_for_s), as_json)


@slurm_group.command("cancel")
@click.argument("job_id")
@JOB_DIR_OPTION
@RETRY_FOR_OPTION
@click.option("--json", "as_json", is_flag=True, help="Machine-readable summary.")
@click.pass_context
def cancel_cmd(ctx: click.Context, job_id: str, job_dir: Path | None, retry_for_s: float, as_json: bool) -> None:
    """Cancel a job (every index), wait until its processes are gone, store what it finished
    and name what it did not."""
    job = _job(job_id, job_dir)
    assert job.job_id is not None
    try:
        scheduler.cancel(job.job_id)
    except scheduler.SchedulerError as exc:
        fail(str(exc), EXIT_USAGE)
    finish(ctx, job, lambda j: watch.follow(j, _progress, WAIT_POLL_S, retry_for_s=retry_for_s), as_json)


@slurm_group.command("resubmit")
@click.argument("job_id")
@JOB_DIR_OPTION
@click.option(
    "--time", "time_limit", default=None, metavar="LIMIT", help="The new job's time limit (default: the job's)."
)
@click.option("--partition", default=None, help="The new job's partition (default: the job's).")
@click.option("--account", default=None, help="The new job's account (default: the job's).")
@click.option("--qos", default=None, help="The new job's quality of service (default: the job's).")
@RETRY_FOR_OPTION
@click.option("--dry-run", is_flag=True, help="Print the new job's sbatch script; submit nothing.")
@click.option("--wait", is_flag=True, help="Follow the new job to its end and store what it recorded.")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable summary (with --wait).")
@click.pass_context
def resubmit_cmd(
    ctx: click.Context,
    job_id: str,
    job_dir: Path | None,
    time_limit: str | None,
    partition: str | None,
    account: str | None,
    qos: str | None,
    retry_for_s: float,
    dry_run: bool,
    wait: bool,
    as_json: bool,
) -> None:
    """Submit, as a new job beside it, only the runs an ended job did not finish (a sweep cut
    by its time limit, a node that failed): each index's missing runs with the same options.
    The runs it finished are not run again; 'wait' stores the new job's records beside them."""
    from perfsuite.registry import RecordInvalid

    job = _job(job_id, job_dir)
    try:
        outcome = watch.look_retrying(job, _progress, retry_for_s)
    except watch.SchedulerSilent as exc:
        fail(f"{exc}; nothing was resubmitted", watch.EXIT_SCHEDULER_SILENT)
    except RecordInvalid as exc:
        fail(str(exc), 1)
    running = [watch.state_text(s) for s in outcome.states.values() if not s.ended]
    if running:
        fail(f"job {job.job_id} has not ended ({'; '.join(running)}): resubmit it once it has")
    tasks: list[ArrayTask] = []
    for task in job.tasks:
        missing = jobs_mod.missing_runs(task, outcome.records[task.index])
        if stepwatch.live_ranks(job.folder, task.index) and missing:
            fail(
                f"job {job.job_id} [{task.index}]: its rank 0 may still run; 'perfsuite slurm wait {job.job_id}' first"
            )
        by_count: dict[int, list[str]] = {}
        for name in task.workloads:  # the workloads missing as many runs go together, in the job's order
            if missing[name]:
                by_count.setdefault(missing[name], []).append(name)
        for count, names in by_count.items():
            argv = _rerun_argv(ctx, task, names, count)
            where = f"job {job.job_id} [{task.index}]: "
            tasks.append(checked_task(ctx.find_root(), len(tasks), task.command, argv, where, task.ntasks_per_node)[0])
    if not tasks:
        click.echo(f"job {job.job_id}: every run finished; nothing to resubmit", err=True)
        return
    overrides = {"time": time_limit, "partition": partition, "account": account, "qos": qos}
    options = JobOptions(**{**job.sbatch, **{k: v for k, v in overrides.items() if v is not None}})
    given = {"job_dir": job.folder.parent, "dry_run": dry_run, "wait": wait}
    submit(ctx, tasks, options, given, plan=job.plan, as_json=as_json, resubmits=job.job_id)


def _rerun_argv(ctx: click.Context, task: ArrayTask, names: list[str], count: int) -> list[str]:
    """The task's command for ``count`` more runs of ``names``: its options as they were, the
    seeds following those of the runs it finished where a seed was given."""
    command = _run_commands()[task.command]
    with command.make_context(task.command, list(task.argv), parent=ctx.find_root()) as sub:
        values = dict(sub.params)
    values["names"] = tuple(names)
    values["repeat"] = count
    if values.get("seed") is not None:
        values["seed"] += task.repeat - count
    return command_argv(command, values, NOT_PASSED_ON | set(JOB_PARAM_FLAGS))


def attach(*commands: click.Command) -> None:
    """``--slurm`` and the job's options on these commands (``run``, ``crosscheck``)."""
    for command in commands:
        _with_job_options(command)
