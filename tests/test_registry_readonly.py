"""Registries that cannot be written, and paths that are not registries, with real
filesystems: a SQLite registry on a filesystem remounted read-only opens read-only for the
read commands (nothing migrated, nothing created), a write is one line, one too old to read
without migrating it is one line; ``--db`` naming a device or a FIFO creates nothing beside
it and is one line; the hint for a missing psycopg2 names the package that provides it."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
from pathlib import Path

import pytest
from support.factories import make_record
from support.safety_support import can_mount, tmpfs

from perfsuite.registry import open_registry
from tests.conftest import run_cli


@pytest.fixture
def mounted(tmp_path):
    if not can_mount(tmp_path):
        pytest.skip("needs root allowed to mount a tmpfs")
    with tmpfs(tmp_path / "ro") as folder:
        yield folder


def _remount_read_only(folder: Path) -> None:
    subprocess.run(["mount", "-o", "remount,ro", str(folder)], check=True)


def test_a_registry_on_a_read_only_filesystem_serves_the_read_commands(perfsuite_env, mounted):
    url = f"sqlite:///{mounted / 'registry.db'}"
    record = make_record()
    with open_registry(url) as registry:
        registry.store(record)
    _remount_read_only(mounted)
    before = sorted(p.name for p in mounted.iterdir())
    perfsuite_env["PERFSUITE_DB"] = url
    listed = run_cli(perfsuite_env, "results", "--json")
    assert listed.returncode == 0 and "Traceback" not in listed.stderr, listed.stderr
    assert [r["run_id"] for r in json.loads(listed.stdout)] == [record["run_id"]]
    shown = json.loads(run_cli(perfsuite_env, "show", record["run_id"], "--json", check=True).stdout)
    assert shown == record
    other = make_record()
    path = mounted.parent / "other.json"
    path.write_text(json.dumps(other))
    refused = run_cli(perfsuite_env, "import", str(path))
    assert refused.returncode == 1 and len(refused.stderr.strip().splitlines()) == 1, refused.stderr
    assert "is open read-only (its filesystem is read-only): nothing can be stored" in refused.stderr
    run = run_cli(perfsuite_env, "run", "kernels.memory", "--quick", "--device", "cpu")
    assert run.returncode == 2 and len(run.stderr.strip().splitlines()) == 1, run.stderr
    assert run.stderr.startswith("Error: the registry cannot be used: ") and "Read-only file system" in run.stderr
    assert sorted(p.name for p in mounted.iterdir()) == before  # no journal, no lock file


def test_a_read_only_registry_too_old_to_read_is_one_line(perfsuite_env, mounted):
    from alembic import command
    from sqlalchemy import create_engine

    from perfsuite.registry.db import alembic_config, head_revision

    path = mounted / "old.db"
    engine = create_engine(f"sqlite:///{path}")
    with engine.begin() as connection:
        command.upgrade(alembic_config(connection), "0002")
    engine.dispose()
    _remount_read_only(mounted)
    perfsuite_env["PERFSUITE_DB"] = f"sqlite:///{path}"
    proc = run_cli(perfsuite_env, "results")
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert proc.stderr.strip() == (
        f"Error: registry sqlite:///{path} is at revision 0002, older than this perfsuite's {head_revision()}, "
        "and cannot be migrated: its filesystem is read-only"
    )


@pytest.mark.parametrize("kind", ["character device", "FIFO"])
def test_a_db_path_that_is_not_a_file_creates_nothing_beside_it(perfsuite_env, tmp_path, kind):
    if kind == "FIFO":
        path = tmp_path / "registry.db"
        os.mkfifo(path)
    else:
        path = Path("/dev/null")
    beside = {p.name for p in path.parent.iterdir() if p.name.startswith(path.name)}
    for args in (["results"], ["run", "kernels.memory", "--quick", "--device", "cpu"]):
        proc = run_cli(perfsuite_env, "--db", f"sqlite:///{path}", *args, timeout=120)
        assert proc.returncode in (1, 2) and "Traceback" not in proc.stderr, proc.stderr
        (line,) = proc.stderr.strip().splitlines()
        assert f"registry {path} is a {kind}, not a SQLite database file" in line, line
    assert {p.name for p in path.parent.iterdir() if p.name.startswith(path.name)} == beside


def test_the_psycopg2_hint_names_the_package_that_provides_it(perfsuite_env):
    if importlib.util.find_spec("psycopg2") is not None:
        pytest.skip("psycopg2 is installed here")
    proc = run_cli(perfsuite_env, "--db", "postgresql+psycopg2://u@127.0.0.1:1/db", "results")
    assert proc.returncode == 1
    assert proc.stderr.strip().endswith(
        "pip install psycopg2-binary, or use postgresql+psycopg://, the driver 'perfsuite[postgres]' installs"
    )
