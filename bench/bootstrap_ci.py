"""The median's bootstrap CI (``perfsuite.measure.stats.bootstrap_ci``, which every metric's
summary carries) at n samples: best-of-3 time and peak memory traced by ``tracemalloc`` (numpy
reports its buffers there). Figures to read, not a pass/fail test.

    python bench/bootstrap_ci.py --samples 10000
"""

from __future__ import annotations

import argparse
import time
import tracemalloc

import numpy as np

from perfsuite.measure import stats


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=10_000, help="samples the CI is computed over")
    args = parser.parse_args()
    x = np.random.default_rng(1).lognormal(0.0, 0.1, args.samples)
    stats.bootstrap_ci(x[:100])  # imports and first-call costs out of the figures
    times = []
    for _ in range(3):
        t0 = time.perf_counter()
        ci = stats.bootstrap_ci(x)
        times.append(time.perf_counter() - t0)
    tracemalloc.start()
    stats.bootstrap_ci(x)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    print(
        f"n={args.samples}: {stats.BOOTSTRAP_RESAMPLES} resamples, best of 3 {min(times) * 1e3:.0f} ms, "
        f"peak traced {peak / 1e6:.1f} MB, 95% CI of the median {ci[0]:.6f} .. {ci[1]:.6f}"
    )


if __name__ == "__main__":
    main()
