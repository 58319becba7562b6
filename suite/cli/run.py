"""``perfsuite run``: resolve workloads, parameters and controls, check everything before
anything runs, run each workload in its measuring process and print the summary."""

from __future__ import annotations

import sys

import click

from perfsuite.cli._common import console, emit_json, fail, load_host, price_per_hour_option
from perfsuite.cli._types import (
    MAX_CALLS,
    MAX_NODES,
    MAX_PROCESSES,
    MAX_REPEAT,
    MAX_SECONDS,
    MAX_SEED,
    AsciiIntRange,
    Endpoint,
    FiniteFloat,
)
from perfsuite.engine.requests import RUN_DEFAULTS, parse_param_items
from perfsuite.text import clean, plain


@click.command("run")
@click.argument("names", nargs=-1)
@click.option(
    "--plan",
    "plan_name",
    default=None,
    metavar="PLAN",
    help="Run a plan: a TOML file of runs, or the name of a shipped plan (perfsuite plans).",
)
@click.option(
    "--param", "-p", "param_items", multiple=True, metavar="[NAME:]K=V", help="Set a workload parameter (repeatable)."
)
@click.option("--quick", is_flag=True, help="Use each workload's quick preset; with no NAMES, run the quick suite.")
@click.option(
    "--device", type=click.Choice(["cpu", "cuda"]), default=None, help="Default: cuda if a GPU is visible, else cpu."
)
@click.option(
    "--repeat",
    type=AsciiIntRange(min=1, max=MAX_REPEAT),
    default=1,
    help=f"Runs of each workload (unique seeds), at most {MAX_REPEAT}.",
)
@click.option(
    "--timeout",
    "timeout_s",
    type=FiniteFloat(low=0, high=MAX_SECONDS, low_open=True),
    default=None,
    help="Seconds before a run's process tree is killed (at most thirty days).",
)
@click.option(
    "--seed",
    type=AsciiIntRange(min=0, max=MAX_SEED),
    default=None,
    help="Seed of the first run, 0 to 2**32-1 (default: random, recorded).",
)
@click.option("--deterministic", is_flag=True, help="Ask torch for deterministic algorithms.")
@click.option("--warmup", type=AsciiIntRange(min=0, max=MAX_CALLS), default=None, help="Untimed calls first.")
@click.option(
    "--iterations", type=AsciiIntRange(min=1, max=MAX_CALLS), default=None, help="Timed calls (default: by --min-time)."
)
@click.option(
    "--min-time",
    "min_time_s",
    type=FiniteFloat(low=0, high=MAX_SECONDS),
    default=None,
    help="Seconds of timed calls.",
)
@click.option("--l2-flush", is_flag=True, help="Flush the GPU's L2 between timed calls.")
@click.option("--cuda-graph", is_flag=True, help="Time replays of a CUDA graph of each call.")
@click.option(
    "--nproc-per-node",
    type=AsciiIntRange(min=1, max=MAX_PROCESSES),
    default=None,
    help="Ranks on this node (torchrun).",
)
@click.option("--nnodes", type=AsciiIntRange(min=1, max=MAX_NODES), default=1, help="Nodes (torchrun).")
@click.option(
    "--node-rank", type=AsciiIntRange(min=0, max=MAX_NODES - 1), default=0, help="This node's rank (torchrun)."
)
@click.option(
    "--rdzv-endpoint",
    type=Endpoint(),
    default=None,
    metavar="HOST:PORT",
    help="Rendezvous endpoint (torchrun): node 0's host and a port, 1 to 65535.",
)
@click.option("--division", type=click.Choice(["open", "closed"]), default="open")
@click.option("--json", "as_json", is_flag=True, help="Print the records as JSON.")
@click.option(
    "--reproduces",
    default=None,
    hidden=True,
    metavar="RUN_ID",
    help="Record that this run re-runs RUN_ID (set by 'perfsuite reproduce').",
)
@click.option("--strict", is_flag=True, help="Refuse to measure when a pre-flight check (perfsuite doctor) fails.")
@click.option(
    "--profile",
    type=click.Choice(["torch", "ncu"]),
    default=None,
    help="Capture a few calls after each timed loop: PyTorch profiler or Nsight Compute.",
)
@price_per_hour_option("Price of one accelerator-hour: the record gets a cost per unit of work.")
@click.pass_context
def run_cmd(
    ctx: click.Context,
    names: tuple[str, ...],
    plan_name: str | None,
    param_items: tuple[str, ...],
    quick: bool,
    device: str | None,
    repeat: int,
    timeout_s: float | None,
    seed: int | None,
    deterministic: bool,
    warmup: int | None,
    iterations: int | None,
    min_time_s: float | None,
    l2_flush: bool,
    cuda_graph: bool,
    nproc_per_node: int | None,
    nnodes: int,
    node_rank: int,
    rdzv_endpoint: str | None,
    division: str,
    as_json: bool,
    reproduces: str | None,
    strict: bool = False,
    profile: str | None = None,
    price_per_hour: float | None = None,
) -> None:
    """Run workloads and record the results. With --quick and no NAMES: the quick suite; with
    --plan: every run of a plan, with the options given here applied to each."""
    requests, crosschecked = command_requests(ctx)
    check_rendezvous_ports(requests)
    outcome = execute(ctx, requests, as_json, crosscheck_table=bool(crosschecked))
    sys.exit(outcome.exit_code)


