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
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from perfsuite.measure import stats

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


def _segments(y: np.ndarray, penalty: float, min_runs: int) -> list[int]:
    """The break indices PELT finds (each the first run of a new segment): ruptures'
    ``Pelt(model="l2", min_size=min_runs, jump=1)``, step for step (its pruning included), with
    each segment's cost from running sums instead of a variance per candidate. Importing
    ruptures (and the scipy.stats it loads) cost a history command more than its query; fifty
    series of 100 runs take 0.1 s here."""
    n = int(y.size)
    s1 = np.concatenate(([0.0], np.cumsum(y))).tolist()
    s2 = np.concatenate(([0.0], np.cumsum(y * y))).tolist()

    def cost(start: int, end: int) -> float:  # sum of squared deviations from the segment's mean
        total = s1[end] - s1[start]
        return max(s2[end] - s2[start] - total * total / (end - start), 0.0)

    best: dict[int, tuple[float, list[int]]] = {0: (0.0, [])}  # end -> (total cost, segment ends)
    admissible: list[int] = []
    for end in [*range(min_runs, n), n]:
        admissible.append(end - min_runs)
        candidates = [
            (best[t][0] + cost(t, end) + penalty, best[t][1]) for t in admissible if t in best
        ]  # ruptures skips a start it has no partition for
        chosen = min(candidates, key=lambda c: c[0])
        best[end] = (chosen[0], [*chosen[1], end])
        # pruned as ruptures prunes: the kept starts zipped with the candidates, in order
        admissible = [t for t, c in zip(admissible, candidates, strict=False) if c[0] <= chosen[0] + penalty]
    return best[n][1][:-1]  # the last end is the series' length


def change_points(
    values: list[float],
    min_step: float = DEFAULT_MIN_STEP,
    alpha: float = DEFAULT_ALPHA,
    min_runs: int = DEFAULT_MIN_RUNS,
    noise_factor: float = DEFAULT_NOISE_FACTOR,
) -> list[ChangePoint]:
    """Change points of a series of run values (one per run, oldest first), in order."""
    x = np.asarray(values, dtype=np.float64)
    if x.size < 2 * min_runs or x.size < 3 or not np.all(x > 0):
        return []
    noise = max(stats.run_noise(x), NOISE_FLOOR)
    y = np.log(x)
    breaks = _segments(y, 2.0 * noise**2 * math.log(x.size), min_runs)
    bounds = [0, *breaks, int(x.size)]
    found = []
    for i, at in enumerate(breaks):
        left, right = x[bounds[i] : at], x[at : bounds[i + 2]]
        if left.size < min_runs or right.size < min_runs:
            continue
        before, after = float(np.median(left)), float(np.median(right))
        step = abs(math.log(after / before))
        if abs(after / before - 1.0) <= min_step or step <= noise_factor * noise:
            continue
        p = stats.welch_t(left, right)
        if p < alpha:
            found.append(ChangePoint(at, before, after, after / before, p, noise))
    return found
