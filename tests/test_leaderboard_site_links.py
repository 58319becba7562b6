"""The leaderboard as a public round's site is laid out, walked in a real headless Chromium
(Debian's ``chromium`` through playwright): from the front page, every page a link reaches is
opened, and every link and every resource a page loads (its benchmark's data file, a record's
shard, styles, scripts) resolves, with no console error; the front page's cards show the
leaders and link to the rest; a benchmark page's data is a file of its own; the pictures draw
the table's leaders; and a record's page is written for each record the tables link to
(every ranked record with ``--per-run``)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest
from support.browser import offline_page
from support.factories import gemm_metrics, make_metric, make_record

from perfsuite.publish.leaderboard import build_site
from perfsuite.publish.leaderboard.site import CHART_SYSTEMS, FRONT_LEADERS
from perfsuite.registry import open_registry

GEMM_HOSTS = [f"box-{i:02d}" for i in range(CHART_SYSTEMS + 2)]  # more than a card or a picture shows
SEEDS = 3


def _times(scale: float) -> tuple[float, ...]:
    return tuple(round(scale * (1.0 + 0.001 * i), 6) for i in range(9))


def _serving(host: str, per_request: float) -> dict:
    steps = [
        {
            "case": f"rate {rate:g}/s",
            "mode": "rate",
            "load": rate,
            "offered_rps": rate,
            "completed_rps": min(rate, 3.0),
            "output_tokens_per_s": min(rate, 3.0) * per_request,
            "ttft_ms": {"p99": 50.0 * (k + 1)},
            "tpot_ms": {"p99": 10.0 * (k + 1)},
            "valid": True,
            "within_slo": True,
        }
        for k, rate in enumerate((1.0, 2.0, 4.0))
    ]
    return make_record(
        workload_name="inference.serving",
        category="inference",
        host=host,
        device="cuda",
        params={"rates": [1.0, 2.0, 4.0], "output_tokens": 64, "slo_ttft_ms": 1000.0, "slo_tpot_ms": 100.0},
        metrics=[make_metric("rate sweep", "goodput_at_slo_rps", "requests/s", [3.0], higher_is_better=True)],
        details={"serving": {"slo": {"ttft_ms": 1000.0, "tpot_ms": 100.0}, "rate_sweep": {"steps": steps}}},
    )


def _fill(db: Path) -> int:
    """GEMM on more systems than a card shows, each twice (an older run no table links to);
    kernels.ceilings (a roofline on each system page); time to target with seeds on more
    systems than a picture draws; a serving sweep on two. Returns the number of records."""
    from datetime import UTC, datetime, timedelta

    count = 0
    start = datetime(2026, 3, 1, tzinfo=UTC)
    with open_registry(f"sqlite:///{db}") as reg:
        for i, host in enumerate(GEMM_HOSTS):
            for run in range(2):
                reg.store(
                    make_record(
                        host=host,
                        device="cuda",
                        started_at=start + timedelta(hours=i, minutes=run),
                        metrics=gemm_metrics(time_ms=_times(1.0 + 0.1 * i + 0.01 * run)),
                    )
                )
                count += 1
            reg.store(
                make_record(
                    workload_name="kernels.ceilings",
                    host=host,
                    device="cuda",
                    params={},
                    metrics=gemm_metrics(case="matmul.bf16", time_ms=_times(0.9)),
                )
            )
            count += 1
            for seed in range(SEEDS):
                reg.store(
                    make_record(
                        workload_name="training.resnet",
                        host=host,
                        device="cuda",
                        params={"depth": 50},
                        controls={"seed": seed},
                        metrics=[
                            make_metric("target", "time_to_target_s", "s", [50.0 + i + seed], higher_is_better=False)
                        ],
                    )
                )
                count += 1
        for host, per_request in (("box-00", 640.0), ("box-01", 420.0)):
            reg.store(_serving(host, per_request))
            count += 1
    return count


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> tuple[Path, int]:
    root = tmp_path_factory.mktemp("links")
    count = _fill(root / "r.db")
    with open_registry(f"sqlite:///{root / 'r.db'}") as reg:
        counts = build_site(reg, root / "site")
    assert counts["records"] == count
    return root / "site", count


def _page(browser, width: int = 1280):
    """A page that notes every failure: a request that failed (a file that is not there), a
    response other than 200 where there is one, a console error, a script error."""
    page = offline_page(browser, width)
    page.problems, page.loaded = [], []
    page.on("requestfailed", lambda r: page.problems.append(f"failed: {r.url} ({r.failure})"))
    page.on("requestfinished", lambda r: page.loaded.append(r.url))
    page.on("response", lambda r: page.problems.append(f"{r.status}: {r.url}") if r.status >= 400 else None)
    page.on("console", lambda m: page.problems.append(f"console: {m.text}") if m.type == "error" else None)
    page.on("pageerror", lambda e: page.problems.append(f"script: {e}"))
    return page


def _key(url: str) -> str:
    """Pages by file; a record's page by its record too (the hash names which record it draws)."""
    parts = urlsplit(url)
    return url if parts.path.endswith("/record.html") else url.split("#")[0]


