"""The data out of the registry, flat: one row per metric and case of each run, with what makes
runs comparable (the comparability key, parameters, controls), the system it ran on and how
(device, host, software), so that a spreadsheet, pandas or a notebook needs nothing else.

``perfsuite export`` writes these rows as CSV, Parquet or JSON Lines, and ``perfsuite.load``
returns them as a pandas DataFrame: one definition of the columns (:data:`COLUMNS`) for both.
Each column has one type (:data:`COLUMN_TYPES`, the record schema's type of the field it is
drawn from), declared rather than guessed from the values: two exports read side by side have
the same Parquet schema whether or not a column happens to be empty in one of them.
A collective's sweep also comes out in nccl-tests' own shape (:mod:`perfsuite.analysis.nccl_tests_json`
writes the JSON document nccl-tests writes with ``-J``; :func:`sweep_rows` gives the flat rows
the sweep table prints): one row per size, nccl-tests' field names, its units (us, GB/s).

Raw samples stay in the records (``perfsuite show --json``): a row carries their statistics.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterable, Iterator
from typing import Any

from perfsuite.schemas.comparability import comparability_key, key_settings
from perfsuite.schemas.headline import case_metric_names
from perfsuite.schemas.regime import case_regime
from perfsuite.schemas.serving_steady import case_marks
from perfsuite.schemas.throttle import record_summary, throttle_flag

# (column, what it is). The order is the order of the columns in every export.
COLUMNS: tuple[tuple[str, str], ...] = (
    ("run_id", "the run's id (perfsuite show RUN_ID)"),
    ("started_at", "when the run started, ISO 8601 with its offset"),
    ("workload", "dotted workload name"),
    ("version", "workload version (different versions never compare)"),
    ("category", "data, kernels, collectives, training or inference"),
    ("case", "what was timed within the run (a dtype, a size, a scenario)"),
    ("metric", "metric name, its unit in the name or the unit column"),
    ("value", "the metric's value (the median of its samples where it has several)"),
    ("unit", "the value's unit, as the record states it"),
    ("higher_is_better", "whether a larger value is better"),
    ("headline", "whether this metric is the case's headline (the figure tables show)"),
    ("n", "samples behind the value"),
    ("mean", "mean of the samples"),
    ("stdev", "standard deviation of the samples"),
    ("min", "smallest sample"),
    ("max", "largest sample"),
    ("p5", "5th percentile of the samples"),
    ("p95", "95th percentile of the samples"),
    ("ci95_low", "bootstrap 95% CI of the median, low end"),
    ("ci95_high", "bootstrap 95% CI of the median, high end"),
    ("roofline_resource", "the measured ceiling the value is judged against"),
    ("roofline_fraction", "the value as a fraction of that ceiling"),
    ("status", "success, failed, invalid, skipped, timeout or aborted"),
    ("verification", "passed, failed or skipped"),
    ("comparability_key", "runs compare only where this key is equal (recomputed from the record)"),
    ("key_settings", "every setting the key is made of, as JSON: parameters, timing, world, regime"),
    ("regime", "burst, sustained or power-capped: how this case was measured (unobserved: no NVML)"),
    ("params", "the resolved parameters, as JSON"),
    ("scenario", "the run's scenario, where it has one"),
    ("division", "open or closed"),
    ("quick", "whether the quick preset was used"),
    ("throttled", "power-capped or thermal slowdown seen by NVML while this case was timed, else empty"),
    ("steady_state", "an open-loop serving step whose throughput is not a steady-state figure: why, else empty"),
    ("seed", "the run's seed"),
    ("repeat_index", "which of a --repeat's runs (from 0)"),
    ("warmup", "untimed calls first (empty: not applied by this workload)"),
    ("iterations", "timed calls asked for (empty: by min_time_s, or not applied)"),
    ("min_time_s", "seconds of timed calls asked for (empty: a fixed count, or not applied)"),
    ("l2_flush", "L2 flushed between timed calls (empty: not applied)"),
    ("cuda_graph", "calls replayed from a CUDA graph (empty: not applied)"),
    ("device", "cpu or cuda"),
    ("device_name", "the measured device: GPU or CPU model"),
    ("device_key", "the measured device's identity (name, UUID, host)"),
    ("host", "host name"),
    ("gpu_count", "GPUs visible on the host"),
    ("driver", "NVIDIA driver version"),
    ("world_size", "processes of the run"),
    ("nnodes", "nodes of the run"),
    ("launcher", "local, torchrun or slurm"),
    ("torch", "torch version"),
    ("cuda", "CUDA version torch was built with"),
    ("nccl", "NCCL version"),
    ("suite_version", "perfsuite version"),
    ("suite_commit", "perfsuite git commit (with -dirty where the checkout had changes)"),
    ("plugin", "the plugin (distribution) that provides the workload"),
    ("plugin_version", "its version"),
)
COLUMN_NAMES = tuple(name for name, _ in COLUMNS)
STATISTICS = ("n", "mean", "stdev", "min", "max", "p5", "p95", "ci95_low", "ci95_high")

# The type of each column: the record schema's type of the field it comes from (integer: int64,
# number: float64, boolean: bool; JSON held as text is a string), so that an empty column keeps
# its type instead of becoming Arrow's null type (tests/test_export_types.py checks both against
# result.schema.json). started_at is a UTC timestamp.
FLOAT_COLUMNS = ("value", *(s for s in STATISTICS if s != "n"), "roofline_fraction", "min_time_s")
INT_COLUMNS = ("version", "n", "seed", "repeat_index", "warmup", "iterations", "gpu_count", "world_size", "nnodes")
BOOL_COLUMNS = ("higher_is_better", "headline", "quick", "l2_flush", "cuda_graph")
KINDS = {**dict.fromkeys(FLOAT_COLUMNS, "float64"), **dict.fromkeys(INT_COLUMNS, "int64")}
KINDS.update({**dict.fromkeys(BOOL_COLUMNS, "bool"), "started_at": "timestamp"})
COLUMN_TYPES: dict[str, str] = {name: KINDS.get(name, "string") for name in COLUMN_NAMES}


def _headlines(record: dict) -> set[tuple[str, str]]:
    """(case, metric) of each case's headline, by the one headline rule."""
    return set(case_metric_names(record).items())


