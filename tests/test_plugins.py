"""The plugin host through the real CLI: entry-point discovery, PERFSUITE_PLUGINS,
broken plugins (an import error, ``sys.exit()``, a raising hook) reported without stopping
the others, a name registered twice disabled with a warning naming both plugins."""

from __future__ import annotations

import json

GOOD = """
from dataclasses import dataclass
from perfsuite import hookimpl, Workload, Case, Work, Check, param

@dataclass(frozen=True)
class P:
    n: int = param(1000, "items summed per call")

class Sum(Workload):
    name = "demo.sum"
    category = "kernels"
    description = "sum a python range"
    Params = P
    quick = {"n": 100}
    def cases(self, ctx):
        n = self.params.n
        self.out = None
        def fn():
            self.out = sum(range(n))
        return [Case("sum", fn, Work(items=n, item_unit="ints"),
                     verify=lambda: Check("sum", self.out == n * (n - 1) // 2, "closed form"))]

@hookimpl
def perfsuite_register_workloads(register):
    register(Sum)
"""


def test_entry_point_plugin_is_listed_with_distribution_and_version(cli, add_plugin):
    add_plugin("good", GOOD, version="1.2.3")
    rows = json.loads(cli("list", "--json", check=True).stdout)
    demo = next(r for r in rows if r["name"] == "demo.sum")
    assert demo["plugin"] == {"name": "good", "distribution": "perfsuite-test-good", "version": "1.2.3"}
    assert demo["available"] is True
    assert demo["params"][0]["name"] == "n" and demo["params"][0]["default"] == 1000
    plugins = json.loads(cli("plugins", "--json", check=True).stdout)
    good = next(p for p in plugins if p["name"] == "good")
    assert good["hooks"] == ["perfsuite_register_workloads"] and good["workloads"] == ["demo.sum"]
    assert good["builtin"] is False and good["error"] is None


def test_perfsuite_plugins_restricts_and_empty_hides(cli, add_plugin, perfsuite_env):
    add_plugin("good", GOOD)
    add_plugin("other", GOOD.replace("demo.sum", "demo.other"))
    perfsuite_env["PERFSUITE_PLUGINS"] = "other"
    names = {r["name"] for r in json.loads(cli("list", "--json", check=True).stdout)}
    assert "demo.other" in names and "demo.sum" not in names
    perfsuite_env["PERFSUITE_PLUGINS"] = ""
    names = {r["name"] for r in json.loads(cli("list", "--json", check=True).stdout)}
    assert not names & {"demo.sum", "demo.other"}
    del perfsuite_env["PERFSUITE_PLUGINS"]  # unset: every installed plugin loads
    names = {r["name"] for r in json.loads(cli("list", "--json", check=True).stdout)}
    assert {"demo.sum", "demo.other"} <= names


def test_plugin_failing_at_import_is_reported_and_others_work(cli, add_plugin):
    add_plugin("good", GOOD)
    add_plugin("broken", "raise ImportError('needs libfoo.so, which is missing')\n")
    listing = cli("list", check=True)
    assert "plugin broken failed to load" in listing.stdout and "libfoo.so" in listing.stdout
    assert "demo.sum" in listing.stdout
    plugins = json.loads(cli("plugins", "--json", check=True).stdout)
    broken = next(p for p in plugins if p["name"] == "broken")
    assert broken["error"] == "ImportError: needs libfoo.so, which is missing"
    ran = cli("run", "demo.sum", "--quick", "--device", "cpu", "--json")
    assert ran.returncode == 0, ran.stderr
    assert json.loads(ran.stdout)[0]["status"] == "success"


def test_plugin_whose_registration_raises_is_reported(cli, add_plugin):
    add_plugin("good", GOOD)
    add_plugin(
        "badreg",
        """
from perfsuite import hookimpl
@hookimpl
def perfsuite_register_workloads(register):
    register(object)
""",
    )
    plugins = json.loads(cli("plugins", "--json", check=True).stdout)
    bad = next(p for p in plugins if p["name"] == "badreg")
    assert "not a subclass of perfsuite.Workload" in bad["error"]
    assert any(r["name"] == "demo.sum" for r in json.loads(cli("list", "--json", check=True).stdout))


