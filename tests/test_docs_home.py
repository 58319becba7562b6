"""The home page's first example does what the page says: its install line names an extra the
package declares, and its commands, read from ``docs/index.md`` itself, run in a real process
against a registry this test made, the run lands in ``results`` and the printed row has the
columns the page shows."""

from __future__ import annotations

import re
import shlex
import tomllib

from tests.conftest import REPO, run_cli

HOME = REPO / "docs" / "index.md"
# An indented code block: four spaces, then the line.
INDENTED = re.compile(r"^    (?P<line>\S.*)$", re.MULTILINE)


def home_lines(prefix: str) -> list[list[str]]:
    """The home page's indented command lines that start with ``prefix``, split as a shell
    would (comments dropped)."""
    head = HOME.read_text().split("\n## ", 1)[0]  # the example comes before the first section
    return [shlex.split(m["line"], comments=True) for m in INDENTED.finditer(head) if m["line"].startswith(prefix)]


def test_the_install_line_names_a_declared_extra():
    (install,) = home_lines("pip install")
    extras = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    target = install[-1]
    assert target.startswith(".[") and target.endswith("]"), install
    assert set(target[2:-1].split(",")) <= set(extras), f"{install}: extras not in pyproject.toml"


def test_the_three_line_example_runs_and_stores_a_run(perfsuite_env):
    commands = home_lines("perfsuite ")
    assert [c[1] for c in commands] == ["list", "run", "results"], commands
    perfsuite_env["COLUMNS"] = "100"
    outputs = [run_cli(perfsuite_env, *command[1:], "--device", "cpu", check=True).stdout for command in commands[:2]]
    outputs.append(run_cli(perfsuite_env, *commands[2][1:], check=True).stdout)
    listing, run, results = outputs
    assert re.search(r"^kernels\.gemm\s.*\byes\b", listing, re.MULTILINE), listing
    header = next(line for line in run.splitlines() if line.startswith("workload "))
    shown = ["workload", "case", "metric", "value", "unit", "95%", "CI", "time/call", "status", "run"]
    assert [h for h in header.split() if h in shown] == shown, header
    row = next(line for line in run.splitlines() if line.startswith("kernels.gemm "))
    run_id = row.split()[-1]
    assert "passed" in row.split() and re.fullmatch(r"[0-9a-f]{8}", run_id), row
    assert run_id in results, results
