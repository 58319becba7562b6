"""Change points in a history of runs of one comparability key: where did the figure step, and
was the step larger than runs of that key vary from one to the next?

The unit is the run: one value per run (its median), never the calls inside it. On the logs of
those values (steps are relative), ruptures' PELT search with a least-squares cost finds the
segmentation; its penalty comes from the series' own between-run noise
(:func:`perfsuite.measure.stats.run_noise`, robust to the steps it looks for), as the BIC of a
Gaussian mean shift: ``2 sigma^2 log n``. A break found there is reported only when

- each side holds at least ``min_runs`` runs (a lone wild run is not a step),
- the step is larger than ``min_step`` (default 5%) *and* than ``noise_factor`` times the noise
  (default 3: a shift beyond what runs of this key do anyway), and
- Welch's t-test on the run values on either side gives p < ``alpha``.

Runs of different keys never share a history: a change of settings (L2 flush, a power-capped
regime, another iteration policy) starts another series, so it cannot look like a change point.

The search is plain Python over the run values (a history of 5,000 runs is a few thousand floats):
numpy, a tenth of a second to import, is loaded only for the t-test of a break that passes the
step thresholds.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import accumulate, pairwise

DEFAULT_MIN_STEP = 0.05
DEFAULT_ALPHA = 0.05
DEFAULT_MIN_RUNS = 2
DEFAULT_NOISE_FACTOR = 3.0
# The noise a series of identical values is taken to have (relative): a floor that keeps the
# penalty positive, far below any step worth reporting.
NOISE_FLOOR = 1e-4


@dataclass
class ChangePoint:
    index: int  # the first run after the step
    before: float  # median of the run values before (within the segment)
    after: float
    ratio: float  # after / before
    p_value: float  # Welch's t over the run values of the two segments
    noise: float  # the series' between-run noise (relative standard deviation)


def _median(values: list[float]) -> float:
    """numpy's median, to the bit: the middle value, or the mean of the two middle values."""
    ordered = sorted(values)
    mid = len(ordered) // 2
    return ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2.0


def _run_noise(logs: list[float]) -> float:
    """:func:`perfsuite.measure.stats.run_noise` on values whose logs are ``logs``: the median
    absolute difference of successive runs, as a normal standard deviation (MAD / 0.6745, over
    sqrt 2 for a difference)."""
    return _median([abs(b - a) for a, b in pairwise(logs)]) / 0.6745 / math.sqrt(2.0)


def _segments(y: Sequence[float], penalty: float, min_runs: int) -> list[int]:
    """The break indices PELT finds (each the first run of a new segment): ruptures'
    ``Pelt(model="l2", min_size=min_runs, jump=1)``, step for step (its pruning included), with
    each segment's cost from running sums instead of a variance per candidate, and each end's
    best partition kept as the start it came from. Importing ruptures (and the scipy.stats it
    loads) cost a history command more than its query."""
    n = len(y)
    ys = [float(v) for v in y]
    s1 = [0.0, *accumulate(ys)]
    s2 = [0.0, *accumulate(v * v for v in ys)]
    best: list[float | None] = [0.0] + [None] * n  # end -> the least total cost of a partition up to it
    start_of = [0] * (n + 1)  # end -> the start of the last segment of that partition
    admissible: list[int] = []
    for end in [*range(min_runs, n), n]:
        admissible.append(end - min_runs)
        totals = []
        chosen: float | None = None
        chosen_start = 0
        for t in admissible:
            before = best[t]
            if before is None:  # ruptures skips a start it has no partition for
                continue
            total = s1[end] - s1[t]
            cost = s2[end] - s2[t] - total * total / (end - t)  # squared deviations from the mean
            candidate = before + max(cost, 0.0) + penalty
            totals.append(candidate)
            if chosen is None or candidate < chosen:  # the first of equal totals, as min() keeps
                chosen, chosen_start = candidate, t
        assert chosen is not None  # the start 0, or the start an earlier end kept, is always there
        best[end], start_of[end] = chosen, chosen_start
        # pruned as ruptures prunes: the kept starts zipped with the candidates, in order
        admissible = [t for t, c in zip(admissible, totals, strict=False) if c <= chosen + penalty]
    breaks = []
    at = start_of[n]
    while at > 0:  # the last end is the series' length
        breaks.append(at)
        at = start_of[at]
    return breaks[::-1]


def change_points(
    values: Sequence[float],
    min_step: float = DEFAULT_MIN_STEP,
    alpha: float = DEFAULT_ALPHA,
    min_runs: int = DEFAULT_MIN_RUNS,
    noise_factor: float = DEFAULT_NOISE_FACTOR,
) -> list[ChangePoint]:
    """Change points of a series of run values (one per run, oldest first), in order."""
    x = [float(v) for v in values]
    if len(x) < 2 * min_runs or len(x) < 3 or not all(v > 0 for v in x):
        return []
    low, high = min(x), max(x)
    if high / low - 1.0 <= min_step and 1.0 - low / high <= min_step:
        # no two segments' medians can differ by more than the minimum step (each median lies
        # between the series' extremes, and rounding keeps that order): whatever the search
        # found would be dropped below, so a steady series is not searched
        return []
    y = [math.log(v) for v in x]
    noise = max(_run_noise(y), NOISE_FLOOR)
    breaks = _segments(y, 2.0 * noise**2 * math.log(len(x)), min_runs)
    bounds = [0, *breaks, len(x)]
    found = []
    for i, at in enumerate(breaks):
        left, right = x[bounds[i] : at], x[at : bounds[i + 2]]
        if len(left) < min_runs or len(right) < min_runs:
            continue
        before, after = _median(left), _median(right)
        step = abs(math.log(after / before))
        if abs(after / before - 1.0) <= min_step or step <= noise_factor * noise:
            continue
        from perfsuite.measure import stats  # numpy and scipy.special: only for a break this large

        p = stats.welch_t(left, right)
        if p < alpha:
            found.append(ChangePoint(at, before, after, after / before, p, noise))
    return found
