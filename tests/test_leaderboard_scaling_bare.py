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
# world -> each cross-check round's (suite, bare loop) samples/s: the rounds' ratios, suite over
# bare, are 1.02, 1.0, 1.01 on one GPU and 0.93, 0.97, 0.95 on four (the 2-GPU run predates them)
ROUNDS = {
    1: [(408.0, 400.0), (400.0, 400.0), (404.0, 400.0)],
    4: [(1_302.0, 1_400.0), (1_358.0, 1_400.0), (1_330.0, 1_400.0)],
}


def _throughput_run(host: str, world: int, tokens_per_s: float, bare_samples_per_s: float | None) -> dict:
    details = {}
    if bare_samples_per_s is not None:
        rounds = [{"suite_samples_per_s": s, "reference_samples_per_s": r} for s, r in ROUNDS.get(world, [])]
        details["crosscheck"] = {
            "train": {
                "status": "measured",
                "reference_samples_per_s": bare_samples_per_s,
                "agrees": False,
                "rounds": rounds,
            }
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
    # under the table: the suite's efficiency over the bare loop's from the rounds, where both the
    # point's runs and the first point's have rounds (median 0.95 over median 1.01)
    from perfsuite.measure.stats import ratio_of_medians_ci

    ratio, low, high = ratio_of_medians_ci([1.02, 1.0, 1.01], [0.93, 0.97, 0.95])
    assert round(ratio, 3) == round(0.95 / 1.01, 3)
    assert page.locator("#scaling-table .versus-bare").all_inner_texts() == [
        "with-loop · weak scaling (16 per GPU): the suite's efficiency over the bare DDP loop's, from the rounds of "
        f"each run's cross-check (95% interval): 4 GPUs {ratio:.3f} ({low:.3f}\u2013{high:.3f})."
    ]
    assert page.errors == []
