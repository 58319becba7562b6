"""The leaderboard in a real headless Chromium (Debian's ``chromium``, driven by playwright; no
browser is ever downloaded), one browser for the module: it opens from files, a header click
sorts, a column filter hides rows, the busbw chart draws one series per system, time-to-target
bars start at zero, a table downloads as CSV, the system-against-system page compares, nothing
overflows a 390 px phone, and no script runs from a ``<script>``, ``onerror=`` or
``javascript:`` payload in any submitted field."""

from __future__ import annotations

import csv
import re
from pathlib import Path

import pytest
from support.browser import watched_page
from support.factories import gemm_metrics, make_metric, make_record

from perfsuite.publish.leaderboard import build_site
from perfsuite.registry import open_registry

EVIL = "<script>alert(1)</script>"
EVIL_IMG = '<img src=x onerror="alert(2)">'
EVIL_LINK = "javascript:alert(3)"


def _times(scale: float) -> tuple[float, ...]:
    return tuple(round(scale * (1.0 + 0.001 * i), 6) for i in range(9))


def _collective(host: str, busbw: float, seed: int, inject: str = "none", world: int = 1) -> dict:
    """An all_reduce record at ``world`` ranks with its sweep table (details.rows), as the
    collectives write it."""
    rows = [
        {
            "size_bytes": size,
            "count": size // 4,
            "dtype": "float",
            "redop": "sum",
            "root": -1,
            "oop": None,
            "ip": {"busbw_gbps": busbw * size / (size + 2**20), "algbw_gbps": busbw, "time_us": 10.0, "wrong": 0},
        }
        for size in (2**10, 2**14, 2**18, 2**22)
    ]
    metrics = [
        make_metric("in-place", "busbw_gbps", "GB/s", [busbw, busbw * 0.99, busbw * 1.01], higher_is_better=True)
    ]
    return make_record(
        workload_name="collectives.all_reduce",
        category="collectives",
        host=host,
        device="cuda",
        params={"max_bytes": 2**22, "inject": inject, "iters": 20},
        metrics=metrics,
        details={"rows": rows},
        controls={"seed": seed},
        gpu_count=world,
        launch={"world_size": world},
    )


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    """Three hosts ranked on one gemm case (the slowest named like a script, another like an
    image whose load fails), two hosts on all_reduce, plus a failed run, an unverified run and an
    all_reduce self-test that must not appear."""
    root = tmp_path_factory.mktemp("board")
    with open_registry(f"sqlite:///{root / 'r.db'}") as reg:
        for host, scale in (("fast-box", 1.0), ("mid-box", 1.5), (EVIL, 3.0), (EVIL_IMG, 2.0)):
            reg.store(
                make_record(
                    host=host,
                    device="cuda",
                    metrics=gemm_metrics(time_ms=_times(scale)),
                    params={"m": 1024, "n": 1024, "k": 1024, "dtype": "bf16", "note": EVIL_LINK},
                )
            )
        reg.store(make_record(host="failed-box", device="cuda", status="failed"))
        reg.store(
            make_record(
                host="unverified-box", device="cuda", verification="failed", metrics=gemm_metrics(time_ms=_times(0.5))
            )
        )
        reg.store(_collective("fast-box", 300.0, 1))
        reg.store(_collective("mid-box", 150.0, 2))
        reg.store(_collective("selftest-box", 900.0, 3, inject="wrong_element"))  # recorded, never ranked
        build_site(reg, root / "site")
    return root / "site"


def test_unranked_runs_are_absent_and_text_is_escaped_in_the_html(site):
    page = (site / "workloads" / "kernels.gemm.html").read_text()
    assert "failed-box" not in page and "unverified-box" not in page
    for text in [page] + [p.read_text() for p in (site / "systems").glob("*.html")]:
        assert EVIL not in text and EVIL_IMG not in text
        assert "<script>" not in text.replace('<script type="application/json"', "")
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page


