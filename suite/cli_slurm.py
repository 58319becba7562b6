"""``perfsuite run ... --slurm`` and ``perfsuite slurm submit|status|wait|cancel``: perfsuite's
runs as SLURM batch jobs that it writes, submits, watches and collects.

``run`` (and ``crosscheck``) take the job's options (``--nodes``, ``--ntasks-per-node``,
``--gpus-per-node``, ``--partition`` ...); with ``--slurm`` the command is not run here but
written into an sbatch script (``suite.slurm.script``) whose step runs it once per task, each
task one rank. ``slurm submit --plan`` submits a run plan as a job array, one ``[[run]]`` per
index. The script is kept in the job's folder beside the records (``--dry-run`` prints it
instead); ``--wait`` (or ``slurm wait JOB``) follows the job and stores what it recorded.
A refusal by the scheduler is its own answer in one line, exit 2, and nothing is kept.
"""
from __future__ import annotations

import dataclasses
import datetime as dt
import functools
import os
import shutil
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from suite.cli import EXIT_USAGE, console, emit_json, fail, load_host
from suite.slurm import jobs as jobs_mod
from suite.slurm import scheduler, watch
from suite.slurm.jobs import STORE_BESIDE, STORE_NAMED, ArrayTask, Job
from suite.slurm.plans import PlanError
from suite.slurm.script import JobOptions, render
from suite.text import clean, plain

# The job's options as `run --slurm` and `slurm submit` take them (dest -> JobOptions field).
JOB_FIELDS = {"nodes": "nodes", "ntasks": "ntasks", "ntasks_per_node": "ntasks_per_node",
              "gpus_per_node": "gpus_per_node", "partition": "partition", "account": "account", "qos": "qos",
              "time_limit": "time", "exclusive": "exclusive", "container_image": "container_image",
              "container_mounts": "container_mounts", "mpi": "mpi", "array_parallel": "array_parallel",
              "job_name": "job_name"}
# run's own launch options (torchrun here) and their defaults: under --slurm the tasks are the ranks
LOCAL_LAUNCH = {"nproc_per_node": ("--nproc-per-node", None), "nnodes": ("--nnodes", 1),
                "node_rank": ("--node-rank", 0), "rdzv_endpoint": ("--rdzv-endpoint", None)}
NCCL_TESTS_MPIRUN_ENV = "PERFSUITE_NCCL_TESTS_MPIRUN"
WAIT_POLL_S = 1.0


def job_params(with_switch: bool) -> list[click.Parameter]:
    """The job's options; ``with_switch``: with ``--slurm`` itself (on run and crosscheck)."""
    tag = "[--slurm] " if with_switch else ""
    out: list[click.Parameter] = []
    if with_switch:
        out.append(click.Option(["--slurm"], is_flag=True,
                                help="Submit as a SLURM batch job (one task per rank) instead of running here."))
    out += [
        click.Option(["--nodes"], type=click.IntRange(min=1), default=None, help=f"{tag}Nodes of the job (default 1)."),
        click.Option(["--ntasks"], type=click.IntRange(min=1), default=None,
                     help=f"{tag}Tasks (ranks) of the job in all, instead of per node."),
        click.Option(["--ntasks-per-node"], type=click.IntRange(min=1), default=None,
                     help=f"{tag}Tasks (ranks) per node (default: one per GPU; on CPUs the workloads' world size)."),
        click.Option(["--gpus-per-node"], type=click.IntRange(min=1), default=None,
                     help=f"{tag}GPUs per node (implies --device cuda)."),
        click.Option(["--partition"], default=None, help=f"{tag}SLURM partition."),
        click.Option(["--account"], default=None, help=f"{tag}SLURM account."),
        click.Option(["--qos"], default=None, help=f"{tag}SLURM quality of service."),
        click.Option(["--time", "time_limit"], default=None, metavar="LIMIT",
                     help=f"{tag}The job's time limit, as sbatch reads it (30, 1:00:00, 1-0)."),
        click.Option(["--exclusive"], is_flag=True, help=f"{tag}Whole nodes, shared with no other job."),
        click.Option(["--container-image"], default=None, metavar="IMAGE",
                     help=f"{tag}pyxis/enroot image the ranks run in (perfsuite installed in it)."),
        click.Option(["--container-mounts"], default=None, metavar="SRC:DST[,...]",
                     help=f"{tag}pyxis mounts (the job's folder is mounted as well)."),
        click.Option(["--mpi"], default=None, metavar="TYPE",
                     help=f"{tag}srun's --mpi for nccl-tests' ranks in a cross-check (default pmix)."),
        click.Option(["--array-parallel"], type=click.IntRange(min=1), default=None,
                     help=f"{tag}At most this many array tasks at once."),
        click.Option(["--job-name"], default=None, help=f"{tag}The job's name (default perfsuite)."),
        click.Option(["--job-dir"], type=click.Path(file_okay=False, path_type=Path), default=None,
                     help=f"{tag}Where job folders go, on storage the nodes share (default: <records>/slurm)."),
        click.Option(["--dry-run"], is_flag=True, help=f"{tag}Print the sbatch script; submit nothing."),
        click.Option(["--wait"], is_flag=True, help=f"{tag}Follow the job to its end and store what it recorded."),
    ]
    return out


