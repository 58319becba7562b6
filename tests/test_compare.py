"""``perfsuite compare``: the ratio of medians with its CI, Mann-Whitney on raw samples, a
verdict beyond a threshold, refusal of different comparability keys, environment
differences. Statistics are checked against scipy where it is installed."""

from __future__ import annotations

import json

import numpy as np
import pytest
from factories import gemm_metrics, make_record

from perfsuite.analysis.compare import NO_CHANGE, SLOWER, NotComparable, compare_records
from perfsuite.measure import stats

SLEEP_PLUGIN = '''
import os, time
from dataclasses import dataclass
from suite import Case, Work, Workload, hookimpl, param

@dataclass(frozen=True)
class SleepParams:
    sleep_ms: float = param(4.0, "milliseconds each call sleeps")

class Sleep(Workload):
    """A timed call whose duration is set by its parameter: a stable CPU workload. The
    environment variable PS_TEST_SLOWDOWN plants a relative slowdown without changing
    the parameters (what a regression in the code would do)."""
    name = "testing.sleep"
    category = "kernels"
    Params = SleepParams

    def cases(self, ctx):
        seconds = self.params.sleep_ms / 1e3 * (1.0 + float(os.environ.get("PS_TEST_SLOWDOWN", "0")))
        return [Case("sleep", lambda: time.sleep(seconds), Work(items=1, item_unit="sleeps"))]

@hookimpl
def perfsuite_register_workloads(register):
    register(Sleep)
'''
RUN_ARGS = ("run", "testing.sleep", "--device", "cpu", "--warmup", "2", "--iterations", "30", "--seed", "5", "--json")


def _samples(seed: int, scale: float = 1.0, n: int = 40) -> tuple[float, ...]:
    rng = np.random.default_rng(seed)
    return tuple(float(v) for v in rng.normal(1.0, 0.01, n) * scale)


def _record(time_ms, **kw):
    return make_record(metrics=gemm_metrics(time_ms=time_ms), **kw)


def test_mann_whitney_and_ratio_ci_agree_with_scipy():
    scipy_stats = pytest.importorskip("scipy.stats")
    rng = np.random.default_rng(0)
    for n1, n2, ties in ((5, 6, False), (8, 30, False), (30, 35, False), (25, 25, True)):
        a, b = rng.normal(0, 1, n1), rng.normal(0.4, 1, n2)
        if ties:
            a, b = np.round(a), np.round(b)
        u, p = stats.mann_whitney_u(a, b)
        expected = scipy_stats.mannwhitneyu(a, b, alternative="two-sided")
        assert u == pytest.approx(expected.statistic) and p == pytest.approx(expected.pvalue, rel=1e-9)
    ratio, low, high = stats.ratio_of_medians_ci([2.0] * 5 + [2.1] * 5, [3.0] * 5 + [3.15] * 5)
    assert ratio == pytest.approx(1.5) and low <= ratio <= high


def test_a_planted_ten_percent_slowdown_is_slower_with_small_p():
    a = _record(_samples(1))
    b = _record(_samples(2, scale=1.10))
    result = compare_records(a, b)
    assert result.verdict == SLOWER
    head = next(m for m in result.metrics if m.headline)
    assert head.metric == "tflops" and head.ratio == pytest.approx(1 / 1.10, rel=0.01)
    assert head.p_value < 0.05 and head.ratio_ci_high < 1.0
    time_row = next(m for m in result.metrics if m.metric == "time_ms")
    assert time_row.verdict == SLOWER and time_row.ratio > 1.0


def test_same_code_twice_is_no_significant_change_and_small_changes_stay_below_the_threshold():
    assert compare_records(_record(_samples(1)), _record(_samples(2))).verdict == NO_CHANGE
    # 1% slower, clearly significant with these samples, but under the 2% threshold
    tiny = compare_records(_record(_samples(1, n=400)), _record(_samples(2, scale=1.01, n=400)))
    assert tiny.verdict == NO_CHANGE and next(m for m in tiny.metrics if m.headline).p_value < 0.05
    assert (
        compare_records(_record(_samples(1, n=400)), _record(_samples(2, scale=1.01, n=400)), threshold=0.005).verdict
        == SLOWER
    )


