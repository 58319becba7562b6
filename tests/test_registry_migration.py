"""A registry made by an older perfsuite opens with this one: every record kept, long sample
lists re-encoded (same sha256), the leaderboard built.

The older registry is made at test time by the registry code of a commit from before the
samples encoding (its ``registry`` and ``schemas`` folders taken from git history into a
temporary folder and run in a subprocess), from records of that time: the repository's
4 MB ``data.host_to_device`` record as it was then (162,758 samples inline) and a few
synthetic ones."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support.registry_support import git, run_older_code

from perfsuite.registry import open_registry
from perfsuite.registry.db import head_revision
from perfsuite.schemas.samples import MIN_ENCODED, metric_samples
from perfsuite.schemas.validate import check_record

REPO = Path(__file__).resolve().parent.parent
OLD_COMMIT = "8514ae0458ec84b4e499ca1b215548fb41b6f8a9"  # main before the samples encoding (schema head 0003)
BIG = "submissions/perfsuite/results/h200-x1/data.host_to_device/dc06fe8ccf724103a8035270244cf718.json"

MAKE_OLD_REGISTRY = r"""
import json, sys
sys.path[:0] = [sys.argv[1], sys.argv[2]]
from registry import open_registry  # the old commit's registry (not perfsuite.registry)
from support.factories import gemm_metrics, make_record
records = [json.load(open(sys.argv[4]))]
records += [make_record(host=f"box{i}", device="cuda", controls={"seed": i},
                        metrics=gemm_metrics(time_ms=tuple(1.0 + 0.01 * i + 0.001 * k for k in range(9))))
            for i in range(3)]
with open_registry(sys.argv[3]) as reg:
    print(json.dumps(reg.store_all(records)))
"""


@pytest.fixture(scope="module")
def old_registry(tmp_path_factory) -> tuple[Path, list[dict]]:
    if not (REPO / ".git").exists():
        pytest.skip("needs the repository's git history (the older registry code is taken from it)")
    root = tmp_path_factory.mktemp("old")
    big = root / "big.json"
    big.write_bytes(git("show", f"{OLD_COMMIT}:{BIG}"))
    db = root / "old.db"
    lines = run_older_code(OLD_COMMIT, ("registry", "schemas"), MAKE_OLD_REGISTRY, [f"sqlite:///{db}", str(big)], root)
    assert json.loads(lines[-1]) == ["stored"] * 4
    import sqlite3

    with sqlite3.connect(db) as c:
        assert c.execute("SELECT version_num FROM alembic_version").fetchone()[0] == "0003"
        before = [
            (run_id, sha, json.loads(record))
            for run_id, sha, record in c.execute("SELECT run_id, record_sha256, record FROM runs ORDER BY run_id")
        ]
    return db, before


def test_an_old_registry_keeps_every_record_and_its_samples_are_re_encoded(old_registry):
    db, before = old_registry
    big_before = json.loads((db.parent / "big.json").read_text())
    with open_registry(f"sqlite:///{db}") as reg:  # migrates to this version's head
        for run_id, sha, record in before:
            stored = reg.get(run_id)
            assert stored["sha256"] == sha == check_record(stored)  # the hash covers the decoded samples
            assert [metric_samples(m, stored["metrics"]) for m in stored["metrics"]] == [
                m["samples"] for m in record["metrics"]
            ]
        big = reg.get(big_before["run_id"])
        assert len(json.dumps(big)) < 256 * 1024 < len(json.dumps(big_before))
        long_lists = sum(len(m["samples"]) >= MIN_ENCODED for m in big_before["metrics"])
        assert long_lists == 28 and sum(isinstance(m["samples"], dict) for m in big["metrics"]) == long_lists
        with reg.engine.connect() as c:
            assert c.exec_driver_sql("SELECT version_num FROM alembic_version").scalar_one() == head_revision()
            rows = (
                c.exec_driver_sql(
                    "SELECT samples FROM metrics m JOIN runs r ON r.id = m.run_id WHERE r.run_id = ? ORDER BY position",
                    (big_before["run_id"],),
                )
                .scalars()
                .all()
            )
        from perfsuite.schemas.samples import decode

        # metric rows hold the compact form, each decodable alone (a reciprocal becomes a table)
        assert [decode(json.loads(r)) for r in rows] == [m["samples"] for m in big_before["metrics"]]
        assert max(len(r) for r in rows) < 64 * 1024


def test_an_old_registry_becomes_a_leaderboard(old_registry, tmp_path):
    from perfsuite.publish.leaderboard import build_site

    db, before = old_registry
    with open_registry(f"sqlite:///{db}") as reg:
        counts = build_site(reg, tmp_path / "site")
    assert counts["records"] == len(before) and counts["workloads"] == 2
    page = (tmp_path / "site" / "workloads" / "data.host_to_device.html").read_text()
    assert "GB/s" in page and "pinned.1stream.1GiB" in page
