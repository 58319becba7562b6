"""The training cross-check's rounds as a record holds them (``details.crosscheck.train.rounds``:
each round's suite and bare-loop samples/s), read alike by the cross-check that writes its
summary of them and by the leaderboard's scaling view, which may not import the cross-check.

Both sides of a round ran back to back, so a round's ratio (suite over bare loop) carries less
of what drifts over a call (clocks under a power cap) than the ratio of each side's median does.
A data-parallel run's scaling efficiency over the bare loop's at the same world size is its
median round ratio over the one-GPU run's.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any


def round_ratios(rounds: Iterable[Mapping[str, Any]]) -> list[float]:
    """Each round's suite samples/s over its bare loop's; a round whose bare loop measured
    nothing (or that lacks either figure) is left out."""
    ratios = []
    for r in rounds:
        suite, ref = r.get("suite_samples_per_s"), r.get("reference_samples_per_s")
        if isinstance(suite, (int, float)) and isinstance(ref, (int, float)) and ref > 0:
            ratios.append(suite / ref)
    return ratios
