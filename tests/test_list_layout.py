"""``perfsuite list`` as the terminal narrows, through the real CLI: a reader picks a workload
by its name, whether it runs here and what it measures, so the description stays on screen at
100, 80 and 60 columns, and the category, version and plugin columns are what give way."""

from __future__ import annotations

import json

import pytest
from rich.cells import cell_len

PLUGIN = """
from dataclasses import dataclass
from perfsuite import hookimpl, Workload, Case, Work, Check, param

@dataclass(frozen=True)
class P:
    n: int = param(1000, "items summed per call")

class Sum(Workload):
    name = "demo.sum"
    category = "kernels"
    description = "sum a python range of integers and compare it with the closed form of that sum"
    version = 42
    Params = P
    def cases(self, ctx):
        n = self.params.n
        return [Case("sum", lambda: sum(range(n)), Work(items=n, item_unit="ints"),
                     verify=lambda: Check("sum", True, "not measured in this test"))]

@hookimpl
def perfsuite_register_workloads(register):
    register(Sum)
"""


def blocks(out: str, names: list[str]) -> dict[str, str]:
    """Each workload's text: the lines from the one that opens with its name to the next
    workload's, whatever the layout (a table row that wraps, or a block)."""
    lines = out.splitlines()
    starts = sorted((i, n) for n in names for i, line in enumerate(lines) if line.split()[:1] == [n])
    assert [n for _, n in starts] == sorted(names), f"each workload once, at a line's start:\n{out}"
    ends = [i for i, _ in starts[1:]] + [len(lines)]
    return {n: "\n".join(lines[i:end]) for (i, n), end in zip(starts, ends, strict=True)}


@pytest.mark.parametrize("width", [100, 80, 60])
def test_list_keeps_each_description_and_gives_up_version_and_plugin_first(cli, add_plugin, perfsuite_env, width):
    add_plugin("narrow", PLUGIN, version="9.8.7")
    rows = json.loads(cli("list", "--json", "--device", "cpu", check=True).stdout)
    perfsuite_env["COLUMNS"] = str(width)
    out = cli("list", "--device", "cpu", check=True).stdout

    too_wide = [line for line in out.splitlines() if cell_len(line) > width]
    assert not too_wide, f"lines wider than {width} columns: {too_wide}"
    text = blocks(out, [r["name"] for r in rows])
    for r in rows:  # what it measures: the description's words, never cut or folded at these widths
        words = text[r["name"]].split()
        short = [w for w in r["description"].split() if len(w) < 40]  # a longer word may fold by design
        assert all(w in words for w in short), f"{r['name']}: description missing at {width}:\n{text[r['name']]}"
        available = "yes" if r["available"] else "no:"
        assert available in words, f"{r['name']}: availability missing at {width}"
    if width == 100:  # a table still: the plugin column left out (and named) before the description
        header = next(line for line in out.splitlines() if line.startswith("name "))
        assert header.split()[-2:] == ["available", "description"], header
        assert "9.8.7" not in out and "left out for the width" in out
    else:  # a block per workload, the description indented under its name
        assert "9.8.7" not in out and "perfsuite-test-narrow" not in out
        assert "left out for the width" in out


def test_list_at_a_wide_terminal_shows_version_and_plugin_beside_the_description(cli, add_plugin, perfsuite_env):
    add_plugin("narrow", PLUGIN, version="9.8.7")
    perfsuite_env["COLUMNS"] = "200"
    out = cli("list", "--device", "cpu", check=True).stdout
    row = next(line for line in out.splitlines() if line.startswith("demo.sum "))
    assert "42" in row.split() and "perfsuite-test-narrow 9.8.7" in row and "sum a python range" in row
    assert "left out for the width" not in out
