"""One seal for a record: the engine that makes it, ``perfsuite import`` that stores it and
``perfsuite submit`` that files it all go through ``perfsuite.schemas.seal.seal_record``, so one
record is the same bytes and the same sha256 whichever way it went."""

from __future__ import annotations

import ast
import json
import os
from pathlib import Path

from conftest import run_cli

from perfsuite.registry import open_registry
from perfsuite.schemas.seal import seal_record

REPO = Path(__file__).resolve().parent.parent


def test_a_run_imported_and_submitted_is_the_same_bytes_and_hash_as_the_engine_sealed_it(tmp_path, perfsuite_env):
    ran = run_cli(perfsuite_env, "run", "kernels.memory", "--quick", "--device", "cpu", "--json", check=True)
    run_id = json.loads(ran.stdout)[0]["run_id"]
    engine_file = (Path(perfsuite_env["PERFSUITE_RECORDS"]) / f"{run_id}.json").read_bytes()
    engine = seal_record(json.loads(engine_file))
    assert engine.sha256 == json.loads(engine_file)["sha256"]
    assert engine.text.encode("utf-8") == engine_file  # the runner wrote the seal's own text

    # A fresh registry, whose records folder does not hold the runner's file: import reads the
    # file, submit files the registry's copy (nothing to copy byte for byte).
    fresh = dict(
        perfsuite_env,
        PERFSUITE_DB=f"sqlite:///{tmp_path / 'fresh.db'}",
        PERFSUITE_RECORDS=str(tmp_path / "fresh-records"),
        XDG_DATA_HOME=str(tmp_path / "fresh-data"),
    )
    source = tmp_path / "incoming" / f"{run_id}.json"
    source.parent.mkdir()
    source.write_bytes(engine_file)
    run_cli(fresh, "import", str(source), check=True)
    with open_registry(fresh["PERFSUITE_DB"]) as reg:
        stored = reg.get(run_id)
    imported = seal_record(stored)
    assert (imported.sha256, imported.canonical) == (engine.sha256, engine.canonical)
    assert imported.text.encode("utf-8") == engine_file

    root = tmp_path / "tree"
    run_cli(fresh, "submit", run_id, "--org", "acme", "--system", "box", "--root", str(root), check=True)
    filed_files = list((root / "acme" / "results" / "box").rglob(f"{run_id}.json"))
    assert len(filed_files) == 1
    filed = filed_files[0].read_bytes()
    assert filed == engine_file
    assert seal_record(json.loads(filed)).canonical == engine.canonical
    assert not os.path.exists(Path(fresh["PERFSUITE_RECORDS"]) / f"{run_id}.json")  # not a copy of a runner's file


# -- every path calls the one seal -----------------------------------------------------------------
# (file, function): where each path makes or accepts a record.
SEALING_PATHS = {
    "engine": ("suite/engine/record.py", "finalize"),
    "import (a folder or files, checked in bulk)": ("registry/bulk.py", "prepare"),
    "import (one record, recovery, the runner's store)": ("registry/store.py", "check_storable"),
    "submit": ("suite/publish/submissions/filing.py", "_plan"),
}
# The pieces of a seal, which nothing outside the record rules calls on its own.
SEAL_PIECES = {"hashed_body", "check_record_body", "record_sha256", "check_record", "validate_record", "check_sha256"}


def _module_imports(tree: ast.Module) -> set[tuple[str, str]]:
    """(module, name) of every ``from module import name`` in a file, function-local ones included."""
    return {
        (node.module or "", alias.name)
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom)
        for alias in node.names
    }


def _calls(function: ast.FunctionDef) -> set[str]:
    return {
        node.func.id if isinstance(node.func, ast.Name) else getattr(node.func, "attr", "")
        for node in ast.walk(function)
        if isinstance(node, ast.Call)
    }


def sealing_problems(files: dict[str, tuple[str, str]], root: Path) -> list[str]:
    """Each path whose file does not import ``seal_record`` from ``perfsuite.schemas.seal`` or
    whose function does not call it."""
    bad = []
    for path_name, (file, function) in files.items():
        tree = ast.parse((root / file).read_text())
        if ("perfsuite.schemas.seal", "seal_record") not in _module_imports(tree):
            bad.append(f"{path_name}: {file} does not import perfsuite.schemas.seal.seal_record")
            continue
        found = [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == function]
        if not found or "seal_record" not in _calls(found[0]):
            bad.append(f"{path_name}: {file}:{function} does not call seal_record")
    return bad


def test_the_engine_import_and_submit_each_call_the_one_seal():
    assert sealing_problems(SEALING_PATHS, REPO) == []


def test_nothing_outside_the_record_rules_calls_a_piece_of_the_seal_on_its_own():
    roots = [REPO / "suite", REPO / "registry", REPO / "workloads"]
    bad = sorted(
        f"{path.relative_to(REPO)}: {module}.{name}"
        for root in roots
        for path in root.rglob("*.py")
        for module, name in _module_imports(ast.parse(path.read_text()))
        if module.startswith("perfsuite.schemas") and name in SEAL_PIECES
    )
    assert bad == []


def test_the_sealing_check_fails_on_a_path_that_hashes_for_itself(tmp_path):
    (tmp_path / "own.py").write_text(
        "from perfsuite.schemas.canonical import record_sha256\n\n"
        "def finalize(record):\n    record['sha256'] = record_sha256(record)\n    return record\n"
    )
    (tmp_path / "unused.py").write_text(
        "from perfsuite.schemas.seal import seal_record\n\ndef prepare(record):\n    return record\n"
    )
    assert sealing_problems({"own": ("own.py", "finalize"), "unused": ("unused.py", "prepare")}, tmp_path) == [
        "own: own.py does not import perfsuite.schemas.seal.seal_record",
        "unused: unused.py:prepare does not call seal_record",
    ]