JOB_PARAM_NAMES = [str(p.name) for p in job_params(True)]
JOB_PARAM_FLAGS = {str(p.name): max(p.opts, key=len) for p in job_params(True)}


# -- from options to a job ---------------------------------------------------------------
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


def parsed(root: click.Context, command_name: str, argv: list[str]) -> dict[str, Any]:
    """``argv`` parsed as the command would parse it in the job (nothing runs)."""
    command = root.command.get_command(root, command_name)  # type: ignore[attr-defined]
    with command.make_context(command_name, list(argv), parent=root) as sub:
        return dict(sub.params)


def checked_task(root: click.Context, index: int, command_name: str, argv: list[str], where: str,
                 ntasks_per_node: int | None = None) -> tuple[ArrayTask, dict[str, Any]]:
    """One array index's command, checked here as the job would check it (options, workload
    names, parameters), so that a mistake is one line now rather than a failed job later."""
    from suite import params as params_mod
    from suite.cli import _parse_param_options
    from suite.plugins import UnknownWorkload

    try:
        values = parsed(root, command_name, argv)
    except click.ClickException as exc:
        fail(f"{where}{exc.format_message()}")
    if values.get("slurm"):
        fail(f"{where}--slurm inside a job's own command")
    host = load_host()
    names = list(dict.fromkeys(values["names"]))
    if not names:
        if not values["quick"]:
            fail(f"{where}name at least one workload, or use --quick alone for the quick suite")
        names = list(host.workloads)
    try:
        for name in names:
            host.get(name)
        per_params = _parse_param_options(values["param_items"], names, host)
        for name in names:
            params_mod.resolve(host.get(name).cls, per_params[name], values["quick"])
    except (UnknownWorkload, params_mod.ParamError) as exc:
        fail(f"{where}{exc}")
    return ArrayTask(index, command_name, list(argv), names, values["repeat"], ntasks_per_node), values


def job_options(given: dict[str, Any], devices: set[str], min_world: int, plan_gpus: int | None = None) -> JobOptions:
    """The job's options from the command line, with the defaults: GPUs per node as many as
    the plan's runs use at most (``plan_gpus``), one task per GPU, or on CPUs as many tasks as
    the workloads' world size."""
    options = JobOptions(**{JOB_FIELDS[k]: v for k, v in given.items() if k in JOB_FIELDS and v not in (None, False)})
    if "cuda" in devices and options.gpus_per_node is None:
        if plan_gpus is None:
            fail("runs on cuda need --gpus-per-node N: the job holds no GPU otherwise (one task per GPU by default)")
        options = dataclasses.replace(options, gpus_per_node=plan_gpus)
    if options.ntasks is None and options.ntasks_per_node is None:
        per_node = options.gpus_per_node if options.gpus_per_node is not None else max(1, min_world)
        options = dataclasses.replace(options, ntasks_per_node=per_node)
    return options


def default_device(given: dict[str, Any]) -> str:
    """A job's device where its command names none: cuda where it holds GPUs, else cpu
    (the submitting host's GPUs say nothing about the nodes')."""
    return "cuda" if given.get("gpus_per_node") else "cpu"


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