def test_the_site_is_swapped_in_whole_and_a_failed_build_keeps_the_old_one(site, tmp_path):
    out = tmp_path / "site"
    with open_registry(f"sqlite:///{site.parent / 'r.db'}") as reg:
        build_site(reg, out)
        (out / "stale.html").write_text("from an older build")  # listed in the manifest: perfsuite's own
        import json

        manifest = json.loads((out / ".perfsuite-manifest.json").read_text())
        manifest["files"].append("stale.html")
        (out / ".perfsuite-manifest.json").write_text(json.dumps(manifest))
        (out / "mine.txt").write_text("the user's")  # not listed: kept
        build_site(reg, out)
        assert not (out / "stale.html").exists() and (out / "mine.txt").read_text() == "the user's"
        before = sorted(p.relative_to(out) for p in out.rglob("*"))
        reg.engine.dispose()
    import shutil

    from perfsuite.registry import RegistryError

    shutil.copyfile(site.parent / "r.db", tmp_path / "broken.db")
    with open_registry(f"sqlite:///{tmp_path / 'broken.db'}") as broken:
        with broken.engine.begin() as c:  # runs whose metrics are gone: the build fails half way
            c.exec_driver_sql("PRAGMA foreign_keys = OFF")
            c.exec_driver_sql("DROP TABLE metrics")
        with pytest.raises((RegistryError, Exception), match="metrics"):
            build_site(broken, out)
    assert sorted(p.relative_to(out) for p in out.rglob("*")) == before
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".site.")]


def _page(browser, width: int = 1400, downloads: bool = False):
    p = watched_page(browser, width, accept_downloads=downloads)
    p.dialogs = []
    p.on("dialog", lambda d: (p.dialogs.append(d.message), d.dismiss()))
    return p


@pytest.fixture
def page(browser):
    p = _page(browser)
    yield p
    p.context.close()


def _systems(page) -> list[str]:
    return page.locator(".tabulator-row .tabulator-cell[tabulator-field='system']").all_inner_texts()


def test_the_board_opens_from_files_and_sorts_by_a_column(site, page):
    page.goto((site / "index.html").as_uri())
    page.click("a[href='workloads/kernels.gemm.html']")
    page.wait_for_selector(".tabulator-row")
    assert _systems(page) == ["fast-box", "mid-box", EVIL_IMG, EVIL]  # ranked by TFLOP/s, best first
    header = page.locator(".tabulator-col[tabulator-field='c:bf16'] .tabulator-col-title")
    header.click()  # first click: best first (higher is better)
    header.click()
    assert _systems(page) == [EVIL, EVIL_IMG, "mid-box", "fast-box"]
    assert "sort=c%3Abf16%3Aasc" in page.url or "sort=c:bf16:asc" in page.url  # the state is in the permalink
    again = page.context.new_page()
    again.goto(page.url)
    again.wait_for_selector(".tabulator-row")
    assert _systems(again) == [EVIL, EVIL_IMG, "mid-box", "fast-box"]
    assert page.dialogs == [] and page.errors == []


def test_a_dotted_case_shows_its_figure(tmp_path, page):
    """Ceilings and host-device cases are named with dots (``matmul.bf16``): the table shows their
    figures, not an empty cell (Tabulator reads a dotted field as a nested one unless told)."""
    with open_registry(f"sqlite:///{tmp_path / 'r.db'}") as reg:
        reg.store(
            make_record(
                workload_name="kernels.ceilings",
                host="fast-box",
                device="cuda",
                params={},
                metrics=gemm_metrics(case="matmul.bf16", time_ms=_times(1.0)),
            )
        )
        build_site(reg, tmp_path / "site")
    page.goto((tmp_path / "site" / "workloads" / "kernels.ceilings.html").as_uri())
    page.wait_for_selector(".tabulator-row")
    (cell,) = page.locator(".tabulator-row .tabulator-cell[tabulator-field='c:matmul.bf16']").all_inner_texts()
    assert cell.split()[0] == "2.139" and "1 run" in cell  # the median of its calls
    assert page.errors == []


def test_time_to_target_bars_start_at_zero(tmp_path, page):
    """A bar's length is its figure: two systems at 50 and 58 s are drawn from zero (a y axis from
    the smaller figure drew 50 s about a tenth the height of 58 s), and the chart says so."""
    with open_registry(f"sqlite:///{tmp_path / 'r.db'}") as reg:
        for host, seconds in (("fast-box", 50.0), ("slow-box", 58.0)):
            reg.store(
                make_record(
                    workload_name="training.resnet",
                    host=host,
                    device="cuda",
                    params={"depth": 50},
                    metrics=[make_metric("target", "time_to_target_s", "s", [seconds], higher_is_better=False)],
                )
            )
        build_site(reg, tmp_path / "site")
    page.goto((tmp_path / "site" / "workloads" / "training.resnet.html").as_uri())
    chart = page.locator("#family-chart")
    chart.locator("canvas").wait_for()
    pattern = re.compile(r"time to target per system; seconds axis from (\S+) to (\S+)")
    for _ in range(50):  # named once drawn
        label = chart.get_attribute("aria-label") or ""
        if match := pattern.fullmatch(label):
            break
        page.wait_for_timeout(100)
    assert match, label
    assert float(match[1]) == 0.0 and float(match[2]) >= 58.0
    assert page.errors == []


