"""The ``perfsuite`` command line. Heavy modules (torch, the registry's SQLAlchemy) are
imported inside the commands that need them, so ``--help`` and ``list`` start fast."""
from __future__ import annotations

import datetime as dt
import functools
import json
import os
import sys
from pathlib import Path
from typing import Any, NoReturn

import click

from suite import __version__
from suite.text import clean, plain

EXIT_USAGE = 2


def fail(message: str, code: int = EXIT_USAGE) -> NoReturn:
    """One clear line on stderr and a non-zero exit; nothing has been recorded."""
    click.echo(f"Error: {clean(message)}", err=True)
    sys.exit(code)


def console(stderr: bool = False):
    from rich.console import Console

    # Piped output (CI logs, files) gets a wide table rather than rich's 80 columns.
    width = None if sys.stdout.isatty() else int(os.environ.get("COLUMNS", "0") or 0) or 160
    return Console(soft_wrap=False, width=width, stderr=stderr)


def emit_json(data: Any) -> None:
    click.echo(json.dumps(data, indent=2, sort_keys=True, default=str))


def load_host():
    """The plugin host; its problems (failed plugins, disabled names) are warned about once."""
    from suite.plugins import get_host

    host = get_host()
    warn_plugin_problems()
    return host


@functools.lru_cache(maxsize=1)
def warn_plugin_problems() -> None:
    """Each plugin problem as one ``Warning:`` line on stderr, once per process."""
    from suite.plugins import get_host

    for line in get_host().warnings():
        click.echo(f"Warning: {clean(line)}", err=True)


def open_db(ctx: click.Context):
    from registry import RegistryError, open_registry

    try:
        return open_registry(ctx.obj.get("db_url"))
    except RegistryError as exc:
        fail(str(exc), 1)


def default_device() -> str:
    from suite import nvml

    return "cuda" if nvml.device_count() > 0 else "cpu"


class PerfsuiteGroup(click.Group):
    """Adds the commands plugins register before any command runs; a plugin whose hook
    raises is reported (``plugins``, one warning on stderr) and cannot stop the others.
    A :class:`registry.RegistryError` or a database error escaping any command is one line
    and exit 1."""

    def _plugin_commands(self) -> None:
        if getattr(self, "_loaded", False):
            return
        self._loaded = True
        from suite.plugins import get_host

        get_host().call_each("perfsuite_register_commands", cli=self)
        warn_plugin_problems()

    def list_commands(self, ctx):
        self._plugin_commands()
        return super().list_commands(ctx)

    def get_command(self, ctx, name):
        self._plugin_commands()
        return super().get_command(ctx, name)

    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except Exception as exc:
            registry = sys.modules.get("registry")  # only loaded by commands that open it
            if registry is not None and isinstance(exc, registry.RegistryError):
                fail(str(exc), 1)
            if registry is not None and type(exc).__module__.startswith("sqlalchemy."):
                fail(f"registry: {registry.errors.first_line(exc)}", 1)  # a query through Registry.session()
            raise


@click.group(cls=PerfsuiteGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="perfsuite")
@click.option("--db", "db_url", envvar="PERFSUITE_DB", metavar="URL",
              help="Registry: any SQLAlchemy URL (default: a SQLite file in the user's data dir).")
@click.pass_context
def cli(ctx: click.Context, db_url: str | None) -> None:
    """perfsuite: measure what GPUs, pipelines, collectives, training and inference deliver,
    and keep every result in a registry."""
    ctx.ensure_object(dict)
    ctx.obj["db_url"] = db_url


# -- list -------------------------------------------------------------------------------
@cli.command("list")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@click.option("--device", type=click.Choice(["cpu", "cuda"]), default=None,
              help="Judge availability for this device (default: cuda if a GPU is visible).")
