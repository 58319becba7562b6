"""Tables people can read, at 100 columns: every line fits, no name, case label or run id is
cut or folded, run ids are the shortest prefix that names one run, prose wraps between words,
columns without a value are left out (a CPU run has no GPU columns), figures are in scaled units.
The commands run as real processes with COLUMNS=100 on a real registry; the layout and unit
rules are also checked as plain functions."""

from __future__ import annotations

import json
import re

import pytest
from factories import make_metric, make_record
from rich.console import Console

from perfsuite.analysis.layout import Column, FittedTable, markdown, widths
from perfsuite.analysis.tables import id_prefixes
from perfsuite.analysis.units import interval, parts, quantity
from perfsuite.measure.nvml_sampler import Reading, summarize
from perfsuite.registry import open_registry

WIDTH = 100

READABILITY = """
from dataclasses import dataclass
from perfsuite import hookimpl, Workload, Case, Work, Check, param

@dataclass(frozen=True)
class P:
    n: int = param(2000, "items per call")
    fail: bool = param(False, "raise in every call, with a long message")

LABELS = ("pageable.4stream.256MiB", "pinned.1stream.64KiB")

class Readable(Workload):
    name = "readability.a_rather_long_workload_name"
    category = "data"
    Params = P
    def cases(self, ctx):
        def make(label):
            def fn():
                if self.params.fail:
                    raise RuntimeError(
                        "[rank 0] the step failed on purpose after reading /var/tmp/perfsuite/inputs/shard-0007.bin "
                        "while the loader waited for the next batch of images from the decoder"
                    )
                self.out = sum(range(self.params.n))
            verify = lambda: Check(label, self.out == self.params.n * (self.params.n - 1) // 2, "closed form")
            return Case(label, fn, Work(items=self.params.n, item_unit="images"), verify=verify)
        return [make(label) for label in LABELS]

@hookimpl
def perfsuite_register_workloads(register):
    register(Readable)
"""


def lines(text: str) -> list[str]:
    return text.splitlines()


def tokens(text: str) -> set[str]:
    return {t.strip(",;") for line in lines(text) for t in line.split()}


def assert_fits(text: str) -> None:
    too_wide = [line for line in lines(text) if len(line) > WIDTH]
    assert not too_wide, f"lines wider than {WIDTH}: {too_wide[:3]}"


def assert_whole(text: str, *words: str) -> None:
    """Each word appears whole as a token of some line: not cut, not folded mid-word."""
    found = tokens(text)
    missing = [w for w in words if w not in found]
    assert not missing, f"cut or folded: {missing}\n{text}"


def shown_ids(text: str) -> list[str]:
    return [t for t in tokens(text) if re.fullmatch(r"[0-9a-f]{8,32}", t)]


@pytest.fixture
def registry_with_runs(cli, add_plugin, perfsuite_env):
    """A CPU run of two cases and a failed run through the real CLI at COLUMNS=100, plus stored
    GPU-shaped records: two whose run ids share their first ten digits, one power-capped."""
    perfsuite_env["COLUMNS"] = str(WIDTH)
    add_plugin("readability", READABILITY)
    name = "readability.a_rather_long_workload_name"
    common = "--device", "cpu", "--iterations", "3", "--warmup", "0"
    run = cli("run", name, *common)
    assert run.returncode == 0, run.stderr
    failed = cli("run", name, "-p", "fail=true", *common)
    assert failed.returncode == 1
    capped = summarize([Reading(0.0, 1980, 420.0, ()), Reading(0.5, 1455, 700.0, ("software power cap",))])
    stored = [
        make_record(run_id="abcdef0123" + "0" * 22, device="cuda"),
        make_record(run_id="abcdef0123" + "f" * 22, device="cuda", details={"throttle": {"bf16": capped}}),
        make_record(
            workload_name="kernels.tiny",
            metrics=[make_metric("bf16", "tflops", "TFLOP/s", [0.000779, 0.00078, 0.000781], higher_is_better=True)],
        ),
    ]
    with open_registry(perfsuite_env["PERFSUITE_DB"]) as reg:
        for record in stored:
            reg.store(record)
    return {"run": run.stdout, "failed": failed.stdout, "name": name}


