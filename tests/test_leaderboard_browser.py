"""The leaderboard in a real headless Chromium (Debian's ``chromium``, driven by
playwright; no browser is ever downloaded): it opens from files, a header click sorts,
the filter hides rows, a system link opens its page, and a system named like a script
renders as text without running."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from factories import gemm_metrics, make_record

from perfsuite.registry import open_registry
from perfsuite.registry.leaderboard import build_site

CHROMIUM = os.environ.get("PERFSUITE_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--headless",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
]
EVIL = "<script>alert(1)</script>"


def _times(scale: float) -> tuple[float, ...]:
    return tuple(round(scale * (1.0 + 0.001 * i), 6) for i in range(9))


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    """Three hosts ranked on one gemm case (the slowest host named like a script), plus a
    failed and an unverified run that must not appear."""
    root = tmp_path_factory.mktemp("board")
    with open_registry(f"sqlite:///{root / 'r.db'}") as reg:
        for host, scale in (("fast-box", 1.0), ("mid-box", 1.5), (EVIL, 3.0)):
            reg.store(make_record(host=host, device="cuda", metrics=gemm_metrics(time_ms=_times(scale))))
        reg.store(make_record(host="failed-box", device="cuda", status="failed"))
        reg.store(
            make_record(
                host="unverified-box", device="cuda", verification="failed", metrics=gemm_metrics(time_ms=_times(0.5))
            )
        )
        build_site(reg, root / "site")
    return root / "site"


def test_unranked_runs_are_absent_and_text_is_escaped_in_the_html(site):
    page = (site / "workloads" / "kernels.gemm.html").read_text()
    assert "failed-box" not in page and "unverified-box" not in page
    assert EVIL not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    for system_page in (site / "systems").glob("*.html"):
        assert EVIL not in system_page.read_text()


@pytest.fixture(scope="module")
def browser():
    if not (os.path.isfile(CHROMIUM) and os.access(CHROMIUM, os.X_OK)):
        pytest.fail(f"{CHROMIUM} is missing: scripts/test.sh installs Debian's chromium (apt-get install chromium)")
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is in the 'test' extra")
    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield b
        b.close()


@pytest.fixture
def page(browser):
    context = browser.new_context()
    context.route("http://*/**", lambda route: route.abort())  # nothing may come from a network
    context.route("https://*/**", lambda route: route.abort())
    p = context.new_page()
    dialogs: list[str] = []
    p.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    p.dialogs = dialogs
    yield p
    context.close()


def _systems(page) -> list[str]:
    return page.locator("table.board tbody tr td:nth-child(3)").all_inner_texts()


def test_the_board_opens_from_files_and_sorts_by_a_column(site, page):
    page.goto((site / "index.html").as_uri())
    page.click("a[href='workloads/kernels.gemm.html']")
    assert page.url.endswith("/workloads/kernels.gemm.html")
    assert _systems(page) == ["fast-box", "mid-box", EVIL]  # ranked by TFLOP/s, best first
    result_header = page.locator("table.board thead th", has_text="result")
    result_header.click()  # ascending: worst first
    assert _systems(page) == [EVIL, "mid-box", "fast-box"]
    result_header.click()
    assert _systems(page) == ["fast-box", "mid-box", EVIL]
    page.locator("table.board thead th", has_text="system").click()
    assert _systems(page) == sorted(_systems(page), key=str.lower)
    assert page.dialogs == []


def test_the_filter_hides_rows(site, page):
    page.goto((site / "workloads" / "kernels.gemm.html").as_uri())
    page.fill("input.filter", "mid-")
    visible = page.locator("table.board tbody tr:visible td:nth-child(3)").all_inner_texts()
    assert visible == ["mid-box"]
    page.fill("input.filter", "")
    assert page.locator("table.board tbody tr:visible").count() == 3


def test_a_system_link_opens_its_page_and_a_script_name_is_text(site, page):
    page.goto((site / "workloads" / "kernels.gemm.html").as_uri())
    page.locator("a.system-link", has_text=EVIL).click()
    assert "/systems/" in page.url
    assert page.locator("h1.system-name").inner_text() == EVIL
    assert page.locator("script").count() == 1  # only the page's own leaderboard.js
    page.goto((site / "index.html").as_uri())
    page.locator("a.system-link", has_text="fast-box").click()
    assert page.locator("h1.system-name").inner_text() == "fast-box"
    assert "nothing to place on a roofline" in page.inner_text("main")  # these runs report no bytes
    assert page.dialogs == []
