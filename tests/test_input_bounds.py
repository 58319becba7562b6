"""Inputs are data from wherever the user points, checked against stated bounds before anything
runs: a plan file is read only if it is a regular file under a size bound, nests within a depth
bound, makes at most a bounded number of runs and follows a schema (types, no unknown keys, no
command-line option set in a plan); numbers are ASCII digits (no ``_``), finite and within 64
bits; a list parameter names each item once; a rendezvous endpoint is a host and a port from 1 to
65535; a record's dates lie within a sane range; names hold no control characters. Each refusal
is one line and exit 2 (``import``'s own refusals: exit 1), from a real ``perfsuite`` process,
and nothing is measured or stored."""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys

import click
import pytest
from support.factories import make_record, sign

from perfsuite.engine.plan import MAX_PLAN_BYTES, MAX_RUNS, shipped
from tests.conftest import run_cli

# A workload of its own, so that these cases do not hang on any built-in family's parameters.
BOUNDS_PLUGIN = """
from dataclasses import dataclass
from perfsuite import hookimpl, Workload, Case, Work, param

@dataclass(frozen=True)
class P:
    size_bytes: int = param(1024, "bytes (K/M/G suffixes)")
    lr: float = param(0.5, "a rate")
    ops: tuple[str, ...] = param(("copy", "triad"), "kernels", choices=("copy", "scale", "triad"))
    sizes: tuple[int, ...] = param((1024,), "sizes (K/M/G suffixes)")

class Sized(Workload):
    name = "bounds.sized"
    category = "kernels"
    Params = P
    def cases(self, ctx):
        return [Case(op, lambda: None, Work(items=1)) for op in self.params.ops]

@hookimpl
def perfsuite_register_workloads(register):
    register(Sized)
"""
RUN = ("run", "bounds.sized", "--device", "cpu", "--warmup", "0", "--iterations", "1")
MEMORY_CAP = 4 * 1024**3  # a refused read of /dev/zero must not take the machine's memory with it
WAIT_S = 60  # a refusal comes in seconds; a process still running then has hung or started measuring


@pytest.fixture
def bounds(add_plugin, perfsuite_env):
    add_plugin("bounds", BOUNDS_PLUGIN)
    return perfsuite_env


