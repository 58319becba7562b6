"""``perfsuite compare``: the ratio of medians with its CI, Mann-Whitney on raw samples, a
verdict beyond a threshold, refusal of different comparability keys, environment
differences. Statistics are checked against scipy where it is installed."""

from __future__ import annotations

import json

import numpy as np
import pytest
from support.factories import gemm_metrics, make_record

from perfsuite.analysis.compare import NO_CHANGE, SLOWER, NotComparable, compare_records
from perfsuite.measure import stats

SLEEP_PLUGIN = '''
import os, time
from dataclasses import dataclass
from perfsuite import Case, Work, Workload, hookimpl, param

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


def test_a_metric_whose_baseline_is_zero_is_left_out_not_divided_by():
    """busbw at world size one is zero by nccl-tests' formula: no ratio, and no error."""
    from support.factories import make_metric

    from perfsuite.analysis.compare import compare_runs

    def run(seed: int) -> dict:
        rng = np.random.default_rng(seed)
        time_us = list(rng.normal(10.0, 0.1, 20))
        return make_record(
            workload_name="collectives.all_reduce",
            params={},
            metrics=[
                make_metric("in-place 1 KiB", "busbw_gbps", "GB/s", [0.0] * 20, higher_is_better=True),
                make_metric("in-place 1 KiB", "time_us", "us", time_us, higher_is_better=False),
            ],
        )

    for a, b in (([run(1)], [run(2)]), ([run(1), run(2)], [run(3), run(4)])):
        result = compare_runs(a, b)
        assert [m.metric for m in result.metrics] == ["time_us"], result.metrics
        assert result.no_ratio == ["in-place 1 KiB busbw_gbps"]
    only_zero = make_record(
        workload_name="collectives.all_reduce",
        params={},
        metrics=[make_metric("in-place 1 KiB", "busbw_gbps", "GB/s", [0.0] * 5, higher_is_better=True)],
    )
    with pytest.raises(ValueError, match="baseline other than zero"):
        compare_runs([only_zero], [only_zero])


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


def _runs(level: float, n: int, seed: int, spread: float = 0.01) -> list[dict]:
    """``n`` runs whose own medians vary by ``spread`` around ``level`` (ms per call)."""
    rng = np.random.default_rng(seed)
    return [_record(_samples(seed * 100 + i, scale=level * float(rng.normal(1.0, spread)), n=20)) for i in range(n)]


def test_between_runs_one_value_per_run_finds_a_planted_regression_and_not_noise():
    from perfsuite.analysis.compare import BETWEEN_RUNS, compare_runs

    base, same, slow = _runs(1.0, 5, 1), _runs(1.0, 5, 2), _runs(1.10, 5, 3)
    result = compare_runs(base, slow)
    head = next(m for m in result.metrics if m.headline)
    assert result.basis == BETWEEN_RUNS and result.verdict == SLOWER and head.n_a == head.n_b == 5
    assert head.ratio == pytest.approx(1 / 1.10, rel=0.03) and head.p_value < 0.01 and head.ratio_ci_high < 1.0
    # the same code: the calls of two runs differ far beyond chance, the runs do not
    calm = compare_runs(base, same)
    assert calm.verdict == NO_CHANGE and next(m for m in calm.metrics if m.headline).p_value > 0.05
    # the calls of two of those runs, though, differ far beyond chance: run-to-run noise is not in them
    value = lambda r: r["metrics"][0]["value"]
    within = compare_records(max(base, key=value), min(same, key=value))
    assert next(m for m in within.metrics if m.headline).p_value < 1e-4


def test_a_burst_and_a_power_capped_run_are_not_compared():
    capped = {"power_capped": True, "thermal_slowdown": False, "samples": 100, "duration_s": 2.0}
    capped |= {"sm_clock_mhz_median": 1455.0, "sm_clock_mhz_max": 1980.0}
    burst = {**capped, "power_capped": False, "sm_clock_mhz_median": 1980.0, "duration_s": 0.03, "samples": 2}
    a = _record(_samples(1), device="cuda", details={"throttle": {"bf16": burst}})
    b = _record(_samples(2), device="cuda", details={"throttle": {"bf16": capped}})
    with pytest.raises(NotComparable) as err:
        compare_records(a, b)
    assert err.value.fields == ["regime: 'burst' vs 'power-capped'"]


def test_different_parameters_are_refused_naming_each_field():
    a = _record(_samples(1), params={"m": 1024, "dtype": "bf16"})
    b = _record(_samples(2), params={"m": 2048, "dtype": "bf16"}, version=2)
    with pytest.raises(NotComparable) as err:
        compare_records(a, b)
    assert err.value.fields == ["version: 1 vs 2", "param.m: 1024 vs 2048"]
    with pytest.raises(NotComparable) as err:
        compare_records(a, _record(_samples(2), params={"m": 1024, "dtype": "bf16"}, controls={"l2_flush": True}))
    assert err.value.fields == ["timing.l2_flush: False vs True"]


def test_environment_differences_are_listed():
    a = _record(_samples(1), device="cuda", host="a")
    b = _record(_samples(2), device="cuda", host="b", environment={"packages": {"torch": "2.12.0"}})
    facts = {d["fact"]: (d["a"], d["b"]) for d in compare_records(a, b).environment_differences}
    assert facts["host"] == ("a", "b") and facts["torch"] == ("2.11.0", "2.12.0")


def _ids(records: list[dict]) -> str:
    return ",".join(r["run_id"][:12] for r in records)


def test_compare_cli_between_repeats_of_real_cpu_runs_gates_a_planted_slowdown(
    cli, add_plugin, perfsuite_env, tmp_path
):
    """Two repeats of the same code (three runs each): no significant change, with a p-value over
    runs; a planted 10% slowdown: exit 3 with --fail-on slower, a Markdown table and a JUnit failure."""
    add_plugin("sleep", SLEEP_PLUGIN)
    base = json.loads(cli(*RUN_ARGS, "--repeat", "3", check=True).stdout)
    same = json.loads(cli(*RUN_ARGS, "--repeat", "3", check=True).stdout)
    perfsuite_env["PS_TEST_SLOWDOWN"] = "0.10"
    slow = json.loads(cli(*RUN_ARGS, "--repeat", "3", check=True).stdout)
    del perfsuite_env["PS_TEST_SLOWDOWN"]
    assert len(base) == len(same) == len(slow) == 3

    gate = ("--threshold", "5%", "--fail-on", "slower")
    unchanged = cli("compare", _ids(base), _ids(same), *gate, "--json")
    assert unchanged.returncode == 0, unchanged.stderr
    out = json.loads(unchanged.stdout)
    head = next(m for m in out["metrics"] if m["headline"])
    assert out["verdict"] == "no significant change" and out["basis"] == "between runs"
    assert head["metric"] == "items_per_s" and head["n_a"] == head["n_b"] == 3 and 0 <= head["p_value"] <= 1
    assert "between runs: 3 runs of A against 3 of B" in out["note"] and not out["failed"]

    junit = tmp_path / "compare.xml"
    regression = cli("compare", _ids(base), _ids(slow), *gate, "--format", "markdown", "--junit", str(junit))
    assert regression.returncode == 3, regression.stderr
    assert regression.stdout.startswith("### testing.sleep: slower")
    assert "| case | metric |" in regression.stdout and "p (Welch, runs)" in regression.stdout
    assert "**slower**" in regression.stdout and "compare: slower (--fail-on slower)" in regression.stderr
    import xml.etree.ElementTree as ET

    suite = ET.parse(junit).getroot().find("testsuite")
    assert suite is not None and suite.get("failures") == "1"
    (failure,) = suite.iter("failure")
    assert failure.get("type") == "slower" and "between runs" in failure.get("message", "")


def test_compare_of_single_runs_says_within_run_refuses_other_settings_and_reproduce_links(cli, add_plugin):
    """One run a side: the figures are over calls and say so; different parameters: refused,
    naming the parameter. Reproducing a run links the new record to it."""
    add_plugin("sleep", SLEEP_PLUGIN)
    base = json.loads(cli(*RUN_ARGS, check=True).stdout)[0]
    other = json.loads(
        cli(
            "run", "testing.sleep", "-p", "sleep_ms=2", "--device", "cpu", "--iterations", "5", "--json", check=True
        ).stdout
    )[0]
    refused = cli("compare", base["run_id"], other["run_id"])
    assert refused.returncode == 1
    assert refused.stderr.strip().startswith("Error: runs are not comparable: different param.sleep_ms: 4.0 vs 2.0")

    reproduced = cli("reproduce", base["run_id"][:8], "--json")
    assert reproduced.returncode in (0, 1), reproduced.stderr
    outcome = json.loads(reproduced.stdout)
    assert outcome["original"] == base["run_id"] and outcome["comparison"]["basis"] == "within run"
    again = json.loads(cli("show", outcome["reproduction"], "--json", check=True).stdout)
    assert again["reproduces"] == base["run_id"]
    assert again["controls"]["seed"] == base["controls"]["seed"] and again["workload"] == base["workload"]
    assert again["controls"]["iterations"] == 30 and again["comparability_key"] == base["comparability_key"]
    within = cli("compare", base["run_id"], outcome["reproduction"], check=True).stdout
    assert "within run: side A has one run" in within and "p within run (calls)" in within


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


def test_compare_by_system_takes_the_newest_runs_of_the_baselines_settings(cli, tmp_path):
    """--workload with two --system: the newest --last runs of each side with the settings of A's
    newest run (an L2-flushed run on B is not among them); B 10% slower: exit 3 with --fail-on."""
    from datetime import timedelta

    from support.factories import DEFAULT_START

    from perfsuite.publish.submissions.tree import record_text

    files = []
    for i in range(8):
        for host, scale in (("box-a", 1.0), ("box-b", 1.10)):
            level = scale * (1.0 + 0.004 * ((i * 7) % 5 - 2))  # runs vary by about 1%
            record = make_record(
                host=host,
                started_at=DEFAULT_START + timedelta(hours=i),
                metrics=gemm_metrics(time_ms=_samples(i, level)),
            )
            files.append(tmp_path / f"{host}-{i}.json")
            files[-1].write_text(record_text(record))
    flushed = make_record(host="box-b", started_at=DEFAULT_START + timedelta(days=1), controls={"l2_flush": True})
    files.append(tmp_path / "flushed.json")
    files[-1].write_text(record_text(flushed))
    cli("import", *map(str, files), check=True)
    args = ("compare", "--workload", "kernels.gemm", "--system", "box-a", "--system", "box-b", "--last", "4")
    proc = cli(*args, "--fail-on", "slower", "--json")
    assert proc.returncode == 3, proc.stderr
    out = json.loads(proc.stdout)
    assert out["verdict"] == "slower" and out["basis"] == "between runs" and len(out["runs_b"]) == 4
    assert flushed["run_id"] not in out["runs_b"] and out["failed"]
