"""What every command shares: one-line errors and exit codes, the rich consoles, JSON output,
the plugin host and the registry as a command opens them, and plain-text cells and verdict
colours for the tables of the registry commands."""

from __future__ import annotations

import contextlib
import functools
import json
import os
import sys
from collections.abc import Callable, Iterator
from typing import Any, NoReturn

import click

from perfsuite.cli._types import FiniteFloat
from perfsuite.text import clean

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
    """The plugin host, with the commands plugins register added to the group (their hook is
    called wherever the plugins are loaded, so that one that raises is reported with the rest);
    its problems (failed plugins, disabled names) are warned about once."""
    from perfsuite.plugins import get_host

    host = get_host()
    context = click.get_current_context(silent=True)
    group = context.find_root().command if context is not None else None
    plugin_commands = getattr(group, "plugin_commands", None)  # the perfsuite group's, not a test's bare command
    if plugin_commands is not None:
        plugin_commands()
    warn_plugin_problems()
    return host


@functools.lru_cache(maxsize=1)
def warn_plugin_problems() -> None:
    """Each plugin problem as one ``Warning:`` line on stderr, once per process."""
    from perfsuite.plugins import get_host

    for line in get_host().warnings():
        click.echo(f"Warning: {clean(line)}", err=True)


def warn_plugin_problems_if_loaded() -> None:
    """:func:`warn_plugin_problems` where this process has loaded the plugins (a command that
    reads the registry loads them only for what it needs: the class of a third party's run)."""
    plugins = sys.modules.get("perfsuite.plugins")
    if plugins is not None and plugins.get_host.cache_info().currsize:
        warn_plugin_problems()


def open_db(ctx: click.Context):
    from perfsuite.registry import RegistryError, open_registry

    try:
        return open_registry(ctx.obj.get("db_url"))
    except RegistryError as exc:
        fail(str(exc), 1)


def run_id_prefixes(registry, run_ids) -> dict[str, str]:
    """Each run id -> the shortest prefix (at least eight digits) that names it alone in the
    registry and among ``run_ids``: what a table shows and ``perfsuite show PREFIX`` finds."""
    from perfsuite.analysis.tables import MIN_ID, id_prefixes
    from perfsuite.registry.queries import ids_sharing_prefixes

    wanted = list(dict.fromkeys(run_ids))
    with registry.session() as session:
        others = ids_sharing_prefixes(session, wanted, MIN_ID)
    return id_prefixes(wanted, others)


def default_device() -> str:
    """cuda where a GPU is visible to the processes started here (CUDA_VISIBLE_DEVICES honoured), else cpu."""
    from perfsuite.engine.launcher import gpus_visible

    return "cuda" if gpus_visible() > 0 else "cpu"


VERDICT_COLOURS = {
    "faster": "green",
    "slower": "red",
    "no significant change": "yellow",
    "mixed": "magenta",
    "not tested (one sample)": "dim",
    "reproduced": "green",
    "did not reproduce": "red",
}


def text(value) -> "object":
    """A rich Text cell: record text is shown as characters, never read as markup."""
    from rich.text import Text

    return Text("" if value is None else str(value))


def verdict_text(verdict: str):
    from rich.text import Text

    return Text(verdict, style=f"bold {VERDICT_COLOURS.get(verdict, '')}".strip())


def pct(ratio: float) -> str:
    return f"{(ratio - 1.0) * 100:+.2f}%"


def fmt_p(p: float | None) -> str:
    if p is None:
        return "n/a"
    return f"{p:.2g}" if p >= 1e-4 else f"{p:.1e}"


@contextlib.contextmanager
def progress_bar(total: int, what: str) -> Iterator[Callable[[int], None]]:
    """A progress bar with its ETA on stderr when it is a terminal, else (for 1,000 items or more)
    a line at each tenth; yields the function to call with the number of items just done."""
    if total < 1 or (total < 1000 and not sys.stderr.isatty()):
        yield lambda _done: None
        return
    if sys.stderr.isatty():
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

        columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn())
        with Progress(*columns, console=Console(stderr=True), transient=True) as bar:
            task = bar.add_task(what, total=total)
            yield lambda done: bar.advance(task, done)
        return
    state = {"done": 0, "shown": 0}

    def advance(done: int) -> None:
        state["done"] += done
        tenth = state["done"] * 10 // total
        if tenth > state["shown"]:
            state["shown"] = tenth
            click.echo(f"{what}: {state['done']} of {total}", err=True)

    yield advance


def price_per_hour_option(help: str) -> Callable[[Callable], Callable]:
    """``--price-per-hour USD``, one definition for every command that prices runs (``run``
    prices its records, ``submit`` a new system file): a finite number, not negative, read by
    the same rule everywhere; ``help`` says what the price is used for there."""
    return click.option(
        "--price-per-hour", "price_per_hour", type=FiniteFloat(low=0), default=None, metavar="USD", help=help
    )


def owned_file_options(flag: str) -> Callable[[Callable], Callable]:
    """``--parents`` and ``--replace`` for a command that writes one file at ``flag`` (``--out``,
    ``--plot``): one definition, so that every such command words them alike
    (:mod:`perfsuite.owned_file` decides which file may be replaced)."""

    def decorate(command: Callable) -> Callable:
        command = click.option(
            "--replace",
            is_flag=True,
            help=f"Replace the regular file at {flag} even where perfsuite cannot tell it wrote it "
            "(no record beside it).",
        )(command)
        return click.option("--parents", is_flag=True, help=f"Create the folders above {flag} where they are missing.")(
            command
        )

    return decorate
