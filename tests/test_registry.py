"""The results registry on a real SQLite file: storing, idempotency, refusals, queries,
concurrent writers in separate processes, and migrations that match the models."""

from __future__ import annotations

import copy
import os
import subprocess
import sys
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest
from sqlalchemy import inspect, select
from support.factories import gemm_metrics, make_metric, make_record, sign
from support.registry_support import (
    open_fresh_files_at_once,
    run_concurrent_stores,
    table_counts,
)

from perfsuite import registry
from perfsuite.registry import (
    RecordInvalid,
    RegistryError,
    open_registry,
)
from perfsuite.registry.models import Base, Run
from perfsuite.schemas.canonical import canonical_json, record_sha256

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture
def db_url(tmp_path) -> str:
    return f"sqlite:///{tmp_path / 'registry.db'}"


@pytest.fixture
def reg(db_url):
    with open_registry(db_url) as opened:
        yield opened


# -- storing -------------------------------------------------------------------------------
def test_store_then_get_reproduces_the_record_byte_for_byte(reg):
    record = make_record(device="cuda", gpu_count=2, details={"text": "größe ✓", "nested": {"b": [1, 2.5]}})
    assert reg.store(record) == "stored"
    fetched = reg.get(record["run_id"])
    assert canonical_json(fetched) == canonical_json(record)
    assert record_sha256(fetched) == record["sha256"]
    assert reg.get(record["run_id"][:8]) == fetched  # a unique prefix is enough


def test_stored_columns_come_from_the_record(reg):
    record = make_record(
        device="cuda",
        gpu_count=2,
        host="node7",
        started_at=datetime(2026, 3, 1, 14, 0, tzinfo=timezone(timedelta(hours=2))),
    )
    reg.store(record)
    with reg.session() as session:
        run = session.execute(select(Run).where(Run.run_id == record["run_id"])).scalar_one()
        assert run.device_key == record["environment"]["measured_device"]["key"]
        assert run.system.hostname == "node7" and run.system.gpu_count == 2
        assert run.system.gpu_name == "NVIDIA H200"
        assert (run.workload.name, run.workload.version, run.workload.category) == ("kernels.gemm", 1, "kernels")
        assert run.environment.data == record["environment"]
        # Timezone-aware on the way out, normalised to UTC, same instant as written.
        assert run.started_at == datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
        assert run.started_at.tzinfo is not None
        assert [(m.case, m.name) for m in run.metrics] == [("bf16", "time_ms"), ("bf16", "tflops")]
        assert run.metrics[1].roofline_resource == "matmul.bf16"
        assert run.metrics[1].samples == record["metrics"][1]["samples"]
        assert run.metrics[1].statistics == record["metrics"][1]["statistics"]


def test_storing_the_same_record_again_is_a_duplicate_and_writes_nothing(reg):
    record = make_record()
    assert reg.store(record) == "stored"
    before = table_counts(reg)
    assert reg.store(copy.deepcopy(record)) == "duplicate"
    assert table_counts(reg) == before


def test_same_run_id_with_different_content_is_refused(reg):
    record = make_record()
    reg.store(record)
    before = table_counts(reg)
    other = make_record(run_id=record["run_id"], params={"m": 8})
    with pytest.raises(RegistryError) as info:
        reg.store(other)
    message = str(info.value)
    assert "\n" not in message and record["run_id"] in message and record["sha256"] in message
    assert table_counts(reg) == before
    assert reg.get(record["run_id"]) == record


def test_a_wrong_sha256_is_refused(reg):
    record = make_record()
    record["details"]["tampered"] = True  # content changed, hash not
    with pytest.raises(RecordInvalid, match=r"^\$\.sha256: record says [0-9a-f]{64}, its content hashes to"):
        reg.store(record)
    assert sum(table_counts(reg).values()) == 0


def _drop_measured_device(r):
    del r["environment"]["measured_device"]


def _naive_start(r):
    r["started_at"] = "2026-01-15T12:00:00"


def _nan_value(r):
    r["metrics"][1]["value"] = float("nan")


