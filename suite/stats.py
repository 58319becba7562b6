"""Statistics over raw samples: the summary every metric carries, with a bootstrap CI."""
from __future__ import annotations

from typing import Sequence

import numpy as np

BOOTSTRAP_RESAMPLES = 2000
BOOTSTRAP_SEED = 20260101  # fixed, so the same samples always give the same interval


def bootstrap_ci(samples: Sequence[float], statistic=np.median, confidence: float = 0.95,
                 resamples: int = BOOTSTRAP_RESAMPLES) -> tuple[float, float]:
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
