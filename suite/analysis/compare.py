"""Is B faster than A? Two groups of runs (one run or several a side) compared metric by metric,
apples to apples.

Runs compare only when their comparability keys are equal, recomputed from each record's
content (:mod:`perfsuite.schemas.comparability`): same workload and version, parameters, timing
controls honoured, world and regime. Otherwise :class:`NotComparable` names each setting that
differs.

The unit that varies between runs is the run (clocks, placement, power state), so:

- **between runs** (both sides have at least two runs): one value per run (the run's figure,
  the median of its calls). The ratio of the medians of those values (B over A) gets a bootstrap
  95% CI over runs, and Welch's t-test on the run values gives the p-value.
- **within run** (a side has one run): the newest run of each side, the ratio of the medians of
  their calls with a bootstrap CI and Mann-Whitney U over the calls. That says whether the calls
  of two runs differ, not whether runs do: it is labelled as such, never as a p-value over runs.

A change is called only when it is significant (p < ``alpha``), the CI excludes 1 *and* it is
larger than ``threshold`` (default 2%). Environment differences (driver, CUDA, NCCL, torch,
clocks and power state seen, host) are listed beside the verdict: they are often the reason.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from perfsuite.measure import stats
from perfsuite.schemas.comparability import comparability_key, flat_settings, key_settings
from perfsuite.schemas.headline import case_metric_names
from perfsuite.schemas.samples import metric_samples

DEFAULT_THRESHOLD = 0.02
DEFAULT_ALPHA = 0.05
FASTER, SLOWER, NO_CHANGE = "faster", "slower", "no significant change"
NOT_TESTED = "not tested (one sample)"  # a single value on a side (power, energy): no test possible
MIXED = "mixed"
BETWEEN_RUNS, WITHIN_RUN = "between runs", "within run"
TESTS = {BETWEEN_RUNS: "Welch's t over run values", WITHIN_RUN: "Mann-Whitney U over the calls of one run a side"}


class NotComparable(ValueError):
    """Runs of different comparability keys; ``fields`` names each difference."""

    def __init__(self, fields: list[str]):
        self.fields = fields
        super().__init__("runs are not comparable: different " + "; ".join(fields))


@dataclass
class MetricComparison:
    case: str
    metric: str
    unit: str
    higher_is_better: bool
    median_a: float  # between runs: the median of A's run values; within run: of A's calls
    median_b: float
    ratio: float  # median(B) / median(A)
    ratio_ci_low: float
    ratio_ci_high: float
    p_value: float | None  # None: too few values on a side, no test possible
    n_a: int  # runs (between runs) or calls (within run)
    n_b: int
    verdict: str
    headline: bool = False
    basis: str = BETWEEN_RUNS


@dataclass
class Comparison:
    run_a: str  # the newest run of each side
    run_b: str
    workload: str
    threshold: float
    alpha: float
    verdict: str
    basis: str = BETWEEN_RUNS
    test: str = TESTS[BETWEEN_RUNS]
    runs_a: list[str] = field(default_factory=list)
    runs_b: list[str] = field(default_factory=list)
    comparability_key: str = ""
    key_settings: dict = field(default_factory=dict)
    metrics: list[MetricComparison] = field(default_factory=list)
    environment_differences: list[dict] = field(default_factory=list)
    no_ratio: list[str] = field(default_factory=list)  # "case metric" left out: baseline median zero

    def to_dict(self) -> dict:
        return asdict(self)

    @property
    def note(self) -> str:
        """What the figures are: over runs, or over the calls of one run a side (and why)."""
        if self.basis == BETWEEN_RUNS:
            return (
                f"between runs: {len(self.runs_a)} runs of A against {len(self.runs_b)} of B, one value per run; "
                f"p from {self.test}, 95% CI of B/A bootstrapped over runs"
            )
        few = "A" if len(self.runs_a) < 2 else "B"
        return (
            f"within run: side {few} has one run, so the CI and p are over the calls of run "
            f"{self.run_a[:8]} against those of run {self.run_b[:8]}, not over runs; repeat the runs "
            "(perfsuite run --repeat N) for a test between runs"
        )


def key_basis(record: dict) -> dict[str, Any]:
    """The settings the comparability key is made of, flattened: ``param.m`` per parameter."""
    return flat_settings(key_settings(record))


_MISSING = object()


def key_differences(a: dict, b: dict) -> list[str]:
    """Each comparability setting that differs, as ``setting: A value vs B value``."""
    ba, bb = key_basis(a), key_basis(b)
    out = []
    for name in list(dict.fromkeys([*ba, *bb])):
        va, vb = ba.get(name, _MISSING), bb.get(name, _MISSING)
        if va != vb:
            show = lambda v: "(absent)" if v is _MISSING else repr(v)
            out.append(f"{name}: {show(va)} vs {show(vb)}")
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


def has_ratio(baseline: list[float]) -> bool:
    """A ratio against ``baseline`` exists: its median is not zero (bus bandwidth at world size one
    is zero by nccl-tests' formula; a count of errors is zero on a good run). Such a metric is left
    out of a comparison, never a division by zero."""
    return bool(baseline) and float(np.median(baseline)) != 0.0


def _check_side(records: list[dict], side: str) -> None:
    if not records:
        raise ValueError(f"side {side} has no run")
    for record in records:
        if record["status"] != "success":
            raise ValueError(f"run {record['run_id']} has status {record['status']}: nothing measured to compare")


def _newest(records: list[dict]) -> dict:
    return max(records, key=lambda r: (r["started_at"], r["run_id"]))


def _metrics(record: dict) -> dict[tuple[str, str], dict]:
    return {(m["case"], m["name"]): m for m in record["metrics"]}


def _between_runs(
    a: list[dict], b: list[dict], heads: dict[str, str], threshold: float, alpha: float, no_ratio: list[str]
) -> list[MetricComparison]:
    by_a, by_b = [_metrics(r) for r in a], [_metrics(r) for r in b]
    rows = []
    for case, name in _metrics(_newest(a)):
        if not all((case, name) in m for m in by_a + by_b):
            continue
        va = [m[(case, name)]["value"] for m in by_a]
        vb = [m[(case, name)]["value"] for m in by_b]
        if not has_ratio(va):
            no_ratio.append(f"{case} {name}")
            continue
        first = by_a[0][(case, name)]
        ratio, low, high = stats.ratio_of_medians_ci(va, vb)
        p = stats.welch_t(va, vb)
        rows.append(
            MetricComparison(
                case=case,
                metric=name,
                unit=first["unit"],
                higher_is_better=first["higher_is_better"],
                median_a=float(np.median(va)),
                median_b=float(np.median(vb)),
                ratio=ratio,
                ratio_ci_low=low,
                ratio_ci_high=high,
                p_value=p,
                n_a=len(va),
                n_b=len(vb),
                verdict=metric_verdict(ratio, low, high, p, first["higher_is_better"], threshold, alpha),
                headline=heads.get(case) == name,
                basis=BETWEEN_RUNS,
            )
        )
    return rows


def _within_run(
    a: dict, b: dict, heads: dict[str, str], threshold: float, alpha: float, no_ratio: list[str]
) -> list[MetricComparison]:
    by_b = _metrics(b)
    rows = []
    for ma in a["metrics"]:
        mb = by_b.get((ma["case"], ma["name"]))
        if mb is None:
            continue
        sa, sb = metric_samples(ma, a["metrics"]), metric_samples(mb, b["metrics"])
        if not sb:
            continue
        if not has_ratio(sa):
            no_ratio.append(f"{ma['case']} {ma['name']}")
            continue
        ratio, low, high = stats.ratio_of_medians_ci(sa, sb)
        p = None
        if len(sa) > 1 and len(sb) > 1:
            _, p = stats.mann_whitney_u(sa, sb)
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
                verdict=metric_verdict(ratio, low, high, p, ma["higher_is_better"], threshold, alpha),
                headline=heads.get(ma["case"]) == ma["name"],
                basis=WITHIN_RUN,
            )
        )
    return rows


def compare_runs(
    a: list[dict], b: list[dict], threshold: float = DEFAULT_THRESHOLD, alpha: float = DEFAULT_ALPHA
) -> Comparison:
    """Compare the runs of side B against those of side A (see the module docstring).

    Raises :class:`NotComparable` where any two runs have different keys, ValueError where a
    side is empty, a run did not succeed, or the sides share no metric."""
    _check_side(a, "A")
    _check_side(b, "B")
    reference = _newest(a)
    for record in [*a, *b]:
        diffs = key_differences(reference, record)
        if diffs:
            raise NotComparable(diffs)
    newest_a, newest_b = reference, _newest(b)
    heads = case_metric_names(newest_a)
    no_ratio: list[str] = []
    if len(a) >= 2 and len(b) >= 2:
        basis, rows = BETWEEN_RUNS, _between_runs(a, b, heads, threshold, alpha, no_ratio)
    else:
        basis, rows = WITHIN_RUN, _within_run(newest_a, newest_b, heads, threshold, alpha, no_ratio)
    if not rows:
        raise ValueError(
            f"runs {newest_a['run_id'][:8]} and {newest_b['run_id'][:8]} share no metric with samples "
            "and a baseline other than zero"
        )
    verdicts = {r.verdict for r in rows if r.headline} or {r.verdict for r in rows}
    overall = verdicts.pop() if len(verdicts) == 1 else MIXED
    return Comparison(
        run_a=newest_a["run_id"],
        run_b=newest_b["run_id"],
        workload=newest_a["workload"]["name"],
        threshold=threshold,
        alpha=alpha,
        verdict=overall,
        basis=basis,
        test=TESTS[basis],
        runs_a=[r["run_id"] for r in a],
        runs_b=[r["run_id"] for r in b],
        comparability_key=comparability_key(newest_a),
        key_settings=key_settings(newest_a),
        metrics=rows,
        environment_differences=environment_differences(newest_a, newest_b),
        no_ratio=no_ratio,
    )


def compare_records(a: dict, b: dict, threshold: float = DEFAULT_THRESHOLD, alpha: float = DEFAULT_ALPHA) -> Comparison:
    """Compare one run B against one run A: within-run figures (see :func:`compare_runs`)."""
    return compare_runs([a], [b], threshold=threshold, alpha=alpha)
