"""The leaderboard a reader can use, in a real headless Chromium (Debian's ``chromium`` through
playwright): every link of a built site reaches a file that was written (the Parquet download
only where it was), the serving page draws TTFT and TPOT p99 against the throughput each step
achieved (output tokens/s) with the SLO lines, training's time to target shows each seed as a
point with the olympic mean marked, and a phone gets the table before the filters.

``reader_site`` builds the site from ``tests/support/factories.py`` records (:func:`build_reader_site`, which
also builds the site that screenshots are taken of)."""

from __future__ import annotations

import os
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest
from support.browser import watched_page
from support.factories import gemm_metrics, make_metric, make_record

from perfsuite.publish.leaderboard import build_site
from perfsuite.registry import open_registry

# offered rates (requests/s) and what each step achieved (output tokens/s): far apart on purpose
RATES = (1.0, 2.0, 4.0, 8.0, 16.0)
SEEDS = {"fast-node": (50.0, 52.0, 49.0, 55.0, 51.0), "slow-node": (61.0, 58.0, 70.0, 59.0, 60.0)}


def _serving(host: str, tokens_per_request: float, output_tokens: int) -> dict:
    """An ``inference.serving`` record with a rate sweep as the workload writes it (the fields the
    leaderboard reads) and its SLOs."""
    steps = []
    for i, rate in enumerate(RATES):
        achieved = min(rate, 6.0)  # saturates: more offered load buys latency, not tokens
        steps.append(
            {
                "case": f"rate {rate:g}/s",
                "mode": "rate",
                "load": rate,
                "offered_rps": rate,
                "completed_rps": achieved,
                "output_tokens_per_s": achieved * tokens_per_request,
                "ttft_ms": {"p99": 80.0 * (i + 1) ** 2},
                "tpot_ms": {"p99": 12.0 * (i + 1)},
                "valid": True,
                "within_slo": i < 4,
            }
        )
    metrics = [make_metric("rate sweep", "goodput_at_slo_rps", "requests/s", [6.0], higher_is_better=True)]
    return make_record(
        workload_name="inference.serving",
        category="inference",
        host=host,
        device="cuda",
        params={"rates": list(RATES), "output_tokens": output_tokens, "slo_ttft_ms": 1000.0, "slo_tpot_ms": 100.0},
        metrics=metrics,
        details={
            "serving": {
                "slo": {"ttft_ms": 1000.0, "tpot_ms": 100.0, "error_budget": 0.01, "goodput_target": 0.9},
                "rate_sweep": {"steps": steps},
            }
        },
    )


def build_reader_site(root: Path) -> Path:
    """GEMM on three systems, kernels.ceilings, training.resnet with five seeds on two systems,
    inference.serving on two systems at two output lengths: the site under ``root / "site"``."""
    with open_registry(f"sqlite:///{root / 'r.db'}") as reg:
        for host, scale in (("fast-node", 1.0), ("mid-node", 1.4), ("slow-node", 2.1)):
            times = tuple(round(scale * (1.0 + 0.001 * i), 6) for i in range(9))
            reg.store(make_record(host=host, device="cuda", metrics=gemm_metrics(time_ms=times)))
            reg.store(
                make_record(
                    workload_name="kernels.ceilings",
                    host=host,
                    device="cuda",
                    params={},
                    metrics=gemm_metrics(case="matmul.bf16", time_ms=times),
                )
            )
        for host, seconds in SEEDS.items():
            for seed, value in enumerate(seconds):
                reg.store(
                    make_record(
                        workload_name="training.resnet",
                        host=host,
                        device="cuda",
                        params={"depth": 50},
                        controls={"seed": seed},
                        metrics=[make_metric("target", "time_to_target_s", "s", [value], higher_is_better=False)],
                    )
                )
        for host, per_request in (("fast-node", 640.0), ("slow-node", 420.0)):
            for output_tokens in (64, 128):
                reg.store(_serving(host, per_request * output_tokens / 64, output_tokens))
        build_site(reg, root / "site")
    return root / "site"


