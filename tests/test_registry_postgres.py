"""The results registry on a real, throwaway PostgreSQL cluster: the same storing,
idempotency and concurrency guarantees as on SQLite, migrations that match the models,
and records that come back byte-identical.

The cluster (``pg_cluster``: the server binaries found on this machine, run as the
``postgres`` OS user when the tests run as root, on 127.0.0.1 at a free port) is stopped
and removed at the end of the session.
"""

from __future__ import annotations

import uuid

import pytest
from sqlalchemy import inspect, text
from support import pg_cluster
from support.factories import make_record, sign
from support.registry_support import run_concurrent_stores, table_counts

from perfsuite.registry import (
    RecordInvalid,
    RegistryError,
    open_registry,
)
from perfsuite.registry.db import head_revision
from perfsuite.registry.models import Base
from perfsuite.schemas.canonical import canonical_json

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        pg_cluster.server_bin() is None, reason="PostgreSQL server binaries (initdb, pg_ctl) not installed"
    ),
]


@pytest.fixture(scope="session")
def pg_server(request):
    """A throwaway cluster: yields the base URL (without a database name)."""
    pytest.importorskip("psycopg", reason="the psycopg driver is not installed (the 'postgres' extra)")
    cluster = pg_cluster.start(max_connections=60)
    yield cluster.url("").rstrip("/")
    cluster.remove()


