"""``perfsuite history``: a metric over time with each run's CI and its change points."""

from __future__ import annotations

import json
from datetime import timedelta

import numpy as np
from factories import DEFAULT_START, gemm_metrics, make_record

from perfsuite.analysis.history import change_points
from perfsuite.registry.submissions import record_text


def _run_samples(seed: int, level: float) -> list[float]:
    return list(np.random.default_rng(seed).normal(level, level * 0.01, 30))


def test_a_real_step_is_flagged_and_noise_is_not():
    levels = [1.0] * 6 + [1.2] * 6
    samples = [_run_samples(i, lv) for i, lv in enumerate(levels)]
    found = change_points([float(np.median(s)) for s in samples], samples)
    assert [c.index for c in found] == [6] and abs(found[0].ratio - 1.2) < 0.02 and found[0].p_value < 1e-6
    flat = [_run_samples(i, 1.0) for i in range(12)]
    assert change_points([float(np.median(s)) for s in flat], flat) == []
    # one wild run is not a step: each side needs two runs
    spike = [*flat[:5], _run_samples(99, 1.5), *flat[6:]]
    assert change_points([float(np.median(s)) for s in spike], spike) == []


def test_history_cli_lists_runs_in_time_order_with_the_change_point(cli, tmp_path):
    files = []
    for i, level in enumerate([1.0] * 4 + [1.25] * 4):  # the time per call grows by 25% at run 4
        record = make_record(
            started_at=DEFAULT_START + timedelta(days=i), metrics=gemm_metrics(time_ms=tuple(_run_samples(i, level)))
        )
        path = tmp_path / f"{i}.json"
        path.write_text(record_text(record))
        files.append((str(path), record["run_id"]))
    cli("import", *(f for f, _ in files), check=True)
    plot = tmp_path / "h.svg"
    out = json.loads(cli("history", "--workload", "kernels.gemm", "--json", "--plot", str(plot), check=True).stdout)
    assert len(out) == 1 and out[0]["metric"] == "tflops"
    assert [p["run_id"] for p in out[0]["points"]] == [rid for _, rid in files]
    (step,) = out[0]["change_points"]
    assert step["run_id"] == files[4][1] and step["ratio"] < 0.85
    assert plot.read_text().lstrip().startswith("<?xml")
    table = cli("history", "--workload", "kernels.gemm", "--metric", "time_ms", check=True).stdout
    assert "step +2" in table  # +25% in time per call
