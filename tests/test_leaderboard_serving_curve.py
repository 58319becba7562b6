"""The serving page's InferenceMAX view in a real headless Chromium (Debian's ``chromium``
through playwright): output tokens/s per GPU drawn against output tokens/s per user, one line
per system and engine, from the ``curve`` each sweep step records (``serving.curve``); a serving
table whose records carry no curve says so instead of drawing an empty chart."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support.browser import watched_page
from support.factories import make_metric, make_record

from perfsuite.publish.leaderboard import build_site
from perfsuite.registry import open_registry
from perfsuite.workloads.inference.serving.curve import basis, point

CONCURRENCIES = (1, 4, 16, 64)
# system -> (engine, GPUs, output tokens/s of one user alone): the per-user and per-GPU spans differ
SYSTEMS = {"fast-node": ("vllm", 2, 90.0), "slow-node": ("sglang", 1, 60.0)}


def _step(
    case: str,
    mode: str,
    load: float,
    tokens_per_s: float,
    span_s: float,
    ttft_ms: dict,
    per_user: float,
    tpot_p99_over_p50: float,
    **fields,
) -> dict:
    """A sweep step as the workload writes it: ``tokens_per_s`` over ``span_s`` seconds, each
    user's tokens ``per_user`` a second (TPOT's median and mean; its p99 that many times over),
    valid and within its SLOs, with ``fields`` of its own; its curve point is the caller's."""
    tpot = 1e3 / per_user
    return {
        "case": case,
        "mode": mode,
        "load": load,
        **fields,
        "output_tokens_per_s": tokens_per_s,
        "output_tokens": tokens_per_s * span_s,
        "rate_span_s": span_s,
        "ttft_ms": ttft_ms,
        "tpot_ms": {"p50": tpot, "mean": tpot, "p99": tpot_p99_over_p50 * tpot},
        "valid": True,
        "within_slo": True,
    }


def _steps(gpus: int, alone: float, with_curve: bool) -> list[dict]:
    """Concurrency steps as the workload writes them: each user slows as more share the GPUs."""
    b = basis(gpus, "", 0.0, "USD", 0.0, endpoint_local=False)
    steps = []
    for c in CONCURRENCIES:
        per_user = alone / (1 + c / 16)
        ttft = {"p50": 40.0 * c, "p99": 80.0 * c}
        row = _step(f"concurrency {c}", "concurrency", c, per_user * c, 10.0, ttft, per_user, 2.0)
        if with_curve:
            row["curve"] = point(row, b, None)
        steps.append(row)
    return steps


def _serving(host: str, engine: str, gpus: int, alone: float, with_curve: bool = True, tokens: int = 64) -> dict:
    metrics = [make_metric("concurrency sweep", "goodput_at_slo_rps", "requests/s", [alone], higher_is_better=True)]
    return make_record(
        workload_name="inference.serving",
        category="inference",
        host=host,
        device="cuda",
        params={"concurrencies": list(CONCURRENCIES), "output_tokens": tokens},
        metrics=metrics,
        details={
            "serving": {
                "slo": {"ttft_ms": 5000.0, "tpot_ms": 100.0},
                "endpoint": {"engine": {"name": engine, "version": "1"}},
                # a record from before the curve: its rate sweep's latency is drawn, no per-GPU line
                ("concurrency_sweep" if with_curve else "rate_sweep"): {"steps": _steps(gpus, alone, with_curve)},
            }
        },
    )


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("serving-board")
    with open_registry(f"sqlite:///{root / 'r.db'}") as reg:
        for host, (engine, gpus, alone) in SYSTEMS.items():
            reg.store(_serving(host, engine, gpus, alone))
        reg.store(_serving("old-node", "vllm", 1, 50.0, with_curve=False, tokens=128))  # a table of its own
        build_site(reg, root / "site")
    return root / "site"


@pytest.fixture
def page(browser):
    p = watched_page(browser, 1400)
    yield p
    p.context.close()


