"""The MLLOG twin of a record, written through ``mlperf_logging.mllog``: the lines MLPerf's
parser reads (namespace, time_ms, event_type, key, value, metadata), one logger per call so
that two records written in one process never share one, nothing printed, and an event
mlperf_logging cannot log is an error, not a dropped line."""

from __future__ import annotations

import json
import logging

import pytest
from support.factories import make_record

from perfsuite.engine import mllog

FIELDS = ["namespace", "time_ms", "event_type", "key", "value", "metadata"]


def _parsed(lines: list[str]) -> list[dict]:
    out = []
    for line in lines:
        assert line.startswith(":::MLLOG {"), line
        out.append(json.loads(line.split(" ", 1)[1]))
    return out


def _record(name: str, seed: int) -> dict:
    record = make_record(workload_name=name)
    record["controls"]["seed"] = seed
    return record


def test_a_records_twin_has_mlperfs_fields_in_mlperfs_order():
    record = _record("kernels.gemm", 7)
    events = _parsed(mllog.lines(record))
    assert all(list(e) == FIELDS for e in events)
    keys = [e["key"] for e in events]
    assert keys[:5] == ["submission_benchmark", "submission_division", "submission_platform", "seed", "run_start"]
    assert keys[-1] == "run_stop" and keys.count("result") == len(record["metrics"])
    assert events[3]["value"] == 7 and events[0]["value"] == "kernels.gemm"
    assert all(e["metadata"]["file"] == "perfsuite" and e["metadata"]["lineno"] == 0 for e in events)
    assert events[-1]["metadata"]["status"] == "success" and events[-1]["event_type"] == "INTERVAL_END"
    first_result = next(e for e in events if e["key"] == "result")
    m = record["metrics"][0]
    assert first_result["value"] == m["value"] and first_result["metadata"]["metric"] == m["name"]


def test_two_records_in_one_process_get_their_own_lines_and_nothing_is_printed(tmp_path, capsys):
    default = logging.getLogger("mllog_default")  # mlperf_logging's process-wide logger
    handlers_before = list(default.handlers)
    a, b = _record("kernels.gemm", 1), _record("kernels.memory", 2)
    mllog.write(a, tmp_path / "a.mllog")
    mllog.write(b, tmp_path / "b.mllog")
    mllog.write(a, tmp_path / "a-again.mllog")
    text_a = (tmp_path / "a.mllog").read_text()
    assert text_a == (tmp_path / "a-again.mllog").read_text()
    assert "kernels.memory" not in text_a and "kernels.gemm" not in (tmp_path / "b.mllog").read_text()
    assert len(text_a.splitlines()) == len(mllog.lines(a))
    assert capsys.readouterr().out == ""
    assert default.handlers == handlers_before


def test_the_workloads_own_events_follow_the_submission_keys_with_their_times():
    record = _record("training.gpt", 3)
    record["details"]["mllog"] = [
        {"time_ms": 1000.0, "event_type": "INTERVAL_START", "key": "run_start", "value": None, "metadata": {}},
        {
            "time_ms": 1500.5,
            "event_type": "POINT_IN_TIME",
            "key": "eval_accuracy",
            "value": 0.5,
            "metadata": {"epoch_num": 1},
        },
        {
            "time_ms": 2000.0,
            "event_type": "INTERVAL_END",
            "key": "run_stop",
            "value": None,
            "metadata": {"status": "success"},
        },
    ]
    events = _parsed(mllog.lines(record))
    assert [e["key"] for e in events][:5] == [
        "submission_benchmark",
        "submission_org",
        "submission_division",
        "submission_status",
        "submission_platform",
    ]
    assert [(e["time_ms"], e["key"]) for e in events[5:]] == [
        (1000.0, "run_start"),
        (1500.5, "eval_accuracy"),
        (2000.0, "run_stop"),
    ]
    assert events[6]["metadata"] == {"file": "perfsuite", "lineno": 0, "epoch_num": 1}


def test_an_event_mlperf_logging_cannot_log_is_an_error_not_a_missing_line():
    record = _record("training.gpt", 3)
    record["details"]["mllog"] = [
        {"time_ms": 1.0, "event_type": "INTERVAL_START", "key": "run_start", "value": object(), "metadata": {}}
    ]
    with pytest.raises(ValueError, match="could not log an MLLOG event"):
        mllog.lines(record)
    record["details"]["mllog"][0].update(value=None, event_type="SOMETIME")
    with pytest.raises(ValueError, match="event_type 'SOMETIME'"):
        mllog.lines(record)


def test_lines_dropped_by_a_disabled_logging_module_are_an_error():
    logging.disable(logging.CRITICAL)
    try:
        with pytest.raises(RuntimeError, match="mlperf_logging wrote 0 of"):
            mllog.lines(_record("kernels.gemm", 1))
    finally:
        logging.disable(logging.NOTSET)
