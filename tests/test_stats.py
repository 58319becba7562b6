"""Statistics over raw samples, checked against numpy/hand-computed values."""

from __future__ import annotations

import numpy as np
import pytest

from perfsuite.measure import stats


def test_summary_matches_numpy_and_ci_brackets_the_median():
    rng = np.random.default_rng(3)
    x = rng.lognormal(0.0, 0.3, size=400)
    s = stats.summarize(x)
    assert s["n"] == 400
    assert s["median"] == pytest.approx(np.median(x))
    assert s["mean"] == pytest.approx(x.mean())
    assert s["stdev"] == pytest.approx(x.std(ddof=1))
    assert s["p99"] == pytest.approx(np.percentile(x, 99))
    assert s["iqr"] == pytest.approx(np.percentile(x, 75) - np.percentile(x, 25))
    assert s["ci95_low"] < s["median"] < s["ci95_high"]
    # the interval of a 400-sample median is narrow: well inside the IQR
    assert s["ci95_high"] - s["ci95_low"] < s["iqr"] / 2


def test_bootstrap_ci_is_reproducible_and_covers_the_true_median():
    rng = np.random.default_rng(11)
    covered = 0
    for _ in range(100):
        x = rng.normal(10.0, 1.0, size=60)
        lo, hi = stats.bootstrap_ci(x)
        covered += lo <= 10.0 <= hi
        assert stats.bootstrap_ci(x) == (lo, hi)
    assert 85 <= covered <= 100  # nominal 95%


def test_single_sample_and_bad_samples():
    s = stats.summarize([2.5])
    assert s["median"] == s["ci95_low"] == s["ci95_high"] == 2.5 and s["stdev"] == 0.0
    with pytest.raises(ValueError, match="no samples"):
        stats.summarize([])
    with pytest.raises(ValueError, match="NaN"):
        stats.summarize([1.0, float("nan")])


def test_olympic_mean_drops_fastest_and_slowest():
    assert stats.olympic_mean([1.0, 100.0, 5.0, 6.0, 7.0]) == pytest.approx(6.0)
    with pytest.raises(ValueError):
        stats.olympic_mean([1.0, 2.0])
