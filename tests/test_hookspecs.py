"""Every hook is specified with a docstring, documented for plugin authors, and exercised
by a test; a hook that raises in a plugin is recorded, not fatal."""

from __future__ import annotations

import inspect
import json
from pathlib import Path

from perfsuite import hookspecs

REPO = Path(__file__).resolve().parent.parent
HOOKS = sorted(name for name, fn in vars(hookspecs).items() if name.startswith("perfsuite_") and inspect.isfunction(fn))


def test_every_hook_has_a_docstring_a_guide_entry_and_a_test():
    assert HOOKS == [
        "perfsuite_collect_environment",
        "perfsuite_record_stored",
        "perfsuite_register_commands",
        "perfsuite_register_workloads",
    ]
    guide = (REPO / "docs" / "plugin-tutorial.md").read_text()  # the plugin author's guide
    tests = {p.name: p.read_text() for p in (REPO / "tests").glob("test_*.py") if p.name != Path(__file__).name}
    for name in HOOKS:
        assert (getattr(hookspecs, name).__doc__ or "").strip(), f"{name} has no docstring"
        assert name in guide, f"{name} is not in the plugin author guide"
        assert any(name in text for text in tests.values()), f"no test names {name}"


ENV_HOOKS = '''
from perfsuite import hookimpl

@hookimpl
def perfsuite_collect_environment(env):
    env["packages"]["demo-lib"] = "9.9"

@hookimpl
def perfsuite_register_commands(cli):
    import click

    @cli.command("demo-hello")
    def hello():
        """Say hello from a plugin."""
        click.echo("hello from demo")
'''

BROKEN_ENV = """
from perfsuite import hookimpl

@hookimpl
def perfsuite_collect_environment(env):
    raise RuntimeError("fingerprint bug")
"""


def test_collect_environment_and_register_commands_hooks(cli, add_plugin):
    add_plugin("envdemo", ENV_HOOKS)
    env = json.loads(cli("env", "--json", "--device", "cpu", check=True).stdout)
    assert env["packages"]["demo-lib"] == "9.9"
    assert cli("demo-hello", check=True).stdout.strip() == "hello from demo"
    assert "demo-hello" in cli("--help", check=True).stdout


def test_a_raising_environment_hook_is_recorded_not_fatal(cli, add_plugin):
    add_plugin("brokenenv", BROKEN_ENV)
    env = json.loads(cli("env", "--json", "--device", "cpu", check=True).stdout)
    assert env["plugin_errors"] == {"brokenenv": "RuntimeError: fingerprint bug"}
