"""``perfsuite export --format nccl-tests`` writes what the docs promise: the JSON file nccl-tests
writes with ``-J`` (the layout of its src/util.cu), keyed as the example in
docs/records-and-registry.md is, with the figures of the record. On the committed records of real
NCCL runs (submissions/), imported into a real registry and exported by the real CLI."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from pathlib import Path

import pytest

from perfsuite.analysis.nccl_tests_json import nccl_version_code

REPO = Path(__file__).resolve().parent.parent
RESULTS = REPO / "submissions" / "perfsuite" / "results"
DOCS = REPO / "docs" / "records-and-registry.md"
# The keys nccl-tests' JSON writer (src/util.cu) gives its top-level object, each result and each
# mode of a result: what a script written for nccl-tests' files reads.
NCCL_TESTS_TOP = {
    "version",
    "start_time",
    "args",
    "env",
    "nccl_version",
    "config",
    "results",
    "out_of_bounds",
    "average_bus_bandwidth",
    "end_time",
}
NCCL_TESTS_RESULT = {
    "size",
    "count",
    "type",
    "redop",
    "root",
    "out_of_place",
    "in_place",
    "actual_iterations",
    "experiment_name",
}
NCCL_TESTS_MODE = {"time", "alg_bw", "bus_bw", "nwrong"}


def docs_example() -> dict:
    """The JSON example of the docs' nccl-tests section, parsed."""
    text = DOCS.read_text()
    section = text[text.index("### A collective's sweep as nccl-tests writes it") :]
    block = re.search(r"```json\n(.*?)\n```", section, re.DOTALL)
    assert block, "the docs' nccl-tests section has no JSON example"
    return json.loads(block[1])


def one_record(folder: str, workload: str) -> Path:
    return sorted((RESULTS / folder / workload).glob("*.json"))[0]


@pytest.mark.parametrize(
    "folder, workload, modes",
    [
        ("h200-x2", "collectives.all_reduce", {"in_place"}),
        ("h200-x1", "collectives.all_gather", {"out_of_place", "in_place"}),
        ("h200-x1", "collectives.all_to_all", {"out_of_place"}),
    ],
)
def test_the_nccl_tests_export_is_nccl_tests_json_as_the_docs_show(cli, tmp_path, folder, workload, modes):
    path = one_record(folder, workload)
    record = json.loads(path.read_text())
    cli("import", str(path), check=True)
    out = tmp_path / "sweep.json"
    cli("export", "--format", "nccl-tests", "--run", record["run_id"][:12], "--out", str(out), check=True)
    exported = json.loads(out.read_text())
    example = docs_example()

    # keyed as the docs' example, and every key but perfsuite's own is one nccl-tests writes
    assert exported.keys() == example.keys()
    assert set(exported) - {"perfsuite"} <= NCCL_TESTS_TOP
    assert exported["config"].keys() == example["config"].keys()
    assert exported["out_of_bounds"].keys() == example["out_of_bounds"].keys() == {"count", "okay"}
    assert exported["average_bus_bandwidth"].keys() == example["average_bus_bandwidth"].keys()
    (example_row,) = example["results"]
    assert example_row.keys() == NCCL_TESTS_RESULT and example_row["in_place"].keys() == NCCL_TESTS_MODE

    # the figures are the record's, in nccl-tests' units and types
    d = record["details"]
    rows = d["rows"]
    assert exported["version"] == 3 and exported["nccl_version"] == 22809  # NCCL 2.28.9
    assert [r["size"] for r in exported["results"]] == [r["size_bytes"] for r in rows]
    for got, want in zip(exported["results"], rows, strict=True):
        assert got.keys() == NCCL_TESTS_RESULT
        assert got["count"] == want["count"] and got["type"] == want["dtype"] and got["redop"] == want["redop"]
        assert isinstance(got["root"], str) and int(got["root"]) == want["root"]
        assert got["actual_iterations"] == d["iters"]
        for mode, key in (("out_of_place", "oop"), ("in_place", "ip")):
            if mode not in modes:
                assert got[mode] is None and want[key] is None
                continue
            assert got[mode].keys() == NCCL_TESTS_MODE
            assert got[mode]["time"] == pytest.approx(want[key]["time_us"], rel=1e-12)
            assert got[mode]["alg_bw"] == pytest.approx(want[key]["algbw_gbps"], rel=1e-12)
            assert got[mode]["bus_bw"] == pytest.approx(want[key]["busbw_gbps"], rel=1e-12)
            assert isinstance(got[mode]["nwrong"], float) and got[mode]["nwrong"] == want[key]["wrong"]
    assert exported["out_of_bounds"] == {"count": d["wrong_total"], "okay": d["wrong_total"] == 0}
    assert exported["average_bus_bandwidth"]["bandwidth"] == pytest.approx(d["avg_busbw_gbps"], rel=1e-12)
    started = datetime.fromisoformat(record["started_at"]).astimezone(UTC)
    assert exported["start_time"] == started.strftime("%Y-%m-%d %H:%M:%S")  # nccl-tests' time format
    assert exported["config"]["minimum_bytes"] == record["workload"]["params"]["min_bytes"]
    assert exported["config"]["iterations"] == d["iters"] and exported["config"]["warmup_iters"] == d["warmup_iters"]
    assert exported["perfsuite"]["run_id"] == record["run_id"]
    assert exported["perfsuite"]["world_size"] == record["launch"]["world_size"]

    # what a script written for nccl-tests reads: algbw per size, in place where there is one
    algbw = {r["size"]: (r["in_place"] or r["out_of_place"])["alg_bw"] for r in exported["results"]}
    assert algbw[1 << 20] > algbw[8] > 0


def test_the_nccl_version_code_is_ncclgetversions():
    assert nccl_version_code("2.28.9") == 22809 and nccl_version_code("2.19.3") == 21903
    assert nccl_version_code(None) is None and nccl_version_code("") is None