def _wait_rows(page, count: int) -> None:
    """Wait for the table to show ``count`` rows (the page's CSP forbids wait_for_function's eval)."""
    for _ in range(50):
        if page.locator(".tabulator-row").count() == count:
            return
        page.wait_for_timeout(100)
    assert page.locator(".tabulator-row").count() == count


def test_a_column_filter_hides_rows(site, page):
    page.goto((site / "workloads" / "kernels.gemm.html").as_uri())
    page.wait_for_selector(".tabulator-row")
    box = page.locator(".tabulator-col[tabulator-field='system'] input")
    box.press_sequentially("mid-")
    _wait_rows(page, 1)  # the filter applies once typing pauses
    assert _systems(page) == ["mid-box"]
    assert "f.system=mid-" in page.url  # the filter is in the permalink
    box.fill("")
    box.press("Backspace")
    _wait_rows(page, 4)


def test_the_busbw_chart_draws_one_series_per_system(site, page):
    page.goto((site / "workloads" / "collectives.all_reduce.html").as_uri())
    chart = page.locator("#family-chart")
    chart.locator("canvas").wait_for()
    assert chart.get_attribute("data-series") == "2"
    assert sorted(chart.locator(".u-legend .u-series th").all_inner_texts()) == ["fast-box", "mid-box", "size"]
    main = page.inner_text("main")
    assert "max_bytes" in main  # a key setting, shown
    assert "inject" not in main and "selftest-box" not in main  # a harness parameter never; a self-test never ranked
    assert page.errors == []


def test_a_table_downloads_as_csv(site, browser, tmp_path):
    page = _page(browser, downloads=True)
    page.goto((site / "workloads" / "kernels.gemm.html").as_uri())
    page.wait_for_selector(".tabulator-row")
    with page.expect_download() as info:
        page.click("button.csv")
    path = tmp_path / "table.csv"
    info.value.save_as(path)
    rows = list(csv.DictReader(path.open(encoding="utf-8")))
    assert [r["system"] for r in rows] == ["fast-box", "mid-box", EVIL_IMG, EVIL]
    assert float(rows[0]["bf16 (TFLOP/s)"]) > float(rows[1]["bf16 (TFLOP/s)"])
    page.context.close()


def test_system_against_system_gives_a_ratio_and_a_verdict(site, page):
    page.goto((site / "compare.html").as_uri())
    page.select_option("#system-a", label="mid-box")
    page.select_option("#system-b", label="fast-box")
    page.wait_for_selector("#pair-grid .tabulator-row")
    benchmarks = page.locator("#pair-grid .tabulator-cell[tabulator-field='benchmark']").all_inner_texts()
    assert sorted(benchmarks) == ["collectives.all_reduce", "kernels.gemm"]
    gemm = page.locator("#pair-grid .tabulator-row", has_text="kernels.gemm")
    ratio = float(gemm.locator(".tabulator-cell[tabulator-field='ratio']").inner_text())
    assert ratio == pytest.approx(1.5, rel=0.01)  # fast-box does 1.5x mid-box's TFLOP/s
    assert gemm.locator(".tabulator-cell[tabulator-field='verdict']").inner_text() == "not tested (one run)"
    assert "a=" in page.url and "b=" in page.url
    assert page.errors == []


@pytest.mark.parametrize(
    "path", ["index.html", "workloads/kernels.gemm.html", "workloads/collectives.all_reduce.html", "compare.html"]
)
def test_nothing_overflows_a_phone(site, browser, path):
    page = _page(browser, width=390)
    page.goto((site / path).as_uri())
    page.wait_for_timeout(300)
    assert page.evaluate("document.documentElement.scrollWidth") <= 390
    assert page.locator("meta[name=viewport]").count() == 1
    page.context.close()


