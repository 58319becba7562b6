"""Is B faster than A? Two run records compared metric by metric, apples to apples.

Two records compare only when their comparability basis is equal: workload name,
version, every resolved parameter, scenario and division (what the record's
``comparability_key`` hashes). Otherwise :class:`NotComparable` names each field that
differs. For each case and metric the ratio of medians (B over A) gets a bootstrap 95%
CI and a two-sided Mann-Whitney U p-value on the raw samples; a change is called only
when it is significant (p < ``alpha``) *and* larger than ``threshold`` (default 2%).
Environment differences (driver, CUDA, NCCL, torch, clocks and power state seen, host)
are listed beside the verdict: they are often the reason.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from perfsuite.measure import stats

DEFAULT_THRESHOLD = 0.02
DEFAULT_ALPHA = 0.05
FASTER, SLOWER, NO_CHANGE = "faster", "slower", "no significant change"
NOT_TESTED = "not tested (one sample)"  # a single value on a side (power, energy): no test possible
MIXED = "mixed"


class NotComparable(ValueError):
    """Two runs of different comparability keys; ``fields`` names each difference."""

    def __init__(self, fields: list[str]):
        self.fields = fields
        super().__init__("runs are not comparable: different " + "; ".join(fields))


@dataclass
class MetricComparison:
    case: str
    metric: str
    unit: str
    higher_is_better: bool
    median_a: float
    median_b: float
    ratio: float  # median(B) / median(A)
    ratio_ci_low: float
    ratio_ci_high: float
    p_value: float | None  # None: a single sample on a side, no test possible
    n_a: int
    n_b: int
    verdict: str
    headline: bool = False


@dataclass
class Comparison:
    run_a: str
    run_b: str
    workload: str
    threshold: float
    alpha: float
    verdict: str
    metrics: list[MetricComparison] = field(default_factory=list)
    environment_differences: list[dict] = field(default_factory=list)

    def to_dict(self) -> dict:
        return asdict(self)


def key_basis(record: dict) -> dict[str, Any]:
    """The fields the comparability key is made of, flattened: ``param.m`` per parameter."""
    w = record["workload"]
    basis: dict[str, Any] = {
        "workload": w["name"],
        "version": w["version"],
        "scenario": w["scenario"],
        "division": w["division"],
    }
    for name, value in w["params"].items():
        basis[f"param.{name}"] = value
    return basis


_MISSING = object()


def key_differences(a: dict, b: dict) -> list[str]:
    """Each comparability field that differs, as ``field: A value vs B value``."""
    ba, bb = key_basis(a), key_basis(b)
    out = []
    for name in list(dict.fromkeys([*ba, *bb])):
        va, vb = ba.get(name, _MISSING), bb.get(name, _MISSING)
        if va != vb:
            show = lambda v: "(absent)" if v is _MISSING else repr(v)
            out.append(f"{name}: {show(va)} vs {show(vb)}")
    if not out and a["comparability_key"] != b["comparability_key"]:
        out.append(f"comparability_key: {a['comparability_key'][:12]} vs {b['comparability_key'][:12]}")
    return out


def _gpu_state(record: dict, key: str) -> Any:
    seen = (record.get("gpu_state") or {}).get("after") or []
    values = [obs.get(key) for obs in seen]
    if key == "throttle_reasons":
        values = sorted({reason for v in values for reason in (v or [])})
        return ", ".join(values) if values else "none"
    return ", ".join(str(v) for v in values) if values else None


def environment_facts(record: dict) -> dict[str, Any]:
    """The environment facts a result depends on, by a short name (None: not recorded)."""
    env = record["environment"]
    runtime = env.get("runtime") or {}
    packages = env.get("packages") or {}
    gpus = env.get("gpus") or []
    return {
        "host": env["host"],
        "cpu": env["cpu"]["model"],
        "os": env["os"],
        "python": env["python"],
        "device": env["measured_device"]["name"],
        "gpus": f"{len(gpus)} x {gpus[0]['name']}" if gpus else "none",
        "driver": ", ".join(sorted({g["driver"] for g in gpus})) or None,
        "cuda": runtime.get("cuda"),
        "nccl": runtime.get("nccl") or packages.get("nvidia-nccl-cu13") or packages.get("nvidia-nccl-cu12"),
        "torch": runtime.get("torch") or packages.get("torch"),
        "triton": packages.get("triton"),
        "suite commit": env["suite"].get("git_commit"),
        "sm clock MHz (after)": _gpu_state(record, "sm_clock_mhz"),
        "power limit W (after)": _gpu_state(record, "power_limit_w"),
        "clock events (after)": _gpu_state(record, "throttle_reasons") if record.get("gpu_state") else None,
        "launch": f"{record['launch']['launcher']} x{record['launch']['world_size']}",
    }


def environment_differences(a: dict, b: dict) -> list[dict]:
    fa, fb = environment_facts(a), environment_facts(b)
    return [{"fact": k, "a": fa[k], "b": fb[k]} for k in fa if fa[k] != fb[k]]


def metric_verdict(
    ratio: float, low: float, high: float, p_value: float | None, higher_is_better: bool, threshold: float, alpha: float
) -> str:
    """faster / slower only when significant, outside the CI's 1.0 and beyond the threshold."""
    if p_value is None:
        return NOT_TESTED
    if p_value >= alpha or abs(ratio - 1.0) <= threshold or low <= 1.0 <= high:
        return NO_CHANGE
    better = ratio > 1.0 if higher_is_better else ratio < 1.0
    return FASTER if better else SLOWER


