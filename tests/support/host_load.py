"""How busy the rest of the machine was while a timing test ran.

The tests that judge a timing against a reference (marked ``alone``) run after the parallel
pass of ``scripts/test.sh``, with no other test beside them. What can still spoil them is work
outside the test: another job on a shared machine. The one-minute load average cannot say so
(it still carries the parallel pass a minute later), so this measures the CPU time that
processes outside the test's own process tree used during it: the machine's busy time less the
test process's and its descendants'.
"""

from __future__ import annotations

import resource
import time

import psutil

from perfsuite.workloads.inference.serving.capacity import _busy_s as _machine_busy_s


def _own_s() -> float:
    """CPU seconds of this process, its reaped descendants, and the descendants still alive."""
    total = 0.0
    for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN):
        use = resource.getrusage(who)
        total += use.ru_utime + use.ru_stime
    for child in psutil.Process().children(recursive=True):
        try:
            t = child.cpu_times()
        except psutil.NoSuchProcess:
            continue  # reaped in between: its time is in RUSAGE_CHILDREN
        total += t.user + t.system + t.children_user + t.children_system
    return total


class OtherLoad:
    """``with OtherLoad() as other: ...``; then ``other.cores``: the cores that processes
    outside this test's tree kept busy, on average, while the block ran."""

    cores: float = 0.0

    def __enter__(self) -> "OtherLoad":
        self._wall, self._busy, self._own = time.monotonic(), _machine_busy_s(), _own_s()
        return self

    def __exit__(self, *exc) -> None:
        wall = time.monotonic() - self._wall
        others = (_machine_busy_s() - self._busy) - (_own_s() - self._own)
        self.cores = max(others, 0.0) / wall if wall > 0 else 0.0

    def busy(self) -> bool:
        """Other work worth more than half of the machine's cores: timings are not judged."""
        return self.cores > 0.5 * (psutil.cpu_count() or 1)
