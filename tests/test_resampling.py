"""perfsuite.measure.resampling gives scipy.stats' figures without importing scipy.stats: the
percentile bootstrap (the same resamples and interval, to the bit), the Mann-Whitney U test and
Welch's t-test (the same statistic, the p-value to rounding), over samples small and large, with
ties and without, and sides of one value."""

from __future__ import annotations

import numpy as np
import pytest

from perfsuite.measure import resampling, stats

scipy_stats = pytest.importorskip("scipy.stats")
# scipy's own warning on nearly identical values (its t-test's moments); the figures are compared
pytestmark = pytest.mark.filterwarnings("ignore:Precision loss occurred:RuntimeWarning")


def _samples(rng, n: int, kind: str) -> np.ndarray:
    if kind == "ties":
        return rng.integers(0, 4, n).astype(np.float64)
    if kind == "constant":
        return np.full(n, 2.5)
    return rng.lognormal(0.0, 0.3, n)


@pytest.mark.parametrize("n", [1, 2, 3, 8, 9, 61, 1000])
@pytest.mark.parametrize("confidence", [0.95, 0.9])
def test_the_bootstrap_draws_scipys_resamples_and_gives_its_interval_to_the_bit(n, confidence):
    rng = np.random.default_rng(n)
    x = _samples(rng, n, "lognormal")
    data = np.repeat(x, 2) if n == 1 else x  # scipy resamples two values or more
    expected = scipy_stats.bootstrap(
        (data,),
        np.median,
        n_resamples=2000,
        batch=100,
        confidence_level=confidence,
        method="percentile",
        vectorized=True,
        rng=np.random.default_rng(stats.BOOTSTRAP_SEED),
    )
    drawn = resampling.bootstrap_distribution(
        (data,), np.median, 2000, 100, np.random.default_rng(stats.BOOTSTRAP_SEED)
    )
    assert np.array_equal(drawn, expected.bootstrap_distribution)
    ci = expected.confidence_interval
    assert resampling.percentile_interval(drawn, confidence) == (float(ci.low), float(ci.high))


def _median_ratio(x, y, axis=-1):
    return np.median(y, axis=axis) / np.median(x, axis=axis)


def _scipy_ratio_of_medians(a, b):
    """scipy's unpaired percentile bootstrap of median(b) / median(a), drawn as the suite draws it."""
    return scipy_stats.bootstrap(
        (a, b), _median_ratio, n_resamples=2000, batch=100, method="percentile", vectorized=True, paired=False,
        rng=np.random.default_rng(stats.BOOTSTRAP_SEED),
    )  # fmt: skip


def test_the_ratio_of_medians_resamples_each_side_as_scipy_does_unpaired():
    rng = np.random.default_rng(7)
    a, b = rng.lognormal(0, 0.2, 12), rng.lognormal(0.1, 0.2, 30)
    expected = _scipy_ratio_of_medians(a, b)
    drawn = resampling.bootstrap_distribution(
        (a, b), _median_ratio, 2000, 100, np.random.default_rng(stats.BOOTSTRAP_SEED)
    )
    assert np.array_equal(drawn, expected.bootstrap_distribution)


SIZES = [(1, 1), (1, 5), (3, 3), (5, 8), (8, 8), (8, 40), (9, 9), (12, 30), (200, 150)]


@pytest.mark.parametrize("kind", ["lognormal", "ties"])
@pytest.mark.parametrize(("n1", "n2"), SIZES)
def test_mann_whitney_gives_scipys_statistic_and_p_value(n1, n2, kind):
    rng = np.random.default_rng(n1 * 1000 + n2)
    for _ in range(5):
        x, y = _samples(rng, n1, kind), _samples(rng, n2, kind) * 1.1
        expected = scipy_stats.mannwhitneyu(x, y, alternative="two-sided")
        u, p = resampling.mann_whitney_u(x, y)
        assert u == expected.statistic
        assert p == pytest.approx(expected.pvalue, rel=1e-12, abs=1e-300)


def test_mann_whitney_of_two_constant_sides_is_scipys_too():
    x, y = np.full(4, 1.0), np.full(6, 1.0)
    expected = scipy_stats.mannwhitneyu(x, y, alternative="two-sided")
    assert resampling.mann_whitney_u(x, y) == (expected.statistic, pytest.approx(expected.pvalue, rel=1e-12))


