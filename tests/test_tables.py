"""Tables people can read, at 100 columns: every line fits, no name, case label or run id is
cut or folded, run ids are the shortest prefix that names one run, prose wraps between words,
columns without a value are left out (a CPU run has no GPU columns), figures are in scaled units.
The commands run as real processes with COLUMNS=100 on a real registry; the layout and unit
rules are also checked as plain functions."""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path

import pytest
from rich.console import Console
from support.factories import make_metric, make_record

from perfsuite.analysis.layout import Column, FittedTable, markdown, widths
from perfsuite.analysis.tables import id_prefixes, results_table, runs_table, sweep_tables
from perfsuite.analysis.units import interval, parts, quantity
from perfsuite.measure.nvml_sampler import Reading, summarize
from perfsuite.registry import open_registry

WIDTH = 100
RESULTS = Path(__file__).resolve().parent.parent / "submissions/perfsuite/results"

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
    # each headline row's case (indented under its run's workload) and the regime it was measured in
    assert_whole(results, "pageable.4stream.256MiB", "pinned.1stream.64KiB", "bf16", "power-capped", "failed")
    left_out = re.search(r"left out for the width \(100 columns\): (.*)", results)
    assert left_out is None or not {"case", "value", "unit", "regime", "status"} & set(left_out[1].split(", "))
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
    assert len(table) == 2 + 6  # a row per headline row: the CPU run's two cases, the failed run, three stored
    assert any("power-capped" in line for line in table)
    assert json.loads(cli("results", "--format", "json", check=True).stdout)[0]["run_id"]


def submitted(system: str, workload: str, run_id: str) -> dict:
    return json.loads((RESULTS / system / workload / f"{run_id}.json").read_text())


def rendered(*renderables) -> str:
    console = Console(width=WIDTH, record=True)
    for r in renderables:
        console.print(r)
    return console.export_text()


def test_run_summary_shows_each_scenarios_loadgen_metric_with_its_verdict_and_a_sweep_as_nccl_tests_prints_it():
    """The headline rows of real H200 records: an inference run's three LoadGen scenarios each
    with its figure and VALID/INVALID (one planted INVALID), a collective's busbw at its largest
    size per mode with the size in the case, and its nccl-tests table below. At 100 columns the
    verdict's column gives way to the metric's name, and the INVALID scenario's status says so."""
    generate = submitted("h200-x1", "inference.generate", "8157a68a963b40c08cd636695052c51b")
    invalid = copy.deepcopy(generate)
    invalid["run_id"] = "0" * 32
    for check in invalid["verification"]["checks"]:
        if check["label"] == "Server VALID":
            check["passed"] = False
    all_reduce = submitted("h200-x2", "collectives.all_reduce", "99c2fe3d05e64871805b8c4cd4e403f3")
    records = [generate, invalid, all_reduce]
    text = rendered(results_table(records), *sweep_tables(records))
    assert_fits(text)
    assert_whole(text, "inference.generate", "collectives.all_reduce", "tokens/s", "ms", "GB/s", "tokens_per_s")
    by_line = lines(text)
    for run in ("8157a68a", "00000000"):
        scenarios = [ln.split()[1] for ln in by_line if ln.startswith("inference.generate") and ln.endswith(run)]
        assert scenarios == ["SingleStream", "Server", "Offline"]
    assert [ln.split()[-2] for ln in by_line if ln.endswith("00000000")] == ["passed", "invalid", "passed"]
    assert "left out for the width (100 columns): beside, valid" in text
    sweep = text[text.index("the sweep as nccl-tests prints it") :]
    assert_whole(sweep, "8", "1048576", "85.11", "#wrong")
    assert len([ln for ln in lines(sweep) if re.match(r"\s+\d+\s+\d+\s+float\s+sum", ln)]) == 18  # every size
    console = Console(width=140, record=True)
    console.print(results_table(records))
    wide = lines(console.export_text())
    assert [ln.split()[-3] for ln in wide if ln.endswith("00000000")] == ["VALID", "INVALID", "VALID"]
    headline = next(ln for ln in wide if ln.startswith("collectives.all_reduce"))
    assert headline.split()[1:6] == ["in-place", "1", "MiB", "busbw_gbps", "85.1"]  # the size the busbw was taken at


