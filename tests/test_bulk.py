"""``registry.bulk.store_many``, the import path of a public round: records checked once and
written in batches through the driver's bulk paths, with the same rules as ``Registry.store``
(duplicates skipped, a conflicting run id refused), a failing batch rolled back, ``atomic``
all or none, and what it stores read back by the ordinary queries."""

from __future__ import annotations

import pytest
from support.factories import make_record, sign
from support.registry_support import table_counts

from perfsuite.registry import RecordInvalid, RegistryError, open_registry
from perfsuite.registry.bulk import store_many
from perfsuite.schemas.canonical import canonical_json


@pytest.fixture
def reg(tmp_path):
    with open_registry(f"sqlite:///{tmp_path / 'r.db'}") as opened:
        yield opened


def _records(n: int, host: str = "box") -> list[dict]:
    return [make_record(host=host, controls={"seed": i}) for i in range(n)]


def test_stored_records_read_back_byte_for_byte_and_duplicates_are_skipped(reg):
    records = _records(7)
    done: list[int] = []
    outcome = store_many(reg, records, batch=3, progress=done.append)
    assert (outcome.stored, outcome.duplicate, done) == (7, 0, [3, 3, 1])
    for record in records:
        assert canonical_json(reg.get(record["run_id"])) == canonical_json(record)
    assert len(reg.results(limit=None)) == 7 and table_counts(reg)["metrics"] == 7 * len(records[0]["metrics"])
    again = store_many(reg, [*records[:2], records[0]], batch=3)  # already stored, and twice in one batch
    assert (again.stored, again.duplicate) == (0, 3)


def test_a_conflicting_run_id_rolls_back_its_batch_only(reg):
    records = _records(5)
    conflict = sign({**make_record(host="other"), "run_id": records[0]["run_id"]})
    with pytest.raises(RegistryError, match=f"run {records[0]['run_id']} is already stored"):
        store_many(reg, [*records[:4], records[4], conflict], batch=4)
    assert {r["run_id"] for r in reg.results(limit=None)} == {r["run_id"] for r in records[:4]}


def test_atomic_stores_all_or_nothing(reg):
    records = _records(5)
    broken = {**make_record(host="x"), "sha256": "0" * 64}
    with pytest.raises(RecordInvalid, match=r"^record 5 of 5: \$\.sha256"):
        store_many(reg, [*records[:4], broken], batch=2, total=5, atomic=True)
    assert reg.results(limit=None) == []
    assert store_many(reg, records, batch=2, atomic=True).stored == 5


def _folder(tmp_path, records: list[dict]):
    import json

    folder = tmp_path / "records"
    folder.mkdir()
    for record in records:
        (folder / f"{record['run_id']}.json").write_text(json.dumps(record))
    return folder


def test_a_records_folder_streams_in_batches_refusing_each_bad_file_and_is_idempotent(reg, tmp_path):
    from perfsuite.registry.bulk import store_files
    from perfsuite.registry.recovery import record_files

    records = _records(5)
    folder = _folder(tmp_path, records)
    misnamed = folder / f"{'f' * 32}.json"
    misnamed.write_text(canonical_json(records[0]))
    broken = folder / f"{'e' * 32}.json"
    broken.write_text("{not json")
    done: list[int] = []
    outcome = store_files(reg, record_files(folder), batch=2, progress=done.append)
    assert (outcome.stored, outcome.duplicate, sum(done)) == (5, 0, 7)
    assert sorted(path for path, _ in outcome.refused) == [str(broken), str(misnamed)]
    assert "not its file name's" in dict(outcome.refused)[str(misnamed)]
    assert table_counts(reg)["runs"] == 5
    again = store_files(reg, record_files(folder), batch=2)
    assert (again.stored, again.duplicate, len(again.refused)) == (0, 5, 2)


def test_a_folder_file_whose_run_id_is_stored_with_another_record_is_refused_and_the_rest_stored(reg, tmp_path):
    from perfsuite.registry.bulk import store_files
    from perfsuite.registry.recovery import record_files

    records = _records(3)
    reg.store(records[0])
    changed = sign({**records[0], "error": "changed after it was stored"})
    folder = _folder(tmp_path, [changed, *records[1:]])
    outcome = store_files(reg, record_files(folder))
    assert (outcome.stored, outcome.duplicate) == (2, 0)
    [(path, why)] = outcome.refused
    assert path.endswith(f"{records[0]['run_id']}.json") and "stored with another record" in why


def test_perfsuite_import_of_a_records_folder_prints_one_summary_and_progress_only_when_asked(tmp_path, cli):
    records = _records(3)
    folder = _folder(tmp_path / "round", records) if (tmp_path / "round").mkdir() is None else None
    (folder / f"{'e' * 32}.json").write_text("[]")
    first = cli("import", str(folder))
    assert first.returncode == 1, first.stderr
    assert first.stdout.strip().splitlines() == [f"{folder}: 3 stored, 0 already there, 1 refused"]
    assert first.stderr.count("Error: ") == 1 and f"{'e' * 32}.json" in first.stderr
    (folder / f"{'e' * 32}.json").unlink()
    again = cli("import", "--progress", str(folder), check=True)
    assert again.stdout.strip() == f"{folder}: 0 stored, 3 already there"
    assert "importing" not in first.stderr  # not a terminal, no --progress: the summary alone
