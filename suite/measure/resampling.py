"""scipy.stats' percentile bootstrap, Mann-Whitney U test and Welch's t-test, computed here on
numpy (and ``scipy.special`` for Student's t) without importing ``scipy.stats``.

Importing ``scipy.stats`` costs 0.6 s of CPU, more than the rest of ``perfsuite compare`` at
100,000 records, and a command a user types should answer within a second. The methods are
scipy's own, step for step (``scipy/stats/_resampling.py``, ``_mannwhitneyu.py``,
``_stats_py.py`` of scipy 1.17): the bootstrap draws its resamples from the generator in the
same order with the same calls, so it gives scipy's intervals; the tests give scipy's
statistics and p-values (to rounding). ``tests/test_resampling.py`` holds them to scipy's
figures over samples with and without ties, small and large.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np

# scipy's choice between the exact and the normal distribution of U (_mwu_choose_method)
MWU_EXACT_UP_TO = 8


def bootstrap_distribution(
    samples: Sequence[np.ndarray],
    statistic: Callable[..., np.ndarray],
    resamples: int,
    batch: int,
    rng: np.random.Generator,
) -> np.ndarray:
    """The statistic over ``resamples`` unpaired resamples of ``samples`` (1-D arrays, each
    resampled on its own), drawn ``batch`` at a time: ``scipy.stats.bootstrap(...,
    paired=False, vectorized=True).bootstrap_distribution`` for the same generator state.
    ``statistic`` takes the resampled arrays and ``axis=-1``."""
    out = []
    for start in range(0, resamples, batch):
        size = min(batch, resamples - start)
        drawn = [
            sample[rng.integers(0, sample.shape[-1], (size, sample.shape[-1]), dtype=np.int64)] for sample in samples
        ]
        out.append(statistic(*drawn, axis=-1))
    return np.concatenate(out, axis=-1)


def median_bootstrap_distribution(sample: np.ndarray, resamples: int, rng: np.random.Generator) -> np.ndarray:
    """The medians of ``resamples`` bootstrap resamples of ``sample`` (n values drawn with
    replacement), drawn from their exact distribution instead of by drawing each resample.

    Drawing n indices uniformly from 0..n-1 is taking floor(n U) of n uniforms U, and floor is
    monotone, so the k-th smallest index is floor(n U_(k)), U_(k) the k-th order statistic of the
    uniforms: Beta(k, n + 1 - k). The next one, given U_(k) = u, is the least of the other n - k
    uniforms above u: u + (1 - u) Beta(1, n - k). A resample's median (numpy's: the middle value,
    or the mean of the two middle ones) is then the sorted sample at those indices: the same
    distribution as resampling gives, at two draws a resample instead of n. The random stream is
    not scipy's, so the interval matches scipy's to within resampling noise, not to the bit.
    """
    x = np.sort(np.asarray(sample, dtype=np.float64))
    n = x.size
    k = (n + 1) // 2  # 1-based rank of the (lower) middle value
    u = rng.beta(k, n + 1 - k, resamples)
    low = x[np.minimum((u * n).astype(np.int64), n - 1)]
    if n % 2:
        return low
    v = u + (1.0 - u) * rng.beta(1, n - k, resamples)
    return 0.5 * (low + x[np.minimum((v * n).astype(np.int64), n - 1)])


def percentile_interval(distribution: np.ndarray, confidence: float) -> tuple[float, float]:
    """The two-sided percentile interval of a bootstrap distribution: its quantiles at alpha and
    1 - alpha by ``scipy.stats.quantile``'s linear method (Hyndman and Fan's type 7), in its
    arithmetic (numpy's own quantile rounds differently in the last digit)."""
    y = np.sort(distribution)
    n = np.float64(y.size)
    alpha = np.float64((1.0 - confidence) / 2.0)
    ends = []
    for p in (alpha, 1 - alpha):
        jg = p * n + (1 - p)
        j, jp1, g = jg // 1 - 1, jg // 1, jg % 1
        if j < 0:
            g = np.float64(0.0)
        low, high = int(min(max(j, 0.0), n - 1)), int(min(max(jp1, 0.0), n - 1))
        ends.append(float((1 - g) * y[low] + g * y[high]))
    return ends[0], ends[1]


def _ranks(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Average ranks (1-based) of ``values`` and the size of each group of ties."""
    order = np.argsort(values, kind="mergesort")
    ordered = values[order]
    starts = np.flatnonzero(np.r_[True, ordered[1:] != ordered[:-1]])
    counts = np.diff(np.r_[starts, ordered.size])
    average = starts + (counts + 1) / 2.0  # the mean of ranks start+1 .. start+count
    ranks = np.empty(values.size, dtype=np.float64)
    ranks[order] = np.repeat(average, counts)
    return ranks, counts


def _exact_sf(u: int, n1: int, n2: int) -> float:
    """P(U >= u) under the null for n1 and n2 values without ties, for u at or above the middle
    (the distribution is symmetric: P(U <= n1*n2 - u)). scipy's ``_MWU`` (BSD-3, from code by
    @toobaz): the frequencies of U from 0 to n1*n2 - u by the recurrence over the sigma array,
    in integers while they fit 64 bits, in floats beyond, as scipy does."""
    n1, n2 = min(n1, n2), max(n1, n2)
    top = n1 * n2 - u
    sigma = np.zeros(top + 1, dtype=int)
    for d in range(1, n1 + 1):
        sigma[d : top + 1 : d] += d
    for d in range(n2 + 1, n2 + n1 + 1):
        sigma[d : top + 1 : d] -= d
    sigma = sigma[1:]
    configurations = np.zeros(top + 1, dtype=np.uint64)
    configurations[0] = 1
    as_uint = True
    uint_max = np.iinfo(np.uint64).max
    for k in range(1, top + 1):
        value = np.dot(configurations[:k], sigma[k - 1 :: -1]) / k
        if value > uint_max and as_uint:
            configurations = configurations.astype(float)
            as_uint = False
        configurations[k] = value
    return float(np.cumsum(configurations / float(math.comb(n1 + n2, n1)))[top])


def mann_whitney_u(x: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    """scipy.stats.mannwhitneyu(x, y, alternative="two-sided") (method "auto", continuity
    corrected): (U of ``x``, p). Exact where a side has at most eight values and no value is
    tied, else the normal approximation with the tie correction."""
    n1, n2 = x.size, y.size
    ranks, ties = _ranks(np.concatenate([x, y]))
    u1 = float(ranks[:n1].sum()) - n1 * (n1 + 1) / 2.0
    u = max(u1, n1 * n2 - u1)
    if (n1 <= MWU_EXACT_UP_TO or n2 <= MWU_EXACT_UP_TO) and not (ties > 1).any():
        p = 2.0 * _exact_sf(round(u), n1, n2)
    else:
        n = n1 + n2
        tie_term = float((ties.astype(np.float64) ** 3 - ties).sum())
        s = math.sqrt(n1 * n2 / 12.0 * ((n + 1) - tie_term / (n * (n - 1))))
        numerator = u - n1 * n2 / 2.0 - 0.5
        if s > 0:
            z = numerator / s
        else:  # every value tied: numpy's division by zero, as scipy's (an infinity, or NaN for 0/0)
            z = math.copysign(math.inf, numerator) if numerator else math.nan
        p = 2.0 * 0.5 * math.erfc(z / math.sqrt(2.0))  # twice the normal survival at z
    return u1, min(max(p, 0.0), 1.0)


def welch_t_p(x: np.ndarray, y: np.ndarray) -> float:
    """scipy.stats.ttest_ind(x, y, equal_var=False).pvalue: two-sided, Student's t at
    Welch-Satterthwaite's degrees of freedom (``scipy.special.stdtr``, which scipy.stats calls)."""
    from scipy.special import stdtr

    n1, n2 = x.size, y.size
    vn1 = float(np.var(x, ddof=1)) / n1
    vn2 = float(np.var(y, ddof=1)) / n2
    with np.errstate(divide="ignore", invalid="ignore"):
        df = np.float64(vn1 + vn2) ** 2 / (np.float64(vn1) ** 2 / (n1 - 1) + np.float64(vn2) ** 2 / (n2 - 1))
        t = np.float64(float(np.mean(x)) - float(np.mean(y))) / np.sqrt(np.float64(vn1 + vn2))
    if math.isnan(df):
        df = np.float64(1.0)
    return float(2.0 * stdtr(df, -abs(t)))
