"""What a user reads is true and whole: a printed headline is the statistic its label names and
lies inside the interval printed beside it (a ceiling's best call is labelled best and gets no
interval of the median); a figure's CI carries the prefix its value carries (``171k–215k`` beside
``175k``); at 100 and 80 columns the tables keep the suite's own columns (value, CI, % of ceiling,
regime, status) and leave decoration out first. Records from ``tests/support/factories.py`` in a real
registry, read back by the real ``perfsuite results``, ``show`` and ``compare``."""

from __future__ import annotations

import re

import pytest
from support.factories import gemm_metrics, make_metric, make_record

from perfsuite.analysis.units import alike, interval
from perfsuite.registry import open_registry

CI = re.compile(r"(?P<value>-?[\d.,]+[kMG]?)\s+(?P<unit>\S+)\s+(?P<low>-?[\d.,]+[kMG]?)–(?P<high>-?[\d.,]+[kMG]?)")
PREFIX = {"": 1.0, "k": 1e3, "M": 1e6, "G": 1e9}


def read(number: str) -> float:
    """A printed figure back as a float: ``171k`` -> 171000."""
    prefix = number[-1] if number[-1] in "kMG" else ""
    return float(number.rstrip("kMG").replace(",", "")) * PREFIX[prefix]


def printed_headlines(text: str) -> list[tuple[float, float, float, str]]:
    """(value, low, high, line) of every line that prints a figure with an interval beside it."""
    found = []
    for line in text.splitlines():
        m = CI.search(line)
        if m:
            found.append((read(m["value"]), read(m["low"]), read(m["high"]), line))
    return found


def assert_inside(text: str) -> int:
    """Every printed value lies inside its printed interval; how many were checked."""
    found = printed_headlines(text)
    outside = [line for value, low, high, line in found if not low <= value <= high]
    assert not outside, "a headline outside its own interval:\n" + "\n".join(outside)
    return len(found)


def ceilings_record() -> dict:
    """A ``kernels.ceilings`` record as the workload writes it: the throughput's value is its
    fastest call (an upper bound), far above the median's interval on a CPU's noisy calls."""
    rates = [0.00279, 0.0031, 0.0035, 0.0040, 0.00458, 0.0033, 0.347]  # TFLOP/s: 347 GFLOP/s best
    metric = make_metric("matmul.fp32", "tflops", "TFLOP/s", rates, higher_is_better=True)
    metric["value"] = max(metric["samples"])
    time_ms = make_metric("matmul.fp32", "time_ms", "ms", [2 / r for r in rates], higher_is_better=False)
    return make_record(workload_name="kernels.ceilings", params={}, metrics=[metric, time_ms])


def loader_record() -> dict:
    """A data workload at 175k images/s whose interval runs 171k to 215k."""
    metric = make_metric(
        "decode", "items_per_s", "images/s", [171e3, 172e3, 175e3, 190e3, 215e3], higher_is_better=True
    )
    return make_record(workload_name="data.loader", params={}, metrics=[metric])


def roofed_record() -> dict:
    """A GEMM at 87.3% of its ceiling, measured in the burst regime, verified."""
    metrics = gemm_metrics()
    tflops = metrics[1]
    tflops["roofline"].update(
        {"fraction": 0.873, "ceiling": 1.2, "ceiling_unit": "TFLOP/s", "ceiling_run_id": "c" * 32, "reason": None}
    )
    return make_record(metrics=metrics, run_id="a" * 32)


@pytest.fixture
def stored(perfsuite_env):
    records = {"ceilings": ceilings_record(), "loader": loader_record(), "gemm": roofed_record()}
    with open_registry(perfsuite_env["PERFSUITE_DB"]) as reg:
        for record in records.values():
            reg.store(record)
    return records


