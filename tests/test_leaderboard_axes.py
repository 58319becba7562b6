"""The leaderboard's value axes in a real headless Chromium (Debian's ``chromium`` through
playwright): an axis is as wide as its widest figure, so that a throughput of a million tokens/s
does not run under the axis's name, and the scaling view's two pictures (throughput and
efficiency against GPUs) put each GPU count at the same place across the page."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.browser import watched_page
from support.factories import make_metric, make_record

from perfsuite.publish.leaderboard import build_site
from perfsuite.registry import open_registry

# world size -> tokens/s: the batch per GPU held (weak scaling), figures of a node of four GPUs
THROUGHPUT = {1: 438_270.0, 2: 743_646.0, 4: 1_418_614.0}
# the name of a value axis takes this much room beside its figures (uPlot's default label size)
LABEL_PX = 30


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("axes-board")
    with open_registry(f"sqlite:///{root / 'r.db'}") as reg:
        for world, tokens_per_s in THROUGHPUT.items():
            reg.store(
                make_record(
                    workload_name="training.gpt",
                    category="training",
                    host="node-4",
                    device="cuda",
                    gpu_count=world,
                    params={"global_batch": 16 * world, "goal": "throughput"},
                    launch={"world_size": world},
                    metrics=[
                        make_metric("throughput", "tokens_per_s", "tokens/s", [tokens_per_s], higher_is_better=True)
                    ],
                )
            )
        build_site(reg, root / "site")
    return root / "site"


@pytest.fixture(params=[1280, 390], ids=["desktop", "phone"])
def page(browser, request):
    p = watched_page(browser, request.param)
    yield p
    p.context.close()


def _plot_left(chart) -> float:
    """Where a chart's plotting area starts, from the chart's left edge: the value axis's width."""
    chart.locator("canvas").wait_for()
    return chart.locator(".u-over").bounding_box()["x"] - chart.locator(".uplot").bounding_box()["x"]


def _text_px(page, text: str) -> float:
    """The width of ``text`` in the font uPlot draws axis figures in."""
    return page.evaluate(
        """t => { const c = document.createElement("canvas").getContext("2d");
                  c.font = "12px system-ui, -apple-system, \\"Segoe UI\\", Roboto, \\"Helvetica Neue\\", sans-serif";
                  return c.measureText(t).width; }""",
        text,
    )


def test_a_value_axis_leaves_room_for_its_widest_figure_beside_its_name(site, page):
    """The 4-GPU table's trend over time draws 1,418,614 tokens/s: its axis figures reach
    1,400,000 or more, and the plotting area starts past the name and the widest figure."""
    page.goto((site / "workloads" / "training.gpt.html").as_uri())
    four = page.locator("a.tab", has_text="world_size 4").get_attribute("href")
    page.goto((site / "workloads" / "training.gpt.html").as_uri() + four)
    page.reload()
    trend = page.locator("#trend-chart")
    left = _plot_left(trend)
    assert left >= LABEL_PX + _text_px(page, "1,400,000")
    assert page.errors == []


def test_the_scaling_pictures_put_each_gpu_count_at_the_same_place(site, page):
    page.goto((site / "workloads" / "training.gpt.html").as_uri())
    throughput, efficiency = page.locator("#scaling-throughput"), page.locator("#scaling-efficiency")
    assert _plot_left(throughput) == _plot_left(efficiency)
    assert _plot_left(throughput) >= LABEL_PX + _text_px(page, "1,400,000")
    assert page.errors == []