def list_cmd(as_json: bool, device: str | None) -> None:
    """List workloads, with availability and the reason when unavailable."""
    from suite import params as params_mod
    from suite.controls import Controls
    from suite.launcher import LaunchOptions
    from suite.plugins import conflict_text
    from suite.runner import RunRequest, static_unmet

    host = load_host()
    device = device or default_device()
    rows = []
    for name in sorted(host.workloads):
        e = host.workloads[name]
        nproc = max(1, e.cls.requirements.min_world_size)
        req = RunRequest(e, None, False, Controls(device=device), LaunchOptions(nproc_per_node=nproc))
        reason = static_unmet(req)
        rows.append({"name": name, "category": e.cls.category, "version": e.cls.version,
                     "description": e.cls.description,
                     "plugin": {"name": e.plugin.name, "distribution": e.plugin.distribution,
                                "version": e.plugin.version},
                     "available": reason is None, "reason": reason,
                     "params": params_mod.describe(e.cls.Params), "quick": dict(e.cls.quick)})
    errors = [{"plugin": p.name, "error": p.error} for p in host.errors()]
    if as_json:
        emit_json(rows if not errors else rows + [{"plugin_error": e} for e in errors])
        return
    from rich.table import Table

    t = Table(title=f"workloads (device: {device})")
    for col in ("name", "category", "v", "plugin", "available", "description"):
        t.add_column(col)
    for r in rows:
        avail = "yes" if r["available"] else f"no: {r['reason']}"
        plugin = r["plugin"]["distribution"] or r["plugin"]["name"]
        t.add_row(*map(plain, (r["name"], r["category"], str(r["version"]),
                               f"{plugin} {r['plugin']['version'] or ''}", avail, r["description"])))
    out = console()
    out.print(t)
    for e in errors:
        out.print(plain(f"plugin {e['plugin']} failed to load: ", style="red") + plain(e["error"]))
    for name, owners in host.conflicts.items():
        out.print(plain(f"workload {name!r} disabled: {conflict_text(owners)}", style="yellow"))


# -- plugins ----------------------------------------------------------------------------
@cli.command("plugins")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def plugins_cmd(as_json: bool) -> None:
    """List plugins: version, hooks implemented, workloads, load errors."""
    from suite.plugins import conflict_text

    host = load_host()
    rows = [p.to_dict() for p in host.plugins.values()]
    if as_json:
        emit_json(rows)
        return
    from rich.table import Table

    t = Table(title="plugins")
    for col in ("name", "distribution", "version", "hooks", "workloads", "status"):
        t.add_column(col)
    for r in rows:
        status = [f"error: {r['error']}"] if r["error"] else []
        status += [f"disabled {name!r}: {conflict_text(host.conflicts[name])}" for name in r["disabled"]]
        t.add_row(*map(plain, (r["name"], r["distribution"] or "", r["version"] or "", ", ".join(r["hooks"]),
                               ", ".join(r["workloads"]), "; ".join(status) or "ok")))
    console().print(t)


# -- env --------------------------------------------------------------------------------
@cli.command("env")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@click.option("--device", type=click.Choice(["cpu", "cuda"]), default=None)
def env_cmd(as_json: bool, device: str | None) -> None:
    """Print the environment fingerprint stored in every record."""
    from suite.environment import collect

    load_host()
    env = collect(device or default_device(), deep=True)
    if as_json:
        emit_json(env)
        return
    from rich.pretty import Pretty

    console().print(Pretty(env, expand_all=True))


# -- run --------------------------------------------------------------------------------
def _parse_param_options(items: tuple[str, ...], names: list[str], host) -> dict[str, dict[str, str]]:
    """``k=v`` applies to every named workload that has ``k``; ``name:k=v`` to one. A key no
    named workload has is an error."""
    from suite.params import ParamError, param_fields, parse_assignments

    per: dict[str, dict[str, str]] = {n: {} for n in names}
    for item in items:
        target = None
        if ":" in item.split("=", 1)[0]:
            target, item = item.split(":", 1)
            if target not in per:
                raise ParamError(f"--param {target}:{item}: {target!r} is not one of the workloads being run")
        (key, value), = parse_assignments([item]).items()
        hit = False
        for n in ([target] if target else names):
            if key in param_fields(host.get(n).cls.Params):
                per[n][key] = value
                hit = True
        if not hit:
            where = target or ", ".join(names)
            raise ParamError(f"unknown parameter {key!r} for {where} (see 'perfsuite list --json')")
    return per