def test_every_table_fits_100_columns_without_cutting_names_ids_or_words(cli, registry_with_runs, perfsuite_env):
    name = registry_with_runs["name"]
    summary, failed = registry_with_runs["run"], registry_with_runs["failed"]
    for text in (summary, failed):
        assert_fits(text)
        assert_whole(text, name)
    assert_whole(summary, "pageable.4stream.256MiB", "pinned.1stream.64KiB", "images/s", "passed")
    for gpu_only in ("% of ceiling", "% of spec", "throttled"):  # a CPU run has no GPU columns
        assert gpu_only not in summary
    # the error wraps between its words; its longest word (a path) is whole
    assert_whole(failed, "failed", "/var/tmp/perfsuite/inputs/shard-0007.bin", "decoder")

    results = cli("results", check=True).stdout
    assert_fits(results)
    assert_whole(results, name, "kernels.gemm", "kernels.tiny", "MFLOP/s", "780")
    if "power-capped" not in tokens(results):  # whole, or its column said to be left out for the width
        assert re.search(r"left out for the width \(100 columns\): .*throttled", results)
    with open_registry(perfsuite_env["PERFSUITE_DB"]) as reg:
        every_id = [r["run_id"] for r in reg.results(limit=None)]
    ids = shown_ids(results)
    assert len(ids) == len(every_id) == 5
    for prefix in ids:  # each shown id names exactly one run, as `perfsuite show` needs
        assert len(prefix) >= 8 and sum(i.startswith(prefix) for i in every_id) == 1
    assert {"abcdef01230", "abcdef0123f"} <= set(ids)  # longer where two ids share ten digits

    shown = cli("show", "abcdef0123f", check=True).stdout
    assert_fits(shown)
    assert_whole(shown, "abcdef0123" + "f" * 22, "TFLOP/s")

    for args in (("list", "--device", "cpu"), ("describe", name), ("plugins",), ("plans",)):
        text = cli(*args, check=True).stdout
        assert_fits(text)
        assert_whole(text, name if args[0] != "plans" else "scaleout-collectives-x8")
    described = cli("describe", "kernels.gemm", "--device", "cpu", check=True).stdout
    assert_whole(described, "dtypes", "bf16", "fp32", "tf32", "fp8")
    assert "perfsuite run kernels.gemm --quick" in described

    # the same rows as a Markdown table, for a CI job's step summary
    md = cli("results", "--format", "markdown", check=True).stdout
    table = [line for line in lines(md) if line.startswith("|")]
    assert table[0].startswith("| run | started (UTC) | workload |")
    assert set(table[1]) <= set("|-:")
    assert len(table) == 2 + 5
    assert any("power-capped" in line for line in table)
    assert json.loads(cli("results", "--format", "json", check=True).stdout)[0]["run_id"]


# -- the rules, as functions ---------------------------------------------------------------------
@pytest.mark.parametrize(
    ("value", "unit", "shown"),
    [
        (0.000779, "TFLOP/s", "779 MFLOP/s"),
        (1467.0, "TFLOP/s", "1,467 TFLOP/s"),  # the field's own unit where it reads well
        (41840.0, "us", "41.8 ms"),
        (0.0166, "ms", "16.6 µs"),
        (23.3973, "ms", "23.4 ms"),
        (90_000.0, "ms", "90.0 s"),  # never kiloseconds
        (16280.0, "images/s", "16.3k images/s"),
        (0.1413, "GB/s", "141 MB/s"),
        (0.741, "fraction", "74.1%"),
        (659.0, "W", "659 W"),
        (0.303, "GB/J", "0.303 GB/J"),  # a unit that does not scale stays as it is
    ],
)
def test_figures_are_scaled_to_read_well(value, unit, shown):
    assert quantity(value, unit) == shown


def test_a_ci_is_in_the_unit_of_its_value():
    assert interval(0.00077, 0.00079, 0.000779, "TFLOP/s") == "770–790"
    assert parts(16280.0, "images/s") == ("16.3k", "images/s")


def test_run_ids_are_the_shortest_prefix_that_names_one_run():
    a, b, c = "abcdef01" + "0" * 24, "abcdef01" + "1" * 24, "12345678" + "9" * 24
    assert id_prefixes([a, b, c]) == {a: "abcdef010", b: "abcdef011", c: "12345678"}
    assert id_prefixes([c], others=["1234567" + "8" * 25]) == {c: "123456789"}  # a stored id that is not shown
    assert id_prefixes([a], others=[a]) == {a: "abcdef01"}


def test_columns_without_values_are_left_out_and_the_widest_droppable_first():
    cols = [Column("name"), Column("empty"), Column("note", wrap=True, drop=1), Column("extra", drop=2)]
    rows = [["kernels.gemm", "", "a few words here", "x" * 40]]
    shown, sizes = widths(cols, rows, 60) or ([], [])
    assert [cols[i].header for i in shown] == ["name", "note"]  # "empty" has no value; "extra" did not fit
    assert sizes[0] == len("kernels.gemm")


def test_rows_are_stacked_where_the_columns_that_must_show_cannot_fit():
    t = FittedTable([Column("workload"), Column("run")], [["collectives.reduce_scatter", "0123456789abcdef"]])
    console = Console(width=40, record=True)
    console.print(t)
    text = console.export_text()
    assert "workload  collectives.reduce_scatter" in text and "run       0123456789abcdef" in text


def test_markdown_escapes_pipes_and_keeps_empty_columns_out():
    md = markdown([Column("a"), Column("b"), Column("n", justify="right")], [["x|y", "", "3"]])
    assert md.splitlines() == ["| a | n |", "|---|---:|", "| x\\|y | 3 |"]
