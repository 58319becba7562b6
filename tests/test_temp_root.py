"""The test run keeps its temporary files under pytest's own folder, never in the machine's temp
root: a context with no artifact root (``perfsuite.testing.run_in_process``, a workload's own
tests) makes a fresh folder on each run, and a subprocess a test starts makes its own. The
session fixture ``session_temp_root`` (tests/conftest.py) moves both; these tests fail where
it does not.

Why not a test that scans the real temp root for new ``perfsuite-*`` entries after the run: the
root is shared with every other process on the machine (other test runs, a user's own
perfsuite runs), so a new entry there cannot be told apart from someone else's, and a check
that can blame the wrong run is not one to keep.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

from perfsuite.context import RunContext
from perfsuite.controls import Controls
from tests.conftest import cli_env


def test_a_context_without_an_artifact_root_makes_its_folder_under_the_test_runs_temp(
    session_temp_root, tmp_path_factory
):
    folder = RunContext(params=None, controls=Controls()).artifact_dir()
    assert folder.is_dir() and folder.name.startswith("perfsuite-artifacts-")
    assert folder.is_relative_to(session_temp_root)
    assert session_temp_root.is_relative_to(tmp_path_factory.getbasetemp())


def test_a_subprocess_makes_its_temporary_files_under_the_test_runs_temp(session_temp_root, tmp_path):
    """What a CLI subprocess gets (``cli_env`` copies this process's environment)."""
    script = "import tempfile; print(tempfile.mkdtemp(prefix='perfsuite-probe-'))"
    proc = subprocess.run(
        [sys.executable, "-c", script], env=cli_env(tmp_path), capture_output=True, text=True, timeout=60, check=True
    )
    made = Path(proc.stdout.strip())
    assert made.is_dir() and made.is_relative_to(session_temp_root)
    os.rmdir(made)
    assert Path(tempfile.gettempdir()) == session_temp_root


def test_run_in_process_writes_a_workloads_own_files_under_the_folder_a_test_gives(tmp_path, session_temp_root):
    """A plugin's test keeps a run's files with the test: ``artifact_dir`` (made if missing)."""
    from dataclasses import dataclass

    from perfsuite import Case, Check, Work, Workload, param
    from perfsuite.testing import run_in_process

    @dataclass(frozen=True)
    class P:
        n: int = param(10, "lines the run writes beside its figures")

    class Notes(Workload):
        name = "demo.notes"
        category = "kernels"
        description = "writes a file of its own"
        Params = P

        def cases(self, ctx):
            def fn():
                (ctx.artifact_dir() / "notes.txt").write_text("x\n" * self.params.n)

            return [Case("notes", fn, Work(items=1, item_unit="files"), verify=lambda: Check("notes", True, "none"))]

    target = tmp_path / "run-files"
    ctx = run_in_process(Notes, {"n": 3}, artifact_dir=target)
    assert ctx.artifact_root == str(target)
    assert (target / "notes.txt").read_text() == "x\n" * 3
    default = run_in_process(Notes, {"n": 1})  # no folder given: a fresh one, under this run's temp
    assert Path(default.artifact_root).is_relative_to(session_temp_root)
    assert (Path(default.artifact_root) / "notes.txt").is_file()