def test_a_best_call_is_labelled_best_and_printed_without_the_medians_interval(cli, stored):
    results = cli("results", check=True).stdout
    shown = cli("show", stored["ceilings"]["run_id"][:12], check=True).stdout
    for text in (results, shown):
        line = next(ln for ln in text.splitlines() if "matmul.fp32" in ln and "tflops" in ln)
        assert "tflops (best)" in line and "347" in line and "GFLOP/s" in line
        assert "–" not in line  # the median's interval (2.79–4.58) is not printed beside the best call
        assert "best call" in line  # in the CI's column, which is never left out for the width
        assert_inside(text)
    # the medians keep their interval, and it holds them
    assert assert_inside(results) >= 2
    assert assert_inside(cli("show", stored["gemm"]["run_id"][:12], check=True).stdout) >= 2


def test_the_check_fails_on_a_headline_outside_its_interval():
    """The checker itself: a median labelled as such but printed beside another statistic's interval."""
    with pytest.raises(AssertionError, match="outside its own interval"):
        assert_inside("kernels.ceilings  tflops  347  GFLOP/s  2.79–4.58  passed")
    assert assert_inside("kernels.gemm  bf16  2.10  TFLOP/s  2.05–2.14  passed") == 1


def test_an_interval_carries_the_prefix_of_its_value(cli, stored):
    assert interval(171e3, 215e3, 175e3, "images/s") == "171k–215k"
    assert alike(190e3, 175e3, "images/s") == "190k"
    assert interval(0.00077, 0.00079, 0.000779, "TFLOP/s") == "770–790"  # the prefix is on the unit: MFLOP/s
    for text in (cli("results", check=True).stdout, cli("show", stored["loader"]["run_id"][:12], check=True).stdout):
        line = next(ln for ln in text.splitlines() if "items_per_s" in ln)
        assert "175k" in line and "171k–215k" in line, line
        assert_inside(text)
    shown = cli("show", stored["loader"]["run_id"][:12], check=True).stdout
    row = next(ln for ln in shown.splitlines() if "items_per_s" in ln).split()
    # mean, stdev, min and max beside the value in its unit, with its prefix
    assert {"185k", "171k", "215k"} <= set(row), row


@pytest.mark.parametrize("width", [100, 80])
def test_a_narrow_terminal_keeps_the_ci_and_the_share_of_the_ceiling(cli, perfsuite_env, stored, width):
    perfsuite_env["COLUMNS"] = str(width)
    for args in (("results",), ("show", stored["gemm"]["run_id"][:12])):
        text = cli(*args, check=True).stdout
        assert all(len(line) <= width for line in text.splitlines()), text
        assert "-[ 1 ]-" not in text  # laid out as a table, not stacked
        header = " ".join(text.split())
        assert "95% CI" in header and "% of ceiling" in header, text
        assert "87.3%" in next(ln for ln in text.splitlines() if "TFLOP/s" in ln) and "matmul.bf16" in text, text
        left_out = re.search(r"left out for the width \(\d+ columns\): (.*)", text)
        kept = {"value", "95% CI", "% of ceiling", "regime", "status"}
        assert left_out is None or not kept & set(left_out[1].split(", ")), left_out[1]
        assert_inside(text)
        if args == ("results",):  # the label of a best call survives the width
            ceiling_line = next(ln for ln in text.splitlines() if "GFLOP/s" in ln)
            assert "347" in ceiling_line and "best call" in ceiling_line


@pytest.mark.parametrize("width", [100, 80])
def test_compare_keeps_the_ci_of_the_ratio_at_a_narrow_width(cli, perfsuite_env, width):
    perfsuite_env["COLUMNS"] = str(width)
    a = make_record(metrics=gemm_metrics(), run_id="1" * 32)
    b = make_record(metrics=gemm_metrics(time_ms=(0.90, 0.91, 0.92, 0.89, 0.90)), run_id="2" * 32)
    with open_registry(perfsuite_env["PERFSUITE_DB"]) as reg:
        for record in (a, b):
            reg.store(record)
    text = cli("compare", "11111111", "22222222", check=True).stdout
    assert all(len(line) <= width for line in text.splitlines()), text
    header = " ".join(text.split())
    assert "95% CI of B/A" in header, text
    assert re.search(r"\d\.\d{4}–\d\.\d{4}", text), text