def _headline_names(record: dict) -> dict[str, str]:
    """case -> the name of its headline metric, by the one rule (schemas.headline)."""
    from perfsuite.schemas.headline import case_headline

    primary = record["workload"].get("primary_metric")
    cases = dict.fromkeys(m["case"] for m in record["metrics"])
    return {case: case_headline(record["metrics"], case, primary)["name"] for case in cases}


def compare_records(a: dict, b: dict, threshold: float = DEFAULT_THRESHOLD, alpha: float = DEFAULT_ALPHA) -> Comparison:
    """Compare run B against run A. Raises :class:`NotComparable` for different keys."""
    diffs = key_differences(a, b)
    if diffs:
        raise NotComparable(diffs)
    for record in (a, b):
        if record["status"] != "success":
            raise ValueError(f"run {record['run_id']} has status {record['status']}: nothing measured to compare")
    from perfsuite.schemas.samples import metric_samples

    by_key_b = {(m["case"], m["name"]): m for m in b["metrics"]}
    heads = _headline_names(a)
    rows = []
    for ma in a["metrics"]:
        mb = by_key_b.get((ma["case"], ma["name"]))
        if mb is None:
            continue
        sa, sb = metric_samples(ma, a["metrics"]), metric_samples(mb, b["metrics"])
        if not sa or not sb:
            continue
        ratio, low, high = stats.ratio_of_medians_ci(sa, sb)
        p = None
        if len(sa) > 1 and len(sb) > 1:
            _, p = stats.mann_whitney_u(sa, sb)
        verdict = metric_verdict(ratio, low, high, p, ma["higher_is_better"], threshold, alpha)
        rows.append(
            MetricComparison(
                case=ma["case"],
                metric=ma["name"],
                unit=ma["unit"],
                higher_is_better=ma["higher_is_better"],
                median_a=float(np.median(sa)),
                median_b=float(np.median(sb)),
                ratio=ratio,
                ratio_ci_low=low,
                ratio_ci_high=high,
                p_value=p,
                n_a=len(sa),
                n_b=len(sb),
                verdict=verdict,
                headline=heads.get(ma["case"]) == ma["name"],
            )
        )
    if not rows:
        raise ValueError(f"runs {a['run_id'][:8]} and {b['run_id'][:8]} share no metric with samples")
    verdicts = {r.verdict for r in rows if r.headline} or {r.verdict for r in rows}
    overall = verdicts.pop() if len(verdicts) == 1 else MIXED
    return Comparison(
        run_a=a["run_id"],
        run_b=b["run_id"],
        workload=a["workload"]["name"],
        threshold=threshold,
        alpha=alpha,
        verdict=overall,
        metrics=rows,
        environment_differences=environment_differences(a, b),
    )