def command_requests(ctx: click.Context) -> tuple[list, int]:
    """The runs a parsed ``perfsuite run`` command line asks for (``ctx.params``, as click parsed
    them), built by the builder ``perfsuite.run`` uses too; and how many of a plan's entries are
    cross-checks. A plan's options are under those typed on the command line."""
    p = ctx.params
    options = {name: p[name] for name in RUN_DEFAULTS}
    host = load_host()
    if p["plan_name"] is None:
        return build_requests(host, p["names"], p["param_items"], options), 0
    if p["names"] or p["param_items"]:
        fail("--plan names its own workloads and parameters: give no NAMES or --param beside it")
    given = {
        name: value
        for name, value in options.items()
        if ctx.get_parameter_source(name) == click.core.ParameterSource.COMMANDLINE
    }
    return plan_requests(ctx, host, p["plan_name"], given)


def build_requests(
    host, names: tuple[str, ...], param_items: tuple[str, ...], options: dict, extra_env: dict[str, str] | None = None
) -> list:
    """The runs one command line asks for (:func:`perfsuite.engine.requests.build_requests`,
    the builder ``perfsuite.run`` calls too), ``--param`` as typed. Anything that cannot run as
    asked is one line and exit 2, before anything runs."""
    from perfsuite.engine.requests import RequestError
    from perfsuite.engine.requests import build_requests as build

    try:
        requests = build(host, names, parse_param_items(param_items), options, extra_env)
    except RequestError as exc:
        fail(str(exc))
    return requests


def plan_requests(ctx: click.Context, host, plan_name: str, given: dict) -> tuple[list, int]:
    """Every run of a plan, its options under those ``given`` on the command line; and how many
    of its entries are cross-checks. A bad plan is one line naming its file and entry."""
    from perfsuite.cli._reference import crosscheck_env

    plan = load_plan(ctx, plan_name, given.get("repeat"))
    requests = []
    for run in plan.runs:
        options = {**run.options, **given}
        reference = {k: options.pop(k) for k in ("rounds", "nccl_tests", "mpirun") if k in options}
        env = crosscheck_env(**reference) if run.crosscheck else {}
        requests += build_requests(host, run.workloads, run.params, options, extra_env=env)
    click.echo(f"plan {plan.name} ({plan.source}): {len(plan.runs)} entries, {len(requests)} runs", err=True)
    return requests, sum(run.crosscheck for run in plan.runs)


