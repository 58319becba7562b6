"""Statistics over raw samples (the summary every metric carries, with a bootstrap CI) and
between runs: the ratio of medians with its CI, and the tests that go with it (scipy's)."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

BOOTSTRAP_RESAMPLES = 2000
BOOTSTRAP_SEED = 20260101  # fixed, so the same samples always give the same interval
# Resamples drawn and reduced at a time: memory is BOOTSTRAP_BATCH x n values, not resamples x n.
BOOTSTRAP_BATCH = 100
# From this many values a side, a ratio of medians draws each resample's median from its exact
# distribution (``resampling.median_bootstrap_distribution``) instead of drawing the resample:
# scipy's way costs resamples x n values a side, 7.5 s for the 20 cases of two records of
# 10,000 calls each, where a command a user types should answer within a second.
MEDIAN_BY_ORDER_STATISTICS_FROM = 1001


def bootstrap_ci(
    samples: Sequence[float] | np.ndarray,
    statistic=np.median,
    confidence: float = 0.95,
    resamples: int = BOOTSTRAP_RESAMPLES,
) -> tuple[float, float]:
    """Percentile bootstrap confidence interval of ``statistic`` over ``samples``.

    Computed as ``scipy.stats.bootstrap`` computes it (:mod:`perfsuite.measure.resampling`:
    the same draws and interval, without importing scipy.stats; method ``percentile``, seeded with
    :data:`BOOTSTRAP_SEED`, so the same samples always give the same interval) in batches of
    :data:`BOOTSTRAP_BATCH` resamples: measured at n = 10,000 samples, the hand-written
    version this replaced drew all 2,000 resamples at once and peaked at 480 MB traced;
    this peaks at 24 MB, takes as long (0.8 to 1.4 s each on a loaded two-core host,
    ``bench/bootstrap_ci.py``) and gives the same interval: scipy draws its resamples from
    the seeded generator in the same order. The percentile method,
    not scipy's default BCa, because BCa adds a jackknife of n statistics over n - 1 samples
    (n^2 values) for an interval the reports read only as the spread of the median.
    ``statistic`` takes ``axis=`` (numpy's reductions do). One sample: its value, twice.
    """
    from perfsuite.measure.resampling import bootstrap_distribution, percentile_interval

    x = np.asarray(samples, dtype=np.float64)
    if x.size == 1:
        return float(x[0]), float(x[0])
    drawn = bootstrap_distribution((x,), statistic, resamples, BOOTSTRAP_BATCH, np.random.default_rng(BOOTSTRAP_SEED))
    return percentile_interval(drawn, confidence)


def summarize(samples: Sequence[float]) -> dict:
    """n, median, mean, stdev (sample), min, max, p5/p95/p99, IQR and the median's 95% CI."""
    x = np.asarray(samples, dtype=np.float64)
    if x.size == 0:
        raise ValueError("no samples to summarize")
    if not np.all(np.isfinite(x)):
        raise ValueError("samples contain NaN or infinity")
    p5, p25, p50, p75, p95, p99 = np.percentile(x, [5, 25, 50, 75, 95, 99])
    lo, hi = bootstrap_ci(x)
    return {
        "n": int(x.size),
        "median": float(p50),
        "mean": float(x.mean()),
        "stdev": float(x.std(ddof=1)) if x.size > 1 else 0.0,
        "min": float(x.min()),
        "max": float(x.max()),
        "p5": float(p5),
        "p95": float(p95),
        "p99": float(p99),
        "iqr": float(p75 - p25),
        "ci95_low": lo,
        "ci95_high": hi,
    }


def olympic_mean(values: Sequence[float]) -> float:
    """MLPerf-style score of N runs: drop the fastest and the slowest, average the rest."""
    x = sorted(float(v) for v in values)
    if len(x) < 3:
        raise ValueError("an olympic mean needs at least 3 values")
    return float(np.mean(x[1:-1]))


# -- between two runs, and between two groups of runs ----------------------------------------


def ratio_of_medians_ci(
    baseline: Sequence[float],
    candidate: Sequence[float],
    confidence: float = 0.95,
    resamples: int = BOOTSTRAP_RESAMPLES,
) -> tuple[float, float, float]:
    """``median(candidate) / median(baseline)`` with a percentile bootstrap CI
    (``scipy.stats.bootstrap``'s, unpaired, seeded, in batches: see :func:`bootstrap_ci`).

    Each side is resampled on its own (the sides are independent): calls of one run each, or one
    value per run when comparing groups of runs. From :data:`MEDIAN_BY_ORDER_STATISTICS_FROM`
    values a side, each resample's median is drawn from its exact distribution instead. The seed
    is fixed so the same values always give the same interval. Returns (ratio, low, high).
    """
    a = np.asarray(baseline, dtype=np.float64)
    b = np.asarray(candidate, dtype=np.float64)
    if a.size == 0 or b.size == 0:
        raise ValueError("a ratio of medians needs samples on both sides")
    base = float(np.median(a))
    if base == 0.0:
        raise ValueError("the baseline median is zero: no ratio")
    ratio = float(np.median(b)) / base
    from perfsuite.measure.resampling import bootstrap_distribution

    def median_ratio(x: np.ndarray, y: np.ndarray, axis: int = -1) -> np.ndarray:
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.median(y, axis=axis) / np.median(x, axis=axis)

    # scipy resamples samples of two or more: one value resampled is that value, and so is a pair of it
    a2, b2 = (np.repeat(v, 2) if v.size == 1 else v for v in (a, b))
    rng = np.random.default_rng(BOOTSTRAP_SEED)
    if max(a2.size, b2.size) >= MEDIAN_BY_ORDER_STATISTICS_FROM:
        from perfsuite.measure.resampling import median_bootstrap_distribution

        with np.errstate(divide="ignore", invalid="ignore"):
            drawn = median_bootstrap_distribution(b2, resamples, rng) / median_bootstrap_distribution(
                a2, resamples, rng
            )
    else:
        drawn = bootstrap_distribution((a2, b2), median_ratio, resamples, BOOTSTRAP_BATCH, rng)
    # The percentile interval over the finite ratios: a resample whose baseline median is zero
    # has no ratio (scipy's own interval would be inf or NaN there).
    ratios = drawn[np.isfinite(drawn)]
    alpha = (1.0 - confidence) / 2.0
    return ratio, float(np.quantile(ratios, alpha)), float(np.quantile(ratios, 1.0 - alpha))


def mann_whitney_u(x: Sequence[float], y: Sequence[float]) -> tuple[float, float]:
    """Two-sided Mann-Whitney U test (scipy's, exact for small samples without ties, computed
    by :mod:`perfsuite.measure.resampling` without importing scipy.stats): (U of ``x``, p).

    For the calls of two single runs: it says whether the calls differ, not whether runs do (the
    unit that varies between runs is the run), so callers label it as within-run."""
    from perfsuite.measure.resampling import mann_whitney_u as test

    a = np.asarray(x, dtype=np.float64)
    b = np.asarray(y, dtype=np.float64)
    if a.size == 0 or b.size == 0:
        raise ValueError("a Mann-Whitney test needs samples on both sides")
    return test(a, b)


def welch_t(x: Sequence[float], y: Sequence[float]) -> float:
    """Two-sided p-value of Welch's t-test: do two groups of run values differ in mean?

    The test between groups of runs (one value per run). Welch's rather than Mann-Whitney's:
    with three runs a side no arrangement of ranks reaches p < 0.1 (scipy: 3 vs 3 gives at least
    0.1, 4 vs 4 at least 0.029), so a rank test could never call a change from a typical repeat.
    scipy's test (``ttest_ind(equal_var=False)``), computed by :mod:`perfsuite.measure.resampling`."""
    from perfsuite.measure.resampling import welch_t_p

    a = np.asarray(x, dtype=np.float64)
    b = np.asarray(y, dtype=np.float64)
    if a.size < 2 or b.size < 2:
        raise ValueError("Welch's t-test needs at least two values a side")
    if np.ptp(a) == 0.0 and np.ptp(b) == 0.0:  # no spread on either side: equal or certainly different
        return 1.0 if a[0] == b[0] else 0.0
    p = welch_t_p(a, b)
    return p if math.isfinite(p) else 1.0


def run_noise(values: Sequence[float]) -> float:
    """The between-run noise of a series of run values, as a standard deviation of their logs
    (a relative spread), robust to steps in the series: the median absolute difference of
    successive runs, scaled to a normal standard deviation (MAD / 0.6745, over sqrt 2 for a
    difference). A level shift moves one difference, not the median of them."""
    x = np.log(np.asarray(values, dtype=np.float64))
    if x.size < 3:
        raise ValueError("the noise of a series needs at least three runs")
    diffs = np.abs(np.diff(x))
    return float(np.median(diffs) / 0.6745 / math.sqrt(2.0))
