"""A training benchmark's two kinds of run on the leaderboard, in a real headless Chromium
(Debian's ``chromium`` through playwright): time-to-target runs rank the benchmark, as MLPerf
scores them; throughput runs (``goal=throughput``, a scaling series at 1, 2 and 4 GPUs) are drawn
in the scaling view and never lead it, even when they are of a newer workload version. The
scaling table fits a 390 px phone (a heading row per series, five columns) and keeps its seven
columns on a desktop."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest
from support.browser import watched_page
from support.factories import DEFAULT_START, make_metric, make_record

from perfsuite.publish.leaderboard import build_site
from perfsuite.publish.leaderboard.data import load
from perfsuite.registry import open_registry

# five seeds each: olympic means 52.0 s (fast-box) and 61.0 s (slow-box)
TIMES = {"fast-box": (40.0, 50.0, 52.0, 54.0, 90.0), "slow-box": (48.0, 60.0, 61.0, 62.0, 110.0)}
# the scaling node's images/s at 1, 2 and 4 GPUs: efficiencies 1, 0.9, 0.85
RATES = {1: 6_000.0, 2: 10_800.0, 4: 20_400.0}


def _time_to_target(host: str, seconds: float, seed: int, version: int = 2) -> dict:
    return make_record(
        workload_name="training.resnet",
        version=version,
        category="training",
        host=host,
        device="cuda",
        params={"depth": 50, "global_batch": 512},
        launch={"world_size": 1},
        controls={"seed": seed},
        started_at=DEFAULT_START + timedelta(minutes=seed),
        metrics=[
            make_metric("target", "time_to_target_s", "s", [seconds], higher_is_better=False),
            make_metric("train", "samples_per_s", "images/s", [5_000.0], higher_is_better=True),
        ],
    )


def _throughput(world: int, rate: float, workload: str = "training.resnet", host: str = "scaling-node") -> dict:
    """A throughput run (goal = throughput) of a newer version at ``world`` GPUs, 256 images per GPU."""
    return make_record(
        workload_name=workload,
        version=3,
        category="training",
        host=host,
        device="cuda",
        gpu_count=world,
        params={"depth": 50, "global_batch": 256 * world, "goal": "throughput"},
        launch={"world_size": world},
        metrics=[make_metric("throughput", "samples_per_s", "images/s", [rate], higher_is_better=True)],
    )


@pytest.fixture(scope="module")
def registry_url(tmp_path_factory) -> str:
    root = tmp_path_factory.mktemp("training-goals")
    url = f"sqlite:///{root / 'r.db'}"
    with open_registry(url) as reg:
        for host, times in TIMES.items():
            for seed, seconds in enumerate(times):
                reg.store(_time_to_target(host, seconds, seed))
        for world, rate in RATES.items():
            reg.store(_throughput(world, rate))
            # a benchmark with throughput runs only: nothing ranks it by time to target yet
            reg.store(_throughput(world, rate * 2, workload="training.gpt"))
    return url


@pytest.fixture(scope="module")
def site(registry_url, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("training-goals-site") / "site"
    with open_registry(registry_url) as reg:
        build_site(reg, out)
    return out


@pytest.fixture
def page(browser):
    p = watched_page(browser, 1280)
    yield p
    p.context.close()


@pytest.fixture
def phone(browser):
    p = watched_page(browser, 390)
    yield p
    p.context.close()


def test_the_standard_table_of_a_training_benchmark_is_its_time_to_target_even_of_an_older_version(registry_url):
    with open_registry(registry_url) as reg, reg.session() as s:
        (board,), _ = load(s, "training.resnet")
    assert board.default.version == 2
    assert [h.metric for h in board.default.heads.values()] == ["time_to_target_s"]
    assert [round(row.cells["target"].value, 3) for row in board.default.rows] == [52.0, 61.0]  # the olympic means
    assert sorted(c.shown["world.world_size"] for c in board.configs if c.throughput_goal) == ["1", "2", "4"]


def test_the_front_card_ranks_time_to_target_and_links_the_scaling_runs_apart(site, page):
    page.goto((site / "index.html").as_uri())
    resnet = page.locator("section.card", has=page.locator("h2 a", has_text="training.resnet"))
    assert "time_to_target_s" in resnet.locator("p.meta").first.inner_text()
    assert resnet.locator("tbody td a.system-link").all_inner_texts() == ["fast-box", "slow-box"]
    link = resnet.locator("a.scaling-link")
    assert link.inner_text() == "scaling runs at 1, 2, 4 GPUs"
    assert link.get_attribute("href") == "workloads/training.resnet.html#scaling"
    assert "(throughput, not ranked)" in resnet.locator("p.more").inner_text()
    gpt = page.locator("section.card", has=page.locator("h2 a", has_text="training.gpt"))
    assert gpt.locator("p.goal-throughput").inner_text() == (
        "Throughput runs only (goal = throughput): no time-to-target run ranks this benchmark yet."
    )
    assert page.errors == []


def _wait_attr(page, locator, name: str) -> str:
    for _ in range(50):
        value = locator.get_attribute(name)
        if value:
            return value
        page.wait_for_timeout(100)
    raise AssertionError(f"{name} never set")


def test_the_time_to_target_table_leads_and_the_throughput_runs_are_drawn_beside_it(site, page):
    page.goto((site / "workloads" / "training.resnet.html").as_uri())
    page.wait_for_selector(".tabulator-row")
    shown = page.locator("section.config:not(.hidden)")
    assert shown.locator(".tabulator-cell[tabulator-field='system']").all_inner_texts() == ["fast-box", "slow-box"]
    assert shown.locator("p.goal").inner_text().startswith("Ranked by time to target, as MLPerf scores it")
    _wait_attr(page, page.locator("#family-chart"), "data-runs")
    assert page.locator("#family-chart").get_attribute("data-runs") == "10"  # every seed a point
    source = page.locator("#scaling-source")
    assert source.inner_text() == (
        "Drawn from the throughput runs (goal = throughput) of version 3 at 1, 2 and 4 GPUs, beside this "
        "table's time to target and never ranked against it: throughput runs reach no target."
    )
    throughput = page.locator("#scaling-throughput")
    throughput.locator("canvas").wait_for()
    assert throughput.locator(".u-legend .u-series th").all_inner_texts() == [
        "GPUs",
        "scaling-node · weak scaling (256 per GPU)",
    ]
    rows = [r.split("\t") for r in page.locator("#scaling-table tbody tr").all_inner_texts()]
    assert [(r[1], r[3]) for r in rows] == [("1", "1.000"), ("2", "0.900"), ("4", "0.850")]
    assert page.errors == []


def test_a_throughput_table_says_it_is_a_scaling_series_not_a_ranking(site, page):
    page.goto((site / "workloads" / "training.resnet.html").as_uri())
    page.locator("details#configurations summary").click()
    tab = page.locator(".tab", has_text="world_size 4")
    assert "throughput runs, a scaling series (not ranked against time to target)" in (
        page.locator("details#configurations li", has=tab).inner_text()
    )
    tab.click()
    shown = page.locator("section.config:not(.hidden)")
    note = shown.locator("p.goal-throughput").inner_text()
    assert note.startswith("Throughput runs (goal = throughput) on 4 GPUs: each trained for a fixed budget")
    assert note.endswith("this benchmark is ranked by time to target (its standard table).")
    assert page.locator("#family-chart").inner_text().startswith("Throughput runs reach no target")
    assert page.locator("#scaling-source").is_hidden()  # its own series, not borrowed
    page.locator("#scaling-throughput canvas").wait_for()
    assert page.errors == []


def _no_sideways_scroll(page) -> dict:
    return page.evaluate(
        """() => ({page: document.scrollingElement.scrollWidth - innerWidth,
                   boxes: [...document.querySelectorAll('.scroll')].filter(e => e.offsetParent)
                          .map(e => [e.id || e.className, e.scrollWidth - e.clientWidth])})"""
    )


@pytest.mark.parametrize("table", ["", "#cfg=throughput"])
def test_the_scaling_table_fits_a_phone_with_a_heading_row_per_series(site, phone, table):
    url = (site / "workloads" / "training.resnet.html").as_uri()
    if table:  # the 4-GPU throughput table itself, by its permalink
        (config,) = [c for c in _configs(site) if "world_size 4" in c[1]]
        table = f"#cfg={config[0]}"
    phone.goto(url + table)
    scaling = phone.locator("#scaling-table table.scaling")
    scaling.wait_for()
    assert scaling.locator("thead th").all_inner_texts() == [
        "GPUs",
        "samples_per_s (images/s)",
        "efficiency",
        "runs",
        "bare DDP loop's efficiency",
    ]
    assert scaling.locator("tr.series-head").inner_text() == (
        "scaling-node · weak scaling (256 per GPU)\nefficiency against 1 GPU"
    )
    assert [r.split("\t")[:3] for r in scaling.locator("tr.point").all_inner_texts()] == [
        ["1", "6,000", "1.000"],
        ["2", "10,800", "0.900"],
        ["4", "20,400", "0.850"],
    ]
    overflow = _no_sideways_scroll(phone)
    assert overflow["page"] <= 0
    assert dict(overflow["boxes"])["scaling-table"] <= 0  # nothing scrolled or clipped inside its box
    box = scaling.bounding_box()
    assert box["x"] >= 0 and box["x"] + box["width"] <= 390
    assert phone.errors == []


def test_the_scaling_table_keeps_its_seven_columns_on_a_desktop(site, page):
    page.goto((site / "workloads" / "training.resnet.html").as_uri())
    scaling = page.locator("#scaling-table table.scaling")
    scaling.wait_for()
    assert scaling.locator("thead th").all_inner_texts() == [
        "series",
        "GPUs",
        "samples_per_s (images/s)",
        "efficiency",
        "against",
        "runs",
        "bare DDP loop's efficiency",
    ]
    assert scaling.locator("tr.series-head").count() == 0
    first = scaling.locator("tbody tr").first.inner_text().split("\t")
    assert first[0] == "scaling-node · weak scaling (256 per GPU)" and first[4] == "1 GPU"
    assert _no_sideways_scroll(page)["page"] <= 0
    assert page.errors == []


def _configs(site: Path) -> list[tuple[str, str]]:
    """(table id, label) of training.resnet's tables, from its page's tabs."""
    import re

    text = (site / "workloads" / "training.resnet.html").read_text(encoding="utf-8")
    return re.findall(r'data-config="([0-9a-f]+)">([^<]*)</a>', text)


def test_throughput_runs_never_lead_time_to_target_of_the_same_version_even_with_more_systems(tmp_path):
    with open_registry(f"sqlite:///{tmp_path / 'r.db'}") as reg:
        for seed, seconds in enumerate(TIMES["fast-box"]):
            reg.store(_time_to_target("fast-box", seconds, seed, version=3))
        for host in ("node-a", "node-b"):
            reg.store(_throughput(4, RATES[4], host=host))
        with reg.session() as s:
            (board,), _ = load(s, "training.resnet")
    assert [h.metric for h in board.default.heads.values()] == ["time_to_target_s"]
    assert [len(c.rows) for c in board.configs] == [1, 2]


def test_the_trend_names_its_axis_by_metric_and_unit_within_a_phones_chart_height(site, phone):
    (config,) = [c for c in _configs(site) if "world_size 4" in c[1]]
    phone.goto((site / "workloads" / "training.resnet.html").as_uri() + f"#cfg={config[0]}")
    trend = phone.locator("#trend-chart")
    label = _wait_attr(phone, trend, "aria-label")
    assert label.startswith("throughput over time; samples_per_s (images/s) axis from ")  # the case is the title's
    drawn = phone.evaluate(
        """() => { const c = document.createElement("canvas").getContext("2d");
                   c.font = "bold 12px system-ui, -apple-system, \\"Segoe UI\\", Roboto, \\"Helvetica Neue\\", sans-serif";
                   return c.measureText("samples_per_s (images/s)").width; }"""
    )
    assert drawn < trend.locator(".u-over").bounding_box()["height"]
    assert phone.errors == []