def test_the_serving_page_draws_tokens_per_gpu_against_tokens_per_user_per_system_and_engine(site, page):
    page.goto((site / "workloads" / "inference.serving.html").as_uri())  # the standard table: output_tokens 64
    chart = page.locator("#serving-curve")
    chart.locator("canvas").wait_for()
    assert chart.get_attribute("data-series") == "2"
    legend = sorted(chart.locator(".u-legend .u-series th").all_inner_texts())
    assert legend == ["fast-node vllm", "slow-node sglang", "tokens/s per user"]
    assert "output tokens/s per GPU axis" in (chart.get_attribute("aria-label") or "")
    # x spans the per-user figures the steps recorded, y starts at zero and reaches the per-GPU ones
    per_user = [s["curve"]["output_tokens_per_s_per_user"] for _, g, a in SYSTEMS.values() for s in _steps(g, a, True)]
    per_gpu = [s["curve"]["output_tokens_per_s_per_gpu"] for _, g, a in SYSTEMS.values() for s in _steps(g, a, True)]
    x_min, x_max = map(float, chart.get_attribute("data-x").split())
    y_min, y_max = map(float, chart.get_attribute("data-y").split())
    assert x_min <= min(per_user) and max(per_user) <= x_max < max(per_gpu)  # per user along x, not per GPU
    assert y_min == 0 and y_max >= max(per_gpu)
    # concurrency sweeps only: the latency picture above says it draws rate steps
    assert "No rate sweep in these runs" in page.locator("#family-chart").inner_text()
    assert page.locator("p.unsteady-key").count() == 0  # every step had a steady state: no hollow point to explain
    assert page.errors == []


def test_a_serving_table_without_the_curve_says_why_instead_of_drawing_nothing(site, page):
    url = (site / "workloads" / "inference.serving.html").as_uri()
    page.goto(url)
    tab = page.locator("a.tab", has_text="output_tokens 128")
    page.goto(url + tab.get_attribute("href"))  # the table of the record without a curve
    page.reload()
    note = page.locator("#serving-curve .note")
    note.wait_for()
    assert "measured before the curve was kept" in note.inner_text()
    assert page.errors == []


def _sweep_site(tmp_path: Path, host: str, steps: list[dict], rates: list[float], goodput: float, **record) -> Path:
    """The site of one registry holding one rate sweep of ``steps`` (a vllm engine unless
    ``details``' engine is given through ``engine``) from ``host``."""
    engine = record.pop("engine", {"name": "vllm", "version": "1"})
    made = make_record(
        workload_name="inference.serving",
        category="inference",
        host=host,
        device="cuda",
        params={"rates": rates, "output_tokens": 64, **record.pop("params", {})},
        metrics=[make_metric("rate sweep", "goodput_at_slo_rps", "requests/s", [goodput], higher_is_better=True)],
        details={
            "serving": {
                "slo": {"ttft_ms": 1000.0, "tpot_ms": 100.0},
                "endpoint": {"engine": engine},
                "rate_sweep": {"steps": steps},
            }
        },
        **record,
    )
    with open_registry(f"sqlite:///{tmp_path / 'r.db'}") as reg:
        reg.store(made)
        build_site(reg, tmp_path / "site")
    return tmp_path / "site"


def _rate_sweep_with_peak_search(tmp_path: Path) -> Path:
    """A rate sweep of three rates, then a peak search that measured two of those rates again with
    other figures (as a real sweep does): the site of one record holding both."""
    b = basis(1, "", 0.0, "USD", 0.0, endpoint_local=False)

    def step(case: str, rate: float, per_user: float, ttft_p99: float) -> dict:
        row = _step(case, "rate", rate, rate * 64, 5.0, {"p50": ttft_p99 / 2, "p99": ttft_p99}, per_user, 2.0)
        row["curve"] = point(row, b, None)
        return row

    steps = [step(f"rate {r:g}/s", r, u, t) for r, u, t in ((2.0, 14.0, 100.0), (4.0, 12.0, 150.0), (8.0, 9.0, 300.0))]
    steps += [step("find_peak 4/s", 4.0, 30.0, 5000.0), step("find_peak 8/s", 8.0, 25.0, 9000.0)]
    return _sweep_site(tmp_path, "peak-node", steps, [2.0, 4.0, 8.0], 8.0, params={"find_peak": True})