def _run_ids(site: Path) -> list[str]:
    """The run ids the boards link to (their record pages)."""
    return sorted(
        {m for p in (site / "workloads").glob("*.html") for m in re.findall(r"record\.html#([0-9a-f]+)", p.read_text())}
    )


def test_records_are_written_as_shards_and_each_permalink_finds_its_record(site, browser):
    from perfsuite.publish.leaderboard.site import record_shard, shard_count

    run_ids = _run_ids(site)
    shards = sorted((site / "records").glob("shard-*.js"))
    assert len(shards) == shard_count(len(run_ids)) and not list((site / "records").glob("[0-9a-f]*.js"))
    page = _page(browser)
    for run_id in run_ids:
        assert f'"{run_id}"' in (site / "records" / f"shard-{record_shard(run_id, len(shards))}.js").read_text()
        page.goto("about:blank")
        page.goto(f"{(site / 'record.html').as_uri()}#{run_id}")
        page.locator("#record-body table").first.wait_for()
        assert run_id in page.inner_text("h1")
    page.goto("about:blank")
    page.goto(f"{(site / 'record.html').as_uri()}#{'f' * 32}")
    page.wait_for_timeout(300)
    assert page.inner_text("#record-body") == f"No record {'f' * 32} in this site."
    assert page.errors == []
    page.context.close()


def test_a_record_page_draws_its_record_and_offers_its_json(site, browser):
    page = _page(browser, downloads=True)
    run_id = _run_ids(site)[0]
    page.goto(f"{(site / 'record.html').as_uri()}#{run_id}")
    page.locator("#record-body table").first.wait_for()
    assert run_id in page.inner_text("h1")
    assert page.locator("#record-body td", has_text="bf16").count() >= 1
    with page.expect_download() as info:
        page.click("text=record (JSON)")
    assert info.value.suggested_filename == f"{run_id}.json"
    assert page.errors == []
    page.context.close()


def test_no_submitted_payload_runs_anywhere(site, browser):
    page = _page(browser)
    pages = [
        "index.html",
        "compare.html",
        *(f"workloads/{p.name}" for p in (site / "workloads").glob("*.html")),
        *(f"systems/{p.name}" for p in (site / "systems").glob("*.html")),
        *(f"record.html#{run_id}" for run_id in _run_ids(site)[:4]),
    ]
    for path in pages:
        page.goto("about:blank")  # record.html reloads on a hash change: never race that reload
        page.goto(
            (site / path).as_uri()
            if "#" not in path
            else f"{(site / path.split('#')[0]).as_uri()}#{path.split('#')[1]}"
        )
        page.wait_for_timeout(100)
        for link in page.locator("a").all():
            assert not (link.get_attribute("href") or "").lower().startswith("javascript:"), path
    page.goto((site / "workloads" / "kernels.gemm.html").as_uri())
    page.wait_for_selector(".tabulator-row")
    page.locator(".tabulator a.system-link", has_text=EVIL).click()
    assert page.locator("h1.system-name").inner_text() == EVIL
    page.go_back()
    page.locator(".tabulator a.system-link", has_text="onerror").click()
    assert page.locator("h1.system-name").inner_text() == EVIL_IMG
    assert page.dialogs == [] and page.errors == []
    page.context.close()


def _training(host: str, world: int, tokens_per_s: float) -> dict:
    """A training.gpt run at ``world`` GPUs with the global batch held (strong scaling)."""
    metrics = [
        make_metric("target", "time_to_target_s", "s", [40.0 / world], higher_is_better=False),
        make_metric("train", "tokens_per_s", "tokens/s", [tokens_per_s], higher_is_better=True),
    ]
    return make_record(
        workload_name="training.gpt",
        category="training",
        host=host,
        device="cuda",
        gpu_count=world,
        params={"global_batch": 64, "precision": "bf16"},
        launch={"world_size": world},
        metrics=metrics,
    )


def _legend(chart) -> list[str]:
    return chart.locator(".u-legend .u-series th").all_inner_texts()


def _named(page, chart, title: str) -> tuple[float, float]:
    """The value axis's span the chart names for screen readers once drawn."""
    pattern = re.compile(re.escape(title) + r"; .* axis from (\S+) to (\S+)")
    label = ""
    for _ in range(50):
        label = chart.get_attribute("aria-label") or ""
        if match := pattern.fullmatch(label):
            return float(match[1]), float(match[2])
        page.wait_for_timeout(100)
    raise AssertionError(label)


