"""The headless Chromium the leaderboard's browser tests drive: Debian's ``chromium`` through
playwright (no browser is ever downloaded), one per test module. A missing binary fails the
test rather than skipping it: a site nobody opened is a site nobody tested."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

CHROMIUM = os.environ.get("PERFSUITE_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--headless",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
]


def launch_chromium() -> Iterator:
    """Yield a launched browser and close it afterwards (the body of a module's ``browser`` fixture)."""
    if not (os.path.isfile(CHROMIUM) and os.access(CHROMIUM, os.X_OK)):
        pytest.fail(f"{CHROMIUM} is missing: scripts/test.sh installs Debian's chromium (apt-get install chromium)")
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is in the 'test' extra")
    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield b
        b.close()


def offline_page(browser, width: int, **context_options):
    """A page in a fresh context of ``width`` x 900 px from which nothing may reach a network (the
    site must open from files alone): every http(s) request is aborted. Close it with
    ``page.context.close()``."""
    context = browser.new_context(viewport={"width": width, "height": 900}, **context_options)
    context.route("http://*/**", lambda route: route.abort())
    context.route("https://*/**", lambda route: route.abort())
    return context.new_page()


def watched_page(browser, width: int, **context_options):
    """:func:`offline_page` whose uncaught errors and console errors are kept in ``page.errors``,
    so that a test can assert the page logged none."""
    page = offline_page(browser, width, **context_options)
    page.errors = []
    page.on("pageerror", lambda e: page.errors.append(str(e)))
    page.on("console", lambda m: page.errors.append(m.text) if m.type == "error" else None)
    return page
