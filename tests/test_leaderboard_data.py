"""The leaderboard's tables from a real SQLite registry: runs whose keys differ only in
harness-only parameters share one cell, inference is ranked by LoadGen's metric (never its
accuracy), and a table read with the runs' series equals one aggregated in SQL."""

from __future__ import annotations

from factories import gemm_metrics, make_metric, make_record

from perfsuite.registry import open_registry
from perfsuite.registry.leaderboard.data import load
from perfsuite.registry.leaderboard.keys import key_settings


def _cells(boards):
    return {
        (b.workload, c.id, r.system.name, case): (round(cell.value, 9), cell.count, cell.note)
        for b in boards
        for c in b.configs
        for r in c.rows
        for case, cell in r.cells.items()
    }


def test_harness_only_parameters_pool_into_one_cell_and_both_reads_agree(tmp_path):
    with open_registry(f"sqlite:///{tmp_path / 'r.db'}") as reg:
        for i, inject in enumerate(("none", "none", "hang", "none")):
            params = {"m": 1024, "inject": inject, "max_bytes": 2**20 * (1 + i)}
            times = tuple(1.0 + 0.01 * i + 0.001 * k for k in range(5))
            reg.store(
                make_record(
                    host="box", device="cuda", params=params, controls={"seed": i}, metrics=gemm_metrics(time_ms=times)
                )
            )
        reg.store(make_record(host="box", device="cuda", params={"m": 2048, "inject": "none"}))
        with reg.session() as s:
            series, _ = load(s)
            aggregated, _ = load(s, series=False)
    (board,) = series
    assert [c.settings for c in board.configs] == [
        {"version": 1, "division": "closed", "param.m": 1024},
        {"version": 1, "division": "closed", "param.m": 2048},
    ]
    cell = board.configs[0].rows[0].cells["bf16"]
    assert cell.count == 4 and cell.note == "4 runs, olympic mean" and len(cell.runs) == 4
    assert _cells(series) == _cells(aggregated)
    assert "inject" not in board.configs[0].label and "max_bytes" not in board.configs[0].label


def test_inference_is_ranked_by_loadgens_metric_not_its_accuracy(tmp_path):
    metrics = [
        make_metric("Offline", "accuracy_score", "fraction", [0.99], higher_is_better=True),
        make_metric("Offline", "samples_per_s", "samples/s", [120.0, 121.0], higher_is_better=True),
        make_metric("SingleStream", "accuracy_score", "fraction", [0.98], higher_is_better=True),
        make_metric("SingleStream", "latency_p90_ms", "ms", [9.0], higher_is_better=False),
    ]
    with open_registry(f"sqlite:///{tmp_path / 'r.db'}") as reg:
        reg.store(make_record(workload_name="inference.generate", category="inference", host="box", metrics=metrics))
        with reg.session() as s:
            (board,), _ = load(s)
    cells = board.configs[0].rows[0].cells
    assert {case: c.metric for case, c in cells.items()} == {
        "Offline": "samples_per_s",
        "SingleStream": "latency_p90_ms",
    }


def test_key_settings_leave_out_what_only_steers_the_harness():
    workload = {
        "version": 3,
        "scenario": None,
        "division": "open",
        "params": {"iters": 20, "inject_rank": 0, "inject": "none", "max_bytes": 1, "check": True},
    }
    assert key_settings(workload) == {"version": 3, "division": "open", "param.iters": 20}


def test_a_serving_sweep_is_drawn_as_ttft_and_tpot_against_the_rate(tmp_path):
    import json

    from perfsuite.registry.leaderboard import build_site

    steps = [
        {"load": rate, "ttft_ms": {"p50": 10.0 * rate, "p99": 20.0 * rate}, "tpot_ms": {"p50": 2.0, "p99": 3.0 + rate}}
        for rate in (1.0, 2.0, 4.0)
    ]
    metrics = [make_metric("rate sweep", "goodput_at_slo_rps", "requests/s", [3.5], higher_is_better=True)]
    with open_registry(f"sqlite:///{tmp_path / 'r.db'}") as reg:
        reg.store(
            make_record(
                workload_name="inference.serving",
                category="inference",
                host="box",
                metrics=metrics,
                details={"rate_sweep": {"steps": steps}},
            )
        )
        build_site(reg, tmp_path / "site")
    page = (tmp_path / "site" / "workloads" / "inference.serving.html").read_text()
    data = json.loads(page.split('id="board-data">')[1].split("</script>")[0])
    (chart,) = data["charts"].values()
    assert chart["kind"] == "serving"
    assert chart["series"] == {
        "box TTFT p99": [[1.0, 20.0], [2.0, 40.0], [4.0, 80.0]],
        "box TPOT p99": [[1.0, 4.0], [2.0, 5.0], [4.0, 7.0]],
    }
    assert data["configs"][0]["columns"][0]["metric"] == "goodput_at_slo_rps"
