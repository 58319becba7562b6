"""Which metric of a record is its headline: one rule for every reader of records (the
run's results table, ``perfsuite results``, the registry's summaries).

A workload may name its headline metric (``perfsuite.Workload.primary_metric``, stored in the
record as ``workload.primary_metric``). Where it names none, or a case lacks that metric,
a case's headline is its first throughput (``THROUGHPUT_ORDER``), else its first metric
that is not a cost or a ratio (time, power, per-joule figures, speed-up), else its first
metric. A record's headline is that of its first case that has one.

Plain functions on metric dicts: the registry uses them without importing the host.
"""

from __future__ import annotations

from collections.abc import Iterable

THROUGHPUT_ORDER = ("tflops", "gbps", "items_per_s", "busbw_gbps")
# What a run cost or how it compares, never what it achieved.
NOT_HEADLINE = frozenset({"time_ms", "power_w", "speedup"})


def is_candidate(name: str) -> bool:
    """Whether a metric may be a headline: not time, power, a speed-up or a per-joule figure."""
    return name not in NOT_HEADLINE and not name.endswith("_per_j")


def _cases(metrics: Iterable[dict]) -> list[str]:
    return list(dict.fromkeys(m["case"] for m in metrics))


def case_headline(metrics: list[dict], case: str, primary: str | None = None) -> dict | None:
    """The metric that best says how ``case`` did."""
    mine = [m for m in metrics if m["case"] == case]
    for name in ((primary,) if primary else ()) + THROUGHPUT_ORDER:
        found = next((m for m in mine if m["name"] == name), None)
        if found is not None:
            return found
    return next((m for m in mine if is_candidate(m["name"])), mine[0] if mine else None)


def headline(metrics: list[dict], primary: str | None = None) -> dict | None:
    """The record's headline: the headline of its first case that has a candidate metric."""
    heads = [h for h in (case_headline(metrics, case, primary) for case in _cases(metrics)) if h is not None]
    return next((m for m in heads if is_candidate(m["name"])), heads[0] if heads else None)
