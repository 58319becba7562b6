"""Commands that answer questions about stored runs and publish them, one module each:
compare, history, reproduce (re-run and compare), submit / check (submissions trees),
leaderboard (a static site). :func:`attach` adds them to the ``perfsuite`` group."""
from __future__ import annotations

import click


def attach(cli: click.Group) -> None:
    from suite.commands import compare, history, leaderboard, reproduce, submissions

    for command in (compare.compare_cmd, history.history_cmd, reproduce.reproduce_cmd, submissions.submit_cmd,
                    submissions.check_cmd, leaderboard.leaderboard_cmd):
        cli.add_command(command)