@pytest.mark.parametrize(
    "mutate, expected, resign",
    [
        (lambda r: r["workload"].update(version=0), r"^\$\.workload\.version: 0 is less than the minimum of 1$", True),
        (_drop_measured_device, r"^\$\.environment: 'measured_device' is a required property$", True),
        (
            lambda r: r["metrics"][1].update(value="fast"),
            r"^\$\.metrics\[1\]\.value: 'fast' is not of type 'number'$",
            True,
        ),
        (lambda r: r.update(status="done"), r"^\$\.status: 'done' is not one of", True),
        (
            lambda r: r.update(surprise=1),
            r"^\$: Additional properties are not allowed \('surprise' was unexpected\)$",
            True,
        ),
        (_naive_start, r"^\$\.started_at: '2026-01-15T12:00:00' has no timezone offset$", True),
        # NaN cannot even be hashed (it is not JSON), so this record keeps its old sha256.
        (_nan_value, r"^record is not valid JSON: Out of range float values", False),
    ],
    ids=["below-minimum", "missing-measured-device", "wrong-type", "bad-enum", "extra-key", "naive-time", "nan"],
)
def test_an_invalid_record_is_refused_naming_the_violation(reg, mutate, expected, resign):
    reg.store(make_record())
    before = table_counts(reg)
    record = make_record()
    mutate(record)
    if resign:
        sign(record)  # a correct hash, so the schema is what refuses it
    with pytest.raises(RecordInvalid, match=expected) as info:
        reg.store(record)
    assert "\n" not in str(info.value)
    assert table_counts(reg) == before


def test_a_failure_mid_store_leaves_nothing_half_written(reg, monkeypatch):

    def broken_metric(**_columns):
        raise RuntimeError("disk on fire")

    from perfsuite.registry import store

    monkeypatch.setattr(store, "Metric", broken_metric)
    with pytest.raises(RuntimeError, match="disk on fire"):
        reg.store(make_record(host="fresh-host", workload_name="kernels.fresh"))
    # The system, environment, workload and run rows were added before the metrics: all gone.
    assert sum(table_counts(reg).values()) == 0


def test_json_edge_values_round_trip(reg):
    # Floats that a number-normalising store (PostgreSQL JSONB) would change.
    record = make_record(details={"big": 1e20, "neg_zero": -0.0, "tiny": 5e-324, "int": 7, "float_int": 7.0})
    reg.store(record)
    assert canonical_json(reg.get(record["run_id"])) == canonical_json(record)


# -- queries -------------------------------------------------------------------------------
def _at(hours: float) -> datetime:
    return datetime(2026, 2, 1, tzinfo=UTC) + timedelta(hours=hours)


def test_results_are_newest_first_and_filter(reg):
    old = make_record(started_at=_at(0))
    mid = make_record(started_at=_at(1), workload_name="kernels.copy", params={"mb": 64})
    new = make_record(started_at=_at(2), status="failed", verification="skipped")
    for record in (old, new, mid):
        reg.store(record)
    assert [r["run_id"] for r in reg.results()] == [new["run_id"], mid["run_id"], old["run_id"]]
    assert [r["run_id"] for r in reg.results(workload="kernels.gemm")] == [new["run_id"], old["run_id"]]
    assert [r["run_id"] for r in reg.results(since=_at(1))] == [new["run_id"], mid["run_id"]]
    assert [r["run_id"] for r in reg.results(status="success")] == [mid["run_id"], old["run_id"]]
    assert [r["run_id"] for r in reg.results(limit=1)] == [new["run_id"]]
    summary = reg.results(workload="kernels.copy")[0]
    assert summary["started_at"] == "2026-02-01T01:00:00+00:00"
    assert (summary["workload"], summary["version"], summary["device"], summary["verification"]) == (
        "kernels.copy",
        1,
        "cpu",
        "passed",
    )
    assert (summary["case"], summary["metric"], summary["unit"]) == ("bf16", "tflops", "TFLOP/s")
    assert summary["value"] == mid["metrics"][1]["value"]
    assert reg.results(status="failed")[0]["value"] is None  # a failed run has no metrics
    with pytest.raises(RegistryError, match="has no timezone"):
        reg.results(since=datetime(2026, 1, 1))


def test_primary_metric_skips_time_power_and_per_joule():
    from perfsuite.schemas.headline import headline as primary_metric

    def m(name, case="x"):
        return {"case": case, "name": name}

    assert primary_metric([m("time_ms"), m("power_w"), m("gflop_per_j"), m("tflops"), m("gbps")]) == m("tflops")
    assert primary_metric([m("time_ms"), m("power_w")]) == m("time_ms")
    assert primary_metric([]) is None
    # The workload's own choice wins where the case has it; a speed-up is never a headline.
    launch = [
        m("time_ms", "eager"),
        m("items_per_s", "eager"),
        m("us_per_launch", "eager"),
        m("time_ms", "graph"),
        m("speedup", "graph"),
    ]
    assert primary_metric(launch, "us_per_launch") == m("us_per_launch", "eager")
    assert primary_metric(launch) == m("items_per_s", "eager")
    assert primary_metric([m("time_ms", "a"), m("gbps", "b")]) == m("gbps", "b")