def _order(names: list[str]) -> list[str]:
    """The ceilings run goes first, so the runs after it get roofline fractions."""
    from suite.roofline import CEILINGS_WORKLOAD

    return sorted(names, key=lambda n: (n != CEILINGS_WORKLOAD,))


@cli.command("run")
@click.argument("names", nargs=-1)
@click.option("--param", "-p", "param_items", multiple=True, metavar="[NAME:]K=V",
              help="Set a workload parameter (repeatable).")
@click.option("--quick", is_flag=True, help="Use each workload's quick preset; with no NAMES, run the quick suite.")
@click.option("--device", type=click.Choice(["cpu", "cuda"]), default=None,
              help="Default: cuda if a GPU is visible, else cpu.")
@click.option("--repeat", type=click.IntRange(min=1), default=1, help="Runs of each workload (unique seeds).")
@click.option("--timeout", "timeout_s", type=click.FloatRange(min=0, min_open=True), default=None,
              help="Seconds before a run's process tree is killed.")
@click.option("--seed", type=click.IntRange(min=0), default=None, help="Seed of the first run (default: random, recorded).")
@click.option("--deterministic", is_flag=True, help="Ask torch for deterministic algorithms.")
@click.option("--warmup", type=click.IntRange(min=0), default=None, help="Untimed calls first.")
@click.option("--iterations", type=click.IntRange(min=1), default=None, help="Timed calls (default: by --min-time).")
@click.option("--min-time", "min_time_s", type=click.FloatRange(min=0), default=None, help="Seconds of timed calls.")
@click.option("--l2-flush", is_flag=True, help="Flush the GPU's L2 between timed calls.")
@click.option("--cuda-graph", is_flag=True, help="Time replays of a CUDA graph of each call.")
@click.option("--nproc-per-node", type=click.IntRange(min=1), default=None, help="Ranks on this node (torchrun).")
@click.option("--nnodes", type=click.IntRange(min=1), default=1, help="Nodes (torchrun).")
@click.option("--node-rank", type=click.IntRange(min=0), default=0, help="This node's rank (torchrun).")
@click.option("--rdzv-endpoint", default=None, metavar="HOST:PORT", help="Rendezvous endpoint (torchrun).")
@click.option("--division", type=click.Choice(["open", "closed"]), default="open")
@click.option("--json", "as_json", is_flag=True, help="Print the records as JSON.")
@click.option("--reproduces", default=None, hidden=True, metavar="RUN_ID",
              help="Record that this run re-runs RUN_ID (set by 'perfsuite reproduce').")
@click.option("--strict", is_flag=True, help="Refuse to measure when a pre-flight check (perfsuite doctor) fails.")
@click.option("--profile", type=click.Choice(["torch", "ncu"]), default=None,
              help="Capture a few calls after each timed loop: PyTorch profiler or Nsight Compute.")
@click.option("--price-per-hour", "price_per_hour", type=float, default=None, metavar="USD",
              help="Price of one accelerator-hour: the record gets a cost per unit of work.")
