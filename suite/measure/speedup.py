"""Speed-ups against a workload's baseline case (``Case.baseline``), as tritonbench shows
them: each other case's ``speedup`` = the baseline's median time per call / the case's, in
the same run, so that "1.8x eager" needs no second run to mean something.

The samples of a speed-up are the baseline's median over each of the case's samples, so
its statistics carry the case's own spread. Whichever of the two is measured first, the
metric is added once both are.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field

METRIC = "speedup"
UNIT = "x"


@dataclass
class BaselineSpeedups:
    """Collects each case's time samples and yields speed-ups once the baseline is known."""

    baseline: str | None = None
    _times: dict[str, list[float]] = field(default_factory=dict)
    _done: set[str] = field(default_factory=set)

    def note(self, label: str, is_baseline: bool, samples_s: list[float]) -> list[tuple[str, list[float]]]:
        """Record a measured case; return (case, speed-up samples) for every case whose
        speed-up can now be computed and was not yet."""
        if is_baseline:
            if self.baseline not in (None, label):
                raise ValueError(f"two baseline cases in one run: {self.baseline!r} and {label!r}")
            self.baseline = label
        self._times[label] = list(samples_s)
        if self.baseline is None or self.baseline not in self._times:
            return []
        base = statistics.median(self._times[self.baseline])
        ready = [case for case in self._times if case != self.baseline and case not in self._done]
        self._done.update(ready)
        return [(case, [base / s for s in self._times[case] if s > 0]) for case in ready]
