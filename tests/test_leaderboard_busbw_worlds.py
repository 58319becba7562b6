"""The collectives page's busbw picture across world sizes, in a real headless Chromium (Debian's
``chromium`` through playwright): beside a table's curve, the tables that differ from it only in
the world size are drawn, even where they swept another range of sizes (a 4-rank plan sweeping
16 B to 1 GiB by 4 beside a 2-rank one sweeping 1 KiB to 4 MiB by 2); a table that differs in
what a size measures (its dtype, its timing loop) never is."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support.browser import watched_page
from support.factories import make_metric, make_record

from perfsuite.publish.leaderboard import build_site
from perfsuite.registry import open_registry

# (world, min_bytes, max_bytes, step_factor, dtype, iters): the tables of the board
TABLES = (
    (2, 2**10, 2**22, 2, "fp32", 20),
    (4, 16, 2**30, 4, "fp32", 20),  # the 4-rank range that drew the most sizes
    (4, 16, 2**26, 4, "fp32", 20),  # a shorter 4-rank sweep: not drawn beside the 2-rank table
    (4, 16, 2**30, 4, "bf16", 20),  # another dtype: a picture of its own
    (2, 2**10, 2**22, 2, "fp32", 500),  # another timing loop: a picture of its own
)


def _sweep(world: int, low: int, high: int, step: int, dtype: str, iters: int) -> dict:
    sizes, size = [], low
    while size <= high:
        sizes.append(size)
        size *= step
    busbw = 100.0 * world
    rows = [
        {
            "size_bytes": s,
            "count": s // 4,
            "dtype": dtype,
            "redop": "sum",
            "root": -1,
            "oop": None,
            "ip": {"busbw_gbps": busbw * s / (s + 2**20), "algbw_gbps": busbw, "time_us": 10.0, "wrong": 0},
        }
        for s in sizes
    ]
    return make_record(
        workload_name="collectives.all_reduce",
        category="collectives",
        host="node",
        device="cuda",
        params={"min_bytes": low, "max_bytes": high, "step_factor": step, "dtype": dtype, "iters": iters},
        metrics=[make_metric("in-place", "busbw_gbps", "GB/s", [busbw], higher_is_better=True)],
        details={"rows": rows},
        gpu_count=world,
        launch={"world_size": world},
    )


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("busbw-worlds")
    with open_registry(f"sqlite:///{root / 'r.db'}") as reg:
        for table in TABLES:
            reg.store(_sweep(*table))
        build_site(reg, root / "site")
    return root / "site"


def _table_id(site: Path, world: int, high: int, dtype: str, iters: int) -> str:
    """The id of the board's table with these settings, read from the page's own data file."""
    text = (site / "data" / "collectives.all_reduce.js").read_text(encoding="utf-8")
    board = json.loads(text[text.index("=") + 1 :].strip().rstrip(";"))
    wanted = {
        "world.world_size": str(world),
        "param.max_bytes": str(high),
        "param.dtype": dtype,
        "param.iters": str(iters),
    }
    (found,) = [c["id"] for c in board["configs"] if all(c["shown"].get(k) == v for k, v in wanted.items())]
    return found


@pytest.fixture
def page(browser):
    p = watched_page(browser, 1280)
    yield p
    p.context.close()


def _legend(page, site: Path, table: str) -> list[str]:
    page.goto((site / "workloads" / "collectives.all_reduce.html").as_uri() + f"#cfg={table}")
    page.reload()
    chart = page.locator("#family-chart")
    chart.locator("canvas").wait_for()
    return chart.locator(".u-legend .u-series th").all_inner_texts()


def test_a_table_is_drawn_beside_the_world_sizes_that_swept_another_range_of_sizes(site, page):
    two = _table_id(site, 2, 2**22, "fp32", 20)
    assert _legend(page, site, two) == ["size", "node (2 ranks)", "node (4 ranks, 16 B–1 GiB ×4)"]
    four = _table_id(site, 4, 2**30, "fp32", 20)
    assert _legend(page, site, four) == ["size", "node (4 ranks)", "node (2 ranks, 1 KiB–4 MiB ×2)"]
    assert page.errors == []


def test_a_table_that_measures_a_size_otherwise_is_never_drawn_beside(site, page):
    assert _legend(page, site, _table_id(site, 4, 2**30, "bf16", 20)) == ["size", "node"]
    assert _legend(page, site, _table_id(site, 2, 2**22, "fp32", 500)) == ["size", "node"]
    assert page.errors == []