def capped_cli(env: dict, *args: str) -> subprocess.CompletedProcess:
    """``perfsuite ARGS`` as a real process with its address space capped and a deadline: a
    case that would block or read forever fails the test instead of taking the machine."""

    def cap() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (MEMORY_CAP, MEMORY_CAP))

    return subprocess.run(
        [sys.executable, "-m", "perfsuite", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=WAIT_S,
        preexec_fn=cap,
    )


def refused(proc: subprocess.CompletedProcess, *expected: str, code: int = 2) -> str:
    """The one line of a refusal, checked to hold each of ``expected``."""
    lines = [line for line in proc.stderr.splitlines() if line.strip() and not line.startswith("Warning: ")]
    assert proc.returncode == code, (proc.returncode, proc.stdout[-2000:], proc.stderr[-2000:])
    assert "Traceback" not in proc.stderr, proc.stderr[-2000:]
    assert len(lines) == 1 and lines[0].startswith("Error: "), proc.stderr[-2000:]
    for part in expected:
        assert part in lines[0], lines[0]
    return lines[0]


def nothing_ran(tmp_path) -> None:
    records = tmp_path / "records"
    assert not records.exists() or not list(records.glob("*.json"))
    assert not (tmp_path / "registry.db").exists()  # refused before the registry was opened


def write_plan(tmp_path, text: str, name: str = "plan.toml"):
    path = tmp_path / name
    path.write_text(text)
    return path


ENTRY = '[[run]]\nworkloads = ["bounds.sized"]\ndevice = "cpu"\n'


# -- plan files: what is read, and how much -----------------------------------------------------
def test_a_fifo_given_as_a_plan_is_refused_without_waiting_for_a_writer(bounds, tmp_path):
    fifo = tmp_path / "plan.toml"
    os.mkfifo(fifo)
    refused(capped_cli(bounds, "run", "--plan", str(fifo)), f"plan {fifo}: not a regular file")
    nothing_ran(tmp_path)


def test_dev_zero_given_as_a_plan_is_refused_before_a_byte_is_read(bounds, tmp_path):
    refused(capped_cli(bounds, "run", "--plan", "/dev/zero"), "plan /dev/zero: not a regular file")
    nothing_ran(tmp_path)


def test_a_plan_over_the_size_bound_is_refused_naming_the_bound(bounds, tmp_path):
    plan = write_plan(tmp_path, ENTRY + "#" * (MAX_PLAN_BYTES + 1) + "\n")
    refused(capped_cli(bounds, "run", "--plan", str(plan)), f"over the {MAX_PLAN_BYTES:,}-byte limit of a plan")
    nothing_ran(tmp_path)


def test_a_plan_nested_100000_deep_is_one_line(bounds, tmp_path):
    plan = write_plan(tmp_path, ENTRY + "params = { sizes = " + "[" * 100_000 + "]" * 100_000 + " }\n")
    refused(capped_cli(bounds, "run", "--plan", str(plan)), "nests tables or arrays too deeply")
    nothing_ran(tmp_path)


def test_a_plan_nested_deeper_than_its_schema_is_one_line(bounds, tmp_path):
    plan = write_plan(tmp_path, ENTRY + "params = { sizes = [[[[1]]]] }\n")
    refused(capped_cli(bounds, "run", "--plan", str(plan)), "nests tables or arrays more than 5 deep")
    nothing_ran(tmp_path)


def test_a_plan_of_200000_runs_is_refused_before_any_starts(bounds, tmp_path):
    plan = write_plan(
        tmp_path, '[defaults]\nrepeat = 1000\ndevice = "cpu"\n' + '[[run]]\nworkloads = ["bounds.sized"]\n' * 200
    )
    refused(capped_cli(bounds, "run", "--plan", str(plan)), "200,000 runs", f"limit of {MAX_RUNS:,} runs")
    nothing_ran(tmp_path)


def test_a_plan_of_200000_runs_is_refused_as_a_slurm_job_array_too(bounds, tmp_path):
    plan = write_plan(tmp_path, '[defaults]\ndevice = "cpu"\n' + '[[run]]\nworkloads = ["bounds.sized"]\n' * 200)
    args = ("run", "--plan", str(plan), "--repeat", "1000", "--slurm", "--dry-run")
    refused(capped_cli(bounds, *args), "200,000 runs", f"limit of {MAX_RUNS:,} runs")
    nothing_ran(tmp_path)


def test_a_plan_of_more_entries_than_the_bound_is_refused(bounds, tmp_path):
    plan = write_plan(tmp_path, ENTRY * 1001)
    refused(capped_cli(bounds, "run", "--plan", str(plan)), "1,001 [[run]] entries, over the limit of 1,000")
    nothing_ran(tmp_path)


# -- plan files: the schema ----------------------------------------------------------------------
@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("workloads = 5", "run 1: workloads is an array of workload names, not an integer"),
        ("seed = true", "run 1: seed is a boolean, not an integer"),
        ("repeat = 2.5", "run 1: repeat is a number, not an integer"),
        ('repeat = "2"', "run 1: repeat is a string, not an integer"),
        ("label = { a = 1 }", "run 1: label is a table, not a string"),
        ('label = "two\\nlines"', "run 1: label 'two\\nlines': holds a control character (0x0a)"),
        ("quick = 1", "run 1: quick is an integer, not true or false"),
        ('timeout = "60"', "run 1: timeout is a string, not a number"),
        ("params = { size_bytes = { a = 1 } }", "run 1: params.size_bytes is a table"),
        ("slurm = true", "run 1: slurm cannot be set in a plan: give --slurm on the command line"),
        ('db = "sqlite:///elsewhere.db"', "run 1: db cannot be set in a plan: give --db on the command line"),
        ("json = true", "run 1: json cannot be set in a plan: give --json on the command line"),
        ("nodes = 2", "run 1: nodes cannot be set in a plan: give --nodes on the command line"),
        ('reproduces = "abc"', "run 1: reproduces cannot be set in a plan: give --reproduces on the command line"),
        ("fast = true", "run 1: unknown option 'fast'"),
    ],
)
def test_a_plan_value_of_the_wrong_type_or_key_is_refused_not_coerced(bounds, tmp_path, line, expected):
    entry = '[[run]]\ndevice = "cpu"\n' if line.startswith("workloads") else ENTRY
    plan = write_plan(tmp_path, entry + line + "\n")
    refused(run_cli(bounds, "run", "--plan", str(plan)), f"plan {plan}, {expected}")
    nothing_ran(tmp_path)


