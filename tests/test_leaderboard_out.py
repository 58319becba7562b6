"""``perfsuite leaderboard --out`` where the site cannot go: a file, a folder under /proc, a
read-only filesystem. Each is one error line and a non-zero exit, and a site already there is
left exactly as it was (the new one is staged beside it and swapped in only when complete)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from conftest import run_cli
from support.factories import make_record
from support.safety_support import can_mount, tmpfs

from perfsuite.registry import open_registry


@pytest.fixture
def board_env(perfsuite_env):
    with open_registry(perfsuite_env["PERFSUITE_DB"]) as reg:
        reg.store(make_record())
    return perfsuite_env


def refused(proc: subprocess.CompletedProcess) -> str:
    """The error line of a refused build: no traceback, non-zero exit, the last stderr line."""
    assert proc.returncode != 0, proc.stdout
    assert "Traceback" not in proc.stderr, proc.stderr
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("Error: "), proc.stderr
    return last


def snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_a_file_or_a_folder_under_proc_is_one_line(board_env, tmp_path):
    a_file = tmp_path / "a-file"
    a_file.write_text("keep me")
    assert "is a file" in refused(run_cli(board_env, "leaderboard", "--out", str(a_file)))
    assert a_file.read_text() == "keep me"
    line = refused(run_cli(board_env, "leaderboard", "--out", "/proc/perfsuite-site"))
    assert "cannot write the site to /proc/perfsuite-site" in line


def test_a_read_only_filesystem_leaves_the_previous_site_intact(board_env, tmp_path):
    if not can_mount(tmp_path):
        pytest.skip("needs root allowed to mount a tmpfs")
    with tmpfs(tmp_path / "pub", size="64m") as pub:
        site = pub / "site"
        run_cli(board_env, "leaderboard", "--out", str(site), check=True)
        before = snapshot(site)
        assert "index.html" in before
        subprocess.run(["mount", "-o", "remount,ro", str(pub)], check=True)
        line = refused(run_cli(board_env, "leaderboard", "--out", str(site)))
        assert f"cannot write the site to {site}" in line and "Read-only file system" in line
        assert snapshot(site) == before
        assert sorted(p.name for p in pub.iterdir()) == ["site"]  # no staging folder left
