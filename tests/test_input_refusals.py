"""Every input is checked before anything runs: non-finite numbers, counts beyond their
stated bounds, seeds the seeders cannot take and digits that are not ASCII (refused on
purpose, for options and ``-p`` values alike), repeated list items, endpoints that are not
HOST:PORT and names with control characters are one line and exit 2, and nothing is measured
or recorded. The many option cases run the CLI in this process (the same code, no Python
start-up each); the first also runs as a real process. The bad plans (a FIFO, /dev/zero, a
plan too large, too deep, of too many runs, or off its schema) and records dated where no
right clock could stamp them run as real processes, under a deadline and a memory cap. These
are the lists ``tools/safety_tally.py`` counts."""

from __future__ import annotations

import json
import resource
import subprocess
import sys

import pytest
from support.safety_support import BAD_DATES, BAD_PLANS, RUN, bad_plan, dated_record
from support.safety_support import BAD_OPTIONS as REFUSED

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


MEMORY_CAP = 4 * 1024**3  # a plan read forever fails the test rather than taking the machine


def _capped() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_CAP, MEMORY_CAP))


@pytest.mark.parametrize("case", list(BAD_PLANS))
def test_a_bad_plan_is_one_line_and_exit_2_from_a_real_process(perfsuite_env, tmp_path, case):
    proc = subprocess.run(
        [sys.executable, "-m", "perfsuite", "run", "--plan", bad_plan(tmp_path / "plans", case)],
        env=perfsuite_env,
        capture_output=True,
        text=True,
        timeout=60,  # a refusal takes seconds; a FIFO read or a 200,000-run plan started never ends
        preexec_fn=_capped,
    )
    assert proc.returncode == 2, (proc.stdout[-1000:], proc.stderr[-1000:])
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: plan ") and "Traceback" not in proc.stderr, proc.stderr
    assert BAD_PLANS[case][1] in lines[0], lines[0]
    _nothing_ran(perfsuite_env, tmp_path)
    assert not (tmp_path / "registry.db").exists()


@pytest.mark.parametrize("case", list(BAD_DATES))
def test_a_record_dated_where_no_right_clock_could_is_refused_by_import(perfsuite_env, tmp_path, case):
    path = tmp_path / "dated.json"
    path.write_text(json.dumps(dated_record(BAD_DATES[case])))
    proc = run_cli(perfsuite_env, "import", str(path))
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr
    (line,) = proc.stderr.strip().splitlines()
    assert line.startswith(f"Error: {path}: impossible figure: $.started_at {BAD_DATES[case]}-06-01"), line
    assert "is outside the years 2000 to 2199" in line
    assert json.loads(run_cli(perfsuite_env, "results", "--json", check=True).stdout) == []
