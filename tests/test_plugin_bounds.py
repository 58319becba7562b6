"""Plugin loading has a bound: a plugin whose import or registration hook hangs is disabled with
one warning naming it once ``PERFSUITE_PLUGIN_TIMEOUT_S`` has passed, and every command answers;
a plugin taking a built-in's workload name is refused with one warning naming both, and
``perfsuite plugins`` shows it. Real plugin distributions on PYTHONPATH (``add_plugin``), the real
CLI in its own process.

Without the bound these commands never answer: each call carries a subprocess timeout of a
minute (the two-second bound plus starting Python on a busy two-core machine)."""

from __future__ import annotations

import json
import time

import pytest
from test_plugins import GOOD

BOUND_S = 2
ANSWER_S = 60  # BOUND_S plus the interpreter's start on a busy machine

HANGS = {
    "import": "import time\ntime.sleep(3600)\n",
    "perfsuite_register_workloads": """
import time
from perfsuite import hookimpl
@hookimpl
def perfsuite_register_workloads(register):
    time.sleep(3600)
""",
    "perfsuite_register_commands": """
import time
from perfsuite import hookimpl
@hookimpl
def perfsuite_register_commands(cli):
    time.sleep(3600)
""",
}


@pytest.mark.parametrize("where", sorted(HANGS))
def test_a_plugin_that_hangs_is_disabled_with_one_warning_and_every_command_answers(
    cli, add_plugin, perfsuite_env, where
):
    add_plugin("good", GOOD)
    add_plugin("sleepy", HANGS[where])
    perfsuite_env["PERFSUITE_PLUGIN_TIMEOUT_S"] = str(BOUND_S)
    t0 = time.monotonic()
    listing = cli("list", timeout=ANSWER_S)
    print(f"perfsuite list with a plugin hanging in {where}: {time.monotonic() - t0:.1f} s")
    assert listing.returncode == 0, listing.stderr
    (warning,) = listing.stderr.strip().splitlines()
    assert warning.startswith("Warning: plugin sleepy failed: ")
    assert f"did not return within {BOUND_S} s" in warning and "disabled" in warning
    assert "demo.sum" in listing.stdout and "kernels.gemm" in listing.stdout
    results = cli("results", timeout=ANSWER_S)
    assert results.returncode == 0, results.stderr
    assert results.stderr.strip() == ""  # it reads the registry alone: no plugin is loaded, none is waited for
    plugins = {p["name"]: p for p in json.loads(cli("plugins", "--json", timeout=ANSWER_S, check=True).stdout)}
    assert plugins["sleepy"]["workloads"] == [] and "disabled" in plugins["sleepy"]["error"]
    assert plugins["good"]["error"] is None and plugins["good"]["workloads"] == ["demo.sum"]


def test_a_timeout_that_is_not_a_number_is_warned_about_and_the_default_kept(cli, add_plugin, perfsuite_env):
    add_plugin("good", GOOD)
    perfsuite_env["PERFSUITE_PLUGIN_TIMEOUT_S"] = "soon"
    listing = cli("list", "--json", timeout=ANSWER_S)
    assert listing.returncode == 0, listing.stderr
    assert listing.stderr.strip() == (
        "Warning: PERFSUITE_PLUGIN_TIMEOUT_S='soon' is not a number of seconds above 0: plugins get the default 10 s"
    )
    assert any(r["name"] == "demo.sum" for r in json.loads(listing.stdout))


def test_a_plugin_taking_a_builtins_name_is_shown_by_perfsuite_plugins_with_one_warning(cli, add_plugin):
    add_plugin("intruder", GOOD.replace('"demo.sum"', '"kernels.memory"'))
    warning = (
        "Warning: workload 'kernels.memory' of plugin 'intruder' disabled: the name belongs to the built-in "
        "plugin 'perfsuite.workloads.kernels', which keeps it"
    )
    table = cli("plugins", timeout=ANSWER_S)
    assert table.returncode == 0, table.stderr
    assert table.stderr.strip() == warning
    lines = table.stdout.splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith("intruder "))
    status = " ".join(" ".join(lines[at : at + 3]).split())  # the status cell wraps onto the next lines
    assert "disabled 'kernels.memory': the name belongs to the built-in plugin" in status, table.stdout
    listing = cli("list", timeout=ANSWER_S, check=True)
    memory = next(line for line in listing.stdout.splitlines() if "kernels.memory" in line)
    assert "perfsuite" in memory and "intruder" not in memory
    assert warning.removeprefix("Warning: ") in listing.stdout
