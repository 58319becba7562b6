"""``perfsuite results`` and ``perfsuite compare`` on filed submissions at the widths people
have (a laptop's half screen, a tmux pane): a table, not the one-block-per-record list, with
every line inside the width, every headline's metric named (broken after an underscore where
the column is narrow, never dropped or cut), and a line saying which columns were left out.
The commands run as real processes on a registry that ``perfsuite import`` filled from the
repository's own record files; the layout rules are also checked as plain functions."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from rich.console import Console

from perfsuite.analysis.layout import Column, FittedTable, broken, widths
from tests.conftest import cli_env, run_cli

RESULTS = Path(__file__).resolve().parent.parent / "submissions/perfsuite/results"
FILED = {
    "serving_a": "h100-x1/inference.serving/128e4e2db5ee44239292ceec16f8bebd",
    "serving_b": "h200-x1/inference.serving/96535be1cf744eb986e0453833c96c07",
    "all_reduce_a": "h200-x2/collectives.all_reduce/efec8c5d717e47c8832d47832b387947",
    "all_reduce_b": "h200-x2/collectives.all_reduce/2e8fe92c77b344638a84b528e0b340c8",
    "attention": "h200-x1/kernels.attention/869c3d6c",  # power-capped, with its share of the ceiling
    "gemm": "h100-x1/kernels.gemm/c3a458ed",  # above its ceiling: names the ceilings' run
    "ceilings": "h100-x1/kernels.ceilings/d9f695e73a3f4d1fafbaf4e6d095a094",
    "host_to_device": "h200-x1/data.host_to_device/dc06fe8ccf724103a8035270244cf718",  # long case labels
    "host_to_device_b": "h200-x1/data.host_to_device/d31ebe81c16b4fb790a0c770bf0a617e",
    "generate": "h200-x1/inference.generate/8157a68a963b40c08cd636695052c51b",  # LoadGen's VALID
}
STATUSES = ("passed", "unverified", "invalid", "failed", "skipped", "timeout", "aborted")
CI_OF_RATIO = re.compile(r"\d\.\d{4}–\d\.\d{4}")


def filed(key: str) -> Path:
    (path,) = RESULTS.glob(FILED[key] + "*.json")
    return path


@pytest.fixture(scope="module")
def filed_env(tmp_path_factory) -> dict:
    """A registry of its own that ``perfsuite import`` filled with the filed records above, once
    for the module: its tests only read it."""
    env = cli_env(tmp_path_factory.mktemp("filed"))
    run_cli(env, "import", *(str(filed(key)) for key in FILED), check=True)
    return env


@pytest.fixture(scope="module")
def registry(filed_env) -> dict:
    """The filed records that ``filed_env``'s registry holds, by key."""
    return {key: json.loads(filed(key).read_text()) for key in FILED}


def at(env: dict, width: int, *args: str) -> str:
    return run_cli({**env, "COLUMNS": str(width)}, *args, check=True).stdout


def assert_a_table_inside(text: str, width: int) -> None:
    too_wide = [line for line in text.splitlines() if len(line) > width]
    assert not too_wide, f"lines wider than {width}: {too_wide[:3]}"
    assert "-[ 1 ]-" not in text, text  # a table, not the list of blocks


CAPTIONS = ("left out for the width", "regime ", "verdict: ")  # the lines under a table
RUN_LINE = re.compile(r"^[0-9a-f]{8,32}  ")


def column_cells(text: str, header: str, starts_row) -> list[str]:
    """The cells of the left-justified column ``header``, each cell's lines joined (directly after
    an underscore, else with a space): the table's lines from below its rule to its caption, a
    row begun where ``starts_row`` says, a run's line of its own skipped."""
    lines = text.splitlines()
    found = [(n, re.search(rf"(?:^|(?<=  )){re.escape(header)}(?=  |$)", line)) for n, line in enumerate(lines)]
    head, match = next((n, m) for n, m in found if m)
    start = match.start()
    cells: list[str] = []
    for line in lines[head + 2 :]:
        if line.startswith(CAPTIONS):
            break
        if RUN_LINE.match(line):
            continue
        piece = line[start:].split("  ")[0].strip()
        if starts_row(line):
            cells.append(piece)
        elif piece and cells:
            cells[-1] += piece if cells[-1].endswith("_") else " " + piece
    return cells


