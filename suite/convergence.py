"""Reference convergence points (RCPs): MLPerf Training's check that a run did not converge
in fewer samples than the reference runs of its benchmark allow at its global batch.

A larger batch lets a system take fewer, wider steps; it must not let it reach the target on
fewer samples than the reference's seeds needed, or its time to target would come from an
easier optimisation problem (a tuned-away warm-up, a lucky schedule) rather than from speed.
MLPerf ships RCPs built from its reference implementation's runs; perfsuite ships its own,
built from its filed seeds (the records under ``submissions/``) and kept as data beside this
module (``convergence_points.json``, rebuilt with ``python -m perfsuite.convergence
build submissions/ > suite/convergence_points.json``).

A benchmark is a workload with the parameters that define its problem (model, data, target);
the hyperparameters a submitter may tune (:data:`TUNABLE`: batch, learning rate and schedule,
optimizer, precision, compile and timing settings) are not part of it, nor is the workload's
version (its versions since the language's ``symbols`` train the same model on the same data).
A reference point is the samples to target of every filed seed at one global batch. The check
is MLPerf's: the lowest mean a set of ``n`` runs may show and still not be significantly faster
than the reference (a one-sided Welch t-test at :data:`ALPHA`, the runs assumed to spread as
the reference's do); a run set below it fails. Between two reference batches the point's mean
and spread are interpolated linearly; above the largest, the largest is used (samples to
converge do not fall as the batch grows); below the smallest there is no verdict.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import statistics
import sys
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

POINTS_FILE = Path(__file__).with_name("convergence_points.json")
ENV_POINTS = "PERFSUITE_CONVERGENCE_POINTS"  # another points file (a test's, a round's own)
SCHEMA = 1
ALPHA = 0.05
SAMPLES_METRIC = "samples_to_target"
# Settings a submitter may choose: they steer how a run converges, not what it converges on.
TUNABLE = frozenset(
    {
        "global_batch",
        "lr",
        "weight_decay",
        "warmup_steps",
        "schedule",
        "grad_clip",
        "optimizer",
        "precision",
        "compile",
        "eval_every",
        "max_steps",
        "time_budget_s",
        "pipeline",
        "loader_workers",
        "untimed_init",
    }
)
# One-sided 95% quantiles of Student's t by degrees of freedom (beyond the table: the normal's).
_T95 = {1: 6.314, 2: 2.920, 3: 2.353, 4: 2.132, 5: 2.015, 6: 1.943, 7: 1.895, 8: 1.860, 9: 1.833, 10: 1.812}
_T95.update({11: 1.796, 12: 1.782, 13: 1.771, 14: 1.761, 15: 1.753, 16: 1.746, 17: 1.740, 18: 1.734})
_T95.update({19: 1.729, 20: 1.725, 25: 1.708, 30: 1.697, 40: 1.684, 60: 1.671, 120: 1.658})


class PointsError(ValueError):
    """A points file that cannot be read or does not follow its schema (one line)."""


# What a run is for, not what it converges on: only time-to-target runs (goal "target") have samples
# to target, and the points of records filed before the setting existed keep their benchmark.
NOT_THE_PROBLEM = frozenset({"goal"})


def benchmark(params: Mapping[str, Any]) -> dict[str, Any]:
    """The parameters that define a training benchmark's problem (all but :data:`TUNABLE` and
    :data:`NOT_THE_PROBLEM`; callers leave out the workload's output parameters, where a run saves
    what it leaves behind)."""
    return {k: v for k, v in sorted(params.items()) if k not in TUNABLE and k not in NOT_THE_PROBLEM}


def benchmark_id(workload: str, params: Mapping[str, Any]) -> str:
    text = json.dumps(benchmark(params), sort_keys=True, separators=(",", ":"))
    return f"{workload}:{hashlib.sha256(text.encode()).hexdigest()[:16]}"


def _samples(record: Mapping[str, Any]) -> float | None:
    for m in record.get("metrics") or ():
        if m.get("name") == SAMPLES_METRIC:
            return float(m["value"])
    return None


def build(records: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """Reference points from filed records: every successful, verified training run with a
    samples-to-target figure, grouped by benchmark and global batch."""
    groups: dict[str, dict[str, Any]] = {}
    for r in records:
        samples = _samples(r)
        if samples is None or r.get("status") != "success":
            continue
        if (r.get("verification") or {}).get("status") != "passed":
            continue
        name, outputs = r["workload"]["name"], r["workload"].get("output_params") or ()
        params = {k: v for k, v in (r["workload"].get("params") or {}).items() if k not in outputs}
        g = groups.setdefault(
            benchmark_id(name, params), {"workload": name, "benchmark": benchmark(params), "batches": {}}
        )
        runs = g["batches"].setdefault(int(params["global_batch"]), [])
        runs.append({"run_id": r["run_id"], "seed": r["controls"].get("seed"), "samples": samples})
    out = []
    for bid, g in sorted(groups.items()):
        points = []
        for batch, runs in sorted(g["batches"].items()):
            values = [x["samples"] for x in runs]
            points.append(
                {
                    "global_batch": batch,
                    "runs": len(values),
                    "mean_samples": statistics.fmean(values),
                    "stdev_samples": statistics.stdev(values) if len(values) > 1 else 0.0,
                    "samples_to_target": sorted(values),
                    "run_ids": sorted(x["run_id"] for x in runs),
                }
            )
        out.append({"id": bid, "workload": g["workload"], "benchmark": g["benchmark"], "points": points})
    return {"schema": SCHEMA, "alpha": ALPHA, "benchmarks": out}


def load(path: Path | None = None) -> dict[str, Any]:
    """The points file: ``path``, else ``PERFSUITE_CONVERGENCE_POINTS``, else the shipped one."""
    path = path or Path(os.environ.get(ENV_POINTS) or POINTS_FILE)
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise PointsError(f"reference convergence points {path}: {exc}") from None
    if not isinstance(data, dict) or data.get("schema") != SCHEMA or not isinstance(data.get("benchmarks"), list):
        raise PointsError(f"reference convergence points {path}: not a points file of schema {SCHEMA}")
    return data


def t95(df: float) -> float:
    """Student's t one-sided 95% quantile at ``df`` degrees of freedom (the next smaller tabled)."""
    if df < 1:
        return _T95[1]
    below = [k for k in _T95 if k <= df]
    return _T95[max(below)] if df <= 120 else 1.645