def test_results_summary_uses_the_primary_metric(reg):
    metrics = [
        make_metric("x", "time_ms", "ms", [2.0, 2.1], higher_is_better=False),
        make_metric("x", "power_w", "W", [300.0], higher_is_better=False),
        make_metric("x", "items_per_j", "images/J", [9.0], higher_is_better=True),
        make_metric("x", "items_per_s", "images/s", [500.0, 520.0], higher_is_better=True),
    ]
    reg.store(make_record(workload_name="data.decode", metrics=metrics))
    summary = reg.results()[0]
    assert (summary["metric"], summary["value"], summary["unit"]) == ("items_per_s", 510.0, "images/s")
    # A record that names its headline metric (workload.primary_metric) gets that one.
    named = make_record(workload_name="data.decode", metrics=metrics, workload={"primary_metric": "items_per_j"})
    reg.store(named)
    assert {s["run_id"]: s["metric"] for s in reg.results()}[named["run_id"]] == "items_per_j"


def test_get_refuses_unknown_ambiguous_and_malformed_ids(reg):
    a = make_record(run_id="abcd" + "0" * 28)
    b = make_record(run_id="abcd" + "1" * 28)
    reg.store(a)
    reg.store(b)
    assert reg.get("abcd0")["run_id"] == a["run_id"]
    with pytest.raises(RegistryError, match=r"^run id prefix abcd is ambiguous: matches abcd0+, abcd1+$"):
        reg.get("abcd")
    with pytest.raises(RegistryError, match=r"^no run with id ffff$"):
        reg.get("ffff")
    with pytest.raises(RegistryError, match="is not a run id"):
        reg.get("abc%")


def test_latest_ceilings_is_the_newest_verified_success_on_that_device(reg):
    key, other_key = "1" * 16, "2" * 16
    ceilings = dict(
        workload_name="kernels.ceilings", params={}, device="cuda", metrics=gemm_metrics(case="matmul.bf16")
    )
    good_old = make_record(started_at=_at(0), device_key=key, **ceilings)
    good_new = make_record(started_at=_at(1), device_key=key, **ceilings)
    for record in (
        good_old,
        good_new,
        make_record(started_at=_at(2), device_key=key, verification="failed", **ceilings),
        make_record(started_at=_at(3), device_key=key, status="failed", verification="skipped", **ceilings),
        make_record(started_at=_at(4), device_key=other_key, **ceilings),
        make_record(started_at=_at(5), device_key=key, device="cuda"),  # a gemm, not ceilings
    ):
        reg.store(record)
    assert reg.latest_ceilings(key) == good_new
    assert reg.latest_ceilings(other_key)["environment"]["measured_device"]["key"] == other_key
    assert reg.latest_ceilings("3" * 16) is None


def test_a_quick_ceilings_run_never_stands_in_for_a_full_one(reg):
    # The quick preset times GEMMs of 512-cubed and less and 16 MiB copies: its "ceilings" sit
    # far below the device's and bound no full-size run.
    key = "1" * 16
    ceilings = dict(workload_name="kernels.ceilings", params={}, device="cuda", device_key=key)
    metrics = gemm_metrics(case="matmul.bf16")
    only_quick = make_record(started_at=_at(0), metrics=metrics, **ceilings)
    reg.store(only_quick)
    assert reg.latest_ceiling("kernels.ceilings", key, quick_allowed=True) == only_quick
    assert reg.latest_ceiling("kernels.ceilings", key, quick_allowed=False) is None
    full = make_record(started_at=_at(1), metrics=metrics, workload={"quick": False}, **ceilings)
    newer_quick = make_record(started_at=_at(2), metrics=metrics, **ceilings)
    reg.store(full)
    reg.store(newer_quick)
    for quick_allowed in (True, False):
        assert reg.latest_ceiling("kernels.ceilings", key, quick_allowed=quick_allowed) == full
    assert reg.latest_ceilings(key) == full


def test_history_is_oldest_first_and_matches_params_exactly(reg):
    small = {"m": 256, "n": 256, "k": 256, "dtype": "bf16"}
    large = {"m": 4096, "n": 4096, "k": 4096, "dtype": "bf16"}
    runs = [make_record(started_at=_at(h), params=p) for h, p in ((2, small), (0, small), (1, large))]
    for record in runs:
        reg.store(record)
    assert [r["run_id"] for r in reg.history("kernels.gemm")] == [
        runs[1]["run_id"],
        runs[2]["run_id"],
        runs[0]["run_id"],
    ]
    assert [r["run_id"] for r in reg.history("kernels.gemm", params=small)] == [runs[1]["run_id"], runs[0]["run_id"]]
    assert reg.history("kernels.copy") == []


