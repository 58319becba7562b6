"""``perfsuite env``: the environment fingerprint every record stores."""

from __future__ import annotations

import click

from perfsuite.cli._common import console, default_device, emit_json, load_host


@click.command("env")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@click.option("--device", type=click.Choice(["cpu", "cuda"]), default=None)
def env_cmd(as_json: bool, device: str | None) -> None:
    """Print the environment fingerprint stored in every record."""
    from perfsuite.engine.environment import collect

    load_host()
    env = collect(device or default_device(), deep=True)
    if as_json:
        emit_json(env)
        return
    from rich.pretty import Pretty

    console().print(Pretty(env, expand_all=True))