def results_row(line: str) -> bool:
    return line.startswith("  ") and line.rstrip().endswith(STATUSES)


def headline_names(record: dict) -> list[str]:
    from perfsuite.analysis.tables import metric_cell, summary_rows

    return [metric_cell(row["metric"], row.get("statistic")) for row in summary_rows(record)]


@pytest.mark.parametrize("width", [100, 120, 160])
def test_results_of_filed_runs_is_a_table_that_names_every_metric(filed_env, registry, width):
    text = at(filed_env, width, "results")
    assert_a_table_inside(text, width)
    header = " ".join(text.split())
    for name in ("run / case", "metric", "value", "unit", "95% CI", "regime", "status"):
        assert name in header, text
    # each run's own line: its id, workload and version, the workload's name whole
    for record in registry.values():
        run_line = next(ln for ln in text.splitlines() if ln.startswith(record["run_id"][:8]))
        assert record["workload"]["name"] in run_line.split() and f"v{record['workload']['version']}" in run_line
    expected = [name for record in sorted_as_listed(text, registry) for name in headline_names(record)]
    assert column_cells(text, "metric", results_row) == expected
    left_out = re.search(rf"left out for the width \({width} columns\): (.*)", text)
    kept = {"run / case", "metric", "value", "unit", "95% CI", "regime", "status"}
    assert left_out is None or not kept & set(left_out[1].split(", ")), left_out[1]


def sorted_as_listed(text: str, registry: dict) -> list[dict]:
    """The records in the order their run lines are printed."""
    by_prefix = {record["run_id"][:8]: record for record in registry.values()}
    return [by_prefix[ln[:8]] for ln in text.splitlines() if ln[:8] in by_prefix and ln[8:10] == "  "]


def test_results_at_100_columns_says_which_columns_it_left_out_and_names_the_ceilings_run_by_its_prefix(
    filed_env, registry
):
    narrow = at(filed_env, 100, "results")
    wide = at(filed_env, 250, "results")
    assert "left out for the width" not in wide
    for name in ("% of ceiling", "valid"):  # shown where there is room: a share of the ceiling, LoadGen's verdict
        assert name in wide
    assert "70.8% matmul.bf16" in wide and "VALID" in wide.split()
    ceilings_run = registry["ceilings"]["run_id"]
    understated = next(ln for ln in wide.splitlines() if "ceiling understated" in ln)
    assert f"of run {ceilings_run[:8]};" in understated and ceilings_run not in wide  # a prefix, as for the runs
    left_out = re.search(r"left out for the width \(100 columns\): (.*)", narrow)
    assert left_out is not None, narrow
    assert set(left_out[1].split(", ")) <= {"% of ceiling", "valid"}
    # the power-capped regime (wrapped between its words) is still under its run, beside its figure
    block = narrow[narrow.index(registry["attention"]["run_id"][:8]) :].splitlines()
    block = block[: next(n for n, ln in enumerate(block[1:], 1) if RUN_LINE.match(ln) or ln.startswith("left"))]
    capped = next(ln for ln in block if "power-capped" in ln)
    assert "cudnn" in capped.split() and "TFLOP/s" in capped.split()


def test_results_falls_back_to_the_list_only_where_no_table_can_be_read(cli, perfsuite_env):
    """At 80 columns the listing of a serving run, a collective and a LoadGen run is a table;
    at 50 not even the columns always shown fit at their narrowest: each row is a block."""
    keys = ("serving_b", "all_reduce_a", "generate")
    cli("import", *(str(filed(key)) for key in keys), check=True)
    text = at(perfsuite_env, 80, "results")
    assert_a_table_inside(text, 80)
    records = {key: json.loads(filed(key).read_text()) for key in keys}
    expected = [name for record in sorted_as_listed(text, records) for name in headline_names(record)]
    assert len(expected) > 5 and column_cells(text, "metric", results_row) == expected
    listed = at(perfsuite_env, 50, "results")
    assert "-[ 1 ]-" in listed and all(len(line) <= 50 for line in listed.splitlines())
    assert "goodput_at_slo_rps" in listed.split()


def compare_json(env: dict, a: str, b: str) -> dict:
    return json.loads(run_cli(env, "compare", a, b, "--json", check=True).stdout)