@pytest.fixture
def pg_url(pg_server) -> str:
    """A fresh, empty database in the session's cluster."""
    import psycopg

    name = "t_" + uuid.uuid4().hex[:12]
    with psycopg.connect(pg_server.replace("postgresql+psycopg", "postgresql") + "/postgres", autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    return f"{pg_server}/{name}"


@pytest.fixture
def reg(pg_url):
    with open_registry(pg_url) as opened:
        yield opened


def test_store_then_get_reproduces_the_record_byte_for_byte(reg):
    record = make_record(
        device="cuda", gpu_count=8, details={"text": "größe ✓", "big": 1e20, "neg_zero": -0.0, "tiny": 5e-324}
    )
    assert reg.store(record) == "stored"
    fetched = reg.get(record["run_id"][:10])
    assert canonical_json(fetched) == canonical_json(record)
    summary = reg.results()[0]
    assert summary["run_id"] == record["run_id"] and summary["started_at"] == "2026-01-15T12:00:00+00:00"


def test_restoring_is_a_duplicate_and_a_different_record_is_refused(reg):
    record = make_record()
    assert reg.store(record) == "stored"
    before = table_counts(reg)
    assert reg.store(record) == "duplicate"
    with pytest.raises(RegistryError, match=f"^run {record['run_id']} is already stored with sha256"):
        reg.store(make_record(run_id=record["run_id"], params={"m": 1}))
    assert table_counts(reg) == before


def test_an_invalid_record_is_refused_and_nothing_changes(reg):
    reg.store(make_record())
    before = table_counts(reg)
    record = make_record()
    record["environment"]["measured_device"]["kind"] = "tpu"
    sign(record)
    with pytest.raises(RecordInvalid, match=r"^\$\.environment\.measured_device\.kind: 'tpu' is not one of"):
        reg.store(record)
    assert table_counts(reg) == before


def test_a_failure_mid_store_leaves_nothing_half_written(reg, monkeypatch):

    def broken_metric(**_columns):
        raise RuntimeError("disk on fire")

    from perfsuite.registry import store

    monkeypatch.setattr(store, "Metric", broken_metric)
    with pytest.raises(RuntimeError, match="disk on fire"):
        reg.store(make_record())
    assert sum(table_counts(reg).values()) == 0


def test_latest_ceilings_on_postgres(reg):
    from datetime import datetime, timedelta, timezone

    key = "ab" * 8
    # Same instant range written with different offsets: ordering must use the instant.
    older = make_record(
        workload_name="kernels.ceilings",
        params={},
        device_key=key,
        started_at=datetime(2026, 5, 1, 12, 0, tzinfo=timezone(timedelta(hours=-5))),
    )
    newer = make_record(
        workload_name="kernels.ceilings",
        params={},
        device_key=key,
        started_at=datetime(2026, 5, 1, 18, 0, tzinfo=timezone(timedelta(hours=2))),
    )
    reg.store(newer)
    reg.store(older)
    assert reg.latest_ceilings(key)["run_id"] == older["run_id"]  # 17:00 UTC is after 16:00 UTC
    full = make_record(workload_name="kernels.ceilings", params={}, device_key=key, workload={"quick": False})
    reg.store(full)  # older than both quick runs, and read past them through a server-side cursor
    assert reg.latest_ceiling("kernels.ceilings", key, quick_allowed=False)["run_id"] == full["run_id"]


def test_results_flag_a_power_capped_run_on_postgres(reg):
    """The throttle flag of ``perfsuite results`` comes from the stored record's
    details.throttle, read by a JSON path: the same on PostgreSQL's ``json`` as on SQLite."""
    from rich.console import Console

    from perfsuite.analysis.tables import runs_table
    from perfsuite.measure.nvml_sampler import Reading, summarize

    summary = summarize([Reading(0.0, 1980, 420.0, ()), Reading(0.5, 1455, 700.0, ("software power cap",))])
    capped = make_record(device="cuda", details={"throttle": {"bf16": summary}})
    cool = make_record(device="cuda")
    reg.store(capped)
    reg.store(cool)
    rows = {r["run_id"]: r for r in reg.results()}
    assert rows[capped["run_id"]]["throttled"] == "power-capped"
    assert rows[capped["run_id"]]["throttle"] == summary
    assert rows[cool["run_id"]]["throttled"] is None
    console = Console(record=True, width=250)
    console.print(runs_table(list(rows.values()), nested=False))  # the flag on the run's own line
    lines = console.export_text().splitlines()
    assert "power-capped" in next(ln for ln in lines if capped["run_id"][:8] in ln)
    assert "power-capped" not in next(ln for ln in lines if cool["run_id"][:8] in ln)


def test_four_processes_storing_at_once_into_a_fresh_database_lose_nothing(tmp_path, pg_url):
    outcomes = run_concurrent_stores(pg_url, processes=4, per_process=25, workdir=tmp_path)
    assert len(outcomes) == 100 and set(outcomes.values()) == {"stored"}
    with open_registry(pg_url) as reg:
        assert {r["run_id"] for r in reg.results(limit=None)} == set(outcomes)
        counts = table_counts(reg)
    assert counts["systems"] == 1 and counts["workloads"] == 2 and counts["environments"] == 1
    assert counts["metrics"] == 200


def test_migrations_create_the_tables_and_match_the_models(reg):
    from alembic.autogenerate import compare_metadata
    from alembic.migration import MigrationContext

    with reg.engine.connect() as connection:
        assert set(inspect(connection).get_table_names()) == set(Base.metadata.tables) | {"alembic_version"}
        context = MigrationContext.configure(connection, opts={"compare_type": True})
        assert compare_metadata(context, Base.metadata) == []
        types = dict(
            connection.execute(
                text(
                    "SELECT column_name, data_type FROM information_schema.columns "
                    "WHERE table_name = 'runs' AND column_name IN ('params', 'record', 'started_at')"
                )
            ).all()
        )
    # Queryable JSONB for params; the record stays text-preserving json; instants are timestamptz.
    assert types == {"params": "jsonb", "record": "json", "started_at": "timestamp with time zone"}


# main before records were compressed with lz4 (schema head 0005_compact_samples)
MAIN_BEFORE_LZ4 = "c01972acdd7ff743cd34854a30aaead71ee8248e"
MAKE_MAIN_REGISTRY = r"""
import json, sys
sys.path[:0] = [sys.argv[1], sys.argv[2]]
from registry import open_registry  # that commit's registry code and migrations (not perfsuite.registry)
from support.factories import make_record
records = [make_record(host=f"box{i}", device="cuda", controls={"seed": i}) for i in range(3)]
with open_registry(sys.argv[3]) as reg:
    print(json.dumps(reg.store_all(records)))
    print(json.dumps([[r["run_id"], r["sha256"]] for r in records]))
"""


def _column_compression(connection) -> str:
    return connection.execute(
        text("SELECT attcompression FROM pg_attribute WHERE attrelid = 'runs'::regclass AND attname = 'record'")
    ).scalar_one()


def test_a_registry_made_by_main_keeps_every_record_and_new_records_are_lz4_compressed(pg_url, tmp_path):
    import json

    from support.registry_support import run_older_code

    lines = run_older_code(MAIN_BEFORE_LZ4, ("registry",), MAKE_MAIN_REGISTRY, [pg_url], tmp_path)
    stored, before = (json.loads(line) for line in lines[-2:])
    assert stored == ["stored"] * 3
    with open_registry(pg_url) as reg:  # migrates to this version's head
        for run_id, sha in before:
            assert reg.get(run_id)["sha256"] == sha
        record = make_record(host="box9", details={"text": "x" * 20_000})  # large enough to be compressed
        assert reg.store(record) == "stored"
        assert canonical_json(reg.get(record["run_id"])) == canonical_json(record)
        with reg.engine.connect() as connection:
            assert connection.execute(text("SELECT version_num FROM alembic_version")).scalar_one() == head_revision()
            assert _column_compression(connection) == "l"
            # 0007: a metric's samples and statistics are plain json, the old rows converted in place
            types = connection.execute(
                text(
                    "SELECT column_name, data_type FROM information_schema.columns "
                    "WHERE table_name = 'metrics' AND column_name IN ('samples', 'statistics')"
                )
            ).all()
            assert dict(types) == {"samples": "json", "statistics": "json"}
            old_samples = connection.execute(
                text(
                    "SELECT m.samples FROM metrics m JOIN runs r ON r.id = m.run_id WHERE r.run_id = :id ORDER BY m.position"
                ),
                {"id": before[0][0]},
            ).scalars()
            assert list(old_samples) == [m["samples"] for m in reg.get(before[0][0])["metrics"]]
            methods = connection.execute(
                text(
                    "SELECT run_id, pg_column_compression(record) FROM runs WHERE pg_column_compression(record) IS NOT NULL"
                )
            ).all()
    # the records already stored keep their compression; what is written from now on is lz4
    assert dict(methods) == {record["run_id"]: "lz4", **{run_id: "pglz" for run_id, _ in before}}
    # and the leaderboard's tables are built from them: every old run ranked in its cell
    from perfsuite.publish.leaderboard.data import load

    with open_registry(pg_url) as reg, reg.session() as session:
        boards, _ = load(session)
    ranked = {
        v.run_id for b in boards for c in b.configs for r in c.rows for cell in r.cells.values() for v in cell.runs
    }
    assert {run_id for run_id, _ in before} <= ranked


def test_a_metric_history_on_postgres_is_the_one_sqlite_gives(pg_url, tmp_path):
    """PostgreSQL reads a workload's history by the workload's ids (its plan for a join on the
    name scanned every run): the same points, in the same order, as SQLite's join gives."""
    from datetime import UTC, datetime, timedelta

    from support.factories import gemm_metrics

    from perfsuite.registry.history import metric_history

    start = datetime(2026, 3, 1, tzinfo=UTC)
    records = [
        make_record(
            host=host,
            started_at=start + timedelta(minutes=i),
            metrics=gemm_metrics(time_ms=tuple(t * (1.0 + i / 50) for t in (1.02, 1.00, 1.01))),
        )
        for i, host in enumerate(["alpha", "beta", "alpha", "beta", "alpha"])
    ]
    records.append(make_record(workload_name="kernels.other", started_at=start))
    histories = []
    for url in (pg_url, f"sqlite:///{tmp_path / 'registry.db'}"):
        with open_registry(url) as registry:
            registry.store_all(records)
            with registry.session() as session:
                found = metric_history(session, "kernels.gemm", case="bf16")
                assert metric_history(session, "kernels.nothing_stored") == []
                assert metric_history(session, "kernels.gemm", system="alpha", samples=False)[0].samples == []
            by_system = {p.host_key: p.run_id for p in found}
            histories.append([(p.run_id, p.started_at, p.metric, p.median, p.ci_low, p.samples) for p in found])
            assert len(by_system) == 2  # one system id per host
    assert histories[0] == histories[1]
    assert [run_id for run_id, *_ in histories[0]] == [r["run_id"] for r in records[:5]]