def test_results_shows_each_scenarios_loadgen_metric_under_its_run(tmp_path):
    """``perfsuite results``' table of stored H200 records at 100 columns: under the inference
    run's line, a line per LoadGen scenario with its metric, figure and verdict; under the
    collective's, its busbw at its largest size per mode."""
    from perfsuite.analysis.export import records_by_id

    generate = submitted("h200-x1", "inference.generate", "8157a68a963b40c08cd636695052c51b")
    all_reduce = submitted("h200-x2", "collectives.all_reduce", "99c2fe3d05e64871805b8c4cd4e403f3")
    with open_registry(f"sqlite:///{tmp_path / 'registry.db'}") as reg:
        for record in (generate, all_reduce):
            reg.store(record)
        rows = reg.results(limit=None)
        text = rendered(runs_table(rows, records=records_by_id(reg, [r["run_id"] for r in rows])))
    assert_fits(text)
    shown = [ln.split() for ln in lines(text)]
    start = next(n for n, words in enumerate(shown) if words[:1] == ["8157a68a"] and "inference.generate" in words)
    scenarios = shown[start + 1 : start + 4]
    assert [w[0] for w in scenarios] == ["SingleStream", "Server", "Offline"]
    assert [w[1] for w in scenarios] == ["latency_p90_ms", "tokens_per_s", "tokens_per_s"]  # the metric, named
    assert [w[3] for w in scenarios] == ["ms", "tokens/s", "tokens/s"] and all("VALID" in w for w in scenarios)
    start = next(n for n, words in enumerate(shown) if words[:1] == ["99c2fe3d"] and "collectives.all_reduce" in words)
    assert shown[start + 1][:6] == ["in-place", "1", "MiB", "busbw_gbps", "85.1", "GB/s"]


def test_compare_and_history_fit_100_columns_with_run_ids_whole(cli, perfsuite_env):
    """compare and history of real H200 GEMM runs at 100 columns: every line fits, compare names
    both runs by their whole ids, history each run by a prefix that names one run."""
    perfsuite_env["COLUMNS"] = str(WIDTH)
    runs = ["34a93c24d56643e1ac877a1c10debbe3", "4ee1fe5d4ddd4f2fb5fd52ab3df73fcd", "147bf45bc3ce487bb7e4b9f49e228306"]
    with open_registry(perfsuite_env["PERFSUITE_DB"]) as reg:
        for run_id in runs:
            reg.store(submitted("h200-x1", "kernels.gemm", run_id))
    compared = cli("compare", runs[0][:8], runs[1][:8], check=True).stdout
    assert_fits(compared)
    assert_whole(compared, *runs[:2], "bf16", "fp8", "TFLOP/s", "faster")
    history = cli("history", "--workload", "kernels.gemm", "--case", "bf16", check=True).stdout
    assert_fits(history)
    assert_whole(history, "kernels.gemm", *(r[:8] for r in runs), "795", "806", "794")


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


def test_results_table_flags_a_power_capped_result_and_names_the_ceiling_regime():
    from rich.console import Console
    from support.factories import make_record

    from perfsuite.analysis.tables import results_table

    rec = make_record(workload_name="kernels.gemm", device="cuda")
    rec["environment"]["measured_device"]["name"] = "NVIDIA H200"
    case = rec["metrics"][0]["case"]
    rec["details"]["throttle"] = {case: summarize([Reading(0.0, 1455, 700.0, ("software power cap",))])}
    console = Console(record=True, width=300)
    console.print(results_table([rec]))
    text = console.export_text()
    assert "power-capped (SM 1,455-1,455 MHz)" in text