# -- concurrency ---------------------------------------------------------------------------
def test_two_processes_storing_into_one_fresh_file_lose_nothing(tmp_path, db_url):
    outcomes = run_concurrent_stores(db_url, processes=2, per_process=50, workdir=tmp_path)
    assert len(outcomes) == 100 and set(outcomes.values()) == {"stored"}
    with open_registry(db_url) as reg:
        stored = reg.results(limit=None)
        assert {r["run_id"] for r in stored} == set(outcomes)
        counts = table_counts(reg)
    # One host and two workloads shared by both processes: one row each, no duplicates.
    assert counts["systems"] == 1 and counts["workloads"] == 2 and counts["environments"] == 1
    assert counts["metrics"] == 200


def test_processes_opening_one_fresh_file_at_once_all_migrate_it(tmp_path):
    # Without the lock file around the migration step most of these rounds fail with
    # "table already exists" or "database is locked" (measured: 6 of 8 rounds).
    for round_ in range(3):
        workdir = tmp_path / f"round{round_}"
        workdir.mkdir()
        outcomes = run_concurrent_stores(f"sqlite:///{workdir / 'r.db'}", processes=4, per_process=1, workdir=workdir)
        assert list(outcomes.values()) == ["stored"] * 4


def test_processes_opening_fresh_files_at_once_never_find_them_locked(tmp_path):
    # Switching a fresh file into WAL mode does not wait the busy timeout: done outside the
    # migration lock, 1 to 3 of these 40 rounds failed with "database is locked" (3 tries).
    assert open_fresh_files_at_once(tmp_path, processes=4, rounds=40) == []


def test_an_open_that_meets_a_lock_sqlite_does_not_wait_for_is_tried_again(tmp_path, monkeypatch):
    """The moment a file's last connection closes, SQLite answers "database is locked" without
    waiting the busy timeout: the open is tried again, and any other error is not."""
    import sqlite3

    from perfsuite.registry import db

    real, calls = db._use_wal, []

    def locked_twice(connection):
        calls.append(1)
        if len(calls) <= 2:
            raise sqlite3.OperationalError("database is locked")
        real(connection)

    monkeypatch.setattr(db, "_use_wal", locked_twice)
    with open_registry(f"sqlite:///{tmp_path / 'r.db'}") as reg:
        assert reg.store(make_record()) == "stored"
    assert len(calls) == 3

    def broken(connection):
        calls.append(1)
        raise sqlite3.OperationalError("disk I/O error")

    monkeypatch.setattr(db, "_use_wal", broken)
    calls.clear()
    with pytest.raises(RegistryError, match="disk I/O error"):
        open_registry(f"sqlite:///{tmp_path / 'other.db'}")
    assert len(calls) == 1


# -- opening and migrations ----------------------------------------------------------------
def test_a_fresh_database_is_migrated_to_head_and_matches_the_models(tmp_path, db_url):
    from alembic.autogenerate import compare_metadata
    from alembic.migration import MigrationContext
    from alembic.script import ScriptDirectory

    from perfsuite.registry.db import alembic_config

    with open_registry(db_url) as reg, reg.engine.connect() as connection:
        assert set(inspect(connection).get_table_names()) == set(Base.metadata.tables) | {"alembic_version"}
        context = MigrationContext.configure(connection, opts={"compare_type": True})
        assert context.get_current_revision() == ScriptDirectory.from_config(alembic_config()).get_current_head()
        assert compare_metadata(context, Base.metadata) == []
        assert connection.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
        assert connection.exec_driver_sql("PRAGMA foreign_keys").scalar() == 1
        assert connection.exec_driver_sql("PRAGMA busy_timeout").scalar() == 30000
    assert (tmp_path / "registry.db.lock").exists()


def test_reopening_keeps_the_data(db_url):
    record = make_record()
    with open_registry(db_url) as reg:
        reg.store(record)
    with open_registry(db_url) as reg:
        assert reg.get(record["run_id"]) == record


def test_in_memory_registry_works(tmp_path):
    with open_registry("sqlite://") as reg:
        record = make_record()
        assert reg.store(record) == "stored"
        assert reg.get(record["run_id"]) == record


