"""The training scaling view beside the bare DDP loop, in a real headless Chromium (Debian's
``chromium`` through playwright): each run's cross-check measured a bare loop of the same model at
the run's world size in the same call, and the efficiency picture draws that loop's efficiency
(its N-GPU samples/s over N times its one-GPU samples/s) beside the suite's, the table lists it
per GPU count, and a series whose runs measured no bare loop draws none."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.browser import watched_page
from support.factories import make_metric, make_record

from perfsuite.publish.leaderboard import build_site
from perfsuite.registry import open_registry

# world -> (the suite's tokens/s, the bare loop's samples/s beside it): efficiencies 1, 0.875,
# 0.75 for the suite and 1, 0.95, 0.9 for the bare loop
WITH_LOOP = {1: (400_000.0, 400.0), 2: (700_000.0, 760.0), 4: (1_200_000.0, 1_440.0)}


def _throughput_run(host: str, world: int, tokens_per_s: float, bare_samples_per_s: float | None) -> dict:
    details = {}
    if bare_samples_per_s is not None:
        details["crosscheck"] = {
            "train": {"status": "measured", "reference_samples_per_s": bare_samples_per_s, "agrees": False}
        }
    return make_record(
        workload_name="training.gpt",
        category="training",
        host=host,
        device="cuda",
        gpu_count=world,
        params={"global_batch": 16 * world, "goal": "throughput"},
        launch={"world_size": world},
        metrics=[make_metric("throughput", "tokens_per_s", "tokens/s", [tokens_per_s], higher_is_better=True)],
        details=details,
    )


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("scaling-bare")
    with open_registry(f"sqlite:///{root / 'r.db'}") as reg:
        for world, (tokens_per_s, bare) in WITH_LOOP.items():
            reg.store(_throughput_run("with-loop", world, tokens_per_s, bare))
            reg.store(_throughput_run("no-loop", world, tokens_per_s * 0.9, None))
        build_site(reg, root / "site")
    return root / "site"


@pytest.fixture
def page(browser):
    p = watched_page(browser, 1280)
    yield p
    p.context.close()


def test_the_efficiency_picture_draws_the_bare_ddp_loops_efficiency_beside_the_suites(site, page):
    page.goto((site / "workloads" / "training.gpt.html").as_uri())
    efficiency = page.locator("#scaling-efficiency")
    efficiency.locator("canvas").wait_for()
    legend = efficiency.locator(".u-legend .u-series th").all_inner_texts()
    assert legend == [
        "GPUs",
        "no-loop · weak scaling (16 per GPU)",
        "with-loop · weak scaling (16 per GPU)",
        "with-loop · bare DDP loop",
        "ideal (1.0)",
    ]
    rows = [r.split("\t") for r in page.locator("#scaling-table tbody tr").all_inner_texts()]
    assert [(r[1], r[3], r[6]) for r in rows if r[0].startswith("with-loop")] == [
        ("1", "1.000", "1.000"),
        ("2", "0.875", "0.950"),
        ("4", "0.750", "0.900"),
    ]
    assert [r[6] for r in rows if r[0].startswith("no-loop")] == ["", "", ""]
    assert page.errors == []
