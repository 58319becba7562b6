"""Submissions trees: ``perfsuite check`` names the file of every problem, ``import`` of a
tree is idempotent, ``submit`` files registry runs, and the repository's own tree checks
clean, imports and becomes a leaderboard."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from conftest import REPO
from support.factories import make_record, sign

from perfsuite.publish.submissions.tree import (
    MLLOG_REQUIRED_TRAINING_KEYS,
    check_tree,
    import_tree,
    record_text,
    system_description,
)
from perfsuite.registry import open_registry


def _file(root: Path, record: dict, system: str = "box", org: str = "acme") -> Path:
    path = root / org / "results" / system / record["workload"]["name"] / f"{record['run_id']}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(record_text(record))
    return path


def _system(root: Path, record: dict, system: str = "box", org: str = "acme", **changes) -> Path:
    path = root / org / "systems" / f"{system}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({**system_description(record, org, system), **changes}, indent=2))
    return path


@pytest.fixture
def tree(tmp_path):
    """A clean tree: two GPU runs of one workload on system 'box', different seeds."""
    root = tmp_path / "subs"
    a = make_record(device="cuda", gpu_count=2, host="box1", controls={"seed": 1})
    b = make_record(device="cuda", gpu_count=2, host="box1", controls={"seed": 2})
    _system(root, a)
    paths = [_file(root, a), _file(root, b)]
    return root, paths


def _messages(root: Path) -> list[str]:
    return [str(p) for p in check_tree(root).problems]


def test_a_clean_tree_checks_clean(tree):
    root, _ = tree
    report = check_tree(root)
    assert report.ok, report.problems
    assert len(report.records) == 2 and list(report.systems) == [("acme", "box")]


def test_a_tampered_record_is_named(tree):
    root, paths = tree
    record = json.loads(paths[0].read_text())
    record["metrics"][0]["value"] *= 1.5  # improve the figure, keep the old hash
    paths[0].write_text(record_text(record))
    rel = str(paths[0].relative_to(root))
    assert _messages(root) == [
        f"{rel}: record hash: $.sha256: record says {record['sha256']}, its content hashes "
        f"to {sign(dict(record))['sha256']} (the record was changed after it was written)"
    ]


def test_a_duplicated_seed_is_named(tree):
    root, paths = tree
    twin = make_record(device="cuda", gpu_count=2, host="box1", controls={"seed": 1})
    path = _file(root, twin)
    first, second = sorted([paths[0].relative_to(root), path.relative_to(root)])
    assert _messages(root) == [
        f"{second}: seed 1 is already used by {first}: seeds must be unique per workload, parameters and system"
    ]


def test_a_failed_verification_is_named(tree):
    root, _ = tree
    bad = make_record(device="cuda", gpu_count=2, host="box1", verification="failed", controls={"seed": 3})
    path = _file(root, bad)
    assert _messages(root) == [
        f"{path.relative_to(root)}: verification failed: only runs whose verification passed may be submitted"
    ]


def test_a_missing_system_file_is_named_for_each_record(tree):
    root, paths = tree
    (root / "acme" / "systems" / "box.json").unlink()
    assert _messages(root) == sorted(
        f"{p.relative_to(root)}: no valid system file acme/systems/box.json for system 'box'" for p in paths
    )


def test_a_record_whose_gpu_differs_from_its_system_file_is_named(tree):
    root, paths = tree
    _system(root, json.loads(paths[0].read_text()), accelerator_model_name="NVIDIA H100 80GB HBM3")
    other = make_record(device="cuda", gpu_count=1, host="box1", controls={"seed": 9})
    path = _file(root, other)
    messages = _messages(root)
    for p in paths:
        assert (
            f"{p.relative_to(root)}: accelerator NVIDIA H200 differs from the system file's "
            f"'NVIDIA H100 80GB HBM3' (box.json)"
        ) in messages
    assert f"{path.relative_to(root)}: 1 accelerators in the record, 2 per node in box.json" in messages


def test_a_path_escaping_the_tree_is_named(tree, tmp_path):
    root, paths = tree
    outside = tmp_path / "outside.json"
    shutil.copyfile(paths[0], outside)
    link = paths[0].parent / "0123456789abcdef0123456789abcdef.json"
    link.symlink_to(Path("..") / ".." / ".." / ".." / ".." / "outside.json")
    absolute = root / "acme" / "evidence"
    absolute.parent.mkdir(parents=True, exist_ok=True)
    absolute.symlink_to(tmp_path)
    messages = _messages(root)
    assert len(messages) == 2
    assert messages[0].startswith(f"acme/evidence: path escapes the tree: symlink to '{tmp_path}'")
    assert messages[1].startswith(
        f"{link.relative_to(root)}: path escapes the tree: symlink to '../../../../../outside.json'"
    )


def test_duplicate_run_ids_schema_errors_and_training_rules_are_named(tree):
    root, paths = tree
    record = json.loads(paths[0].read_text())
    dup = _file(root, record, system="box2")
    _system(root, record, system="box2")
    broken = make_record(device="cuda", gpu_count=2, host="box1", controls={"seed": 5})
    broken["controls"]["device"] = "tpu"
    sign(broken)
    broken_path = _file(root, broken)
    train = make_record(workload_name="training.tiny", device="cuda", gpu_count=2, host="box1", controls={"seed": 7})
    train_path = _file(root, train)
    mllog = train_path.with_suffix(".mllog")
    mllog.write_text(':::MLLOG {"key": "seed", "value": 7}\n')
    messages = _messages(root)
    assert (
        f"{dup.relative_to(root)}: duplicate run id {record['run_id']}: also {paths[0].relative_to(root)}" in messages
    )
    assert any(
        m.startswith(f"{broken_path.relative_to(root)}: schema: $.controls.device: 'tpu' is not one of")
        for m in messages
    )
    missing = [k for k in MLLOG_REQUIRED_TRAINING_KEYS if k != "seed"]
    assert f"{mllog.relative_to(root)}: MLLOG lacks required keys: {', '.join(missing)}" in messages
    assert (
        f"{train_path.relative_to(root)}: 1 run(s) of training.tiny with these parameters on box; "
        f"training workloads need 5"
    ) in messages


def test_import_of_a_tree_is_idempotent_and_refuses_a_tree_with_problems(tree, tmp_path):
    root, _paths = tree
    with open_registry(f"sqlite:///{tmp_path / 'r.db'}") as reg:
        assert import_tree(reg, root) == {"stored": 2, "duplicate": 0, "systems": 1}
        assert import_tree(reg, root) == {"stored": 0, "duplicate": 2, "systems": 1}
        bad = make_record(device="cuda", gpu_count=2, host="box1", status="failed", controls={"seed": 4})
        _file(root, bad)
        from perfsuite.registry import RegistryError

        with pytest.raises(RegistryError, match="does not check clean, nothing imported"):
            import_tree(reg, root)
        assert len(reg.results(limit=None)) == 2


def test_the_repository_tree_checks_imports_and_becomes_a_leaderboard(cli, tmp_path):
    """What CI publishes: check, import (twice: idempotent) and the leaderboard of submissions/."""
    sums = {p: p.read_bytes() for p in (REPO / "submissions").rglob("*.json")}
    filed = [p for p in (REPO / "submissions").glob("*/results/*/*/*.json") if len(p.stem) == 32]
    systems = list((REPO / "submissions").glob("*/systems/*.json"))
    n, s = len(filed), len(systems)
    assert n >= 20 and s >= 2
    checked = cli("check", str(REPO / "submissions"), check=True)
    assert checked.stdout.startswith("ok: ") and f"{n} records, {s} systems" in checked.stdout
    assert f"{n} stored" in cli("import", str(REPO / "submissions"), check=True).stdout
    assert f"0 stored, {n} already there" in cli("import", str(REPO / "submissions"), check=True).stdout
    site = tmp_path / "site"
    built = cli("leaderboard", "--out", str(site), "--per-run", check=True)  # every record's page, not the linked only
    assert f"{s} systems, {n} records, {n} record pages" in built.stdout
    gemm = (site / "workloads" / "kernels.gemm.html").read_text()
    assert "h200-x1" in gemm and "TFLOP/s" in gemm and "%" in gemm
    shards = "".join(p.read_text() for p in (site / "records").glob("shard-*.js"))
    assert all(f'"{p.stem}": {{"mllog"' in shards for p in filed)  # every record's page has its data
    assert all(p.read_bytes() == data for p, data in sums.items())  # nothing in the tree was rewritten
    pages = list((site / "systems").glob("*.html"))
    assert len(pages) == s and any('id="roofline-data"' in p.read_text() for p in pages)
    assert max(p.stat().st_size for p in (REPO / "submissions").glob("*/results/*/*/*.json")) < 256 * 1024


def test_submit_files_runs_from_the_registry_then_checks(cli, perfsuite_env, tmp_path):
    records = [make_record(device="cuda", gpu_count=1, host="lab", controls={"seed": s}) for s in (11, 12, 13)]
    files = []
    for r in records:
        path = tmp_path / f"{r['run_id']}.json"
        path.write_text(record_text(r))
        files.append(str(path))
    cli("import", *files, check=True)
    root = tmp_path / "tree"
    out = cli(
        "submit",
        "--org",
        "lab",
        "--system",
        "one-gpu",
        "--root",
        str(root),
        *(r["run_id"][:10] for r in records[:2]),
        check=True,
    )
    assert "ok: " in out.stdout and "wrote lab/systems/one-gpu.json" in out.stdout.replace(f"{root}/", "")
    system_file = root / "lab" / "systems" / "one-gpu.json"
    kept = system_file.read_bytes()
    more = cli("submit", "--org", "lab", "--system", "one-gpu", "--root", str(root), records[2]["run_id"], check=True)
    assert "one-gpu.json" not in more.stdout and records[2]["run_id"] in more.stdout  # only what it wrote
    assert system_file.read_bytes() == kept
    desc = json.loads(system_file.read_text())
    assert desc["accelerator_model_name"] == "NVIDIA H200" and desc["accelerators_per_node"] == 1
    filed = root / "lab" / "results" / "one-gpu" / "kernels.gemm" / f"{records[0]['run_id']}.json"
    assert json.loads(filed.read_text()) == records[0] and filed.with_suffix(".mllog").exists()
    refused = cli("check", str(root / "lab" / "results"))  # a folder that is not a tree
    assert refused.returncode == 1 and "no records found" in refused.stderr