def test_a_sweeps_peak_search_is_left_out_of_both_pictures_where_the_sweep_has_rates_of_its_own(tmp_path, page):
    """The peak search measures rates the sweep already drew: drawn too, the per-GPU line would run
    back and forth between two measurements of one rate. The per-GPU line draws the sweep's own
    steps, as the latency picture does: per user 9 to 14 tokens/s, the peak search's 25 and 30
    nowhere."""
    site = _rate_sweep_with_peak_search(tmp_path)
    page.goto((site / "workloads" / "inference.serving.html").as_uri())
    curve = page.locator("#serving-curve")
    curve.locator("canvas").wait_for()
    x_min, x_max = map(float, curve.get_attribute("data-x").split())
    assert x_min <= 9.0 and 14.0 <= x_max < 25.0
    assert page.errors == []


def _filed_sweep(tmp_path: Path) -> Path:
    """A rate sweep as the 5 s steps of ``transformers serve`` were filed: every step read the
    offered rate x 64 tokens, its requests lasting 4 to 24 s against 5 s of arrivals (no steady
    state), beside one step of 32 s of arrivals for 4 s requests (a steady state)."""
    b = basis(1, "", 0.0, "USD", 0.0, endpoint_local=False)

    def step(rate: float, spread_s: float, e2e_p50_s: float, per_user: float) -> dict:
        row = _step(
            f"rate {rate:g}/s",
            "rate",
            rate,
            rate * 64,
            spread_s,
            {"p50": 100.0, "p99": 400.0},
            per_user,
            1.2,
            requests=int(rate * spread_s),
            arrival_spread_s=spread_s,
            kept_schedule=True,
            e2e_ms={"p50": e2e_p50_s * 1e3, "p99": e2e_p50_s * 1.1e3},
        )
        row["curve"] = point(row, b, None)
        return row

    steps = [step(2.0, 32.0, 4.0, 16.0)]  # 32 s of arrivals for 4 s requests: a steady state
    steps += [step(r, 4.99, e, u) for r, e, u in ((16.0, 6.8, 9.5), (64.0, 11.9, 5.4), (128.0, 24.0, 2.8))]
    engine = {"name": "transformers serve", "version": "5.17.0"}
    return _sweep_site(tmp_path, "filed-node", steps, [2.0, 16.0, 64.0, 128.0], 2.0, version=3, engine=engine)


def test_steps_with_no_steady_state_are_drawn_apart_as_marked_points_not_as_the_line(tmp_path, page):
    """The filed sweep's 5 s steps ran out to 8,192 tokens/s at 2.8 tokens/s per user: the offered
    load, not a measurement. They stay on the picture, every figure as filed, in a series of their
    own named for what they are; the line is the step that had a steady state."""
    site = _filed_sweep(tmp_path)
    page.goto((site / "workloads" / "inference.serving.html").as_uri())
    curve = page.locator("#serving-curve")
    curve.locator("canvas").wait_for()
    legend = sorted(curve.locator(".u-legend .u-series th").all_inner_texts())
    assert legend == [
        "filed-node transformers serve",
        "filed-node transformers serve · no steady state",
        "tokens/s per user",
    ]
    # marked, never dropped: the y axis still reaches the filed 8,192 tokens/s
    _, y_max = map(float, curve.get_attribute("data-y").split())
    assert y_max >= 128 * 64
    # as points no line joins: the line is the measurement's alone
    assert curve.get_attribute("data-unjoined") == "filed-node transformers serve · no steady state"
    latency = page.locator("#family-chart")
    latency.locator("canvas").wait_for()
    names = latency.locator(".u-legend .u-series th").all_inner_texts()
    assert "filed-node TTFT p99 · no steady state" in names and "filed-node TTFT p99" in names
    assert "filed-node TPOT p99 · no steady state" in latency.get_attribute("data-unjoined").split(" | ")
    # and said in words, once, under the first picture that draws such points
    (key,) = latency.locator("p.unsteady-key").all_inner_texts()
    assert key.startswith("Hollow points, never joined to a line: rate steps whose throughput is no steady-state")
    assert curve.locator("p.unsteady-key").count() == 0
    assert page.errors == []