def test_different_parameters_are_refused_naming_each_field():
    a = _record(_samples(1), params={"m": 1024, "dtype": "bf16"})
    b = _record(_samples(2), params={"m": 2048, "dtype": "bf16"}, version=2)
    with pytest.raises(NotComparable) as err:
        compare_records(a, b)
    assert err.value.fields == ["version: 1 vs 2", "param.m: 1024 vs 2048"]


def test_environment_differences_are_listed():
    a = _record(_samples(1), device="cuda", host="a")
    b = _record(_samples(2), device="cuda", host="b", environment={"packages": {"torch": "2.12.0"}})
    facts = {d["fact"]: (d["a"], d["b"]) for d in compare_records(a, b).environment_differences}
    assert facts["host"] == ("a", "b") and facts["torch"] == ("2.11.0", "2.12.0")


def test_compare_and_reproduce_cli_on_real_cpu_runs(cli, add_plugin, perfsuite_env):
    """Two runs of the same code: no significant change; a planted 10% slowdown: slower,
    p < 0.05; different parameters: refused, naming the parameter. Reproducing the first
    run says "reproduced" and the new record links to it."""
    add_plugin("sleep", SLEEP_PLUGIN)
    base = json.loads(cli(*RUN_ARGS, check=True).stdout)[0]
    same = json.loads(cli(*RUN_ARGS, check=True).stdout)[0]
    perfsuite_env["PS_TEST_SLOWDOWN"] = "0.10"
    slow = json.loads(cli(*RUN_ARGS, check=True).stdout)[0]
    del perfsuite_env["PS_TEST_SLOWDOWN"]

    verdict = json.loads(cli("compare", base["run_id"], slow["run_id"][:12], "--json", check=True).stdout)
    head = next(m for m in verdict["metrics"] if m["headline"])
    assert verdict["verdict"] == "slower" and head["p_value"] < 0.05 and head["ratio"] < 0.95
    assert "slower" in cli("compare", base["run_id"], slow["run_id"], check=True).stdout

    unchanged = cli("compare", base["run_id"], same["run_id"], check=True).stdout
    assert "verdict: no significant change" in unchanged

    other = json.loads(
        cli(
            "run", "testing.sleep", "-p", "sleep_ms=2", "--device", "cpu", "--iterations", "5", "--json", check=True
        ).stdout
    )[0]
    refused = cli("compare", base["run_id"], other["run_id"])
    assert refused.returncode == 1
    assert refused.stderr.strip() == "Error: runs are not comparable: different param.sleep_ms: 4.0 vs 2.0"

    reproduced = cli("reproduce", base["run_id"][:8], "--json")
    assert reproduced.returncode == 0, reproduced.stderr
    outcome = json.loads(reproduced.stdout)
    assert outcome["verdict"] == "reproduced" and outcome["original"] == base["run_id"]
    again = json.loads(cli("show", outcome["reproduction"], "--json", check=True).stdout)
    assert again["reproduces"] == base["run_id"]
    assert again["controls"]["seed"] == base["controls"]["seed"] and again["workload"] == base["workload"]
    assert again["controls"]["iterations"] == 30 and again["comparability_key"] == base["comparability_key"]


def test_reproduce_passes_the_stored_run_exactly():
    from perfsuite.cli.reproduce import run_arguments

    record = make_record(
        params={"dtypes": ["bf16", "fp8"], "m": 8192, "flag": True},
        controls={"seed": 42, "iterations": None, "min_time_s": 0.5, "l2_flush": True},
    )
    args = run_arguments(record)
    assert args[:2] == ["run", "kernels.gemm"]
    for expected in (
        ["--seed", "42"],
        ["-p", "dtypes=bf16,fp8"],
        ["-p", "m=8192"],
        ["-p", "flag=true"],
        ["--min-time", "0.5"],
        ["--reproduces", record["run_id"]],
    ):
        i = args.index(expected[0]) if expected[0] != "-p" else args.index(expected[1]) - 1
        assert args[i : i + 2] == expected
    assert "--l2-flush" in args and "--iterations" not in args
