"""What ``perfsuite history`` loads on a SQLite registry, read back from a real process: not
SQLAlchemy's PostgreSQL dialect (the registry's models name JSONB only for a PostgreSQL
engine), and not numpy for a history with no step worth testing (the change-point search is
plain Python; numpy comes with the t-test of a break that passes the step thresholds). Each was
a tenth of a second of every history a user types; the other read commands are held to the
first too."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest
from support.factories import gemm_metrics, make_record
from support.loaded_modules import run_reporting_modules

PG_DIALECT = "sqlalchemy.dialects.postgresql"


def _store(env: dict, level_of) -> list[dict]:
    """Six runs of kernels.gemm on one host, the i-th at ``level_of(i)`` ms a call."""
    from perfsuite.registry import open_registry

    start = datetime(2026, 3, 1, tzinfo=UTC)
    records = [
        make_record(
            host="alpha",
            started_at=start + timedelta(hours=i),
            metrics=gemm_metrics(time_ms=tuple(level_of(i) * t for t in (1.02, 1.00, 1.01, 1.005, 0.995))),
        )
        for i in range(6)
    ]
    with open_registry(env["PERFSUITE_DB"]) as registry:
        registry.store_all(records)
    return records


def test_history_on_sqlite_loads_neither_the_postgresql_dialect_nor_numpy(perfsuite_env, tmp_path):
    assert perfsuite_env["PERFSUITE_DB"].startswith("sqlite")
    records = _store(perfsuite_env, lambda i: 1.0 + 0.001 * (i % 2))  # steady: 0.1% between runs
    for args in (
        ("history", "--workload", "kernels.gemm"),
        ("history", "--workload", "kernels.gemm", "--case", "bf16", "--metric", "tflops"),
        ("history", "--workload", "kernels.gemm", "--case", "bf16", "--json"),
    ):
        found = run_reporting_modules(perfsuite_env, tmp_path, *args)
        modules = set(found["modules"])
        assert "perfsuite.registry.history" in modules  # it did read the history
        assert not [m for m in modules if m == PG_DIALECT or m.startswith(PG_DIALECT + ".")], args
        assert not [m for m in modules if m == "numpy" or m.startswith("numpy.")], args
        for record in records:  # every run is there, by its id's prefix
            assert record["run_id"][:8] in found["stdout"], args


def test_a_step_still_loads_numpy_for_its_t_test_and_is_flagged(perfsuite_env, tmp_path):
    records = _store(perfsuite_env, lambda i: 1.0 if i < 3 else 1.2)  # 20% slower from the fourth run
    found = run_reporting_modules(
        perfsuite_env, tmp_path, "history", "--workload", "kernels.gemm", "--case", "bf16", "--json"
    )
    (series,) = json.loads(found["stdout"])
    (step,) = series["change_points"]
    assert step["run_id"] == records[3]["run_id"] and step["ratio"] < 0.9  # TFLOP/s fell
    assert "numpy" in found["modules"]


@pytest.mark.parametrize(
    "args",
    [
        ("results",),
        ("show", "{a}"),
        ("compare", "{a}", "{b}"),
        ("export", "--workload", "kernels.gemm", "--since", "2026-03-01"),
    ],
    ids=lambda args: args[0],
)
def test_the_other_read_commands_on_sqlite_do_not_load_the_postgresql_dialect(perfsuite_env, tmp_path, args):
    records = _store(perfsuite_env, lambda i: 1.0)
    a, b = records[0]["run_id"][:12], records[1]["run_id"][:12]
    modules = set(run_reporting_modules(perfsuite_env, tmp_path, *(arg.format(a=a, b=b) for arg in args))["modules"])
    assert "perfsuite.registry" in modules
    assert not [m for m in modules if m == PG_DIALECT or m.startswith(PG_DIALECT + ".")]