@pytest.mark.parametrize(
    ("a", "b", "width"),
    [
        ("serving_a", "serving_b", 100),
        ("serving_a", "serving_b", 120),
        ("host_to_device", "host_to_device_b", 100),  # 80 metrics a run, case labels such as pinned.4stream.256MiB
        ("all_reduce_a", "all_reduce_b", 80),
    ],
)
def test_compare_at_a_narrow_width_shows_every_metric_name(filed_env, registry, a, b, width):
    run_a, run_b = registry[a]["run_id"], registry[b]["run_id"]
    text = at(filed_env, width, "compare", run_a[:8], run_b[:8])
    text = text[: text.index("verdict: ")]  # the comparison (the environment's table below is another)
    assert_a_table_inside(text, width)
    header = " ".join(text.split())
    for name in ("case", "metric", "median", "unit", "B/A", "95% CI of B/A", "verdict"):
        assert name in header, text
    expected = [
        m["metric"] + (" *" if m["headline"] else "") for m in compare_json(filed_env, run_a[:8], run_b[:8])["metrics"]
    ]
    assert column_cells(text, "metric", lambda line: bool(CI_OF_RATIO.search(line))) == expected
    left_out = re.search(rf"left out for the width \({width} columns\): (.*)", text)
    assert left_out is None or not {"metric", "95% CI of B/A", "verdict", "B/A"} & set(left_out[1].split(", "))


# -- the rules, as functions ---------------------------------------------------------------------
def printed(table: FittedTable, width: int) -> str:
    console = Console(width=width, record=True)
    console.print(table)
    return console.export_text()


def test_a_split_column_breaks_a_name_after_its_underscores_and_keeps_a_short_tail():
    assert broken("early_stopping_latency_p90_ms", 16, "_") == ["early_stopping_", "latency_p90_ms"]
    assert broken("samples_per_s", 10, "_") == ["samples_", "per_s"]  # never "s" alone
    assert broken("a /very/long/path/without/spaces", 10) == ["a", "/very/long", "/path/with", "out/spaces"]


def test_a_name_column_narrows_rather_than_drop_and_a_decoration_goes_first():
    cols = [Column("case", wrap=True), Column("metric", split="_"), Column("value", justify="right"),
            Column("note", wrap=True, drop=1)]  # fmt: skip
    rows = [["concurrency sweep", "goodput_at_slo_tokens_per_s", "1,234", "a note of several words"]]
    shown, _ = widths(cols, rows, 40) or ([], [])
    assert [cols[i].header for i in shown] == ["case", "metric", "value"]
    text = printed(FittedTable(cols, rows), 40)
    assert " ".join(text.split()).endswith("left out for the width (40 columns): note")
    assert all(len(line) <= 40 for line in text.splitlines())
    metric_lines = [ln.split()[1 if n == 0 else -1] for n, ln in enumerate(text.splitlines()[2:4])]
    assert "".join(metric_lines) == "goodput_at_slo_tokens_per_s"
    # stacked only where even each column's longest word does not fit
    assert widths(cols, rows, 30) is not None
    assert widths(cols, rows, 20) is None
    assert "-[ 1 ]-" in printed(FittedTable(cols, rows), 20)


def test_a_line_of_its_own_is_wrapped_at_the_width_and_widens_no_column():
    t = FittedTable([Column("case"), Column("value", justify="right")], title="runs")
    t.add_line("0123abcd  collectives.a_workload_name_longer_than_every_column  v5  cuda  2026-11-27 10:30 UTC")
    t.add_row("  in-place", "361")
    t.add_line("an error of several words that the run printed", indent=2)
    text = printed(t, 40).splitlines()
    assert text[1].split() == ["case", "value"] and len(text[1]) == len("  in-place  value")
    # a word wider than the line folds; the others break between words
    assert text[3:7] == [
        "0123abcd",
        "collectives.a_workload_name_longer_than_",
        "every_column  v5  cuda  2026-11-27 10:30",
        "UTC",
    ]
    assert text[7] == "  in-place    361"
    assert text[8:] == ["  an error of several words that the run", "  printed"]
    assert t.markdown().splitlines()[4].startswith("| 0123abcd  collectives.")  # a row of its own there