def min_mean(mean: float, stdev: float, n_ref: int, n_runs: int) -> float:
    """The lowest mean samples-to-target that ``n_runs`` runs may show against a reference of
    ``n_ref`` runs (mean, stdev) without being significantly faster (one-sided Welch t-test at
    ALPHA, the runs spreading as the reference's)."""
    if n_ref < 2 or stdev <= 0:
        return mean
    a, b = stdev**2 / n_ref, stdev**2 / n_runs
    df = (a + b) ** 2 / (a**2 / (n_ref - 1) + (b**2 / (n_runs - 1) if n_runs > 1 else 0.0))
    return mean - t95(df) * math.sqrt(a + b)


def _reference_at(points: Sequence[Mapping[str, Any]], batch: int) -> tuple[dict[str, Any] | None, str]:
    pts = sorted(points, key=lambda p: p["global_batch"])
    if not pts or batch < pts[0]["global_batch"]:
        return None, f"no reference point at or below global batch {batch}"
    for p in pts:
        if p["global_batch"] == batch:
            return dict(p), f"the reference point at global batch {batch}"
    if batch > pts[-1]["global_batch"]:
        top = pts[-1]
        return dict(top), f"the largest reference batch, {top['global_batch']} (samples do not fall as the batch grows)"
    lo = max((p for p in pts if p["global_batch"] < batch), key=lambda p: p["global_batch"])
    hi = min((p for p in pts if p["global_batch"] > batch), key=lambda p: p["global_batch"])
    f = (batch - lo["global_batch"]) / (hi["global_batch"] - lo["global_batch"])
    return {
        "global_batch": batch,
        "runs": min(lo["runs"], hi["runs"]),
        "mean_samples": lo["mean_samples"] + f * (hi["mean_samples"] - lo["mean_samples"]),
        "stdev_samples": lo["stdev_samples"] + f * (hi["stdev_samples"] - lo["stdev_samples"]),
    }, f"interpolated between global batches {lo['global_batch']} and {hi['global_batch']}"


def verdict(
    workload: str, params: Mapping[str, Any], samples: Sequence[float], points: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """The check of one run (``samples`` of one value) or of a set of seeds (their olympic mean
    from three runs on, else their mean): ``status`` passed, failed or unchecked (no reference
    for this benchmark or batch), with the figures that decided it."""
    points = points if points is not None else load()
    bid = benchmark_id(workload, params)
    entry = next((b for b in points["benchmarks"] if b.get("id") == bid), None)
    batch = int(params["global_batch"])
    if entry is None:
        return {"status": "unchecked", "benchmark": bid, "reason": "no reference points for this benchmark"}
    ref, basis = _reference_at(entry["points"], batch)
    if ref is None:
        return {"status": "unchecked", "benchmark": bid, "reason": basis}
    values = sorted(float(v) for v in samples)
    mean = statistics.fmean(values[1:-1] if len(values) >= 3 else values)
    floor = min_mean(ref["mean_samples"], ref["stdev_samples"], int(ref["runs"]), len(values))
    passed = mean >= floor
    return {
        "status": "passed" if passed else "failed",
        "benchmark": bid,
        "global_batch": batch,
        "runs": len(values),
        "samples_to_target": mean,
        "min_samples": floor,
        "reference": {k: ref[k] for k in ("global_batch", "runs", "mean_samples", "stdev_samples")},
        "basis": basis,
        "note": (
            f"{mean:,.0f} samples to target against at least {floor:,.0f} allowed ({basis})"
            if passed
            else f"converged in {mean:,.0f} samples, fewer than the {floor:,.0f} the reference allows ({basis})"
        ),
    }


def _records_under(root: Path) -> list[dict]:
    out = []
    for path in sorted(root.rglob("*.json")):
        if "results" not in path.parts:
            continue
        record = json.loads(path.read_text())
        if str((record.get("workload") or {}).get("name", "")).startswith("training."):
            out.append(record)
    return out


def main(argv: list[str] | None = None) -> int:
    """``build DIR``: the points file of the training records under DIR, on stdout."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 2 or args[0] != "build":
        print("usage: python -m perfsuite.convergence build SUBMISSIONS_DIR", file=sys.stderr)
        return 2
    root = Path(args[1])
    if not root.is_dir():
        print(f"convergence: {root} is not a folder", file=sys.stderr)
        return 2
    print(json.dumps(build(_records_under(root)), indent=1, sort_keys=True))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
