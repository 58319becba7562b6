"""Parse LoadGen's ``mlperf_log_summary.txt`` into typed figures.

The summary is LoadGen's own verdict: VALID or INVALID with the constraints it checked
("Min duration satisfied : NO"), its recommendations, the early-stopping estimates, the
latency percentiles (and, with token latencies, first-token and per-output-token ones)
and the achieved rates. We read it rather than recomputing anything, so that VALID and
p99 mean exactly what MLPerf means. Lines are ``label : value``; the label spelling is
LoadGen's (6.x), matched whole so that a renamed line is a clear parse error, not a zero.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

_PERCENTILE = re.compile(r"^(\d+(?:\.\d+)?) percentile (latency|first token latency|time to output token) \(ns\)$")
_HEADLINE_PERCENTILE = re.compile(r"^(\d+(?:\.\d+)?)th (percentile latency|first token percentile latency) \(ns\)$")
_SATISFIED = re.compile(r"^(.*?) satisfied\s*$")
_ES_ESTIMATE = re.compile(r"Early stopping (\d+(?:\.\d+)?)th percentile estimate: (\d+)")
# LoadGen's early-stopping verdicts when it is not met (results.cc): SingleStream and MultiStream
# below the least count the percentile can be estimated from; Server with too many queries over
# the latency bound for the count run.
_ES_TOO_FEW = re.compile(r"Only processed (\d+) queries\. Need to process at least (\d+) queries for early stopping")
_ES_MORE = re.compile(r"Processed (\d+) queries\. Would need to run at least (\d+) more queries")
# Server's latency bounds as "Test Parameters Used" prints them, per latency kind
_BOUNDS = {"latency": "target_latency (ns)", "ttft": "ttft_latency (ns)", "tpot": "tpot_latency (ns)"}

# label in the summary -> field of LoadGenSummary (rates in samples, tokens or queries per second)
_RATES = {
    "Completed samples per second": "completed_samples_per_s",
    "Samples per second": "samples_per_s",
    "Scheduled samples per second": "scheduled_samples_per_s",
    "QPS w/ loadgen overhead": "qps_with_overhead",
    "QPS w/o loadgen overhead": "qps_without_overhead",
    "Completed tokens per second": "tokens_per_s",
    "Tokens per second": "tokens_per_s",
    "TPS w/ loadgen overhead": "tokens_per_s_with_overhead",
    "TPS w/o loadgen overhead": "tokens_per_s_without_overhead",
}
# latency kinds: the plain per-sample (or per-query) latency, time to first token, time per output token
_KIND = {"latency": "latency", "first token latency": "ttft", "time to output token": "tpot"}
_MINMAXMEAN = {
    "Min latency (ns)": ("latency", "min"),
    "Max latency (ns)": ("latency", "max"),
    "Mean latency (ns)": ("latency", "mean"),
    "Min First Token latency (ns)": ("ttft", "min"),
    "Max First Token latency (ns)": ("ttft", "max"),
    "Mean First Token latency (ns)": ("ttft", "mean"),
    "Min Time per Output Token (ns)": ("tpot", "min"),
    "Max Time per Output Token (ns)": ("tpot", "max"),
    "Mean Time per Output Token (ns)": ("tpot", "mean"),
}


class SummaryParseError(ValueError):
    """The text is not a LoadGen summary this parser understands; the message says why."""


@dataclass
class LoadGenSummary:
    scenario: str
    mode: str
    valid: bool
    satisfied: dict[str, bool] = field(default_factory=dict)  # "Min duration" -> True ...
    recommendations: list[str] = field(default_factory=list)
    early_stopping: dict[str, list[str]] = field(default_factory=dict)  # "latency" / "TTFT" / "TPOT" -> lines
    early_stopping_estimates_ns: dict[str, float] = field(default_factory=dict)  # "TTFT p90" -> ns
    headline_ns: dict[str, float] = field(default_factory=dict)  # "latency p90" -> ns (the scenario's result)
    latency_ns: dict[str, dict[str, float]] = field(default_factory=dict)  # kind -> {"p99": ns, "mean": ns}
    rates: dict[str, float] = field(default_factory=dict)
    parameters: dict[str, str] = field(default_factory=dict)  # "Test Parameters Used" as printed
    warnings: bool = False
    errors: bool = False

    @property
    def invalid_reasons(self) -> list[str]:
        """Why LoadGen said INVALID: each constraint not satisfied, then its recommendations."""
        out = [f"{name} not satisfied" for name, ok in self.satisfied.items() if not ok]
        return out + self.recommendations

    def next_steps(self, percentile: float = 0.99) -> list[str]:
        """What would make an INVALID run VALID, each constraint not met as one line with LoadGen's
        own figures and the parameter to change: the query count early stopping needs, the latency
        bound a Server percentile (``percentile``, the run's target) missed, the minimum duration
        LoadGen ran out of queries before. Empty for a VALID run."""
        if self.valid:
            return []
        steps: list[str] = []
        if self.satisfied.get("Early stopping") is False:
            for name, lines in self.early_stopping.items():
                steps += _early_stopping_step(name, " ".join(lines))
        if self.satisfied.get("Performance constraints") is False:
            steps += self._latency_steps(percentile)
        if self.satisfied.get("Min duration") is False:
            hint = next((r for r in self.recommendations if "pre-generates" in r), "")
            steps.append(
                f"LoadGen ran out of queries before min_duration_ms={self.parameters.get('min_duration (ms)', '?')}"
                + (f": {hint[0].lower()}{hint[1:]}" if hint else "")
            )
        if self.satisfied.get("Min queries") is False:
            steps.append(
                f"fewer queries than min_query_count={self.parameters.get('min_query_count', '?')} were issued: "
                "give the run longer (min_duration_ms) or a lower expected latency"
            )
        return steps

    def _latency_steps(self, percentile: float) -> list[str]:
        """Server: each latency kind whose target percentile is over its bound, with both figures."""
        key = _pct_key(str(percentile * 100))
        steps = []
        for kind, label in _BOUNDS.items():
            bound = _number(self.parameters[label], label) if label in self.parameters else 0.0
            seen = self.latency_ns.get(kind, {}).get(key)
            if bound > 0 and seen is not None and seen > bound:
                name = {"latency": "latency", "ttft": "time to first token", "tpot": "time per output token"}[kind]
                steps.append(
                    f"{name} {key} {seen / 1e6:.4g} ms is over its bound {bound / 1e6:.4g} ms: "
                    f"lower target_qps (now {self.parameters.get('target_qps', '?')})"
                )
        return steps

    def to_dict(self, percentile: float = 0.99) -> dict:
        """The record's view; ``percentile``: the run's target latency percentile (its next steps)."""
        return {
            "scenario": self.scenario,
            "mode": self.mode,
            "valid": self.valid,
            "satisfied": self.satisfied,
            "invalid_reasons": self.invalid_reasons,
            "next_steps": self.next_steps(percentile),
            "early_stopping": self.early_stopping,
            "early_stopping_estimates_ns": self.early_stopping_estimates_ns,
            "headline_ns": self.headline_ns,
            "latency_ns": self.latency_ns,
            "rates": self.rates,
            "parameters": self.parameters,
            "warnings": self.warnings,
            "errors": self.errors,
        }


def _early_stopping_step(name: str, text: str) -> list[str]:
    """One early-stopping block's verdict (``text``, its lines joined) as the next step."""
    which = "" if name == "latency" else f" ({name})"
    few = _ES_TOO_FEW.search(text)
    if few:
        done, needed = int(few.group(1)), int(few.group(2))
        return [
            f"early stopping{which} needs at least {needed} queries and this run processed {done}: "
            f"min_query_count={needed} or more"
        ]
    more = _ES_MORE.search(text)
    if more:
        done, extra = int(more.group(1)), int(more.group(2))
        return [
            f"early stopping{which} needs at least {done + extra} queries, every one after the first {done} "
            f"under the latency bound: min_query_count={done + extra} or more, or a lower target_qps"
        ]
    return []


def _number(text: str, label: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise SummaryParseError(f"LoadGen summary: {label!r} has value {text!r}, not a number") from None


def _pct_key(pct: str) -> str:
    v = float(pct)
    return f"p{v:g}".replace(".", "_")


def parse_summary(text: str) -> LoadGenSummary:
    """Parse the text of ``mlperf_log_summary.txt`` (performance mode)."""
    fields: dict[str, str] = {}
    sat: dict[str, bool] = {}
    recs: list[str] = []
    es: dict[str, list[str]] = {}
    latency: dict[str, dict[str, float]] = {}
    headline: dict[str, float] = {}
    rates: dict[str, float] = {}
    params: dict[str, str] = {}
    section = "results"
    block: str | None = None  # "recommendations" or an early-stopping block name
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("====="):
            continue
        if line == "Additional Stats":
            section, block = "stats", None
            continue
        if line == "Test Parameters Used":
            section, block = "params", None
            continue
        if line.startswith(("No warnings", "No errors")):
            continue
        if "warnings encountered" in line:
            fields["_warnings"] = "1"
            continue
        if "errors encountered" in line or line.startswith("ERROR"):
            fields["_errors"] = "1"
            continue
        if section == "results":
            if line == "Recommendations:":
                block = "recommendations"
                continue
            m = re.match(r"^(?:(TTFT|TPOT) )?Early Stopping Result:$", line)
            if m:
                block = m.group(1) or "latency"
                es[block] = []
                continue
            if line.startswith("*") and block is not None:
                (recs if block == "recommendations" else es[block]).append(line.lstrip("* ").strip())
                continue
            if block is not None and block != "recommendations" and es.get(block):
                es[block][-1] += " " + line  # a wrapped early-stopping line
                continue
        if ":" not in line:
            continue
        label, value = (s.strip() for s in line.split(":", 1))
        if section == "params":
            params[label] = value
            continue
        ms = _SATISFIED.match(label)
        if ms and value in ("Yes", "NO", "No"):
            sat[ms.group(1).strip()] = value == "Yes"
            continue
        mh = _HEADLINE_PERCENTILE.match(label)
        if mh:
            kind = "ttft" if "first token" in mh.group(2) else "latency"
            headline[f"{kind} {_pct_key(mh.group(1))}"] = _number(value, label)
            continue
        mp = _PERCENTILE.match(label)
        if mp:
            latency.setdefault(_KIND[mp.group(2)], {})[_pct_key(mp.group(1))] = _number(value, label)
            continue
        if label in _MINMAXMEAN:
            kind, stat = _MINMAXMEAN[label]
            latency.setdefault(kind, {})[stat] = _number(value, label)
            continue
        if label in _RATES:
            rates[_RATES[label]] = _number(value, label)
            continue
        fields[label] = value
    for required in ("Scenario", "Mode", "Result is"):
        if required not in fields:
            raise SummaryParseError(f"LoadGen summary has no {required!r} line")
    if fields["Result is"] not in ("VALID", "INVALID"):
        raise SummaryParseError(f"LoadGen summary: 'Result is' is {fields['Result is']!r}")
    estimates: dict[str, float] = {}
    for name, lines in es.items():
        for m in _ES_ESTIMATE.finditer(" ".join(lines)):
            estimates[f"{name} {_pct_key(m.group(1))}"] = float(m.group(2))
    return LoadGenSummary(
        scenario=fields["Scenario"],
        mode=fields["Mode"],
        valid=fields["Result is"] == "VALID",
        satisfied=sat,
        recommendations=recs,
        early_stopping=es,
        early_stopping_estimates_ns=estimates,
        headline_ns=headline,
        latency_ns=latency,
        rates=rates,
        parameters=params,
        warnings="_warnings" in fields,
        errors="_errors" in fields,
    )


def read_summary(log_dir: Path) -> LoadGenSummary:
    path = Path(log_dir) / "mlperf_log_summary.txt"
    if not path.exists():
        raise SummaryParseError(f"LoadGen wrote no summary in {log_dir}")
    return parse_summary(path.read_text(errors="replace"))
