"""Hostile trees and files, with real processes and real files: ``check`` and ``import`` never
follow a symlink loop, never open a FIFO, bound JSON depth and integer size for system files
as for records, and print every problem on one line with control characters escaped; none
of them hangs (each call is bounded by a timeout) or prints a traceback. ``submit`` refuses a
planted symlink (file or folder) before it writes anything, and the file it points to is
unchanged."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from support.factories import make_record
from support.safety_support import ANSI_NAME, hostile_tree

from perfsuite.registry import open_registry
from tests.conftest import run_cli

BOUND_S = 120  # a hang fails the test instead of stalling it


def _problem_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("problem: ")]


@pytest.mark.parametrize("command", ["check", "import"])
def test_a_hostile_tree_is_one_line_per_problem_with_no_hang_and_no_traceback(perfsuite_env, tmp_path, command):
    root = tmp_path / "subs"
    entries = hostile_tree(root)
    proc = run_cli(perfsuite_env, command, str(root), timeout=BOUND_S)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr + proc.stdout, proc.stderr
    assert "\x1b" not in proc.stderr + proc.stdout  # shown as \x1b, never obeyed
    lines = _problem_lines(proc.stderr)
    escaped = {
        what: rel.replace("\x1b", "\\x1b").replace("\n", "\\n") if "ANSI" in what else rel
        for what, rel in entries.items()
    }
    for what, rel in escaped.items():
        mine = [line for line in lines if line.startswith(f"problem: {rel}: ")]
        assert len(mine) == 1, (what, mine, lines)
    assert any("symlink loop" in line for line in lines)
    assert any("a FIFO" in line for line in lines)
    assert any("nested too deeply" in line or "more than 64 deep" in line for line in lines)
    assert any("an integer of 5,000 digits" in line for line in lines)
    # Every line of stderr is a problem or the closing summary: no line split by a name.
    others = [line for line in proc.stderr.splitlines() if not line.startswith("problem: ")]
    if command == "check":
        assert len(others) == 1 and others[0].endswith("problem(s) in 1 records"), others
    else:
        assert others[-1] == f"Error: {root} does not check clean: nothing imported", others
        assert json.loads(run_cli(perfsuite_env, "results", "--json", check=True).stdout) == []


def test_a_fifo_given_to_import_is_refused_without_opening_it(perfsuite_env, tmp_path):
    fifo = tmp_path / "0123456789abcdef0123456789abcdef.json"
    os.mkfifo(fifo)
    proc = run_cli(perfsuite_env, "import", str(fifo), timeout=BOUND_S)
    assert proc.returncode == 1
    assert proc.stderr.strip() == (
        f"Error: {fifo}: a FIFO, not a regular file: not opened (nothing imported: 1 of 1 files refused)"
    )


def test_a_records_folder_with_a_fifo_imports_the_rest_and_names_it(perfsuite_env, tmp_path):
    folder = tmp_path / "records"
    folder.mkdir()
    good = make_record()
    (folder / f"{good['run_id']}.json").write_text(json.dumps(good))
    os.mkfifo(folder / "0123456789abcdef0123456789abcdef.json")
    proc = run_cli(perfsuite_env, "import", str(folder), timeout=BOUND_S)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert proc.stderr.strip() == (
        f"Error: {folder / '0123456789abcdef0123456789abcdef.json'}: a FIFO, not a regular file: not opened"
    )
    assert proc.stdout.strip() == f"{folder}: 1 stored, 0 already there, 1 refused"


# -- submit writes only inside its tree ---------------------------------------------------------------
@pytest.fixture
def stored_run(perfsuite_env):
    record = make_record(device="cuda", gpu_count=1, host="box1")
    with open_registry(perfsuite_env["PERFSUITE_DB"]) as registry:
        registry.store(record)
    return record


def _files(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*")) if root.exists() else []


@pytest.mark.parametrize("planted", ["results folder", "systems folder", "system file", "record file"])
def test_submit_refuses_a_planted_symlink_before_writing_anything(perfsuite_env, tmp_path, stored_run, planted):
    root = tmp_path / "subs"
    outside = tmp_path / "outside"
    outside.mkdir()
    victim = outside / "victim.txt"
    victim.write_text("precious")
    org = root / "acme"
    run = stored_run
    if planted == "results folder":
        org.mkdir(parents=True)
        (org / "results").symlink_to(outside)
        link = org / "results"
    elif planted == "systems folder":
        org.mkdir(parents=True)
        (org / "systems").symlink_to(outside)
        link = org / "systems"
    elif planted == "system file":
        (org / "systems").mkdir(parents=True)
        (org / "systems" / "box.json").symlink_to(victim)
        link = org / "systems" / "box.json"
    else:
        folder = org / "results" / "box" / run["workload"]["name"]
        folder.mkdir(parents=True)
        (folder / f"{run['run_id']}.json").symlink_to(victim)
        link = folder / f"{run['run_id']}.json"
    before = _files(root)
    proc = run_cli(perfsuite_env, "submit", run["run_id"], "--org", "acme", "--system", "box", "--root", str(root))
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    assert proc.stderr.strip() == f"Error: {link} is a symlink: submit writes real files only: nothing written"
    assert victim.read_text() == "precious" and sorted(p.name for p in outside.iterdir()) == ["victim.txt"]
    assert _files(root) == before


def test_submit_writes_the_tree_atomically_and_it_checks_clean(perfsuite_env, tmp_path, stored_run):
    root = tmp_path / "subs"
    proc = run_cli(
        perfsuite_env, "submit", stored_run["run_id"], "--org", "acme", "--system", "box", "--root", str(root)
    )
    assert proc.returncode == 0, proc.stderr
    run_id, name = stored_run["run_id"], stored_run["workload"]["name"]
    assert _files(root) == sorted(
        [
            "acme",
            "acme/results",
            "acme/results/box",
            f"acme/results/box/{name}",
            f"acme/results/box/{name}/{run_id}.json",
            f"acme/results/box/{name}/{run_id}.mllog",
            "acme/systems",
            "acme/systems/box.json",
        ]
    )  # no temporary sibling left
    assert run_cli(perfsuite_env, "check", str(root), check=True).stdout.startswith("ok: ")


def test_the_escape_of_a_name_keeps_it_on_one_line():
    from perfsuite.cli.check import shown

    assert shown(ANSI_NAME) == "\\x1b[2J\\x1b[31mred\\nline.json"
    assert shown("bad\udcffbyte") == "bad\\udcffbyte"