def _zigzag_sweep(tmp_path: Path) -> tuple[Path, list[dict]]:
    """A rate sweep as the filed h200-x1 one ran: below saturation every step reads 9.7 to 10
    tokens/s per user, so in order of it the per-GPU figures run 928, 256, 512, 128; and one step
    past saturation with no steady state. The site of its one record, and its steps."""
    b = basis(1, "", 0.0, "USD", 0.0, endpoint_local=False)

    def step(rate: float, per_user: float, per_gpu: float, steady: bool = True) -> dict:
        ttft = {"p50": 100.0, "p99": 400.0}
        row = _step(f"rate {rate:g}/s", "rate", rate, per_gpu, 20.0, ttft, per_user, 1.2, steady_state=steady)
        row["curve"] = point(row, b, None)
        return row

    steps = [step(2.0, 10.0, 128.0), step(4.0, 9.7, 256.0), step(8.0, 9.85, 512.0), step(16.0, 7.6, 928.0)]
    steps.append(step(32.0, 2.9, 1040.0, steady=False))
    return _sweep_site(tmp_path, "zigzag-node", steps, [2.0, 4.0, 8.0, 16.0, 32.0], 8.0), steps


def _curve(step: dict) -> list[float]:
    return [step["curve"]["output_tokens_per_s_per_user"], step["curve"]["output_tokens_per_s_per_gpu"]]


def test_a_systems_per_gpu_line_joins_only_its_frontier_and_draws_its_other_steps_as_points(tmp_path):
    """InferenceMAX's frontier: a step is on it when no other step has both more tokens/s per user
    and more per GPU. The line is the frontier (in order of tokens/s per user its per-GPU figure
    only falls); the step it leaves out is a series of its own, never dropped; the step with no
    steady state stays in its series as filed."""
    site, steps = _zigzag_sweep(tmp_path)
    text = (site / "data" / "inference.serving.js").read_text()
    (chart,) = json.loads(text.removeprefix("window.PERFSUITE_BOARD = ").removesuffix(";\n"))["charts"].values()
    per_gpu = chart["per_gpu"]
    assert list(per_gpu) == [
        "zigzag-node vllm",
        "zigzag-node vllm · below the frontier",
        "zigzag-node vllm · no steady state",
    ]
    line = per_gpu["zigzag-node vllm"]
    assert line == sorted(line) and [gpu for _, gpu in line] == sorted((gpu for _, gpu in line), reverse=True)
    assert [gpu for _, gpu in line] == [928.0, 512.0, 128.0]
    assert per_gpu["zigzag-node vllm · below the frontier"] == [_curve(steps[1])]  # 9.7 tokens/s per user, 256 per GPU
    assert sorted(line + per_gpu["zigzag-node vllm · below the frontier"]) == sorted(_curve(s) for s in steps[:4])
    assert per_gpu["zigzag-node vllm · no steady state"] == [_curve(steps[4])]


def test_the_steps_below_the_frontier_are_drawn_as_unjoined_points_and_said_so_under_the_picture(tmp_path, page):
    site, steps = _zigzag_sweep(tmp_path)
    page.goto((site / "workloads" / "inference.serving.html").as_uri())
    curve = page.locator("#serving-curve")
    curve.locator("canvas").wait_for()
    assert curve.get_attribute("data-series") == "3"
    legend = curve.locator(".u-legend .u-series th").all_inner_texts()
    assert "zigzag-node vllm · below the frontier" in legend and "zigzag-node vllm" in legend
    # the line is the frontier; the steps below it and the one with no steady state are points
    assert curve.get_attribute("data-unjoined").split(" | ") == [
        "zigzag-node vllm · below the frontier",
        "zigzag-node vllm · no steady state",
    ]
    x_min, _ = map(float, curve.get_attribute("data-x").split())
    _, y_max = map(float, curve.get_attribute("data-y").split())
    assert x_min <= min(_curve(s)[0] for s in steps) and y_max >= max(_curve(s)[1] for s in steps)
    (key,) = curve.locator("p.frontier-key").all_inner_texts()
    assert key.startswith("Each system's line joins only its frontier, as InferenceMAX draws it")
    assert "below the frontier" in key
    assert page.errors == []
