"""Run plans (``perfsuite run --plan``): the shipped plans are valid and name workloads that
exist; a plan file runs each entry with its own options into one registry and one summary;
a bad plan is one line naming its file and entry, before anything runs."""

from __future__ import annotations

import json
import re

import pytest

from perfsuite.engine.plan import PlanError, load, shipped
from perfsuite.plugins import get_host


def test_the_shipped_plans_load_and_name_only_workloads_that_exist():
    from perfsuite.cli.run import RUN_DEFAULTS

    names = shipped()
    assert {"quick", "cpu", "gpu-one", "gpu-node", "crosschecks"} <= set(names)
    known = set(get_host().workloads) | {"triton.fused_chain", "triton.softmax", "triton.matmul"}
    for name in names:
        plan = load(name, lambda option, value: value)
        assert plan.description, name
        for run in plan.runs:
            assert set(run.workloads) <= known, (name, run.label)
            assert set(run.options) <= set(RUN_DEFAULTS) | {"rounds", "nccl_tests", "mpirun"}, (name, run.label)


def test_a_plan_runs_each_entry_with_its_own_options_into_one_summary(cli, tmp_path):
    plan = tmp_path / "two.toml"
    plan.write_text(
        'name = "two"\ndescription = "two small runs"\n[defaults]\ndevice = "cpu"\niterations = 3\n'
        '[[run]]\nworkloads = ["kernels.gemm"]\nquick = true\nparams = { m = 32, n = 32, k = 32 }\n'
        '[[run]]\nworkloads = ["kernels.memory"]\nquick = true\nrepeat = 2\nwarmup = 0\n'
    )
    proc = cli("run", "--plan", str(plan), "--json", check=True)
    records = json.loads(proc.stdout)
    assert [r["workload"]["name"] for r in records] == ["kernels.gemm", "kernels.memory", "kernels.memory"]
    gemm = records[0]
    assert (gemm["workload"]["params"]["m"], gemm["controls"]["iterations"]) == (32, 3)
    assert [r["controls"]["warmup"] for r in records[1:]] == [0, 0]
    assert len({r["controls"]["seed"] for r in records[1:]}) == 2  # a repeat's runs have seeds of their own
    assert "plan two" in proc.stderr
    listed = json.loads(cli("results", "--json", check=True).stdout)
    assert len(listed) == 3


def test_options_on_the_command_line_apply_to_every_entry(cli, tmp_path):
    plan = tmp_path / "one.toml"
    plan.write_text(
        '[[run]]\nworkloads = ["kernels.gemm"]\nquick = true\nparams = { m = 16, n = 16, k = 16 }\niterations = 5\n'
    )
    records = json.loads(
        cli("run", "--plan", str(plan), "--device", "cpu", "--iterations", "2", "--json", check=True).stdout
    )
    assert records[0]["controls"]["iterations"] == 2


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('[[run]]\nworkloads = ["kernels.gemm"]\nrepeat = 0\n', "run 1: repeat = 0: "),
        ('[[run]]\nworkloads = ["kernels.gemm"]\nrounds = 3\n', "run 1: rounds is an option of a cross-check"),
        ('[[run]]\nworkloads = ["kernels.gemm"]\nfast = true\n', "run 1: unknown option 'fast'"),
        ('[[run]]\nworkloads = ["kernels.nope"]\n', "unknown workload 'kernels.nope'"),
        ('[[run]]\nworkloads = ["kernels.gemm"]\nparams = { size = 3 }\n', "unknown parameter 'size'"),
        ('[[run]]\ndevice = "cpu"\n', "run 1: name its workloads, or set quick = true"),
        ("[[run]\n", "not valid TOML"),
        ("runs = 3\n", "unknown top-level keys ['runs']"),
    ],
)
def test_a_bad_plan_is_one_line_and_exit_2_with_nothing_recorded(cli, tmp_path, text, expected):
    plan = tmp_path / "bad.toml"
    plan.write_text(text)
    proc = cli("run", "--plan", str(plan))
    assert proc.returncode == 2, proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("Error: ") and expected in lines[0], proc.stderr
    assert not (tmp_path / "registry.db").exists()  # refused before the registry was even opened


def test_a_plan_that_is_neither_a_file_nor_shipped_names_the_shipped_ones():
    with pytest.raises(PlanError, match=r"no plan file 'nightly'.*shipped: .*gpu-one"):
        load("nightly", lambda option, value: value)


def test_plans_lists_the_shipped_plans_and_shows_one(cli):
    listed = json.loads(cli("plans", "--json", check=True).stdout)
    assert {p["name"] for p in listed} == set(shipped())
    assert cli("plans", "--show", "quick", check=True).stdout.startswith('name = "quick"')


def test_every_gpu_plan_bounds_each_run_within_a_ten_minute_call_and_states_its_gpu_time():
    """The GPU plans are what a lent machine runs in commands of at most 10 minutes: each run has
    a timeout below that, and each plan says how long it takes on the GPU."""
    for name in ("gpu-one", "gpu-quick", "gpu-training", "crosschecks"):
        plan = load(name, lambda option, value: value)
        assert re.search(r"about [\d.]+ minutes", plan.description), name
        for run in plan.runs:
            assert run.options["device"] == "cuda" and 0 < run.options["timeout_s"] < 600, (name, run.label)


def test_the_4_gpu_training_plan_scales_each_model_weakly_and_strongly_over_1_2_and_4_gpus():
    """Its throughput entries, grouped as the leaderboard's scaling view groups tables (every
    setting equal but the world, and for weak scaling the global batch, the batch per GPU held):
    for each model one weak series and one strong series, each at 1, 2 and 4 GPUs; the strong
    series' 2-GPU point is the weak series' own run."""
    plan = load("scaleout-training-x4", lambda option, value: value)
    weak: dict[tuple, set[int]] = {}
    strong: dict[tuple, set[int]] = {}
    for run in plan.runs:
        params = dict(item.split("=", 1) for item in run.params)  # as -p K=V
        if params.get("goal") != "throughput":
            continue
        gpus = run.options["nproc_per_node"]
        rest = tuple(sorted((k, v) for k, v in params.items() if k != "global_batch"))
        batch = int(params["global_batch"])
        weak.setdefault((run.workloads[0], rest, batch // gpus), set()).add(gpus)
        strong.setdefault((run.workloads[0], rest, batch), set()).add(gpus)
    for model in ("training.gpt", "training.resnet"):
        assert [g for (w, _, _), g in weak.items() if w == model and len(g) > 1] == [{1, 2, 4}], model
        assert [g for (w, _, _), g in strong.items() if w == model and len(g) > 1] == [{1, 2, 4}], model
