"""What installing perfsuite puts on a machine: its wheel holds the one ``perfsuite`` namespace
(every package of the repository's folders mapped into it, the schemas, templates, migrations
and plans as package data, ``py.typed``) and nothing else at top level."""

from __future__ import annotations

import subprocess
import sys
import zipfile

import pytest

from tests.conftest import REPO

# The repository's folders and where the namespace maps them (pyproject.toml's package-dir).
MAPPED = {
    "suite": "perfsuite",
    "registry": "perfsuite/registry",
    "schemas": "perfsuite/schemas",
    "workloads": "perfsuite/workloads",
}


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> zipfile.ZipFile:
    out = tmp_path_factory.mktemp("wheel")
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(out), str(REPO)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr
    (path,) = out.glob("perfsuite-*.whl")
    return zipfile.ZipFile(path)


def test_the_wheel_installs_perfsuite_and_nothing_else_at_top_level(wheel):
    top = {name.split("/", 1)[0] for name in wheel.namelist()}
    assert top == {"perfsuite", "perfsuite-0.1.0.dist-info"}


def test_every_package_folder_of_the_repository_is_in_the_wheel(wheel):
    names = set(wheel.namelist())
    missing = []
    for folder, target in MAPPED.items():
        for init in sorted((REPO / folder).rglob("__init__.py")):
            relative = init.relative_to(REPO / folder).as_posix()
            if "__pycache__" in relative:
                continue
            if f"{target}/{relative}" not in names:
                missing.append(f"{folder}/{relative}")
    assert missing == []


def test_the_wheel_carries_its_data_files_and_type_marker(wheel):
    names = set(wheel.namelist())
    assert "perfsuite/py.typed" in names
    assert "perfsuite/schemas/result.schema.json" in names
    assert any(n.startswith("perfsuite/registry/migrations/versions/") and n.endswith(".py") for n in names)
    assert any(n.startswith("perfsuite/publish/leaderboard/templates/") for n in names)
    # the site's own script and the vendored libraries it loads (a site without them is blank)
    assert "perfsuite/publish/leaderboard/static/leaderboard.js" in names
    assert "perfsuite/publish/leaderboard/static/vendor/uplot/uPlot.iife.min.js" in names
    assert "perfsuite/publish/leaderboard/static/vendor/tabulator/tabulator.min.js" in names
    assert any(n.startswith("perfsuite/workloads/training/mlperf_rules/") for n in names)
    assert "perfsuite/workloads/inference/serving/data/gpt_reverse.jsonl" in names  # the shipped questions
    # the training cross-check's bare loop, run by its path: an installed package must have it
    assert "perfsuite/crosscheck/training_reference.py" in names
    plans = sorted(p.name for p in (REPO / "suite" / "plans").glob("*.toml"))
    assert plans and all(f"perfsuite/plans/{p}" in names for p in plans)


def test_the_console_script_is_the_namespace_cli(wheel):
    (entry_points,) = [n for n in wheel.namelist() if n.endswith(".dist-info/entry_points.txt")]
    text = wheel.read(entry_points).decode()
    assert "perfsuite = perfsuite.cli:main" in text