@click.pass_context
def run_cmd(ctx: click.Context, names: tuple[str, ...], param_items: tuple[str, ...], quick: bool,
            device: str | None, repeat: int, timeout_s: float | None, seed: int | None, deterministic: bool,
            warmup: int | None, iterations: int | None, min_time_s: float | None, l2_flush: bool,
            cuda_graph: bool, nproc_per_node: int | None, nnodes: int, node_rank: int,
            rdzv_endpoint: str | None, division: str, as_json: bool, reproduces: str | None,
            strict: bool = False, profile: str | None = None, price_per_hour: float | None = None) -> None:
    """Run workloads and record the results. With --quick and no NAMES: the quick suite."""
    from schemas.cost import validate_price

    try:
        validate_price(price_per_hour)
    except ValueError as exc:
        fail(f"--price-per-hour: {exc}")
    from suite import params as params_mod
    from suite.controls import QUICK_MIN_TIME_S
    from suite.launcher import LaunchOptions, slurm_world
    from suite.plugins import UnknownWorkload
    from suite.runner import RunRequest, Runner, repeat_seeds, resolve_controls

    host = load_host()
    if not names:
        if not quick:
            fail("name at least one workload, or use --quick alone for the quick suite")
        names = tuple(host.workloads)
    names_list = _order(list(dict.fromkeys(names)))
    device = device or default_device()
    try:
        for n in names_list:
            host.get(n)
        per_params = _parse_param_options(param_items, names_list, host)
        resolved = {n: params_mod.resolve(host.get(n).cls, per_params[n], quick) for n in names_list}
    except (UnknownWorkload, params_mod.ParamError) as exc:
        fail(str(exc))
    if min_time_s is None and quick:
        min_time_s = QUICK_MIN_TIME_S
    requests = []
    for n in names_list:
        entry = host.get(n)
        # A workload that needs several ranks gets them locally unless told otherwise; under
        # srun every task is already one rank.
        reqs = entry.cls.requirements
        auto = max(1, reqs.min_world_size) if nnodes == 1 and slurm_world() == 1 else 1
        nproc = nproc_per_node or auto
        if reqs.max_world_size is not None and nnodes == 1 and nproc > reqs.max_world_size:
            nproc = reqs.max_world_size  # --nproc-per-node is for the multi-rank workloads named beside it
        launch = LaunchOptions(nproc_per_node=nproc, nnodes=nnodes, node_rank=node_rank, rdzv_endpoint=rdzv_endpoint)
        for i, s in enumerate(repeat_seeds(seed, repeat)):
            controls = resolve_controls(device=device, seed=s, deterministic=deterministic, warmup=warmup,
                                        iterations=iterations, min_time_s=min_time_s, l2_flush=l2_flush,
                                        cuda_graph=cuda_graph, timeout_s=timeout_s, repeat_index=i,
                                        repeat_count=repeat, profile=profile)
            requests.append(RunRequest(entry, resolved[n], quick, controls, launch, division=division,
                                       reproduces=reproduces, strict=strict, price_per_hour=price_per_hour))

    from registry import check_url, open_registry, records_dir
    from suite.session import PreflightError, preflight, run_all

    out = console()
    err = console(stderr=True)
    runner = Runner(lambda: open_registry(ctx.obj.get("db_url")), records_dir(),
                    echo=lambda s: err.print(plain(s)))
    try:
        preflight(runner, requests, check_url=lambda: check_url(ctx.obj.get("db_url")))
    except PreflightError as exc:
        fail(str(exc))
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    with Progress(TextColumn("{task.description}"), BarColumn(), TextColumn("{task.completed}/{task.total}"),
                  TimeElapsedColumn(), console=err,
                  disable=as_json or not sys.stderr.isatty(), transient=True) as bar:
        task = bar.add_task("running", total=len(requests))

        def on_start(req) -> None:
            if req is not requests[0]:
                bar.advance(task)
            bar.update(task, description=f"{req.entry.name} (repeat {req.controls.repeat_index + 1}/{repeat})")
            if not as_json and not sys.stderr.isatty():
                click.echo(f"running {req.entry.name} on {device}" +
                           (f" (repeat {req.controls.repeat_index + 1}/{repeat})" if repeat > 1 else ""), err=True)

        outcome = run_all(runner, requests, on_start)
    if as_json:
        emit_json(outcome.records)
    else:
        from suite.report import results_table

        out.print(results_table(outcome.records))
        from suite.scoring import print_scores
        print_scores(out, outcome.records)  # the olympic mean of a --repeat of time-to-target runs
    for line in outcome.messages:
        click.echo(clean(line), err=True)
    sys.exit(outcome.exit_code)


# -- results / show / import ---------------------------------------------------------------
@cli.command("results")
@click.option("--workload", default=None, help="Only this workload.")
@click.option("--since", default=None, metavar="DATE", help="ISO date or datetime (UTC), e.g. 2026-11-01.")
@click.option("--limit", type=click.IntRange(min=1), default=50)
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def results_cmd(ctx: click.Context, workload: str | None, since: str | None, limit: int, as_json: bool) -> None:
    """List recorded runs, newest first."""
    since_dt = None
    if since:
        try:
            since_dt = dt.datetime.fromisoformat(since)
        except ValueError:
            fail(f"--since {since!r} is not an ISO date")
        if since_dt.tzinfo is None:
            since_dt = since_dt.replace(tzinfo=dt.timezone.utc)
    rows = open_db(ctx).results(workload=workload, since=since_dt, limit=limit)
    if as_json:
        emit_json(rows)
        return
    from suite.report import runs_table

    console().print(runs_table(rows))