class _Links(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.hrefs: list[str] = []

    def handle_starttag(self, tag, attrs):
        if tag == "a":
            self.hrefs += [v for k, v in attrs if k == "href" and v]


def dead_links(site: Path) -> list[str]:
    """Each ``<a href>`` of every page (as written) whose target file does not exist."""
    dead = []
    for page in sorted(site.rglob("*.html")):
        parser = _Links()
        parser.feed(page.read_text(encoding="utf-8"))
        for href in parser.hrefs:
            parts = urlsplit(href)
            if parts.scheme or not parts.path:  # another site, or an anchor on this page
                continue
            if not (page.parent / unquote(parts.path)).resolve().is_file():
                dead.append(f"{page.relative_to(site)} -> {href}")
    return dead


@pytest.fixture(scope="module")
def reader_site(tmp_path_factory) -> Path:
    return build_reader_site(tmp_path_factory.mktemp("reader"))


def _page(browser, width: int = 1280):
    p = watched_page(browser, width)
    p.on("requestfailed", lambda r: p.errors.append(f"failed: {r.url}"))
    return p


def test_every_link_of_the_built_site_reaches_a_written_file(reader_site):
    assert (reader_site / "board.parquet").is_file()  # pyarrow is in the test environment
    assert 'href="board.parquet"' in (reader_site / "index.html").read_text()
    assert dead_links(reader_site) == []


def test_without_pyarrow_the_parquet_download_is_neither_written_nor_linked(tmp_path):
    """The build in a fresh process where pyarrow cannot be imported (as without perfsuite[parquet])."""
    code = (
        "import sys; sys.modules['pyarrow'] = None; sys.path.insert(0, sys.argv[2]);"
        "from pathlib import Path; from test_leaderboard_reader import build_reader_site;"
        "build_reader_site(Path(sys.argv[1]))"
    )
    tests = str(Path(__file__).parent)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([tests, os.environ.get("PYTHONPATH", "")])}
    subprocess.run([sys.executable, "-c", code, str(tmp_path), tests], check=True, env=env, timeout=300)
    site = tmp_path / "site"
    assert not (site / "board.parquet").exists()
    front = (site / "index.html").read_text()
    assert "board.parquet" not in front and "without pyarrow" in front
    assert dead_links(site) == []


def test_every_link_a_page_shows_in_the_browser_resolves(reader_site, browser):
    """The links the scripts draw too (table cells, system pages), as the browser has them."""
    page = _page(browser)
    pages = ["index.html", "compare.html", *(f"workloads/{p.name}" for p in (reader_site / "workloads").glob("*.html"))]
    pages += [f"systems/{p.name}" for p in sorted((reader_site / "systems").glob("*.html"))[:2]]
    checked = 0
    for rel in pages:
        page.goto((reader_site / rel).as_uri())
        page.wait_for_load_state("load")
        hrefs = page.eval_on_selector_all("a[href]", "els => els.map(e => e.href)")
        for href in hrefs:
            parts = urlsplit(href)
            if parts.scheme != "file":
                assert parts.scheme in ("blob",), href  # a record's JSON is offered as a blob
                continue
            assert Path(unquote(parts.path)).is_file(), f"{rel}: {href}"
            checked += 1
    assert checked > 20
    assert page.errors == []


def _drawn(page, selector: str) -> None:
    page.locator(f"{selector} canvas").wait_for()
    for _ in range(50):
        if page.locator(selector).get_attribute("data-x"):
            return
        page.wait_for_timeout(100)


def test_the_serving_curve_is_drawn_against_the_achieved_throughput_with_the_slos(reader_site, browser):
    page = _page(browser)
    page.goto((reader_site / "workloads" / "inference.serving.html").as_uri())
    _drawn(page, "#family-chart")
    chart = page.locator("#family-chart")
    assert "against the achieved throughput" in (chart.get_attribute("aria-label") or "")
    low, high = (float(v) for v in (chart.get_attribute("data-x") or "").split())
    # the steps achieved 640 to 3,840 output tokens/s at offered rates of 1 to 16 requests/s
    assert low > max(RATES) and low <= 640.0 and high >= 3840.0
    legend = " ".join(page.locator("#family-chart .u-legend").all_inner_texts())
    assert "SLO TTFT" in legend and "SLO TPOT" in legend and "fast-node TTFT p99" in legend
    assert legend.startswith("output tokens/s")  # the x series: what the steps achieved
    assert page.errors == []


def test_time_to_target_shows_each_seed_and_marks_the_olympic_mean(reader_site, browser):
    page = _page(browser)
    page.goto((reader_site / "workloads" / "training.resnet.html").as_uri())
    _drawn(page, "#family-chart")
    chart = page.locator("#family-chart")
    assert chart.get_attribute("data-runs") == str(sum(len(v) for v in SEEDS.values()))
    legend = " ".join(page.locator("#family-chart .u-legend").all_inner_texts())
    assert all(f"run {k}" in legend for k in range(1, 6)) and "olympic mean" in legend
    low, _ = (float(v) for v in (chart.get_attribute("data-y") or "").split())
    assert low == 0.0  # a time is read from zero
    assert page.errors == []


def test_a_phone_gets_the_table_before_the_filters(reader_site, browser):
    for width, folded in ((390, True), (1280, False)):
        page = _page(browser, width)
        page.goto((reader_site / "workloads" / "inference.serving.html").as_uri())
        page.wait_for_selector(".tabulator-row")
        box = page.locator("#facets-box")
        assert box.count() == 1
        assert (box.get_attribute("open") is None) is folded
        if folded:  # the table starts within the first screen
            top = page.evaluate("document.querySelector('.grid').getBoundingClientRect().top")
            assert top < 900, top
            assert page.evaluate("document.documentElement.scrollWidth") <= width
        assert page.errors == []
        page.context.close()
