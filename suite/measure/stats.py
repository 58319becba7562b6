"""Statistics over raw samples: the summary every metric carries, with a bootstrap CI."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

BOOTSTRAP_RESAMPLES = 2000
BOOTSTRAP_SEED = 20260101  # fixed, so the same samples always give the same interval


def bootstrap_ci(
    samples: Sequence[float], statistic=np.median, confidence: float = 0.95, resamples: int = BOOTSTRAP_RESAMPLES
) -> tuple[float, float]:
    """Percentile bootstrap confidence interval of ``statistic`` over ``samples``."""
    x = np.asarray(samples, dtype=np.float64)
    if x.size == 1:
        return float(x[0]), float(x[0])
    rng = np.random.default_rng(BOOTSTRAP_SEED)
    idx = rng.integers(0, x.size, size=(resamples, x.size))
    stats = statistic(x[idx], axis=1)
    alpha = (1.0 - confidence) / 2.0
    return float(np.quantile(stats, alpha)), float(np.quantile(stats, 1.0 - alpha))


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


# -- between two runs ----------------------------------------------------------------------
# scipy.stats.mannwhitneyu's "auto" method is exact when a sample has at most this many
# values and there are no ties; the same rule here keeps the two in agreement (up to a
# product of sizes where the exact distribution stays cheap to build).
MANN_WHITNEY_EXACT_MAX_N = 8
MANN_WHITNEY_EXACT_MAX_PRODUCT = 4096


def ratio_of_medians_ci(
    baseline: Sequence[float],
    candidate: Sequence[float],
    confidence: float = 0.95,
    resamples: int = BOOTSTRAP_RESAMPLES,
) -> tuple[float, float, float]:
    """``median(candidate) / median(baseline)`` with a percentile bootstrap CI.

    Each sample is resampled on its own (the runs are independent); the seed is fixed so
    the same samples always give the same interval. Returns (ratio, low, high).
    """
    a = np.asarray(baseline, dtype=np.float64)
    b = np.asarray(candidate, dtype=np.float64)
    if a.size == 0 or b.size == 0:
        raise ValueError("a ratio of medians needs samples on both sides")
    base = float(np.median(a))
    if base == 0.0:
        raise ValueError("the baseline median is zero: no ratio")
    ratio = float(np.median(b)) / base
    rng = np.random.default_rng(BOOTSTRAP_SEED)
    ma = np.median(a[rng.integers(0, a.size, size=(resamples, a.size))], axis=1)
    mb = np.median(b[rng.integers(0, b.size, size=(resamples, b.size))], axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratios = mb / ma
    ratios = ratios[np.isfinite(ratios)]
    alpha = (1.0 - confidence) / 2.0
    return ratio, float(np.quantile(ratios, alpha)), float(np.quantile(ratios, 1.0 - alpha))


def _exact_u_sf(u: float, n1: int, n2: int) -> float:
    """P(U >= u) under the null, from the exact distribution of U (no ties)."""
    # counts[m][n] is the array of the number of arrangements giving each U value.
    counts = [[None] * (n2 + 1) for _ in range(n1 + 1)]
    for m in range(n1 + 1):
        for n in range(n2 + 1):
            if m == 0 or n == 0:
                counts[m][n] = np.ones(1, dtype=np.float64)
                continue
            out = np.zeros(m * n + 1, dtype=np.float64)
            shifted = counts[m - 1][n]  # the largest value is from the first sample: +n to U
            out[n : n + shifted.size] += shifted
            rest = counts[m][n - 1]
            out[: rest.size] += rest
            counts[m][n] = out
    dist = counts[n1][n2]
    k = int(np.ceil(u - 1e-9))
    return float(dist[k:].sum() / dist.sum())


def mann_whitney_u(x: Sequence[float], y: Sequence[float]) -> tuple[float, float]:
    """Two-sided Mann-Whitney U test: returns (U of ``x``, p-value).

    Exact for small samples without ties; otherwise the normal approximation with the tie
    correction and a continuity correction (scipy's defaults, so the two agree).
    """
    a = np.asarray(x, dtype=np.float64)
    b = np.asarray(y, dtype=np.float64)
    n1, n2 = a.size, b.size
    if n1 == 0 or n2 == 0:
        raise ValueError("a Mann-Whitney test needs samples on both sides")
    both = np.concatenate([a, b])
    order = np.argsort(both, kind="mergesort")
    ranks = np.empty(both.size, dtype=np.float64)
    sorted_values = both[order]
    # average ranks over ties
    _, first, counts = np.unique(sorted_values, return_index=True, return_counts=True)
    avg = first + (counts + 1) / 2.0
    ranks[order] = np.repeat(avg, counts)
    u1 = float(ranks[:n1].sum() - n1 * (n1 + 1) / 2.0)
    u2 = n1 * n2 - u1
    u = max(u1, u2)
    has_ties = bool((counts > 1).any())
    small = min(n1, n2) <= MANN_WHITNEY_EXACT_MAX_N and n1 * n2 <= MANN_WHITNEY_EXACT_MAX_PRODUCT
    if small and not has_ties:
        return u1, min(1.0, 2.0 * _exact_u_sf(u, n1, n2))
    n = n1 + n2
    tie_term = float((counts.astype(np.float64) ** 3 - counts).sum())
    variance = n1 * n2 / 12.0 * ((n + 1) - tie_term / (n * (n - 1)))
    if variance <= 0:  # every value equal: no evidence of any difference
        return u1, 1.0
    z = (u - n1 * n2 / 2.0 - 0.5) / math.sqrt(variance)
    return u1, min(1.0, math.erfc(z / math.sqrt(2.0)))