@cli.command("show")
@click.argument("run_id")
@click.option("--json", "as_json", is_flag=True, help="Print the whole record.")
@click.pass_context
def show_cmd(ctx: click.Context, run_id: str, as_json: bool) -> None:
    """Show one run: metrics with statistics, verification, GPU state, details."""
    from registry import RegistryError

    try:
        record = open_db(ctx).get(run_id)
    except RegistryError as exc:
        fail(str(exc), 1)
    if as_json:
        emit_json(record)
        return
    from suite.report import show_record

    entry = load_host().workloads.get(record["workload"]["name"])
    show_record(console(), record, entry.cls if entry else None)


@cli.command("import")
@click.argument("files", nargs=-1, required=True, type=click.Path(exists=True, path_type=Path))
@click.pass_context
def import_cmd(ctx: click.Context, files: tuple[Path, ...]) -> None:
    """Load record files into the registry, all or none: every file is checked (size limit,
    UTF-8, JSON, schema, sha256) before one transaction stores them. A directory is a
    submissions tree: checked (perfsuite check), then loaded. Idempotent by run id and hash."""
    if any(f.is_dir() for f in files):
        from suite.commands.submissions import import_directory

        if len(files) != 1:
            fail("give record files, or one submissions directory")
        return import_directory(ctx, files[0])
    from registry import RecordInvalid, RegistryError
    from registry.bulk import BulkOutcome, prepare, store_prepared
    from suite.commands.submissions import progress_bar

    prepared, refused = [], []
    with progress_bar(len(files), "checking") as advance:
        for f in files:
            try:
                prepared.append(prepare(f))  # read, checked (size, UTF-8, JSON, schema, sha256) once
            except RecordInvalid as exc:
                refused.append(f"{f}: {exc}")
            advance(1)
    if refused:
        for line in refused[:-1]:
            click.echo(f"Error: {clean(line)}", err=True)
        fail(f"{refused[-1]} (nothing imported: {len(refused)} of {len(files)} files refused)", 1)
    registry = open_db(ctx)
    outcome = BulkOutcome()
    stored_before = {p.run_id for p in prepared}
    try:
        with progress_bar(len(prepared), "storing") as advance:
            existing = _stored_hashes(registry, stored_before)
            store_prepared(registry.engine, [prepared], outcome, atomic=True, progress=advance)
    except RegistryError as exc:
        fail(f"{exc} (nothing imported)", 1)
    for f, p in zip(files, prepared):
        click.echo(f"{'duplicate' if p.run_id in existing else 'stored'}: {p.run_id} ({clean(f)})")


def _stored_hashes(registry, run_ids: set[str]) -> set[str]:
    """Which of ``run_ids`` the registry already holds (so that the import can say so)."""
    from sqlalchemy import select

    from registry.models import Run

    with registry.session() as session:
        ids = list(run_ids)
        found: set[str] = set()
        for start in range(0, len(ids), 1000):
            found.update(session.execute(select(Run.run_id).where(Run.run_id.in_(ids[start:start + 1000]))).scalars())
        return found


from suite.commands import compare, history, leaderboard, reproduce, submissions  # noqa: E402
from suite.commands.doctor import doctor_cmd  # noqa: E402 - commands attach after the group exists
from suite.commands.roofline import roofline_command  # noqa: E402

cli.add_command(doctor_cmd)
cli.add_command(roofline_command)
for _command in (compare.compare_cmd, history.history_cmd, reproduce.reproduce_cmd, submissions.submit_cmd,
                 submissions.check_cmd, leaderboard.leaderboard_cmd):
    cli.add_command(_command)


from suite.cli_crosscheck import attach as _attach_crosscheck  # noqa: E402 (takes run's options)
_attach_crosscheck(cli)


def main() -> None:
    cli(prog_name="perfsuite")
