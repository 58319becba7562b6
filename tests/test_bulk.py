"""``registry.bulk.store_many``, the import path of a public round: records checked once and
written in batches through the driver's bulk paths, with the same rules as ``Registry.store``
(duplicates skipped, a conflicting run id refused), a failing batch rolled back, ``atomic``
all or none, and what it stores read back by the ordinary queries."""

from __future__ import annotations

import pytest
from factories import make_record, sign
from registry_support import table_counts

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