def check_rendezvous_ports(requests: list) -> None:
    """Each launch of a multi-node run takes the next port after the endpoint's (so that a node
    still busy with one workload never serves the next one's rendezvous): all of them must be
    ports, refused here rather than by torchrun after its rendezvous timeout."""
    endpoint = next((r.launch.rdzv_endpoint for r in requests if r.launch.rdzv_endpoint), None)
    if endpoint is None:
        return
    port = int(endpoint.rpartition(":")[2])
    last = port + len(requests) - 1
    if last > 65535:
        fail(f"--rdzv-endpoint {endpoint}: {len(requests)} runs take ports {port} to {last}, above 65535")


def plan_options() -> set[str]:
    """The run options a plan's entry may set: run's own (bar the one ``reproduce`` sets) and
    the cross-check's; every other option of the command is the command line's alone."""
    return (set(RUN_DEFAULTS) - {"reproduces"}) | {str(p.name) for p in crosscheck_options()}


def _toml_kind(param: click.Parameter) -> type:
    """The TOML type a plan gives an option in: true/false for a flag, an integer for a count."""
    if getattr(param, "is_flag", False):
        return bool
    if isinstance(param.type, click.types.IntParamType):
        return int
    if isinstance(param.type, (FiniteFloat, click.types.FloatParamType)):
        return float
    return str


def load_plan(ctx: click.Context, plan_name: str, repeat_given: int | None = None):
    """The plan, each option of its entries checked against its type and converted as the
    command line would (run's options and the cross-check's); an option that only the command
    line can set (``--slurm``, ``--db``, ``--json``) is refused naming it; the runs it makes
    (``repeat_given``: the command line's ``--repeat``) counted against the bound, before any
    is resolved, here or as a SLURM job array. A bad plan is one line naming its file and entry."""
    from perfsuite.engine.plan import PlanError, check_run_count, load

    by_name = {p.name: p for p in run_cmd.params if p.name}
    by_name.update({p.name: p for p in crosscheck_options() if p.name})
    allowed = plan_options()
    kinds = {name: _toml_kind(p) for name, p in by_name.items() if name in allowed}
    command_line: dict[str, str] = {}
    for name, p in by_name.items():
        if name not in allowed and isinstance(p, click.Option):
            flag = max(p.opts, key=len)
            command_line[name] = command_line[flag.lstrip("-").replace("-", "_")] = flag

    def check(name: str, value):
        param = by_name[name]  # KeyError: not an option of run
        try:
            return param.type_cast_value(ctx, value) if not param.multiple else value
        except click.BadParameter as exc:
            raise ValueError(exc.format_message()) from None

    try:
        plan = load(plan_name, check, kinds=kinds, command_line=command_line)
        check_run_count(plan, len(load_host().workloads), repeat_given)
    except PlanError as exc:
        fail(str(exc))
    return plan


def crosscheck_options() -> list[click.Option]:
    from perfsuite.cli._reference import CROSSCHECK_OPTIONS

    return CROSSCHECK_OPTIONS


