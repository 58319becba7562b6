"""A way out for the data: ``perfsuite export`` as CSV, Parquet and JSON Lines read back by
pandas, a collective's sweep as nccl-tests' JSON, and the Python API (``perfsuite.run`` in a
real process with a plugin workload, ``perfsuite.load`` as a DataFrame). Real SQLite registries,
real CLI processes."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys

import pandas as pd
import pytest
from support.factories import make_record
from test_record_stored_hook import JSONL_SINK, WORKLOAD

from perfsuite.analysis.export import COLUMN_NAMES
from perfsuite.measure.nvml_sampler import Reading, summarize
from perfsuite.registry import open_registry

API_SCRIPT = """
import json, sys
import perfsuite

light = [m for m in ("torch", "pandas", "sqlalchemy", "rich") if m in sys.modules]
record = perfsuite.run("sink.sum", params={"n": 500}, controls={"device": "cpu", "iterations": 3, "warmup": 0})
errors = []
for bad in (lambda: perfsuite.run("sink.sum", params={"size": 3}),
            lambda: perfsuite.run("sink.sum", controls={"iters": 3}),
            lambda: perfsuite.run("sink.summ")):
    try:
        bad()
    except ValueError as exc:
        errors.append(str(exc))
df = perfsuite.load()
heads = df[df.headline]
print(json.dumps({
    "light_at_import": light,
    "repr": repr(record),
    "run_id": record.run_id, "status": record.status, "ok": record.ok,
    "value": record.value(), "unit": record.metric()["unit"], "time_ms": record.value("time_ms", "sum"),
    "file": json.loads(record.path.read_text())["sha256"] == record["sha256"],
    "errors": errors,
    "rows": len(df), "columns": list(df.columns),
    "head": heads[["run_id", "case", "metric", "value", "comparability_key", "device"]].to_dict("records"),
    "started_type": str(df["started_at"].dtype),
}))
"""


def test_perfsuite_run_and_load_from_python(add_plugin, perfsuite_env, tmp_path):
    sink = tmp_path / "sink.jsonl"
    perfsuite_env["SINK_PATH"] = str(sink)
    add_plugin("sinkwork", WORKLOAD)
    add_plugin("jsonlsink", JSONL_SINK)
    proc = subprocess.run(
        [sys.executable, "-c", API_SCRIPT], env=perfsuite_env, capture_output=True, text=True, timeout=600
    )
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout.splitlines()[-1])
    assert out["light_at_import"] == []  # import perfsuite stays light: run and load import on call
    assert out["status"] == "success" and out["ok"] and out["repr"].startswith("Record('sink.sum', run_id=")
    assert out["unit"] == "items/s" and out["value"] > 0 and out["time_ms"] > 0
    assert out["file"]  # the record file on disk is the record returned
    unknown_param, unknown_control, unknown_workload = out["errors"]
    assert "unknown parameter 'size'" in unknown_param and "n" in unknown_param
    assert "unknown controls ['iters']" in unknown_control and "iterations" in unknown_control
    assert "unknown workload 'sink.summ'" in unknown_workload
    assert out["columns"] == list(COLUMN_NAMES) and out["rows"] >= 2  # time_ms and items_per_s of case "sum"
    (head,) = out["head"]
    assert head["run_id"] == out["run_id"] and head["case"] == "sum" and head["metric"] == "items_per_s"
    assert head["value"] == pytest.approx(out["value"]) and head["device"] == "cpu" and head["comparability_key"]
    assert out["started_type"].startswith("datetime64")
    (sunk,) = [json.loads(line) for line in sink.read_text().splitlines()]  # the hook fired for the API's run
    assert sunk["record"]["run_id"] == out["run_id"]


def _sweep_record() -> dict:
    rows = [
        {
            "size_bytes": size,
            "count": size // 4,
            "dtype": "float",
            "redop": "sum",
            "root": -1,
            "oop": None,
            "ip": {"time_us": 10.0 + size / 1e4, "algbw_gbps": size / 1e4, "busbw_gbps": size / 1e4, "wrong": 0},
        }
        for size in (1024, 4096, 16384)
    ]
    return make_record(
        workload_name="collectives.all_reduce",
        device="cuda",
        params={"dtype": "fp32", "min_bytes": 1024, "max_bytes": 16384},
        details={"rows": rows, "collective": "all_reduce"},
    )


@pytest.fixture
def stored(perfsuite_env):
    capped = summarize([Reading(0.0, 1980, 420.0, ()), Reading(0.5, 1455, 700.0, ("software power cap",))])
    records = {
        "gemm": make_record(device="cuda", details={"throttle": {"bf16": capped}}),
        "cpu": make_record(workload_name="kernels.memory", params={"mib": 64}),
        "sweep": _sweep_record(),
    }
    with open_registry(perfsuite_env["PERFSUITE_DB"]) as reg:
        for record in records.values():
            reg.store(record)
    return records


def test_export_csv_parquet_and_jsonl_read_back_by_pandas(cli, stored, tmp_path):
    gemm = stored["gemm"]
    csv_stdout = pd.read_csv(io.StringIO(cli("export", check=True).stdout))
    assert list(csv_stdout.columns) == list(COLUMN_NAMES)
    assert len(csv_stdout) == sum(len(r["metrics"]) for r in stored.values())

    cli("export", "--format", "parquet", "--out", str(tmp_path / "all.parquet"), check=True)
    parquet = pd.read_parquet(tmp_path / "all.parquet")
    cli("export", "--format", "csv", "--out", str(tmp_path / "all.csv"), check=True)
    from_file = pd.read_csv(tmp_path / "all.csv")
    umask = os.umask(0)
    os.umask(umask)
    assert (tmp_path / "all.csv").stat().st_mode & 0o777 == 0o666 & ~umask  # not a temporary file's 0600
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")] == []
    jsonl = pd.read_json(io.StringIO(cli("export", "--format", "jsonl", check=True).stdout), lines=True)
    for df in (parquet, from_file, jsonl):
        assert len(df) == len(csv_stdout)
        rows = df[(df.run_id == gemm["run_id"]) & (df.metric == "tflops")]
        (row,) = rows.to_dict("records")
        metric = next(m for m in gemm["metrics"] if m["name"] == "tflops")
        assert row["value"] == pytest.approx(metric["value"], rel=1e-12)
        assert row["ci95_low"] == pytest.approx(metric["statistics"]["ci95_low"], rel=1e-12)
        assert row["comparability_key"] == gemm["comparability_key"]
        assert row["device_name"] == "NVIDIA H200" and row["throttled"] == "power-capped" and row["headline"]
        assert json.loads(row["params"]) == gemm["workload"]["params"]
    assert str(parquet["started_at"].dtype).startswith("datetime64")

    only = pd.read_csv(io.StringIO(cli("export", "--workload", "kernels.memory", check=True).stdout))
    assert set(only.run_id) == {stored["cpu"]["run_id"]}


def test_a_collective_sweep_as_nccl_tests_json(cli, stored):
    sweep = stored["sweep"]
    text = cli("export", "--format", "nccl-tests", "--run", sweep["run_id"][:10], check=True).stdout
    results = json.loads(text)["results"]
    assert [r["size"] for r in results] == [1024, 4096, 16384] and {r["type"] for r in results} == {"float"}
    assert [r["in_place"]["bus_bw"] for r in results] == pytest.approx([0.1024, 0.4096, 1.6384])
    assert all(r["out_of_place"] is None for r in results)  # all_reduce has no out-of-place mode here
    refused = cli("export", "--format", "nccl-tests", "--run", stored["gemm"]["run_id"])
    assert refused.returncode == 2 and "collectives run" in refused.stderr
    no_file = cli("export", "--format", "parquet")
    assert no_file.returncode == 2 and "--out FILE" in no_file.stderr