def _commit(suite: dict) -> str | None:
    commit = suite.get("git_commit")
    return None if commit is None else commit + ("-dirty" if suite.get("git_dirty") else "")


def run_fields(record: dict) -> dict[str, Any]:
    """The columns every row of one run shares."""
    w, c, launch = record["workload"], record["controls"], record["launch"]
    env = record.get("environment") or {}
    measured = env.get("measured_device") or {}
    runtime = env.get("runtime") or {}
    gpus = env.get("gpus") or []
    plugin = w.get("plugin") or {}
    return {
        "run_id": record["run_id"],
        "started_at": record["started_at"],
        "workload": w["name"],
        "version": w["version"],
        "category": w.get("category"),
        "status": record["status"],
        "verification": record["verification"]["status"],
        "comparability_key": comparability_key(record),
        "key_settings": json.dumps(key_settings(record), sort_keys=True),
        "params": json.dumps(w.get("params") or {}, sort_keys=True),
        "scenario": w.get("scenario"),
        "division": w.get("division"),
        "quick": w.get("quick"),
        "seed": c.get("seed"),
        "repeat_index": c.get("repeat_index"),
        "warmup": c.get("warmup"),
        "iterations": c.get("iterations"),
        "min_time_s": c.get("min_time_s"),
        "l2_flush": c.get("l2_flush"),
        "cuda_graph": c.get("cuda_graph"),
        "device": c.get("device"),
        "device_name": measured.get("name"),
        "device_key": measured.get("key"),
        "host": env.get("host"),
        "gpu_count": len(gpus),
        "driver": gpus[0].get("driver") if gpus else None,
        "world_size": launch.get("world_size"),
        "nnodes": launch.get("nnodes"),
        "launcher": launch.get("launcher"),
        "torch": runtime.get("torch"),
        "cuda": runtime.get("cuda"),
        "nccl": runtime.get("nccl"),
        "suite_version": (env.get("suite") or {}).get("version"),
        "suite_commit": _commit(env.get("suite") or {}),
        "plugin": plugin.get("distribution") or plugin.get("name"),
        "plugin_version": plugin.get("version"),
    }


def metric_rows(record: dict) -> list[dict[str, Any]]:
    """One row per metric and case of a run, every column of :data:`COLUMNS` present."""
    shared = run_fields(record)
    heads = _headlines(record)
    unsteady = case_marks(record)  # a serving step's rates measured in no steady state
    rows = []
    for m in record["metrics"]:
        s = m.get("statistics") or {}
        roof = m.get("roofline") or {}
        row = dict.fromkeys(COLUMN_NAMES)
        row.update(shared)
        row.update(
            {
                "case": m["case"],
                "metric": m["name"],
                "value": m["value"],
                "unit": m["unit"],
                "higher_is_better": m["higher_is_better"],
                "headline": (m["case"], m["name"]) in heads,
                "roofline_resource": roof.get("resource"),
                "roofline_fraction": roof.get("fraction"),
                "throttled": throttle_flag(record_summary(record, m["case"])),
                "regime": case_regime(record, m["case"]),
                "steady_state": unsteady.get(m["case"]),
                **{k: s.get(k) for k in STATISTICS},
            }
        )
        rows.append(_typed(row))
    return rows


def _typed(row: dict[str, Any]) -> dict[str, Any]:
    """The row with each number in its column's type: a float column holds floats (a record's
    value of 3 is 3.0), an integer column ints, so that CSV and JSON Lines read alike whatever
    the record wrote."""
    for name in FLOAT_COLUMNS:
        v = row[name]
        if v is not None and not isinstance(v, float):
            row[name] = float(v)
    for name in INT_COLUMNS:
        v = row[name]
        if isinstance(v, float) and v.is_integer():
            row[name] = int(v)
    return row


def rows_of(records: Iterable[dict]) -> Iterator[dict[str, Any]]:
    for record in records:
        yield from metric_rows(record)