def throttled_copy(record: dict, case: str, reasons: tuple[str, ...]) -> dict:
    """``record`` as if NVML had seen ``reasons`` while ``case`` was timed (clocks falling from
    1980 to 1455 MHz): a new run id, re-signed, schema-valid."""
    import copy
    import uuid

    from support.factories import sign

    out = copy.deepcopy(record)
    out["run_id"] = uuid.uuid4().hex
    out["details"]["throttle"] = {case: summarize([Reading(0.0, 1980, 420.0, ()), Reading(0.5, 1455, 700.0, reasons)])}
    return sign(out)


def test_results_flags_the_power_capped_and_thermal_runs_of_the_registry(cli, tmp_path):
    """A real CPU run of kernels.gemm stored by the run, and two copies of its record that
    NVML saw power-capped and thermally slowed, imported: ``perfsuite results`` marks the two
    copies (table and --json) and leaves the real run unmarked."""
    ran = cli("run", "kernels.gemm", "--quick", "-p", "dtypes=fp32", "--device", "cpu", "--json", check=True)
    (plain_run,) = json.loads(ran.stdout)
    assert plain_run["status"] == "success" and "throttle" not in plain_run["details"]  # no NVML on a CPU run
    capped = throttled_copy(plain_run, "fp32", ("software power cap",))
    hot = throttled_copy(plain_run, "fp32", ("hardware thermal slowdown",))
    files = []
    for name, rec in (("capped", capped), ("hot", hot)):
        files.append(tmp_path / f"{name}.json")
        files[-1].write_text(json.dumps(rec))
    cli("import", *map(str, files), check=True)

    rows = {r["run_id"]: r for r in json.loads(cli("results", "--json", check=True).stdout)}
    assert rows[capped["run_id"]]["throttled"] == "power-capped"
    assert rows[hot["run_id"]]["throttled"] == "thermal slowdown"
    assert rows[capped["run_id"]]["throttle"]["sm_clock_mhz_min"] == 1455
    assert rows[plain_run["run_id"]]["throttled"] is None and rows[plain_run["run_id"]]["throttle"] is None

    table = cli("results", check=True).stdout.splitlines()

    def run_block(rid: str) -> str:
        """The run's line (its id shown as a unique prefix) and its headline rows nested under it."""
        start = next(n for n, ln in enumerate(table) if ln.split() and rid.startswith(ln.split()[0]))
        end = next((n for n in range(start + 1, len(table)) if not table[n].startswith(" ")), len(table))
        return "\n".join(table[start:end])

    line = {rid: run_block(rid) for rid in rows}
    assert "power-capped (SM 1,455-1,980 MHz)" in line[capped["run_id"]]
    assert "thermal slowdown (SM 1,455-1,980 MHz)" in line[hot["run_id"]]
    assert "power-capped" not in line[plain_run["run_id"]] and "thermal" not in line[plain_run["run_id"]]


@pytest.mark.parametrize("width", [72, 90, 110, 130, 160])
def test_run_summary_names_every_headline_metric_at_any_width(width):
    """The name of a figure is never what the width takes away first: without it a value in
    GB/s could be any of a workload's figures. Other columns go; the name breaks at "_"."""
    records = [
        submitted("h200-x1", "kernels.gemm", "00967d54892541a7adab4fed960f4399"),
        submitted("h200-x1", "data.host_to_device", "24e4972411994629a2681a84407c7ded"),
        submitted("h200-x2", "collectives.all_reduce", "99c2fe3d05e64871805b8c4cd4e403f3"),
    ]
    console = Console(width=width, record=True)
    console.print(results_table(records))
    text = console.export_text()
    left_out = re.search(rf"left out for the width \({width} columns\): (.*)", text)
    assert left_out is None or "metric" not in left_out[1].split(", "), left_out[1]
    shown = tokens(text)
    assert {"tflops", "gbps"} <= shown, text
    assert "busbw_gbps" in shown or {"busbw_", "gbps"} <= shown, text
