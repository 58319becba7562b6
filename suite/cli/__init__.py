"""The ``perfsuite`` command line: the group and its global options here, one module per
command beside it (``perfsuite.cli.run`` ...), helpers they share in ``_common``. Heavy modules
(torch, the registry's SQLAlchemy) are imported inside the commands that need them, so
``--help`` and ``list`` start fast."""

from __future__ import annotations

import sys

import click

from perfsuite import __version__
from perfsuite.cli import (
    check,
    compare,
    crosscheck,
    describe,
    doctor,
    env,
    export,
    history,
    import_,
    leaderboard,
    plans,
    plugins,
    reproduce,
    results,
    roofline,
    run,
    show,
    slurm,
    submit,
)
from perfsuite.cli import list as list_
from perfsuite.cli._common import fail, warn_plugin_problems

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
    """Adds the commands plugins register before any command runs; a plugin whose hook
    raises is reported (``plugins``, one warning on stderr) and cannot stop the others.
    A :class:`registry.RegistryError` or a database error escaping any command is one line
    and exit 1; a usage error (an option's value out of range, a missing argument) is one
    line and exit 2. Every command takes the group's ``--db`` after its name too."""

    def add_command(self, cmd: click.Command, name: str | None = None) -> None:
        super().add_command(with_global_options(cmd), name)

    def _plugin_commands(self) -> None:
        if getattr(self, "_loaded", False):
            return
        self._loaded = True
        from perfsuite.plugins import get_host

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


for _command in (
    list_.list_cmd,
    describe.describe_cmd,
    plugins.plugins_cmd,
    env.env_cmd,
    run.run_cmd,
    results.results_cmd,
    show.show_cmd,
    export.export_cmd,
    import_.import_cmd,
    compare.compare_cmd,
    history.history_cmd,
    reproduce.reproduce_cmd,
    submit.submit_cmd,
    check.check_cmd,
    leaderboard.leaderboard_cmd,
    doctor.doctor_cmd,
    roofline.roofline_command,
    crosscheck.crosscheck_cmd,
    plans.plans_cmd,
):
    cli.add_command(_command)
slurm.attach(run.run_cmd, crosscheck.crosscheck_cmd)  # --slurm and the job's options on both
cli.add_command(slurm.slurm_group)


def main() -> None:
    cli(prog_name="perfsuite")