# -- nccl-tests' shape ---------------------------------------------------------------------------
# nccl-tests' name of each mode, and the key of its figures in a record's ``details.rows``.
SWEEP_MODES = (("out_of_place", "oop"), ("in_place", "ip"))
SWEEP_FIELDS = (("time", "time_us"), ("alg_bw", "algbw_gbps"), ("bus_bw", "busbw_gbps"), ("nwrong", "wrong"))
SWEEP_COLUMNS = (
    "size",
    "count",
    "type",
    "redop",
    "root",
    *(f"{mode}_{field}" for mode, _ in SWEEP_MODES for field, _ in SWEEP_FIELDS),
)


def is_sweep(record: dict) -> bool:
    """Whether the record holds a collective's nccl-tests-shaped sweep (``details.rows``)."""
    return record["workload"].get("category") == "collectives" and bool((record.get("details") or {}).get("rows"))


def sweep_rows(record: dict) -> list[dict[str, Any]]:
    """A collective's sweep as nccl-tests reports it: per size, its count, type, redop and root,
    then time (us), algbw and busbw (GB/s) and the wrong-element count out of place and in
    place, named as in nccl-tests' JSON output (``out_of_place_bus_bw`` ...); a mode the
    collective does not have (torch's all_reduce is in place only) is empty."""
    out = []
    for r in record["details"]["rows"]:
        row: dict[str, Any] = {
            "size": r["size_bytes"],
            "count": r["count"],
            "type": r["dtype"],
            "redop": r["redop"],
            "root": r["root"],
        }
        for mode, key in SWEEP_MODES:
            measured = r.get(key) or {}
            for field, key in SWEEP_FIELDS:
                row[f"{mode}_{field}"] = measured.get(key)
        out.append(row)
    return out


def csv_text(rows: Iterable[dict[str, Any]], columns: Iterable[str]) -> str:
    """CSV with a header row; None is an empty cell, booleans are true/false."""
    buffer = io.StringIO()
    names = list(columns)
    writer = csv.writer(buffer, lineterminator="\n")  # rows as lists: DictWriter's per-key work was half the time
    writer.writerow(names)
    for row in rows:
        writer.writerow([str(v).lower() if isinstance(v, bool) else v for v in map(row.get, names)])
    return buffer.getvalue()


def arrow_schema():
    """:data:`COLUMN_TYPES` as an Arrow schema, every column nullable (pyarrow imported here)."""
    import pyarrow as pa

    kinds = {
        "string": pa.string(),
        "float64": pa.float64(),
        "int64": pa.int64(),
        "bool": pa.bool_(),
        "timestamp": pa.timestamp("us", tz="UTC"),
    }
    return pa.schema([pa.field(name, kinds[COLUMN_TYPES[name]]) for name in COLUMN_NAMES])


def arrow_table(rows: list[dict[str, Any]]):
    """The rows as an Arrow table of :func:`arrow_schema`: its types are the declared ones, never
    inferred, so an all-empty column is still a string, int64, float64 or bool column."""
    from datetime import datetime

    import pyarrow as pa

    columns = {}
    for field in arrow_schema():
        values = [row[field.name] for row in rows]
        if field.name == "started_at":
            values = [None if v is None else datetime.fromisoformat(v) for v in values]
        columns[field.name] = pa.array(values, type=field.type)
    return pa.table(columns, schema=arrow_schema())


def parquet_bytes(rows: list[dict[str, Any]]) -> bytes:
    """The rows as a Parquet file (:func:`arrow_table`), in memory."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    sink = pa.BufferOutputStream()
    pq.write_table(arrow_table(rows), sink)
    return sink.getvalue().to_pybytes()


def frame(rows: Iterable[dict[str, Any]], columns: Iterable[str] = COLUMN_NAMES):
    """The rows as a pandas DataFrame with every column, in order (pandas imported here)."""
    import pandas as pd

    out = pd.DataFrame.from_records(list(rows), columns=list(columns))
    if "started_at" in out:
        out["started_at"] = pd.to_datetime(out["started_at"], utc=True, format="ISO8601")
    return out


# -- reading the registry ------------------------------------------------------------------------
CHUNK = 500


def stored_records(
    registry: Any, workload: str | None = None, since: Any = None, limit: int | None = None, status: str | None = None
) -> list[dict]:
    """The stored records the filters select (as ``perfsuite results`` selects runs), newest first."""
    ids = registry.run_ids(workload=workload, since=since, limit=limit, status=status)
    found = records_by_id(registry, ids)
    return [found[i] for i in ids if i in found]


def records_by_id(registry: Any, run_ids: list[str]) -> dict[str, dict]:
    """run id -> its stored record, read in chunks of :data:`CHUNK` ids."""
    from sqlalchemy import select

    from perfsuite.registry.models import Run

    found: dict[str, dict] = {}
    with registry.session() as session:
        for start in range(0, len(run_ids), CHUNK):
            chunk = run_ids[start : start + CHUNK]
            for run_id, record in session.execute(select(Run.run_id, Run.record).where(Run.run_id.in_(chunk))):
                found[run_id] = record
    return found
