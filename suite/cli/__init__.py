"""The ``perfsuite`` command line: the group and its global options here, one module per
command beside it (``perfsuite.cli.run`` ...), helpers they share in ``_common``. A command's
module is imported when that command runs (or the commands are listed), and heavy modules
(torch, the registry's SQLAlchemy) inside the commands that need them, so a command starts
with its own imports only and ``--help`` and ``list`` start fast."""

from __future__ import annotations

import importlib
import sys

import click

from perfsuite import __version__
from perfsuite.cli._common import fail, warn_plugin_problems

# Each built-in command: its name -> (its module in perfsuite.cli, the click command there),
# imported when the command is asked for (all of them at once cost each command 0.1 s).
BUILTIN_COMMANDS = {
    "list": ("list", "list_cmd"),
    "describe": ("describe", "describe_cmd"),
    "plugins": ("plugins", "plugins_cmd"),
    "env": ("env", "env_cmd"),
    "run": ("run", "run_cmd"),
    "results": ("results", "results_cmd"),
    "show": ("show", "show_cmd"),
    "export": ("export", "export_cmd"),
    "import": ("import_", "import_cmd"),
    "compare": ("compare", "compare_cmd"),
    "history": ("history", "history_cmd"),
    "reproduce": ("reproduce", "reproduce_cmd"),
    "submit": ("submit", "submit_cmd"),
    "check": ("check", "check_cmd"),
    "leaderboard": ("leaderboard", "leaderboard_cmd"),
    "doctor": ("doctor", "doctor_cmd"),
    "roofline": ("roofline", "roofline_command"),
    "crosscheck": ("crosscheck", "crosscheck_cmd"),
    "plans": ("plans", "plans_cmd"),
    "slurm": ("slurm", "slurm_group"),
}
# The commands that take --slurm and the job's options (perfsuite.cli.slurm adds them).
SLURM_SUBMITTED = ("run", "crosscheck")

DB_HELP = "Registry: any SQLAlchemy URL (default: $PERFSUITE_DB, else a SQLite file in the user's data dir)."


def _set_db(ctx: click.Context, _param: click.Parameter, value: str | None) -> None:
    """``--db`` after the command: the same setting as before it (the later one wins)."""
    if value is not None:
        ctx.ensure_object(dict)["db_url"] = value


def with_global_options(command: click.Command) -> click.Command:
    """Give a command (each command of a group) the group's ``--db``, so that it works after
    the command's name too: ``perfsuite results --db URL`` as ``perfsuite --db URL results``."""
    if isinstance(command, click.Group):
        for sub in command.commands.values():
            with_global_options(sub)
        return command
    if not any("--db" in getattr(p, "opts", ()) for p in command.params):
        option = click.Option(["--db"], metavar="URL", expose_value=False, callback=_set_db, help=DB_HELP)
        command.params.append(option)
    return command


class PerfsuiteGroup(click.Group):
    """Loads a built-in command's module when the command is asked for, and adds the commands
    plugins register when a command name is not one of perfsuite's own (or the commands are
    listed): a built-in command starts without loading any plugin, and a plugin cannot take a
    built-in's name (its hook fails, as one that raises). A plugin whose hook raises is reported
    (``plugins``, one warning on stderr) and cannot stop the others.
    A :class:`registry.RegistryError` or a database error escaping any command is one line
    and exit 1; a usage error (an option's value out of range, a missing argument) is one
    line and exit 2. Every command takes the group's ``--db`` after its name too."""

    def add_command(self, cmd: click.Command, name: str | None = None) -> None:
        taken = name or cmd.name
        if taken in BUILTIN_COMMANDS or taken in self.commands:  # a plugin's: the built-ins come in by _builtin
            raise ValueError(f"command {taken!r} is already perfsuite's or another plugin's")
        super().add_command(with_global_options(cmd), name)

    def _builtin(self, name: str) -> click.Command | None:
        """The built-in command ``name``, its module imported on first use; None if there is none."""
        if name not in BUILTIN_COMMANDS:
            return None
        if name not in self.commands:
            module, attribute = BUILTIN_COMMANDS[name]
            command = getattr(importlib.import_module(f"perfsuite.cli.{module}"), attribute)
            if name in SLURM_SUBMITTED:
                from perfsuite.cli import slurm

                slurm.attach(command)
            super().add_command(with_global_options(command), name)
        return self.commands[name]

    def plugin_commands(self) -> None:
        """Load the plugins and add the commands they register (once): for a name that is not a
        built-in's, the list of commands, and every command that loads the plugins anyway
        (:func:`perfsuite.cli._common.load_host`), so that a hook that raises is reported there."""
        if getattr(self, "_loaded", False):
            return
        self._loaded = True
        from perfsuite.plugins import get_host

        get_host().call_each("perfsuite_register_commands", cli=self)
        warn_plugin_problems()

    def list_commands(self, ctx):
        for name in BUILTIN_COMMANDS:
            self._builtin(name)
        self.plugin_commands()
        return super().list_commands(ctx)

    def get_command(self, ctx, name):
        # A built-in command runs without loading the plugins (every workload module, 0.2 s of a
        # read command's start); a name the host does not have may be a plugin's.
        found = self._builtin(name)
        if found is not None:
            return found
        self.plugin_commands()
        return super().get_command(ctx, name)

    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except click.UsageError as exc:
            fail(exc.format_message(), exc.exit_code)
        except Exception as exc:
            registry = sys.modules.get("perfsuite.registry")  # only loaded by commands that open it
            if registry is not None and isinstance(exc, registry.RegistryError):
                fail(str(exc), 1)
            if registry is not None and type(exc).__module__.startswith("sqlalchemy."):
                fail(f"registry: {registry.errors.first_line(exc)}", 1)  # a query through Registry.session()
            raise


@click.group(cls=PerfsuiteGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="perfsuite")
@click.option("--db", "db_url", envvar="PERFSUITE_DB", metavar="URL", help=DB_HELP + " Also after the command.")
@click.pass_context
def cli(ctx: click.Context, db_url: str | None) -> None:
    """perfsuite: measure what GPUs, pipelines, collectives, training and inference deliver,
    and keep every result in a registry."""
    ctx.ensure_object(dict)
    ctx.obj["db_url"] = db_url


def main() -> None:
    cli(prog_name="perfsuite")
