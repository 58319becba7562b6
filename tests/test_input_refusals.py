"""Every input is checked before anything runs: non-finite numbers, counts beyond their
stated bounds, seeds the seeders cannot take and digits that are not ASCII (refused on
purpose, for options and ``-p`` values alike) are one line and exit 2, and nothing is
measured or recorded. The many cases run the CLI in this process (the same code, no Python
start-up each); the first also runs as a real process."""

from __future__ import annotations

import json
import subprocess

import pytest
from safety_support import BAD_OPTIONS as REFUSED
from safety_support import RUN

from tests.conftest import run_cli


@pytest.fixture
def cli_here(perfsuite_env):
    """The CLI in this process (CliRunner), returning a CompletedProcess."""
    from click.testing import CliRunner

    from perfsuite.cli import cli as perfsuite

    def _run(*args: str) -> subprocess.CompletedProcess:
        result = CliRunner().invoke(perfsuite, list(args), prog_name="perfsuite")
        assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
        return subprocess.CompletedProcess(args, result.exit_code, result.stdout, result.stderr)

    return _run


def _nothing_ran(perfsuite_env, tmp_path) -> None:
    records = tmp_path / "records"
    assert not records.exists() or not list(records.glob("*.json"))


@pytest.mark.parametrize("case", list(REFUSED))
def test_a_bad_number_is_one_line_and_exit_2_before_anything_runs(cli_here, perfsuite_env, tmp_path, case):
    args, expected = REFUSED[case]
    proc = cli_here(*args)
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: ") and "Traceback" not in proc.stderr, proc.stderr
    assert expected in lines[0], lines[0]
    _nothing_ran(perfsuite_env, tmp_path)


def test_a_non_finite_timeout_is_refused_by_a_real_process(perfsuite_env, tmp_path):
    proc = run_cli(perfsuite_env, *RUN, "--timeout", "nan")
    assert proc.returncode == 2
    assert proc.stderr.strip() == "Error: Invalid value for '--timeout': 'nan' is not a finite number"
    assert json.loads(run_cli(perfsuite_env, "results", "--json", check=True).stdout) == []
    _nothing_ran(perfsuite_env, tmp_path)


def test_a_plan_with_a_non_finite_value_is_refused_before_anything_runs(cli_here, perfsuite_env, tmp_path):
    plan = tmp_path / "plan.toml"
    plan.write_text('name = "bad"\n[[run]]\nworkloads = ["kernels.memory"]\nmin_time = nan\n')
    proc = cli_here("run", "--plan", str(plan), "--device", "cpu")
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert "not a finite number" in proc.stderr
    _nothing_ran(perfsuite_env, tmp_path)