def _hover_values(page, chart, worlds: list[int], x: int) -> list[str]:
    """The legend's values with the cursor on ``x`` GPUs (the x axis is log2 over the worlds,
    a quarter of a doubling of margin each side, as drawn)."""
    import math

    over = chart.locator(".u-over")
    over.scroll_into_view_if_needed()
    box = over.bounding_box()
    lo, hi = math.log2(min(worlds) / 1.25), math.log2(max(worlds) * 1.25)
    page.mouse.move(box["x"] + box["width"] * (math.log2(x) - lo) / (hi - lo), box["y"] + box["height"] / 2)
    page.wait_for_timeout(50)
    return chart.locator(".u-legend .u-series td.u-value").all_inner_texts()


def test_the_scaling_view_draws_throughput_and_efficiency_against_gpus_and_busbw_per_world_size(tmp_path, page):
    """Two systems' GPT-2 at 1, 2 and 4 GPUs, global batch held: the training page draws each
    system's throughput and efficiency against GPUs (the cursor on 1, 2 and 4 GPUs reads each
    point), beside an ideal line at 1, names both value axes' spans, and lists the figures in a
    table; an all_reduce measured at 1, 2 and 4 ranks is drawn with one series per world size
    (none at one rank, where busbw is zero)."""
    with open_registry(f"sqlite:///{tmp_path / 'r.db'}") as reg:
        for world, fast, slow in ((1, 400_000.0, 300_000.0), (2, 760_000.0, 540_000.0), (4, 1_480_000.0, 960_000.0)):
            reg.store(_training("fast-node", world, fast))
            reg.store(_training("slow-node", world, slow))
        for world, busbw in ((1, 0.0), (2, 300.0), (4, 250.0)):  # busbw is zero at one rank (nccl-tests)
            reg.store(_collective("node-a", busbw, world, world=world))
        build_site(reg, tmp_path / "site")
    page.goto((tmp_path / "site" / "workloads" / "training.gpt.html").as_uri() + "#cfg=")
    throughput, efficiency = page.locator("#scaling-throughput"), page.locator("#scaling-efficiency")
    throughput.locator("canvas").wait_for()
    efficiency.locator("canvas").wait_for()
    fast, slow = "fast-node · strong scaling (global batch 64)", "slow-node · strong scaling (global batch 64)"
    assert _legend(throughput) == ["GPUs", fast, slow] and throughput.get_attribute("data-series") == "2"
    assert _legend(efficiency) == ["GPUs", fast, slow, "ideal (1.0)"]
    low, high = _named(page, throughput, "throughput against GPUs")
    assert low == 0.0 and high >= 1_480_000.0
    low, high = _named(page, efficiency, "scaling efficiency against GPUs")
    assert low == 0.0 and high >= 1.0
    worlds = [1, 2, 4]
    assert [_hover_values(page, throughput, worlds, w) for w in worlds] == [
        ["1", "400,000", "300,000"],
        ["2", "760,000", "540,000"],
        ["4", "1,480,000", "960,000"],
    ]
    assert [_hover_values(page, efficiency, worlds, w)[1:3] for w in worlds] == [
        ["1", "1"],
        ["0.95", "0.9"],
        ["0.925", "0.8"],
    ]
    rows = [r.split("\t") for r in page.locator("#scaling-table tbody tr").all_inner_texts()]
    assert [(r[1], r[2], r[3], r[4]) for r in rows if r[0] == fast] == [
        ("1", "400,000", "1.000", "1 GPU"),
        ("2", "760,000", "0.950", "1 GPU"),
        ("4", "1,480,000", "0.925", "1 GPU"),
    ]
    page.mouse.move(0, 0)  # the cursor off the charts: the picture as a reader first sees it
    page.screenshot(path=str(tmp_path / "scaling.png"), full_page=True)
    assert page.errors == []

    page.goto((tmp_path / "site" / "workloads" / "collectives.all_reduce.html").as_uri())
    chart = page.locator("#family-chart")
    chart.locator("canvas").wait_for()
    assert sorted(_legend(chart)) == ["node-a (2 ranks)", "node-a (4 ranks)", "size"]
    _named(page, chart, "bus bandwidth against message size (nccl-tests' busbw), one series per world size")
    assert page.locator("#scaling-throughput").count() == 0  # a training benchmark's view only
    page.screenshot(path=str(tmp_path / "busbw.png"), full_page=True)
    assert page.errors == []