def test_a_name_registered_by_two_plugins_is_disabled_and_the_rest_works(cli, add_plugin):
    add_plugin("first", GOOD)
    add_plugin("second", GOOD)
    add_plugin("third", GOOD.replace("demo.sum", "demo.third"))
    warning = "Warning: workload 'demo.sum' disabled: registered by 2 plugins: 'first' and 'second'"
    for args in (["list"], ["plugins"], ["env", "--json", "--device", "cpu"]):
        proc = cli(*args)
        assert proc.returncode == 0, proc.stderr
        assert proc.stderr.strip() == warning, args
    assert "workload 'demo.sum' disabled: registered by 2 plugins: 'first' and 'second'" in cli("list").stdout
    names = {r["name"] for r in json.loads(cli("list", "--json").stdout)}
    assert "demo.third" in names and "demo.sum" not in names and "kernels.gemm" in names
    plugins = {p["name"]: p for p in json.loads(cli("plugins", "--json").stdout)}
    assert plugins["first"]["disabled"] == ["demo.sum"] and plugins["second"]["disabled"] == ["demo.sum"]
    assert plugins["first"]["error"] is None
    ran = cli("run", "demo.third", "--quick", "--device", "cpu", "--json")
    assert ran.returncode == 0, ran.stderr
    assert json.loads(ran.stdout)[0]["status"] == "success"
    refused = cli("run", "demo.sum", "--quick", "--device", "cpu")
    assert refused.returncode == 2 and "Traceback" not in refused.stderr
    assert refused.stderr.strip().splitlines()[-1] == (
        "Error: workload 'demo.sum' is disabled: registered by 2 plugins: 'first' and 'second'"
    )


def test_a_plugin_calling_sys_exit_at_import_is_reported_and_others_work(cli, add_plugin):
    add_plugin("good", GOOD)
    add_plugin("quitter", "import sys\nsys.exit(3)\n")
    listing = cli("list")
    assert listing.returncode == 0, listing.stderr
    assert "demo.sum" in listing.stdout
    assert listing.stderr.strip() == "Warning: plugin quitter failed: SystemExit(3)"
    plugins = {p["name"]: p for p in json.loads(cli("plugins", "--json", check=True).stdout)}
    assert plugins["quitter"]["error"] == "SystemExit(3)" and plugins["good"]["error"] is None


RAISING_COMMAND_HOOK = """
import sys
from perfsuite import hookimpl

@hookimpl
def perfsuite_register_commands(cli):
    raise RuntimeError("no [bold]commands[/bold] today \\x1b[31m")

@hookimpl
def perfsuite_collect_environment(env):
    sys.exit()
"""


def test_a_plugin_whose_command_hook_raises_leaves_help_and_list_working(cli, add_plugin):
    add_plugin("good", GOOD)
    add_plugin("cmdbug", RAISING_COMMAND_HOOK)
    warning = (
        "Warning: plugin cmdbug failed: RuntimeError: no [bold]commands[/bold] today \\x1b[31m "
        "(in perfsuite_register_commands)"
    )
    for args in (["--help"], ["list"]):
        proc = cli(*args)
        assert proc.returncode == 0, proc.stderr
        assert proc.stderr.splitlines() == [warning], args  # reported once, control characters shown
    assert "demo.sum" in cli("list", check=True).stdout
    plugins = {p["name"]: p for p in json.loads(cli("plugins", "--json", check=True).stdout)}
    assert plugins["cmdbug"]["error"] == (
        "RuntimeError: no [bold]commands[/bold] today \x1b[31m (in perfsuite_register_commands)"
    )
    table = cli("plugins", check=True).stdout
    assert "[bold]commands[/bold]" in table and "\x1b" not in table  # shown as text, not obeyed
    env = json.loads(cli("env", "--json", "--device", "cpu", check=True).stdout)
    assert env["plugin_errors"] == {"cmdbug": "SystemExit(None)"}


def test_builtin_plugins_listed_and_help_does_not_import_torch(perfsuite_env):
    import subprocess
    import sys

    code = (
        "import sys; from perfsuite.cli import cli\n"
        "for args in (['--help'], ['list'], ['plugins']):\n"
        "    try:\n"
        "        cli(args, prog_name='perfsuite')\n"
        "    except SystemExit as e:\n"
        "        assert e.code in (0, None), e.code\n"
        "heavy = [m for m in ('torch', 'triton', 'sqlalchemy', 'numpy') if m in sys.modules]\n"
        "assert not heavy, heavy\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], env=perfsuite_env, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert "workloads.kernels" in proc.stdout


def test_a_plugin_cannot_disable_a_builtin_by_taking_its_name(cli, add_plugin):
    add_plugin("intruder", GOOD.replace('"demo.sum"', '"kernels.memory"'))
    listing = cli("list", "--json")
    assert listing.returncode == 0, listing.stderr
    assert listing.stderr.strip() == (
        "Warning: workload 'kernels.memory' of plugin 'intruder' disabled: the name belongs to the built-in "
        "plugin 'perfsuite.workloads.kernels', which keeps it"
    )
    memory = next(r for r in json.loads(listing.stdout) if r["name"] == "kernels.memory")
    assert memory["plugin"]["name"] == "perfsuite.workloads.kernels" and memory["available"] is True
    plugins = {p["name"]: p for p in json.loads(cli("plugins", "--json", check=True).stdout)}
    assert plugins["intruder"]["disabled"] == ["kernels.memory"] and plugins["intruder"]["workloads"] == []
    assert plugins["perfsuite.workloads.kernels"]["disabled"] == []
