"""One path from what the user asked for to a run: ``perfsuite run`` (its command line as click
parses it) and ``perfsuite.run`` (its Python arguments) build their requests with the same
function, so the same arguments make equal requests and are refused with the same line."""

from __future__ import annotations

import pytest

from perfsuite.api import run_requests
from perfsuite.cli.run import command_requests, run_cmd


def cli_requests(*argv: str) -> list:
    """The requests ``perfsuite run ARGV`` would hand the runner (nothing runs)."""
    with run_cmd.make_context("run", list(argv)) as ctx:
        requests, crosschecks = command_requests(ctx)
    assert crosschecks == 0
    return requests


def test_the_command_line_and_perfsuite_run_build_equal_requests(perfsuite_env):
    cli = cli_requests(
        "kernels.gemm",
        "-p",
        "m=64",
        "-p",
        "dtypes=fp32",
        "--device",
        "cpu",
        "--seed",
        "11",
        "--iterations",
        "3",
        "--warmup",
        "0",
        "--timeout",
        "60",
    )
    api = run_requests(
        "kernels.gemm",
        params={"m": 64, "dtypes": ("fp32",)},
        controls={"device": "cpu", "seed": 11, "iterations": 3, "warmup": 0, "timeout_s": 60.0},
    )
    assert cli == api
    (req,) = api
    assert req.params.m == 64 and req.params.dtypes == ("fp32",)
    assert (req.controls.seed, req.controls.iterations, req.controls.timeout_s) == (11, 3, 60.0)
    assert req.launch.nproc_per_node == 1


def test_quick_means_the_same_preset_and_minimum_time_on_both_paths(perfsuite_env):
    cli = cli_requests("kernels.gemm", "--quick", "--device", "cpu", "--seed", "3")
    api = run_requests("kernels.gemm", quick=True, controls={"device": "cpu", "seed": 3})
    assert cli == api and api[0].quick and api[0].params.m == 256 and api[0].controls.min_time_s == 0.2


def test_the_builder_differs_where_the_arguments_do(perfsuite_env):
    """The equality above is not vacuous: a different seed or parameter makes a different request."""
    base = cli_requests("kernels.gemm", "--device", "cpu", "--seed", "1")
    assert base != cli_requests("kernels.gemm", "--device", "cpu", "--seed", "2")
    assert base != run_requests("kernels.gemm", params={"m": 128}, controls={"device": "cpu", "seed": 1})


def test_both_paths_refuse_an_unknown_parameter_with_the_same_line(perfsuite_env, capsys):
    with pytest.raises(ValueError) as refused:
        run_requests("kernels.gemm", params={"mm": 64}, controls={"device": "cpu"})
    with pytest.raises(SystemExit) as exited:
        cli_requests("kernels.gemm", "-p", "mm=64", "--device", "cpu")
    assert exited.value.code == 2
    line = capsys.readouterr().err.strip()
    assert line == f"Error: {refused.value}" and "did you mean 'm'?" in line
