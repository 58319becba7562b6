"""The paths a records folder of a public round takes, on small folders that force them: the
folder listed in one pass (folders and odd names left out), the stored run ids read in one pass,
the ids sharing a prefix found by the database, and an import whose worker processes each read,
check and write whole batches through their own connection (on SQLite and on PostgreSQL, where
two writers meeting the same new system at once must neither deadlock nor wait for each other's
batch) with the outcome of the one-process path: refusals named, conflicts refused, idempotent."""

from __future__ import annotations

import json
import uuid

import pytest
from support import pg_cluster
from support.factories import make_record, sign
from support.registry_support import table_counts

from perfsuite.registry import open_registry
from perfsuite.registry.bulk import store_files
from perfsuite.registry.queries import ids_sharing_prefixes
from perfsuite.registry.recovery import record_files, record_ids, unstored_records
from perfsuite.schemas.canonical import canonical_json


@pytest.fixture
def reg(tmp_path):
    with open_registry(f"sqlite:///{tmp_path / 'r.db'}") as opened:
        yield opened


@pytest.fixture(scope="module")
def pg_server():
    """A throwaway PostgreSQL cluster for this module's tests: its base URL."""
    if pg_cluster.server_bin() is None:
        pytest.skip("PostgreSQL server binaries (initdb, pg_ctl) not installed")
    pytest.importorskip("psycopg", reason="the psycopg driver is not installed (the 'postgres' extra)")
    cluster = pg_cluster.start(prefix="perfsuite-pg-folder-")
    yield cluster.url("").rstrip("/")
    cluster.remove()