def test_a_plan_key_or_value_of_100000_characters_is_quoted_short(bounds, tmp_path):
    for text, expected in (
        (ENTRY + "k" * 100_000 + " = 1\n", "run 1: unknown option 'kkkk"),
        (ENTRY + 'division = "' + "x" * 100_000 + '"\n', "run 1: division = 'xxxx"),
        ('name = "a\\u001b[2J"\n' + ENTRY, "name 'a\\x1b[2J': holds a control character (0x1b)"),
    ):
        plan = write_plan(tmp_path, text)
        line = refused(run_cli(bounds, "run", "--plan", str(plan)), expected)
        assert len(line.replace(str(plan), "PLAN")) < 400, line  # the plan's own path is as long as the folder
    nothing_ran(tmp_path)


def test_a_plan_name_that_is_not_a_string_is_refused(bounds, tmp_path):
    plan = write_plan(tmp_path, "name = 5\n" + ENTRY)
    refused(run_cli(bounds, "run", "--plan", str(plan)), f"plan {plan}: name is an integer, not a string")
    nothing_ran(tmp_path)


def test_a_valid_plan_still_runs_with_its_typed_values(bounds, tmp_path):
    plan = write_plan(
        tmp_path,
        'name = "ok"\n' + ENTRY + 'label = "sized"\nseed = 7\ntimeout = 60\nwarmup = 0\niterations = 1\n'
        'params = { size_bytes = "1K", lr = 0.25, ops = ["copy"] }\n',
    )
    proc = run_cli(bounds, "run", "--plan", str(plan), "--json", check=True)
    (record,) = json.loads(proc.stdout)
    assert record["workload"]["params"]["size_bytes"] == 1024 and record["workload"]["params"]["ops"] == ["copy"]
    assert (record["controls"]["seed"], record["controls"]["timeout_s"]) == (7, 60.0)


def test_every_shipped_plan_loads_under_the_command_lines_schema(perfsuite_env):
    """The schema is the run command's own options: every plan shipped with perfsuite passes it
    (types, keys, bounds), as ``perfsuite run --plan NAME`` reads it."""
    from perfsuite.cli import cli as perfsuite
    from perfsuite.cli.run import load_plan, run_cmd

    with click.Context(perfsuite, obj={}) as root, run_cmd.make_context("run", [], parent=root) as ctx:
        for name in shipped():
            plan = load_plan(ctx, name)
            assert plan.runs, name


# -- numbers, lists, endpoints --------------------------------------------------------------------
@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (("--timeout", "1_0"), "Invalid value for '--timeout': '1_0' is not a number (ASCII digits only"),
        (("--min-time", "0_5"), "Invalid value for '--min-time': '0_5' is not a number (ASCII digits only"),
        (("--seed", "1_0"), "Invalid value for '--seed': '1_0' is not an integer (ASCII digits only"),
        (("--repeat", "1_0"), "Invalid value for '--repeat': '1_0' is not an integer (ASCII digits only"),
        (("--price-per-hour", "1_0"), "Invalid value for '--price-per-hour': '1_0' is not a number"),
        (("-p", "size_bytes=1_000"), "bounds.sized parameter size_bytes: '1_000' is not an integer (ASCII digits"),
        (("-p", "size_bytes=1_0K"), "bounds.sized parameter size_bytes: '1_0K' is not an integer (ASCII digits"),
        (("-p", "lr=0.0_1"), "bounds.sized parameter lr: '0.0_1' is not a number (ASCII digits only"),
        (("-p", "lr=1e999"), "bounds.sized parameter lr: '1e999' is not a finite number"),
        (("-p", "size_bytes=9999999999G"), "bounds.sized parameter size_bytes: '9999999999G' is outside the 64-bit"),
        (("-p", "sizes=1_024"), "bounds.sized parameter sizes: '1_024' is not an integer"),
        (("-p", "ops=copy,copy"), "bounds.sized parameter ops: copy given more than once"),
        (("-p", "sizes=1K,1024"), "bounds.sized parameter sizes: 1024 given more than once"),
        (("--rdzv-endpoint", "host:99999"), "'host:99999': the port '99999' is not a number from 1 to 65535"),
        (("--rdzv-endpoint", "host:0"), "'host:0': the port '0' is not a number from 1 to 65535"),
        (("--rdzv-endpoint", "host"), "'host' is not HOST:PORT"),
        (("--rdzv-endpoint", ":29500"), "':29500' is not HOST:PORT"),
        (("--rdzv-endpoint", "bad host:29500"), "'bad host' is not a host name or address"),
        (("--rdzv-endpoint", "[::g]:29500"), "[::g] is not an IPv6 address"),
        (("--rdzv-endpoint", "host:\uff12\uff19\uff15\uff10\uff10"), "is not a number from 1 to 65535"),
    ],
)
def test_a_number_list_or_endpoint_out_of_its_rules_is_one_line_before_anything_runs(bounds, tmp_path, args, expected):
    refused(run_cli(bounds, *RUN, *args), expected)
    nothing_ran(tmp_path)