def execute(ctx: click.Context, requests: list, as_json: bool, crosscheck_table: bool = False):
    """Check everything the runs need, run them in turn with progress on stderr, print the
    summary (or the records as JSON), the table of a plan's cross-checks and every message;
    returns the session's outcome. From the runs' start to the command's exit a signal cuts
    nothing it writes (:func:`signals_noted`)."""
    from perfsuite.engine.runner import Runner
    from perfsuite.engine.session import EXIT_INTERRUPTED, PreflightError, preflight, run_all, signals_noted
    from perfsuite.registry import check_url, open_registry, records_dir

    out = console()
    err = console(stderr=True)
    display = ProgressDisplay(err, len(requests), live=not as_json and sys.stderr.isatty(), lines=not as_json)
    runner = Runner(
        lambda: open_registry(ctx.obj.get("db_url")),
        records_dir(),
        echo=lambda s: err.print(plain(s), soft_wrap=True),
        on_progress=display.note,
    )
    try:
        preflight(runner, requests, check_url=lambda: check_url(ctx.obj.get("db_url")))
    except PreflightError as exc:
        fail(str(exc))
    noted: list[int] = []  # a signal after the runs ended: the summary is still written whole
    with signals_noted(noted):
        with display:
            outcome = run_all(runner, requests, display.start)
        if as_json:
            emit_json(outcome.records)
        else:
            from perfsuite.analysis.scoring import print_scores
            from perfsuite.analysis.tables import results_table, sweep_tables

            ids = summary_ids(ctx, outcome.records)
            out.print(results_table(outcome.records, ids))
            for sweep in sweep_tables(outcome.records, ids):  # a collective's busbw at every size
                out.print(sweep)
            print_scores(out, outcome.records)  # the olympic mean of a --repeat of time-to-target runs
            if crosscheck_table:
                from perfsuite.cli._reference import print_crosscheck_table

                print_crosscheck_table([r for r in outcome.records if (r.get("details") or {}).get("crosscheck")])
        for line in outcome.messages:
            click.echo(clean(line), err=True)
        sys.stdout.flush()
        sys.stderr.flush()
    if noted:
        outcome.exit_code = EXIT_INTERRUPTED
    return outcome


class ProgressDisplay:
    """What the runs are doing, on stderr: on a terminal, a bar over the runs and one over the
    current run's steps (case, size, scenario, epoch) with the time left; elsewhere (CI logs,
    files) a line per run and per step, with the time left where the workload counts its steps."""

    def __init__(self, err, total: int, live: bool, lines: bool) -> None:
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
            TimeRemainingColumn,
        )

        from perfsuite.engine.progress import Pace

        self.live, self.lines = live, lines
        self.bar = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            TimeRemainingColumn(),
            console=err,
            disable=not live,
            transient=True,
        )
        self.runs = self.bar.add_task("runs", total=total)
        self.steps = self.bar.add_task("", total=None, visible=False)
        self.started = 0.0
        self.pace = Pace(0.0)
        self.current = ""

    def __enter__(self) -> "ProgressDisplay":
        self.bar.__enter__()
        return self

    def __exit__(self, *exc_info) -> None:
        self.bar.__exit__(*exc_info)

    def start(self, req) -> None:
        import time

        from perfsuite.engine.progress import Pace

        if self.started:
            self.bar.advance(self.runs)
        c = req.controls
        repeat = f" (repeat {c.repeat_index + 1}/{c.repeat_count})" if c.repeat_count > 1 else ""
        self.current = f"{req.entry.name}{repeat}"
        self.started = time.monotonic()
        self.pace = Pace(self.started)
        self.bar.update(self.runs, description=self.current)
        self.bar.reset(self.steps, total=None, description="  starting", visible=True)
        if self.lines and not self.live:
            click.echo(f"running {req.entry.name} on {c.device}{repeat}", err=True)

    def note(self, req, note) -> None:
        import time

        # the line carries the elapsed time and, once a rate is known, the time left: rich's own
        # estimate needs several updates inside its window, which an epoch's note does not give
        line = clean(self.pace.line(note, time.monotonic()))
        self.bar.update(self.steps, description=f"  {line}", total=note.total, completed=note.done or 0)
        if self.lines and not self.live:
            click.echo(f"  {self.current}: {line}", err=True)


def summary_ids(ctx: click.Context, records: list[dict]) -> dict[str, str] | None:
    """The run ids of the summary as their shortest prefixes unique in the registry; None (unique
    among themselves) where the registry cannot be read now: the summary is printed regardless."""
    from perfsuite.cli._common import run_id_prefixes
    from perfsuite.engine.runner import registry_failures
    from perfsuite.registry import open_registry

    try:
        with open_registry(ctx.obj.get("db_url")) as registry:
            return run_id_prefixes(registry, [r["run_id"] for r in records])
    except registry_failures():
        return None