def submit(ctx: click.Context, tasks: list[ArrayTask], options: JobOptions, given: dict[str, Any],
           plan: str | None = None, as_json: bool = False) -> None:
    """Write the job's script and submit it (or print it: ``--dry-run``); ``--wait`` follows it."""
    from registry import RegistryError, check_url, default_url, records_dir

    root_ctx = ctx.find_root()
    db_url = root_ctx.obj.get("db_url") or default_url()
    store = STORE_BESIDE if is_sqlite(db_url) else STORE_NAMED
    job_root = (given.get("job_dir") or records_dir() / "slurm").absolute()
    job = Job(jobs_mod.new_folder(job_root), tasks, store, sbatch=dataclasses.asdict(options), plan=plan)
    program = ["perfsuite"] if options.container_image else [sys.executable, "-m", "suite"]
    text = render(job, options, program)
    if given.get("dry_run"):
        click.echo(text, nl=False)
        return
    try:
        scheduler.command("sbatch")
        if options.container_image and not scheduler.has_pyxis():
            fail("--container-image: this cluster's srun has no --container-image (the pyxis plugin is not "
                 "installed); run without a container, or where pyxis is")
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
    job.submitted_at = dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
    job.save()
    click.echo(f"Submitted batch job {job.job_id}: {job.script}", err=as_json)
    if store == STORE_BESIDE:
        click.echo(f"Note: the registry {clean(db_url)} is a SQLite file the job's nodes may not reach: each index "
                   f"stores beside its records in {job.folder}, and 'perfsuite slurm wait {job.job_id}' loads them "
                   f"into it", err=True)
    if given.get("wait"):
        finish(ctx, job, lambda j: watch.follow(j, _progress, WAIT_POLL_S), as_json=as_json)


def _progress(line: str) -> None:
    click.echo(clean(line), err=True)


def finish(ctx: click.Context, job: Job, follow: Callable[[Job], watch.Outcome], as_json: bool) -> None:
    """Follow the job to its end, store its records in the registry named now, print the
    summary and what did not finish, and exit 0 only if every run finished and passed."""
    from registry import RecordInvalid, RegistryError, open_registry

    try:
        outcome = follow(job)
        stored = watch.collect(outcome, lambda: open_registry(ctx.find_root().obj.get("db_url")))
    except (scheduler.SchedulerError, watch.WaitTimeout, RecordInvalid) as exc:
        fail(str(exc), 1)
    except RegistryError as exc:
        fail(f"{exc}; the job's records stay in {job.folder / 'records'} ('perfsuite import' loads them)", 1)
    if as_json:
        emit_json({"job_id": job.job_id, "folder": str(job.folder), "ended": outcome.ended,
                   "tasks": [dataclasses.asdict(s) for s in outcome.states.values()],
                   "records": [r["run_id"] for r in outcome.all_records], "stored": stored,
                   "unfinished": outcome.unfinished})
    else:
        from suite.report import results_table

        console().print(results_table(outcome.all_records))
        for line in outcome.unfinished:
            click.echo(f"Not finished: {clean(line)}", err=True)
    sys.exit(outcome.exit_code)


# -- run --slurm / crosscheck --slurm ----------------------------------------------------------
def _submit_command(ctx: click.Context, command: click.Command, values: dict[str, Any],
                    given: dict[str, Any]) -> None:
    """``run``/``crosscheck`` with ``--slurm``: its own arguments become the job's command."""
    for dest, (flag, default) in LOCAL_LAUNCH.items():
        if values.get(dest, default) != default:
            fail(f"{flag} is for torchrun here; under --slurm every task is one rank "
                 f"(give --nodes, --ntasks-per-node or --ntasks)")
    skip = set(LOCAL_LAUNCH) | {"as_json"}
    argv = command_argv(command, values, skip)
    if values.get("device") is None:
        argv += ["--device", default_device(given)]
    task, parsed_values = checked_task(ctx.find_root(), 0, command.name or "run", argv, "")
    host = load_host()
    min_world = max(host.get(n).cls.requirements.min_world_size for n in task.workloads)
    options = job_options(given, {parsed_values["device"]}, min_world)
    submit(ctx, with_launcher([task], options), options, given, as_json=bool(values.get("as_json")))


def _with_job_options(command: click.Command) -> None:
    """Add the job's options to ``command``; with ``--slurm`` it submits instead of running,
    and without it a job option is a usage error."""
    original = command.callback
    assert original is not None
    command.params += job_params(with_switch=True)

    def callback(*args: Any, **kwargs: Any) -> Any:
        given = {name: kwargs.pop(name) for name in JOB_PARAM_NAMES}
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
    """Submit perfsuite's runs as SLURM jobs, follow them and collect what they stored."""


@slurm_group.command("submit", params=job_params(with_switch=False))
@click.option("--plan", "plan_name", required=True, metavar="NAME|FILE",
              help="A run plan (TOML): one array index per [[run]].")