def test_size_suffixes_and_plain_digits_still_parse(bounds):
    proc = run_cli(bounds, *RUN, "-p", "size_bytes=64M", "-p", "sizes=1K,2048", "-p", "lr=.5e-1", "--json", check=True)
    (record,) = json.loads(proc.stdout)
    params = record["workload"]["params"]
    assert (params["size_bytes"], params["sizes"], params["lr"]) == (64 * 1024**2, [1024, 2048], 0.05)


def test_the_ports_of_a_rendezvous_after_the_endpoints_must_be_ports(bounds, tmp_path):
    """Each launch takes the port after the last: two runs from 65535 would need 65536."""
    proc = capped_cli(bounds, *RUN, "--repeat", "2", "--rdzv-endpoint", "127.0.0.1:65535")
    refused(proc, "--rdzv-endpoint 127.0.0.1:65535: 2 runs take ports 65535 to 65536, above 65535")
    nothing_ran(tmp_path)


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (("reproduce", "0" * 32, "--threshold", "nan"), "Invalid value for '--threshold': 'nan' is not a finite"),
        (("reproduce", "0" * 32, "--threshold", "inf"), "Invalid value for '--threshold': 'inf' is not a finite"),
        (("history", "--workload", "bounds.sized", "--min-step", "nan"), "'--min-step': 'nan' is not a finite"),
        (("history", "--workload", "bounds.sized", "--min-step", "1_0"), "'--min-step': '1_0' is not a number"),
        (("results", "--limit", "99999999999999999999999"), "'--limit': 99999999999999999999999 is not in the range"),
        (("results", "--limit", "1_0"), "Invalid value for '--limit': '1_0' is not an integer"),
        (("history", "--workload", "bounds.sized", "--system", "box\nbox"), "holds a control character (0x0a)"),
        (("history", "--workload", "bounds.sized", "--system", "\x1b[31mred"), "holds a control character (0x1b)"),
        (("history", "--workload", "bounds.sized\r", "--case", "x"), "'--workload': 'bounds.sized\\r' holds a control"),
        (("compare", "--workload", "bounds.sized", "--last", "1_0"), "'--last': '1_0' is not an integer"),
        (("compare", "--workload", "bounds.sized", "--threshold", "0.0_5"), "'0.0_5' is not a relative change"),
        (("compare", "--workload", "bounds.sized", "--system", "a\x07", "--system", "b"), "control character (0x07)"),
        (("slurm", "wait", "1", "--timeout", "nan"), "Invalid value for '--timeout': 'nan' is not a finite number"),
        (
            (*RUN, "--slurm", "--job-name", "x\n#SBATCH --mem=1T"),
            "'--job-name': 'x\\n#SBATCH --mem=1T' holds a control",
        ),
    ],
)
def test_an_option_of_a_registry_command_out_of_its_rules_is_one_line(bounds, tmp_path, args, expected):
    refused(run_cli(bounds, *args), expected)
    nothing_ran(tmp_path)


# -- record dates ----------------------------------------------------------------------------------
@pytest.mark.parametrize("year", ["9999", "0001", "1970"])
def test_a_record_dated_outside_the_sane_years_is_refused_by_import_naming_it(perfsuite_env, tmp_path, year):
    record = make_record(device="cuda", host="box1")
    record["started_at"] = f"{year}-06-01T12:00:00+00:00"
    record["finished_at"] = f"{year}-06-01T12:00:05+00:00"
    path = tmp_path / "dated.json"
    path.write_text(json.dumps(sign(record)))
    line = refused(run_cli(perfsuite_env, "import", str(path)), code=1)
    assert line.startswith(f"Error: {path}: impossible figure: $.started_at {year}-06-01T12:00:00+00:00 is outside")
    assert json.loads(run_cli(perfsuite_env, "results", "--json", check=True).stdout) == []
