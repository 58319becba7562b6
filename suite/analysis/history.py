"""Change points in a metric's history: where did the figure step, and was it real?

Binary segmentation on the run medians (asv's approach, simplified): the split whose
one-step fit leaves the least squared error is a change point when the step between the
two sides' medians exceeds ``min_step`` (default 5%) *and* a Mann-Whitney U test on the
raw samples of the runs on each side gives p < ``alpha``; each side is then searched
again. A lone noisy run cannot make a step: each side needs ``min_runs`` runs.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from perfsuite.measure import stats

DEFAULT_MIN_STEP = 0.05
DEFAULT_ALPHA = 0.05
DEFAULT_MIN_RUNS = 2


@dataclass
class ChangePoint:
    index: int  # the first run after the step
    before: float  # median of the run medians before (within the segment)
    after: float
    ratio: float  # after / before
    p_value: float


def change_points(
    medians: list[float],
    samples: list[list[float]],
    min_step: float = DEFAULT_MIN_STEP,
    alpha: float = DEFAULT_ALPHA,
    min_runs: int = DEFAULT_MIN_RUNS,
) -> list[ChangePoint]:
    """Change points of a series, in order. ``samples[i]`` are run i's raw samples."""
    found: list[ChangePoint] = []

    def search(lo: int, hi: int) -> None:  # the segment medians[lo:hi]
        if hi - lo < 2 * min_runs:
            return
        values = np.asarray(medians[lo:hi], dtype=np.float64)
        best, best_cost = None, np.inf
        for i in range(min_runs, len(values) - min_runs + 1):  # least squares of a one-step fit
            left, right = values[:i], values[i:]
            cost = float(((left - left.mean()) ** 2).sum() + ((right - right.mean()) ** 2).sum())
            if cost < best_cost:
                best, best_cost = lo + i, cost
        before, after = float(np.median(medians[lo:best])), float(np.median(medians[best:hi]))
        if before == 0 or abs(after / before - 1.0) <= min_step:
            return
        left_samples = [v for run in samples[lo:best] for v in run]
        right_samples = [v for run in samples[best:hi] for v in run]
        _, p = stats.mann_whitney_u(left_samples, right_samples)
        if p >= alpha:
            return
        found.append(ChangePoint(best, before, after, after / before, p))
        search(lo, best)
        search(best, hi)

    search(0, len(medians))
    return sorted(found, key=lambda c: c.index)