@pytest.fixture
def pg(pg_server):
    """A registry in a fresh database of the module's cluster."""
    import psycopg

    name = "t_" + uuid.uuid4().hex[:12]
    with psycopg.connect(pg_server.replace("postgresql+psycopg", "postgresql") + "/postgres", autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    with open_registry(f"{pg_server}/{name}") as opened:
        yield opened


def _records(n: int, hosts: int = 3) -> list[dict]:
    return [make_record(host=f"box{i % hosts}", controls={"seed": i}) for i in range(n)]


def _folder(tmp_path, records: list[dict]):
    folder = tmp_path / "records"
    folder.mkdir(exist_ok=True)
    for record in records:
        (folder / f"{record['run_id']}.json").write_text(json.dumps(record))
    return folder


def test_a_records_folder_is_listed_without_folders_or_names_that_only_contain_a_record_name(tmp_path):
    records = _records(3)
    folder = _folder(tmp_path, records)
    (folder / f"{'a' * 32}.json").mkdir()  # a folder so named is not a record
    (folder / f"note\n{'b' * 32}.json").write_text("{}")  # a name holding a record's name on its second line
    (folder / f"{'C' * 32}.json").write_text("{}")  # upper case: not a run id
    (folder / "unrecorded").mkdir()
    assert sorted(record_ids(folder)) == sorted(r["run_id"] for r in records)
    (folder / f"note\n{'b' * 32}.json").unlink()
    assert sorted(record_ids(folder)) == sorted(r["run_id"] for r in records)
    assert record_ids(tmp_path / "missing") == []


def test_the_stored_ids_of_a_large_folder_are_read_in_one_pass_with_the_same_answer(reg, tmp_path, monkeypatch):
    import perfsuite.registry.db as db

    records = _records(6)
    reg.store_all(records[:4])
    folder = _folder(tmp_path, records)
    few = unstored_records(reg, folder)
    monkeypatch.setattr(db, "ID_SCAN_FROM", 2)  # the folder now counts as a large one
    assert unstored_records(reg, folder) == few == sorted(folder / f"{r['run_id']}.json" for r in records[4:])
    assert reg.stored_ids([r["run_id"] for r in records]) == {r["run_id"] for r in records[:4]}


@pytest.mark.parametrize("backend", ["reg", pytest.param("pg", marks=pytest.mark.slow)], ids=["sqlite", "postgresql"])
def test_ids_sharing_a_prefix_are_found_by_the_database_for_many_ids(backend, request, monkeypatch):
    import perfsuite.registry.queries as queries

    reg = request.getfixturevalue(backend)

    twins = ["abcdef12" + uuid.uuid4().hex[8:] for _ in range(2)]  # the same first eight digits
    records = [make_record(run_id=run_id) for run_id in [*twins, "abcdef13" + uuid.uuid4().hex[8:]]]
    records += _records(3)
    reg.store_all(records)
    ids = [records[0]["run_id"], records[3]["run_id"]]
    with reg.session() as session:
        few = ids_sharing_prefixes(session, ids, 8)
        monkeypatch.setattr(queries, "_PREFIX_SCAN_FROM", 1)
        many = ids_sharing_prefixes(session, ids, 8)
    assert set(twins) <= few and set(twins) <= many
    assert many - set(ids) == set(twins) - set(ids)  # only the twin: no other stored id shares eight digits


def _store_folder(reg, tmp_path, workers: int):
    records = _records(9)
    reg.store(records[0])
    changed = sign({**records[0], "error": "changed after it was stored"})
    folder = _folder(tmp_path, [changed, *records[1:]])
    broken = folder / f"{'e' * 32}.json"
    broken.write_text("{not json")
    misnamed = folder / f"{'f' * 32}.json"
    misnamed.write_text(canonical_json(records[1]))
    done: list[int] = []
    outcome = store_files(reg, record_files(folder), batch=2, workers=workers, parallel_from=1, progress=done.append)
    again = store_files(reg, record_files(folder), batch=2, workers=workers, parallel_from=1)
    return records, folder, outcome, again, sum(done)


@pytest.mark.parametrize("workers", [1, 2], ids=["one process", "two workers"])
def test_a_folder_imported_by_workers_stores_what_one_process_stores(reg, tmp_path, workers):
    records, folder, outcome, again, progressed = _store_folder(reg, tmp_path, workers)
    assert (outcome.stored, outcome.duplicate, progressed) == (8, 0, 11)
    refused = dict(outcome.refused)
    assert sorted(refused) == sorted(
        str(folder / n) for n in (f"{'e' * 32}.json", f"{'f' * 32}.json", f"{records[0]['run_id']}.json")
    )
    assert "stored with another record" in refused[str(folder / f"{records[0]['run_id']}.json")]
    assert "not its file name's" in refused[str(folder / f"{'f' * 32}.json")]
    assert (again.stored, again.duplicate, len(again.refused)) == (0, 8, 3)
    counts = table_counts(reg)
    assert (counts["runs"], counts["systems"]) == (9, 3)
    for record in records[1:]:
        assert canonical_json(reg.get(record["run_id"])) == canonical_json(record)


@pytest.mark.slow
def test_workers_import_a_folder_into_postgresql_side_by_side(pg, tmp_path):
    records, _folder_path, outcome, again, _ = _store_folder(pg, tmp_path, workers=2)
    assert (outcome.stored, len(outcome.refused), again.duplicate) == (8, 3, 8)
    assert table_counts(pg)["systems"] == 3
    assert canonical_json(pg.get(records[5]["run_id"])) == canonical_json(records[5])


@pytest.mark.parametrize("backend", ["reg", pytest.param("pg", marks=pytest.mark.slow)], ids=["sqlite", "postgresql"])
def test_a_history_reads_each_points_interval_and_parameters_as_the_record_holds_them(backend, request):
    from perfsuite.registry.history import metric_history

    reg = request.getfixturevalue(backend)
    records = [make_record(params={"m": 64 * (1 + i % 2), "n": 8, "k": 8, "dtype": "bf16"}) for i in range(4)]
    reg.store_all(records)
    with reg.session() as session:
        points = metric_history(session, "kernels.gemm", metric="tflops", samples=False)
    assert len(points) == 4
    by_run = {r["run_id"]: r for r in records}
    for point in points:
        record = by_run[point.run_id]
        held = next(m for m in record["metrics"] if m["name"] == "tflops")["statistics"]
        assert (point.ci_low, point.ci_high) == (held["ci95_low"], held["ci95_high"])
        assert point.params == record["workload"]["params"]
