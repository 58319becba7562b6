"""The plugin host through the real CLI: entry-point discovery, PERFSUITE_PLUGINS,
broken plugins reported without stopping the others, duplicate names refused."""
from __future__ import annotations

import json

GOOD = '''
from dataclasses import dataclass
from suite import hookimpl, Workload, Case, Work, Check, param

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
'''


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
    add_plugin("badreg", '''
from suite import hookimpl
@hookimpl
def perfsuite_register_workloads(register):
    register(object)
''')
    plugins = json.loads(cli("plugins", "--json", check=True).stdout)
    bad = next(p for p in plugins if p["name"] == "badreg")
    assert "not a subclass of suite.Workload" in bad["error"]
    assert any(r["name"] == "demo.sum" for r in json.loads(cli("list", "--json", check=True).stdout))


def test_two_workloads_with_one_name_is_an_error_naming_both_plugins(cli, add_plugin):
    add_plugin("first", GOOD)
    add_plugin("second", GOOD)
    proc = cli("list")
    assert proc.returncode == 2
    assert proc.stderr.strip() == ("Error: workload 'demo.sum' is registered by two plugins: "
                                   "'first' and 'second'")


def test_builtin_plugins_listed_and_help_does_not_import_torch(perfsuite_env):
    import subprocess
    import sys

    code = ("import sys; from suite.cli import cli\n"
            "for args in (['--help'], ['list'], ['plugins']):\n"
            "    try:\n"
            "        cli(args, prog_name='perfsuite')\n"
            "    except SystemExit as e:\n"
            "        assert e.code in (0, None), e.code\n"
            "heavy = [m for m in ('torch', 'triton', 'sqlalchemy', 'numpy') if m in sys.modules]\n"
            "assert not heavy, heavy\n")
    proc = subprocess.run([sys.executable, "-c", code], env=perfsuite_env, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert "workloads.kernels" in proc.stdout
