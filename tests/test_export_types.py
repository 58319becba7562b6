"""An export's columns have one type each, declared from the record schema, not guessed from the
values: two Parquet exports of different sets, one where optional columns are empty and one
where they are filled, have the same schema (no Arrow null type), and CSV and JSON Lines write
a float column's numbers as floats. Real SQLite registry, the real CLI, files read back by pyarrow."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from support.factories import gemm_metrics, make_metric, make_record, sign

from perfsuite.analysis.export import COLUMN_NAMES, COLUMN_TYPES, arrow_schema
from perfsuite.registry import open_registry

SCHEMA = Path(__file__).resolve().parent.parent / "schemas" / "result.schema.json"

# The record field each column is drawn from, where it is one field of the record (the others
# are derived: headline, regime, throttled, the key and JSON text of settings).
SOURCES = {
    "run_id": ("run_id",),
    "workload": ("workload", "name"),
    "version": ("workload", "version"),
    "case": ("metrics", "case"),
    "metric": ("metrics", "name"),
    "value": ("metrics", "value"),
    "unit": ("metrics", "unit"),
    "higher_is_better": ("metrics", "higher_is_better"),
    **{s: ("metrics", "statistics", s) for s in ("n", "mean", "stdev", "min", "max", "p5", "p95")},
    "ci95_low": ("metrics", "statistics", "ci95_low"),
    "ci95_high": ("metrics", "statistics", "ci95_high"),
    "roofline_resource": ("metrics", "roofline", "resource"),
    "roofline_fraction": ("metrics", "roofline", "fraction"),
    "status": ("status",),
    "scenario": ("workload", "scenario"),
    "quick": ("workload", "quick"),
    "seed": ("controls", "seed"),
    "repeat_index": ("controls", "repeat_index"),
    "warmup": ("controls", "warmup"),
    "iterations": ("controls", "iterations"),
    "min_time_s": ("controls", "min_time_s"),
    "l2_flush": ("controls", "l2_flush"),
    "cuda_graph": ("controls", "cuda_graph"),
    "device_name": ("environment", "measured_device", "name"),
    "device_key": ("environment", "measured_device", "key"),
    "host": ("environment", "host"),
    "driver": ("environment", "gpus", "driver"),
    "world_size": ("launch", "world_size"),
    "nnodes": ("launch", "nnodes"),
    "suite_version": ("environment", "suite", "version"),
    "plugin_version": ("workload", "plugin", "version"),
}
JSON_TYPE = {"integer": "int64", "number": "float64", "boolean": "bool", "string": "string"}


def schema_type(schema: dict, path: tuple[str, ...]) -> str:
    """The JSON type (null aside) of the field at ``path`` in the record schema, through $refs,
    oneOf/anyOf and array items."""

    def resolve(node: dict) -> dict:
        while True:
            if "$ref" in node:
                node = schema["$defs"][node["$ref"].rsplit("/", 1)[1]]
            elif "oneOf" in node or "anyOf" in node:
                node = next(n for n in node.get("oneOf", node.get("anyOf")) if n.get("type") != "null")
            elif node.get("type") == "array" and "items" in node:
                node = node["items"]
            else:
                return node

    node = resolve(schema)
    for name in path:
        node = resolve(node["properties"][name])
    if "type" not in node:  # an enum of values alone
        values = {type(v) for v in node["enum"] if v is not None}
        return "string" if values == {str} else repr(values)
    kinds = node["type"] if isinstance(node["type"], list) else [node["type"]]
    (kind,) = [k for k in kinds if k != "null"]
    return kind


def test_each_columns_declared_type_is_the_record_schemas_type_of_its_field():
    schema = json.loads(SCHEMA.read_text())
    assert set(COLUMN_TYPES) == set(COLUMN_NAMES)
    wrong = {
        column: (COLUMN_TYPES[column], schema_type(schema, path))
        for column, path in SOURCES.items()
        if COLUMN_TYPES[column] != JSON_TYPE[schema_type(schema, path)]
    }
    assert wrong == {}
    assert COLUMN_TYPES["started_at"] == "timestamp" and COLUMN_TYPES["gpu_count"] == "int64"


def sparse_record() -> dict:
    """A CPU run where optional columns have nothing: no ceiling, no GPU (no driver), no
    runtime versions, no iteration count (timed by seconds), no L2 flush."""
    return make_record(
        workload_name="kernels.memory",
        params={"mib": 64},
        metrics=[make_metric("copy", "gbps", "GB/s", [11.0, 12.0, 12.5, 13.0], higher_is_better=True)],
        controls={"iterations": None, "min_time_s": 0.5, "l2_flush": None},
    )


def filled_record() -> dict:
    """A GPU run where the same columns are filled: its ceiling's fraction, driver, runtime versions,
    an iteration count and an L2 flush."""
    metrics = gemm_metrics()
    metrics[1]["roofline"].update({"fraction": 0.873, "ceiling": 1.2, "ceiling_unit": "TFLOP/s", "reason": None})
    return make_record(
        device="cuda",
        metrics=metrics,
        environment={"runtime": {"torch": "2.11.0", "cuda": "13.0", "nccl": "2.28.9"}},
    )


def test_two_exports_have_one_parquet_schema_whether_a_column_is_empty_or_filled(cli, perfsuite_env, tmp_path):
    with open_registry(perfsuite_env["PERFSUITE_DB"]) as reg:
        reg.store(sparse_record())
        reg.store(filled_record())
    sparse, filled = tmp_path / "sparse.parquet", tmp_path / "filled.parquet"
    cli("export", "--format", "parquet", "--workload", "kernels.memory", "--out", str(sparse), check=True)
    cli("export", "--format", "parquet", "--workload", "kernels.gemm", "--out", str(filled), check=True)
    a, b = pq.read_table(sparse), pq.read_table(filled)
    # the sets differ where it matters: a column of each type is all empty in one, filled in the other
    for column in ("roofline_fraction", "iterations", "l2_flush", "driver", "nccl"):
        assert a.column(column).null_count == a.num_rows, column
        assert b.column(column).null_count < b.num_rows, column
    assert pq.read_schema(sparse) == pq.read_schema(filled)
    assert pq.read_schema(sparse).equals(arrow_schema(), check_metadata=False)
    assert not [f.name for f in pq.read_schema(sparse) if pa.types.is_null(f.type)]
    assert a.column("started_at").type == pa.timestamp("us", tz="UTC")
    assert b.column("roofline_fraction").to_pylist()[1] == 0.873


def test_csv_and_jsonl_write_a_float_columns_whole_numbers_as_floats(cli, perfsuite_env):
    record = make_record(
        workload_name="kernels.memory",
        params={"mib": 64},
        metrics=[make_metric("copy", "gbps", "GB/s", [12, 12, 12], higher_is_better=True)],
    )
    record["metrics"][0]["value"] = 12  # a record may hold a whole number as an integer
    with open_registry(perfsuite_env["PERFSUITE_DB"]) as reg:
        reg.store(sign(record))
    (row,) = [json.loads(line) for line in cli("export", "--format", "jsonl", check=True).stdout.splitlines()]
    assert isinstance(row["value"], float) and isinstance(row["seed"], int) and isinstance(row["n"], int)
    (cells,) = list(csv.DictReader(io.StringIO(cli("export", check=True).stdout)))
    assert cells["value"] == "12.0" and cells["n"] == "3"
