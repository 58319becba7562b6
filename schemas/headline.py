"""A record's headline: the figures its family's users read first, one rule for every reader of
records (``perfsuite run`` and ``results``, ``compare``, ``history``, the registry's summaries and
the leaderboard).

A workload declares its headline (:class:`Headline`, ``perfsuite.Workload.headline``; a plain
``primary_metric`` is the one-metric form). The record carries the declaration as
``workload.headline``. The families' declarations:

- kernels: their throughput (TFLOP/s, GB/s; launch overhead in us per launch);
- collectives: bus bandwidth per message size and mode, from nccl-tests' table (``details.rows``);
- data: images/s or GB/s;
- training: time to target (a run whose goal is throughput: its tokens/s, else samples/s);
- inference: each scenario's LoadGen metric (SingleStream: the 90th-percentile latency, its
  early-stopping estimate where LoadGen gave one; MultiStream: the 99th; Server: completed
  samples/s at a VALID target; Offline: samples/s; tokens/s for LLMs), with LoadGen's VALID or
  INVALID, and TTFT/TPOT beside for LLMs.

Accuracy is a check, never a headline: no rule here ever picks an accuracy or eval score.

:func:`headline_rows` is the contract readers build on. Records written before workloads declared
a headline get their family's declaration (:data:`FAMILY_HEADLINES`), or the generic rule:
``primary_metric``, else the first throughput (:data:`THROUGHPUT_ORDER`), else the first metric
that is not a cost, a ratio or a score. Plain functions on record dicts: the registry uses them
without importing the host.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

THROUGHPUT_ORDER = ("tflops", "gbps", "items_per_s", "busbw_gbps")
# What a run cost or how it compares, never what it achieved.
NOT_HEADLINE = frozenset({"time_ms", "power_w", "speedup"})
# nccl-tests' names of the two modes of a row of its table (``details.rows[i]["ip"]``).
SWEEP_MODES = {"oop": "out-of-place", "ip": "in-place"}
SWEEP_BESIDE = (("time_us", "us"), ("algbw_gbps", "GB/s"))


def is_candidate(name: str) -> bool:
    """Whether a metric may be a headline: not time, power, a speed-up, a per-joule figure, a share
    of time (a data loader's stall share: a diagnosis beside its images/s) or a score."""
    return name not in NOT_HEADLINE and not name.endswith(("_per_j", "_share")) and "accuracy" not in name


@dataclass(frozen=True)
class Headline:
    """What a workload's users read first, declared on the workload class.

    ``metric``: candidate metric names in order; a case's headline is the first it has.
    ``cases``: a case's own candidates (an inference scenario's LoadGen metric), before ``metric``.
    ``beside``: metrics shown next to the headline, never ranked (TTFT and TPOT of an LLM).
    ``per_size``: one row per message size and mode from nccl-tests' table in ``details.rows``
    (``size_bytes`` and, per mode ``oop``/``ip``, the metric, ``time_us``, ``algbw_gbps``, ``wrong``).
    ``validity``: the label of the check that says whether a case's figure is valid, with
    ``{case}`` for the case (``"{case} VALID"``: LoadGen's verdict).
    """

    metric: tuple[str, ...] = ()
    cases: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    beside: tuple[str, ...] = ()
    per_size: bool = False
    validity: str | None = None

    def __post_init__(self) -> None:
        for name in (*self.metric, *(m for ms in self.cases.values() for m in ms)):
            if not is_candidate(name):
                raise ValueError(f"{name!r} cannot be a headline (a cost, a ratio or an accuracy score)")
        if not self.metric and not self.cases:
            raise ValueError("a headline names at least one metric")

    def to_dict(self) -> dict[str, Any]:
        """The record's ``workload.headline``."""
        return {
            "metric": list(self.metric),
            "cases": {case: list(names) for case, names in self.cases.items()},
            "beside": list(self.beside),
            "per_size": self.per_size,
            "validity": self.validity,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "Headline":
        return cls(
            metric=tuple(data.get("metric") or ()),
            cases={case: tuple(names) for case, names in (data.get("cases") or {}).items()},
            beside=tuple(data.get("beside") or ()),
            per_size=bool(data.get("per_size")),
            validity=data.get("validity"),
        )


LOADGEN_VALIDITY = "{case} VALID"
# LoadGen's result per scenario (MLPerf Inference rules); an early-stopping estimate first.
LOADGEN_SCENARIOS: Mapping[str, tuple[str, ...]] = {
    "SingleStream": ("early_stopping_latency_p90_ms", "latency_p90_ms"),
    "MultiStream": ("early_stopping_latency_p99_ms", "latency_p99_ms"),
    "Server": ("completed_samples_per_s",),
    "Offline": ("samples_per_s",),
}
LLM_SCENARIOS: Mapping[str, tuple[str, ...]] = {
    **LOADGEN_SCENARIOS,
    "Server": ("tokens_per_s", "completed_samples_per_s"),
    "Offline": ("tokens_per_s", "samples_per_s"),
}
LLM_BESIDE = (
    "early_stopping_ttft_p90_ms",
    "early_stopping_tpot_p90_ms",
    "ttft_p90_ms",
    "tpot_p90_ms",
    "ttft_p99_ms",
    "tpot_p99_ms",
)
LOADGEN = Headline(cases=LOADGEN_SCENARIOS, validity=LOADGEN_VALIDITY)
LOADGEN_LLM = Headline(cases=LLM_SCENARIOS, beside=LLM_BESIDE, validity=LOADGEN_VALIDITY)
SWEEP = Headline(metric=("busbw_gbps",), per_size=True)
# beside it, the untimed initialisation MLPerf's clock rules keep off it (compilation, warm-up); a
# training run whose goal is throughput (it trains for its budget) has no time to target, and its
# figure is the throughput of its ``throughput`` case (a time-to-target run's is the ``train`` case)
TIME_TO_TARGET = Headline(
    metric=("time_to_target_s",),
    cases={"throughput": ("tokens_per_s", "samples_per_s")},
    beside=("untimed_init_s",),
)
# Records written before workloads declared a headline: their family's, by workload category
# (inference by whether it generated tokens).
FAMILY_HEADLINES: Mapping[str, Headline] = {"training": TIME_TO_TARGET}


def _cases(metrics: Iterable[Mapping[str, Any]]) -> list[str]:
    return list(dict.fromkeys(m["case"] for m in metrics))


def case_headline(metrics: list[dict], case: str, primary: str | None = None) -> dict | None:
    """The generic rule for one case: ``primary`` unless it is a share of time (records written
    before ``data.loader_stall`` declared images/s named its stall share: a diagnosis, never a
    figure to rank), else its first throughput, else its first candidate metric, else its first
    metric (None for a case with no metric)."""
    mine = [m for m in metrics if m["case"] == case]
    for name in ((primary,) if primary and not primary.endswith("_share") else ()) + THROUGHPUT_ORDER:
        found = next((m for m in mine if m["name"] == name), None)
        if found is not None:
            return found
    return next((m for m in mine if is_candidate(m["name"])), mine[0] if mine else None)


def headline(metrics: list[dict], primary: str | None = None) -> dict | None:
    """The generic rule for a whole record: the headline of its first case that has a candidate."""
    heads = [h for h in (case_headline(metrics, case, primary) for case in _cases(metrics)) if h is not None]
    return next((m for m in heads if is_candidate(m["name"])), heads[0] if heads else None)


def declared(record: Mapping[str, Any]) -> Headline | None:
    """The record's headline declaration: its own, else its family's (records written before
    workloads declared one), else None (the generic rule, with the record's ``primary_metric``)."""
    w = record["workload"]
    if "headline" in w:  # written since workloads declare one: null is the generic rule
        own = w["headline"]
        return Headline.from_dict(own) if isinstance(own, Mapping) else None
    category = w.get("category")
    if category == "inference":
        generated = any(m["name"].startswith("tokens_per_s") for m in record.get("metrics") or ())
        return LOADGEN_LLM if generated else LOADGEN
    if category == "collectives" and (record.get("details") or {}).get("rows"):
        return SWEEP
    return FAMILY_HEADLINES.get(str(category))


def _check_passed(record: Mapping[str, Any], label: str) -> bool | None:
    found = [c for c in (record.get("verification") or {}).get("checks") or () if c.get("label") == label]
    return all(c["passed"] for c in found) if found else None


def statistic_of(metric: Mapping[str, Any]) -> str | None:
    """Which statistic of its samples a metric's value is, so that its label can name it:
    ``"median"`` (what a run records), ``"best"`` (its fastest call: ``kernels.ceilings`` keeps it,
    as a ceiling is an upper bound), or None (a figure computed otherwise, or no statistics)."""
    s = metric.get("statistics") or {}
    value = metric.get("value")
    if value is None:
        return None
    if s.get("median") is not None and math.isclose(value, s["median"], rel_tol=1e-12, abs_tol=0.0):
        return "median"
    best = s.get("max") if metric.get("higher_is_better", True) else s.get("min")
    if best is not None and math.isclose(value, best, rel_tol=1e-12, abs_tol=0.0):
        return "best"
    return None


def value_ci(metric: Mapping[str, Any]) -> list[float] | None:
    """The 95% CI to print beside a metric's value: its samples' bootstrap CI of the median, shown
    only where the value is that median. A best call's value lies above the median's interval (a
    ceiling's 347 GFLOP/s beside 2.79-4.58), so it gets none: an interval is only ever printed
    beside the statistic it is of."""
    s = metric.get("statistics") or {}
    if s.get("n", 0) > 1 and s.get("ci95_low") is not None and statistic_of(metric) == "median":
        return [s["ci95_low"], s["ci95_high"]]
    return None


def _row(record: Mapping[str, Any], metric: Mapping[str, Any], decl: Headline | None) -> dict[str, Any]:
    case = metric["case"]
    beside = []
    for name in decl.beside if decl else ():
        found = next((m for m in record["metrics"] if m["case"] == case and m["name"] == name), None)
        if found is not None:
            beside.append({"metric": name, "unit": found["unit"], "value": found["value"]})
    return {
        "case": case,
        "size_bytes": None,
        "metric": metric["name"],
        "unit": metric["unit"],
        "value": metric["value"],
        "higher_is_better": metric["higher_is_better"],
        "statistic": statistic_of(metric),
        "ci95": value_ci(metric),
        "valid": _check_passed(record, decl.validity.format(case=case)) if decl and decl.validity else None,
        "beside": beside,
    }


def _sweep_rows(record: Mapping[str, Any], decl: Headline) -> list[dict[str, Any]]:
    name = decl.metric[0] if decl.metric else "busbw_gbps"
    unit = next((m["unit"] for m in record["metrics"] if m["name"] == name), "GB/s")
    rows = []
    for mode, label in SWEEP_MODES.items():
        for r in (record.get("details") or {}).get("rows") or ():
            cell = r.get(mode) if isinstance(r, Mapping) else None
            if not isinstance(cell, Mapping) or cell.get(name) is None:
                continue
            wrong = cell.get("wrong")
            rows.append(
                {
                    "case": label,
                    "size_bytes": r.get("size_bytes"),
                    "metric": name,
                    "unit": unit,
                    "value": cell[name],
                    "higher_is_better": True,
                    "statistic": None,
                    "ci95": None,
                    "valid": None if wrong is None else wrong == 0,
                    "beside": [
                        {"metric": key, "unit": u, "value": cell[key]}
                        for key, u in SWEEP_BESIDE
                        if cell.get(key) is not None
                    ],
                }
            )
    return rows


def headline_rows(record: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The headline rows of a record: one per case (per scenario for inference), or per message
    size and mode for a sweep, in the record's order. Each row is a dict:

    ``case`` (str), ``size_bytes`` (int, a sweep row; else None), ``metric``, ``unit``, ``value``
    (float), ``higher_is_better`` (bool), ``statistic`` (which statistic of the samples ``value``
    is: ``"median"``, ``"best"`` or None, :func:`statistic_of`), ``ci95`` ([low, high] of the
    run's median where it has several samples and ``value`` is that median, else None),
    ``valid`` (LoadGen's VALID/INVALID for a scenario, #wrong == 0 for a sweep row, else None:
    verification is the record's), ``beside`` (a list of ``{metric, unit,
    value}`` shown next to it, never ranked).

    A case without any of its declared metrics has no row, unless no case has one (a record written
    before the declaration, a run that stopped short): then every case gets the generic rule's.
    A record without metrics (failed, skipped) has no rows. This contract is stable: fields may be
    added, never renamed or removed.
    """
    metrics = record.get("metrics") or []
    decl = declared(record)
    if decl is not None and decl.per_size:
        rows = _sweep_rows(record, decl)
        if rows:
            return rows
    out = []
    if decl is not None:
        for case in _cases(metrics):
            mine = {m["name"]: m for m in metrics if m["case"] == case}
            name = next((n for n in (*decl.cases.get(case, ()), *decl.metric) if n in mine), None)
            if name is not None:
                out.append(_row(record, mine[name], decl))
        if out:
            return out
    primary = record["workload"].get("primary_metric")
    for case in _cases(metrics):
        found = case_headline(metrics, case, primary)
        if found is not None:
            out.append(_row(record, found, decl))
    return out


def case_metric_names(record: Mapping[str, Any]) -> dict[str, str]:
    """case -> the name of its headline metric (cases with no headline row are absent); a sweep's
    cases by the metric its declaration names, as its per-case metrics carry it."""
    decl = declared(record)
    if decl is not None and decl.per_size:
        name = decl.metric[0] if decl.metric else "busbw_gbps"
        return {m["case"]: name for m in record.get("metrics") or () if m["name"] == name}
    return {row["case"]: row["metric"] for row in headline_rows(record)}
