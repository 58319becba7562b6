"""The table ``perfsuite show`` prints of the engine's side of each step: the engine's own TTFT
beside the client's, its queue time, running and waiting requests, KV-cache usage, preemptions,
the prefix-cache hit rate by both counts, and the cache guard's verdict (``serving.step_watch``).

A step row carries ``engine_metrics`` (``available``, and where it is: ``family``,
``interval_s``, ``scrapes``, ``failed_scrapes``, ``window_s``, ``metrics`` under the engine's
names, ``summary`` by role, ``scrapes_file``; else ``reason``) and ``cache_state`` (``design``,
``state``, ``hit_rate`` and its ``source``, ``probe``, ``flagged``, ``reason``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

COLUMNS = (
    "load",
    "TTFT p50 client / engine",
    "TTFT p99 client / engine",
    "queue p50",
    "running mean / max",
    "waiting mean / max",
    "KV cache mean / max",
    "preempted",
    "hit rate usage / engine",
    "cache state",
)


def _n(value: Any, fmt: str = ".1f") -> str:
    return "-" if value is None else format(value, fmt)


def _pair(a: Any, b: Any, fmt: str = ".1f") -> str:
    return f"{_n(a, fmt)} / {_n(b, fmt)}"


def steps(serving: Mapping[str, Any]) -> list[dict]:
    return [
        row
        for key in ("rate_sweep", "concurrency_sweep", "trace_replay")
        for row in (serving.get(key) or {}).get("steps", [])
    ]


def engine_table(serving: Mapping[str, Any]) -> list[Any]:
    """The table (plain-text cells), and a line saying why metrics were not scraped where they
    were not; nothing for a record made before either was kept."""
    from rich.table import Table
    from rich.text import Text

    rows = [r for r in steps(serving) if "engine_metrics" in r or "cache_state" in r]
    if not rows:
        return []
    setup = serving.get("engine_metrics") or {}
    out: list[Any] = []
    if setup and not setup.get("available"):
        out.append(Text(f"engine metrics: not available ({setup.get('reason')})"))
    scraped = [r for r in rows if (r.get("engine_metrics") or {}).get("available")]
    if not scraped and not any((r.get("prefix_cache") or {}).get("hit_rate") is not None for r in rows):
        # nothing of the engine's to show beside the client's figures: the cache state per step in
        # one line rather than a table of dashes
        out.append(Text(f"prefix-cache hit rate: not reported; cache state by step: {_states(rows)}"))
        out.extend(_flagged(rows))
        return out
    title = "the engine's view of each step"
    if scraped:
        em = scraped[0]["engine_metrics"]
        title += f" ({em.get('family')} metrics every {em.get('interval_s'):g} s; ms)"
    t = Table(title=Text(title))
    for col in COLUMNS:
        t.add_column(col, justify="left" if col in ("load", "cache state") else "right")
    for row in rows:
        s = (row.get("engine_metrics") or {}).get("summary") or {}
        cache = row.get("cache_state") or {}
        usage = (row.get("prefix_cache") or {}).get("hit_rate")
        state = str(cache.get("state", "-")) + (" (not ranked)" if cache.get("flagged") else "")
        t.add_row(
            *(
                Text(c)
                for c in (
                    _case(row),
                    _pair((row.get("ttft_ms") or {}).get("p50"), s.get("ttft_p50_ms")),
                    _pair((row.get("ttft_ms") or {}).get("p99"), s.get("ttft_p99_ms")),
                    _n(s.get("queue_time_p50_ms")),
                    _pair(s.get("running_mean"), s.get("running_max")),
                    _pair(s.get("waiting_mean"), s.get("waiting_max")),
                    _pair(s.get("kv_cache_usage_mean"), s.get("kv_cache_usage_max"), ".0%"),
                    _n(s.get("preemptions"), ".0f"),
                    _pair(usage, s.get("prefix_cache_hit_rate"), ".0%"),
                    state,
                )
            )
        )
    out.append(t)
    out.extend(_flagged(rows))
    return out


def _case(row: Mapping[str, Any]) -> str:
    return str(row.get("case") or f"{row.get('mode')} {row.get('load')}")


def _states(rows: list[dict]) -> str:
    """Each step's cache state, steps of one state named together in their order."""
    by_state: dict[str, list[str]] = {}
    for row in rows:
        cache = row.get("cache_state") or {}
        state = str(cache.get("state", "-")) + (" (not ranked)" if cache.get("flagged") else "")
        by_state.setdefault(state, []).append(_case(row))
    return "; ".join(f"{state} ({', '.join(cases)})" for state, cases in by_state.items())


def _flagged(rows: list[dict]) -> list[Any]:
    """One line for each step the cache guard flagged, with its reason."""
    from rich.text import Text

    return [
        Text(f"{row.get('case')}: {(row.get('cache_state') or {}).get('reason')}")
        for row in rows
        if (row.get("cache_state") or {}).get("flagged")
    ]


# The engine's figures a step records as metrics of its case, so that ``export`` carries them
# beside the client's: (summary key, metric name, unit, higher is better).
ENGINE_METRICS = (
    ("ttft_p50_ms", "engine_ttft_p50_ms", "ms", False),
    ("ttft_p99_ms", "engine_ttft_p99_ms", "ms", False),
    ("queue_time_p50_ms", "engine_queue_time_p50_ms", "ms", False),
    ("kv_cache_usage_max", "engine_kv_cache_usage_max", "fraction", False),
    ("preemptions", "engine_preemptions", "requests", False),
)


def record_engine(ctx: Any, case: str, row: Mapping[str, Any]) -> None:
    """The step's engine figures (where scraped) and its prefix-cache hit rate (where known) as
    metrics of its case."""
    summary = (row.get("engine_metrics") or {}).get("summary") or {}
    for key, name, unit, better in ENGINE_METRICS:
        if summary.get(key) is not None:
            ctx.add_metric(case, name, unit, [float(summary[key])], higher_is_better=better)
    rate = (row.get("cache_state") or {}).get("hit_rate")
    if rate is not None:  # neither better nor worse: it is the state the step met
        ctx.add_metric(case, "prefix_cache_hit_rate", "fraction", [float(rate)], higher_is_better=True)