@click.pass_context
def submit_cmd(ctx: click.Context, plan_name: str, **given: Any) -> None:
    """Submit a run plan as a job array: one [[run]] per index, each as 'perfsuite run' (or
    'crosscheck') with every task one rank."""
    from suite.slurm import plans

    try:
        plan = plans.load(plan_name)
    except PlanError as exc:
        fail(str(exc))
    device = default_device(given)
    tasks, devices = [], set()
    host = load_host()
    min_world = 1
    for index, run in enumerate(plan.runs):
        argv = list(run.argv)
        if "--device" not in argv:
            argv += ["--device", device]
        task, values = checked_task(ctx.find_root(), index, run.command, argv,
                                    f"plan {plan.name}, [[run]] {index + 1}: ", run.ntasks_per_node)
        tasks.append(task)
        devices.add(values["device"])
        min_world = max([min_world] + [host.get(n).cls.requirements.min_world_size for n in task.workloads])
    options = job_options(given, devices, min_world, plan.max_ntasks_per_node())
    submit(ctx, with_launcher(tasks, options), options, given, plan=plan.name)


def _job(job_id: str, job_dir: Path | None) -> Job:
    from registry import records_dir

    try:
        return jobs_mod.find((job_dir or records_dir() / "slurm").absolute(), job_id)
    except jobs_mod.JobNotFound as exc:
        fail(str(exc))


JOB_DIR_OPTION = click.option("--job-dir", type=click.Path(file_okay=False, path_type=Path), default=None,
                              help="Where the job's folder is, if not under <records>/slurm.")


@slurm_group.command("status")
@click.argument("job_id")
@JOB_DIR_OPTION
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def status_cmd(job_id: str, job_dir: Path | None, as_json: bool) -> None:
    """Each array index: the scheduler's state, the runs stored so far and the runs not yet."""
    from registry import RecordInvalid

    job = _job(job_id, job_dir)
    try:
        outcome = watch.look(job)
    except (scheduler.SchedulerError, RecordInvalid) as exc:
        fail(str(exc), 1)
    rows: list[dict[str, Any]] = []
    for task in job.tasks:
        state = outcome.states.get(task.index)
        records = outcome.records[task.index]
        missing = jobs_mod.missing_runs(task, records)
        rows.append({"index": task.index, "command": " ".join([task.command, *task.workloads]),
                     "state": watch.state_text(state) if state else "unknown to the scheduler",
                     "stored": len(records), "expected": sum(task.expected().values()),
                     "not_yet": sorted(missing.elements()), "runs": [r["run_id"] for r in records]})
    if as_json:
        emit_json({"job_id": job.job_id, "folder": str(job.folder), "tasks": rows})
        return
    from rich.table import Table

    table = Table(title=f"job {job.job_id} ({job.folder})")
    for col in ("index", "command", "state", "stored", "not yet"):
        table.add_column(col)
    for row in rows:
        table.add_row(*map(plain, (row["index"], row["command"], row["state"], f"{row['stored']}/{row['expected']}",
                                   ", ".join(row["not_yet"]))))
    console().print(table)


@slurm_group.command("wait")
@click.argument("job_id")
@JOB_DIR_OPTION
@click.option("--timeout", "timeout_s", type=click.FloatRange(min=0, min_open=True), default=None,
              help="Give up after this many seconds (the job goes on).")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable summary.")
@click.pass_context
def wait_cmd(ctx: click.Context, job_id: str, job_dir: Path | None, timeout_s: float | None, as_json: bool) -> None:
    """Follow a job to its end (a line per change of state and per record stored), store its
    records in the registry and print them; name the runs that did not finish."""
    job = _job(job_id, job_dir)
    finish(ctx, job, lambda j: watch.follow(j, _progress, WAIT_POLL_S, timeout_s), as_json)


@slurm_group.command("cancel")
@click.argument("job_id")
@JOB_DIR_OPTION
@click.option("--json", "as_json", is_flag=True, help="Machine-readable summary.")
@click.pass_context
def cancel_cmd(ctx: click.Context, job_id: str, job_dir: Path | None, as_json: bool) -> None:
    """Cancel a job (every index), wait until its processes are gone, store what it finished
    and name what it did not."""
    job = _job(job_id, job_dir)
    assert job.job_id is not None
    try:
        scheduler.cancel(job.job_id)
    except scheduler.SchedulerError as exc:
        fail(str(exc), EXIT_USAGE)
    finish(ctx, job, lambda j: watch.follow(j, _progress, WAIT_POLL_S), as_json)


def attach(cli: click.Group) -> None:
    """``--slurm`` and the job's options on ``run`` and ``crosscheck``, and the ``slurm`` group."""
    for name in ("run", "crosscheck"):
        if name in cli.commands:
            _with_job_options(cli.commands[name])
    cli.add_command(slurm_group)