@pytest.mark.parametrize("kind", ["lognormal", "ties"])
@pytest.mark.parametrize(("n1", "n2"), [(2, 2), (2, 7), (3, 3), (5, 40), (100, 90)])
def test_welch_t_gives_scipys_p_value(n1, n2, kind):
    rng = np.random.default_rng(n1 + 10 * n2)
    for _ in range(5):
        x, y = _samples(rng, n1, kind), _samples(rng, n2, kind) + 0.05
        if np.ptp(x) == 0 and np.ptp(y) == 0:
            continue  # stats.welch_t answers that case itself
        expected = scipy_stats.ttest_ind(x, y, equal_var=False).pvalue
        assert resampling.welch_t_p(x, y) == pytest.approx(expected, rel=1e-12, abs=1e-300)
    constant, varied = np.full(5, 1.0), 1.0 + np.arange(5) / 10  # one side without spread
    expected = scipy_stats.ttest_ind(constant, varied, equal_var=False).pvalue
    assert resampling.welch_t_p(constant, varied) == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize("n", [1001, 1002, 10000])
@pytest.mark.parametrize("kind", ["lognormal", "ties"])
def test_from_a_thousand_values_the_ratio_of_medians_draws_medians_from_their_exact_distribution(n, kind):
    """Two records of 10,000 calls a case: each resample's median is drawn from its order
    statistics instead of by resampling. A random stream of its own, so the interval is scipy's
    within resampling noise (a few hundredths of its width; to the bit where ties make the median
    discrete), and the 2,000 ratios are scipy's distribution by a two-sample KS test."""
    rng = np.random.default_rng(n)
    a = _samples(rng, n, kind)
    b = _samples(rng, n + 7, kind) * 1.05 + (1.0 if kind == "ties" else 0.0)
    expected = _scipy_ratio_of_medians(a, b)
    found, low, high = stats.ratio_of_medians_ci(a, b)
    assert found == float(np.median(b) / np.median(a))
    ci = expected.confidence_interval
    width = ci.high - ci.low
    assert abs(low - ci.low) <= 0.08 * width and abs(high - ci.high) <= 0.08 * width
    drawn = resampling.median_bootstrap_distribution(b, 2000, np.random.default_rng(1)) / (
        resampling.median_bootstrap_distribution(a, 2000, np.random.default_rng(2))
    )
    assert scipy_stats.ks_2samp(drawn, expected.bootstrap_distribution).pvalue > 0.05


@pytest.mark.parametrize("n", [5, 6, 1001, 1002])
def test_a_resamples_median_from_order_statistics_is_the_resampled_median_in_distribution(n):
    """Odd n (the middle value) and even n (the mean of the two middle values), against numpy's
    median of resamples drawn index by index."""
    x = np.random.default_rng(n).lognormal(0.0, 0.3, n)
    fast = resampling.median_bootstrap_distribution(x, 4000, np.random.default_rng(3))
    slow = resampling.bootstrap_distribution((x,), np.median, 4000, 100, np.random.default_rng(4))
    assert scipy_stats.ks_2samp(fast, slow).pvalue > 0.05
    if n % 2:  # an odd resample's median is one of the sample's values
        assert np.isin(fast, x).all()
    else:  # an even one's, the mean of two of them
        assert x.min() <= fast.min() and fast.max() <= x.max() and not np.isin(fast, x).all()


def test_the_statistics_of_a_run_and_of_compare_import_no_scipy_stats():
    import subprocess
    import sys

    code = (
        "import sys\n"
        "from perfsuite.measure import stats\n"
        "stats.summarize([1.0, 2.0, 3.5, 2.2])\n"
        "stats.ratio_of_medians_ci([1.0, 2.0, 3.0], [2.0, 3.0, 4.5])\n"
        "stats.mann_whitney_u([1.0, 2.0, 3.0], [2.5, 3.0, 4.5])\n"
        "stats.welch_t([1.0, 2.0, 3.0], [2.5, 3.0, 4.5])\n"
        "print('scipy.stats' in sys.modules)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert proc.stdout.strip() == "False"
