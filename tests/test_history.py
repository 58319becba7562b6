"""``perfsuite history``: one series per comparability key, each run with its CI, change points
beyond the runs' own noise (PELT, Welch's t over runs), through a real registry and the CLI."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

import numpy as np
import pytest
from support.factories import DEFAULT_START, gemm_metrics, make_record

from perfsuite.analysis.history import change_points
from perfsuite.publish.submissions.tree import record_text

SUBMITTED_GEMM = Path(__file__).resolve().parent.parent / "submissions/perfsuite/results/h200-x1/kernels.gemm"


def _run_samples(seed: int, level: float, n: int = 30) -> list[float]:
    return list(np.random.default_rng(seed).normal(level, level * 0.01, n))


def _levels(n: int, level: float, seed: int, spread: float = 0.01) -> list[float]:
    """Run medians of ``n`` runs around ``level`` with a between-run spread."""
    return list(np.random.default_rng(seed).normal(level, level * spread, n))


def test_a_real_step_is_flagged_and_noise_and_one_wild_run_are_not():
    values = _levels(8, 100.0, 1) + _levels(8, 90.0, 2)  # a 10% regression at run 8
    (step,) = change_points(values)
    assert step.index == 8 and abs(step.ratio - 0.9) < 0.02 and step.p_value < 1e-6 and step.noise < 0.02
    assert change_points(_levels(16, 100.0, 3)) == []
    spike = _levels(16, 100.0, 4)
    spike[7] = 130.0  # one wild run is not a step: each side needs two runs
    assert change_points(spike) == []
    # a 4% step within 1% noise is real but under the default 5% minimum step
    small = _levels(8, 100.0, 5) + _levels(8, 96.0, 6)
    assert change_points(small) == [] and len(change_points(small, min_step=0.02)) == 1


def test_a_step_within_the_runs_own_noise_is_not_a_change_point():
    noisy = _levels(8, 100.0, 7, spread=0.05) + _levels(8, 94.0, 8, spread=0.05)  # 6% step, 5% run noise
    assert change_points(noisy) == []


def _write(tmp_path: Path, i: int, level: float, **kw) -> tuple[str, str]:
    record = make_record(
        started_at=DEFAULT_START + timedelta(days=i), metrics=gemm_metrics(time_ms=tuple(_run_samples(i, level))), **kw
    )
    path = tmp_path / f"{i}.json"
    path.write_text(record_text(record))
    return str(path), record["run_id"]


def test_history_finds_a_planted_regression_across_runs_and_not_a_change_of_settings(cli, tmp_path):
    rng = np.random.default_rng(11)
    regression = [_write(tmp_path, i, float(rng.normal(1.0 if i < 6 else 1.10, 0.005))) for i in range(12)]
    # another day, another setting: L2 flushed between calls, 15% slower, and no regression in it
    flushed = [_write(tmp_path, 20 + i, float(rng.normal(1.15, 0.005)), controls={"l2_flush": True}) for i in range(4)]
    cli("import", *(f for f, _ in regression + flushed), check=True)
    plot = tmp_path / "h.svg"
    out = json.loads(cli("history", "--workload", "kernels.gemm", "--json", "--plot", str(plot), check=True).stdout)
    assert len(out) == 2 and {s["metric"] for s in out} == {"tflops"}
    main, other = sorted(out, key=lambda s: len(s["points"]), reverse=True)
    assert [p["run_id"] for p in main["points"]] == [rid for _, rid in regression]
    (step,) = main["change_points"]
    assert step["run_id"] == regression[6][1] and 0.88 < step["ratio"] < 0.93 and step["p_value"] < 1e-3
    assert other["key_settings"]["timing"]["l2_flush"] is True and other["change_points"] == []
    assert plot.read_text().lstrip().startswith("<?xml")
    table = cli("history", "--workload", "kernels.gemm", "--metric", "time_ms", check=True).stdout
    assert "step +1" in table and "over runs" in table  # +10% in time per call


def test_submitted_gemm_history_has_no_change_point_that_is_only_a_change_of_settings(cli):
    """The H200 GEMM records: burst, power-capped and L2-flushed runs once shared one key and
    showed a -12.6% "change point" at the first power-capped run; imported, each setting is its
    own series."""
    files = sorted(str(p) for p in SUBMITTED_GEMM.glob("*.json"))
    cli("import", *files, check=True)
    out = json.loads(cli("history", "--workload", "kernels.gemm", "--case", "bf16", "--json", check=True).stdout)
    assert [c for s in out for c in s["change_points"]] == []
    keys = {p["run_id"][:8]: s["key_settings"] for s in out for p in s["points"]}
    burst, capped, flushed, both = (keys[r] for r in ("34a93c24", "65f60dc3", "8389d613", "2e33e1b0"))
    assert (burst["regime"], capped["regime"], flushed["regime"], both["regime"]) == (
        "burst",
        "power-capped",
        "burst",
        "power-capped",
    )
    assert burst["timing"]["iterations"] == "count ~16" and capped["timing"]["iterations"].startswith("min-time ~2 s")
    assert len({json.dumps(k, sort_keys=True) for k in (burst, capped, flushed, both)}) == 4
    (burst_series,) = [s for s in out if any(p["run_id"].startswith("34a93c24") for p in s["points"])]
    assert min(p["median"] for p in burst_series["points"]) > 770  # burst figures only (capped runs: 670-690)


def test_the_change_point_search_finds_what_ruptures_pelt_finds():
    """The search is ruptures' PELT (least squares, its pruning included) without importing it:
    the same breaks on seeded series with and without steps, for several minimum segment sizes."""
    ruptures = pytest.importorskip("ruptures")
    from perfsuite.analysis.history import _segments

    rng = np.random.default_rng(7)
    compared = 0
    for _ in range(120):
        n, min_runs = int(rng.integers(6, 80)), int(rng.integers(2, 6))
        if n < 2 * min_runs:
            continue
        y = rng.normal(0.0, 0.02, n)
        for _step in range(int(rng.integers(0, 3))):
            y[int(rng.integers(1, n)) :] += rng.normal(0.0, 0.1)
        penalty = float(2 * 0.02**2 * np.log(n) * rng.uniform(0.5, 50))
        found = ruptures.Pelt(model="l2", min_size=min_runs, jump=1).fit(y.reshape(-1, 1)).predict(pen=penalty)
        assert _segments(y, penalty, min_runs) == [int(e) for e in found[:-1]]
        compared += 1
    assert compared > 80
