"""A read command imports what it reads with and nothing a run needs: ``results``, ``show``,
``compare``, ``history`` and ``export`` start without the other commands' modules, the plugins
(every workload module: ``show`` imports the one family that made the run it shows), scipy.stats
or torch. What each costs a command a user types at 100,000 records is what
``bench/cli_scale.py`` times; here the modules a real process loaded are read back."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from support.factories import gemm_metrics, make_record
from support.loaded_modules import run_reporting_modules

NEVER = ("scipy.stats", "torch", "perfsuite.engine.runner", "perfsuite.cli.run")


@pytest.fixture
def stored(perfsuite_env):
    """Two runs on each of two hosts, the first of each with a slower GEMM: ids of a, b."""
    from perfsuite.registry import open_registry

    start = datetime(2026, 3, 1, tzinfo=UTC)
    records = [
        make_record(
            host=host,
            started_at=start + timedelta(minutes=i),
            metrics=gemm_metrics(time_ms=tuple(t * (1.0 + i / 10) for t in (1.02, 1.00, 1.01, 1.05, 0.99))),
        )
        for i, host in enumerate(["alpha", "alpha", "beta", "beta"])
    ]
    with open_registry(perfsuite_env["PERFSUITE_DB"]) as registry:
        registry.store_all(records)
    return records[0]["run_id"], records[1]["run_id"]


def loaded(env: dict, tmp_path, *args: str) -> set[str]:
    return set(run_reporting_modules(env, tmp_path, *args)["modules"])


@pytest.mark.parametrize(
    "args",
    [
        ("results",),
        ("results", "--limit", "2", "--format", "markdown"),
        ("show", "{a}"),
        ("compare", "{a}", "{b}"),
        ("history", "--workload", "kernels.gemm"),
        ("history", "--workload", "kernels.gemm", "--case", "bf16", "--system", "alpha"),
        ("export", "--workload", "kernels.gemm", "--since", "2026-03-01"),
    ],
    ids=lambda args: " ".join(args),
)
def test_a_read_command_loads_neither_the_plugins_nor_scipy_stats_nor_torch(perfsuite_env, tmp_path, stored, args):
    a, b = stored
    modules = loaded(perfsuite_env, tmp_path, *(arg.format(a=a[:12], b=b[:12]) for arg in args))
    assert "perfsuite.registry" in modules  # it did read the registry
    assert not [m for m in modules if m in NEVER or m.startswith(("torch.", "scipy.stats."))]
    other_families = ("collectives", "data", "training", "inference")
    assert not [m for m in modules if m.startswith(tuple(f"perfsuite.workloads.{f}" for f in other_families))]
    commands = {m.rsplit(".", 1)[1] for m in modules if m.startswith("perfsuite.cli.") and not m[14:].startswith("_")}
    assert args[0] in commands and not commands - {args[0], "results"}  # export reads --since as results does


def test_show_finds_the_class_of_a_built_in_run_without_the_plugin_host(perfsuite_env, tmp_path, stored):
    """The run's own family alone is imported, and its class is the host's."""
    a, _ = stored
    assert "perfsuite.workloads.kernels" in loaded(perfsuite_env, tmp_path, "show", a)
    from perfsuite.plugins import get_host, recorded_workload

    record = make_record()
    assert recorded_workload(record["workload"]) is get_host().get("kernels.gemm").cls
    gone = {**record["workload"], "name": "kernels.no_longer_shipped"}
    assert recorded_workload(gone) is None


def test_a_plugin_command_is_found_and_a_plugin_cannot_take_a_built_in_name(cli, add_plugin):
    add_plugin(
        "commands",
        """
        import click
        from perfsuite import hookimpl

        @hookimpl
        def perfsuite_register_commands(cli):
            @cli.command("hello-plugin")
            def hello():
                click.echo("hello from a plugin")

            @cli.command("results")
            def results():
                click.echo("not perfsuite's results")
        """,
    )
    assert cli("hello-plugin", check=True).stdout.strip() == "hello from a plugin"
    own = cli("results", check=True)
    assert "not perfsuite's results" not in own.stdout and own.stderr == ""  # the built-in, no plugin loaded
    listing = cli("--help", check=True)
    assert "hello-plugin" in listing.stdout
    assert "Warning: plugin commands failed: ValueError: command 'results' is already perfsuite's" in listing.stderr