def test_every_page_link_and_loaded_file_of_the_site_resolves(built, browser):
    site, _ = built
    page = _page(browser)
    start = (site / "index.html").as_uri()
    queue, seen, problems, links, resources = [start], {_key(start)}, [], 0, set()
    while queue:
        url = queue.pop(0)
        page.goto("about:blank")  # a record's page reloads on a hash change: never race that reload
        page.goto(url)
        page.wait_for_load_state("load")
        if "/workloads/" in url:
            page.wait_for_selector(".tabulator-row")
        if url.split("#")[0].endswith("/record.html"):
            page.locator("#record-body table").first.wait_for()
        page.wait_for_timeout(100)
        problems += [f"{url}: {p}" for p in page.problems]
        page.problems.clear()
        resources.update(page.loaded)
        page.loaded.clear()
        for href in page.eval_on_selector_all("a[href]", "els => els.map(e => e.href)"):
            parts = urlsplit(href)
            if parts.scheme == "blob":  # a record's JSON, offered from the page itself
                continue
            assert parts.scheme == "file", f"{url}: a link off the site: {href}"
            links += 1
            if not Path(unquote(parts.path)).is_file():
                problems.append(f"{url}: dead link {href}")
            elif parts.path.endswith(".html") and _key(href) not in seen:
                seen.add(_key(href))
                queue.append(href)
        assert len(seen) < 500, "the walk is bounded: a small site has fewer pages"
    assert problems == []
    pages = {urlsplit(u).path for u in seen}
    written = {p.as_uri()[len("file://") :] for p in site.rglob("*.html")}
    assert pages == written  # every page of the site is reached from the front page
    assert links > 100
    loaded = {unquote(urlsplit(u).path).removeprefix(str(site) + "/") for u in resources}
    assert {f"data/{p.stem}.js" for p in (site / "workloads").glob("*.html")} <= loaded  # each page's data file
    assert any(p.startswith("records/shard-") for p in loaded)  # a record's shard


def test_a_front_card_shows_the_leaders_and_links_to_every_system(built, browser):
    site, _ = built
    page = _page(browser)
    page.goto((site / "index.html").as_uri())
    card = page.locator("section.card", has=page.locator("h2", has_text="kernels.gemm"))
    rows = card.locator("tbody tr").all_inner_texts()
    assert len(rows) == FRONT_LEADERS
    assert [r.split("\t")[1] for r in rows] == GEMM_HOSTS[:FRONT_LEADERS]  # best first
    more = card.locator("a.all-systems")
    assert more.inner_text() == f"All {len(GEMM_HOSTS)} systems"
    more.click()
    page.wait_for_selector(".tabulator-row")
    systems = page.locator(".tabulator-row .tabulator-cell[tabulator-field='system']").all_inner_texts()
    assert systems == GEMM_HOSTS  # the benchmark's page ranks every system
    assert page.problems == []
    page.context.close()


def test_a_benchmark_page_loads_its_data_file_and_draws_the_leaders(built, browser):
    site, _ = built
    html = (site / "workloads" / "training.resnet.html").read_text()
    assert 'id="board-data"' not in html and '<script src="../data/training.resnet.js"></script>' in html
    text = (site / "data" / "training.resnet.js").read_text()
    data = json.loads(text.removeprefix("window.PERFSUITE_BOARD = ").removesuffix(";\n"))
    assert len(data["configs"][0]["rows"]) == len(GEMM_HOSTS)  # the table: every system
    page = _page(browser)
    page.goto((site / "workloads" / "training.resnet.html").as_uri())
    chart = page.locator("#family-chart")
    chart.locator("canvas").wait_for()
    for _ in range(50):
        if chart.get_attribute("data-runs"):
            break
        page.wait_for_timeout(100)
    assert chart.get_attribute("data-runs") == str(CHART_SYSTEMS * SEEDS)  # the leaders' seeds, each a point
    assert f"The {CHART_SYSTEMS} leaders" in page.inner_text("#pictures")
    assert page.problems == []
    page.context.close()


def test_record_pages_are_the_linked_records_and_per_run_writes_every_one(built, cli, tmp_path):
    site, count = built
    shards = "".join(p.read_text() for p in (site / "records").glob("shard-*.js"))
    stored = set(re.findall(r'^"([0-9a-f]{32})": \{"mllog"', shards, flags=re.M))
    linked = {
        m
        for p in (*(site / "systems").glob("*.html"), *(site / "data").glob("*.js"))
        for m in re.findall(r"record\.html#([0-9a-f]+)|\"r:[^\"]+\":\"([0-9a-f]+)\"", p.read_text())
        for m in m
        if m
    }
    assert linked and stored == linked  # a page for each record linked, and no other
    assert len(stored) < count  # the older GEMM runs are ranked (in the olympic mean), not linked
    done = cli("--db", f"sqlite:///{site.parent / 'r.db'}", "leaderboard", "--out", str(tmp_path / "all"), "--per-run")
    assert done.returncode == 0, done.stderr
    assert f"{count} records, {count} record pages" in done.stdout
    shards = "".join(p.read_text() for p in (tmp_path / "all" / "records").glob("shard-*.js"))
    assert len(re.findall(r'^"[0-9a-f]{32}": \{"mllog"', shards, flags=re.M)) == count