def test_default_locations_follow_the_environment(monkeypatch, tmp_path):
    monkeypatch.delenv("PERFSUITE_DB", raising=False)
    monkeypatch.delenv("PERFSUITE_RECORDS", raising=False)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    assert registry.default_url() == f"sqlite:///{tmp_path}/xdg/perfsuite/registry.db"
    assert registry.records_dir() == tmp_path / "xdg" / "perfsuite" / "records"
    monkeypatch.delenv("XDG_DATA_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert registry.default_url() == f"sqlite:///{tmp_path}/home/.local/share/perfsuite/registry.db"
    monkeypatch.setenv("PERFSUITE_DB", "postgresql+psycopg://u@h/db")
    monkeypatch.setenv("PERFSUITE_RECORDS", str(tmp_path / "recs"))
    assert registry.default_url() == "postgresql+psycopg://u@h/db"
    assert registry.records_dir() == tmp_path / "recs"


def test_open_registry_without_a_url_creates_the_default_file(monkeypatch, tmp_path):
    monkeypatch.delenv("PERFSUITE_DB", raising=False)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    with open_registry() as reg:
        reg.store(make_record())
    assert (tmp_path / "xdg" / "perfsuite" / "registry.db").is_file()


def test_an_unsupported_url_is_refused():
    with pytest.raises(RegistryError, match="unsupported registry URL mysql://u:\\*\\*\\*@h/db"):
        open_registry("mysql://u:secret@h/db")


def test_a_bare_postgresql_url_uses_psycopg3():
    from perfsuite.registry.db import _make_engine

    pytest.importorskip("psycopg", reason="the psycopg driver is not installed (the 'postgres' extra)")

    engine = _make_engine("postgresql://u@127.0.0.1:1/db")  # no connection is made yet
    assert engine.url.drivername == "postgresql+psycopg"
    engine.dispose()


def test_the_registry_imports_no_runner_cli_or_workload():
    code = (
        "import sys, registry, registry.db, registry.store, registry.queries, registry.models; "
        "bad = [m for m in sys.modules if m in ('perfsuite.engine.runner', 'perfsuite.cli', 'torch') "
        "or m.startswith('workloads')]; print(bad); sys.exit(1 if bad else 0)"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.slow
def test_an_installed_wheel_migrates_without_the_source_tree(tmp_path):
    """The migrations travel as package data: a non-editable install opens a fresh DB."""
    wheels = tmp_path / "wheels"
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(wheels), str(REPO)],
        check=True,
        capture_output=True,
        text=True,
    )
    target = tmp_path / "site"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--no-deps",
            "-q",
            "--target",
            str(target),
            *map(str, wheels.glob("perfsuite-*.whl")),
        ],
        check=True,
        capture_output=True,
        text=True,
    )
    code = (
        "import sys; import perfsuite.registry as registry; "
        "assert registry.__file__.startswith(sys.argv[1]), registry.__file__; "
        "reg = registry.open_registry(sys.argv[2]); print(sorted(reg.results()))"
    )
    env = {**os.environ, "PYTHONPATH": str(target)}
    result = subprocess.run(
        [sys.executable, "-c", code, str(target), f"sqlite:///{tmp_path / 'w.db'}"],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"


def test_the_head_read_from_the_migration_files_is_alembics_and_an_opened_registry_is_at_it(tmp_path):
    """Opening a registry already at the head skips Alembic: the head it compares against,
    read from the files' revision lines, must be the one Alembic computes."""
    from sqlalchemy import text

    from perfsuite.registry.db import head_revision, shipped_head

    assert shipped_head() == head_revision() is not None
    url = f"sqlite:///{tmp_path / 'r.db'}"
    for _ in range(2):  # created and migrated, then opened at the head
        with registry.open_registry(url) as reg, reg.engine.connect() as c:
            assert c.execute(text("SELECT version_num FROM alembic_version")).scalars().all() == [shipped_head()]


def test_a_run_is_found_by_a_prefix_as_a_range_and_an_ambiguous_prefix_is_refused(tmp_path):
    with registry.open_registry(f"sqlite:///{tmp_path / 'r.db'}") as reg:
        a = make_record(run_id="ab" + "0" * 30)
        b = make_record(run_id="ab" + "1" * 30)
        for r in (a, b):
            reg.store(r)
        assert reg.get("ab0")["run_id"] == a["run_id"] and reg.get("AB1 ")["run_id"] == b["run_id"]
        with pytest.raises(registry.RegistryError, match="ambiguous"):
            reg.get("ab")
        with pytest.raises(registry.RegistryError, match="no run with id ac"):
            reg.get("ac")
        assert reg.stored_ids([a["run_id"], "f" * 32]) == {a["run_id"]}
