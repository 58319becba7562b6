"""Request-rate and concurrency sweeps of ``inference.serving``, and the search of the highest
rate within the SLOs (``find_peak``).

A step sends ``requests`` prompts at one load (an open-loop rate or a closed-loop concurrency)
and is judged as LoadGen judges a run, by rules stated in advance:

- VALID when its failed requests stay within the error budget, the client kept to its schedule
  (send lag p99 under ``MAX_SEND_LAG_MS``) and the offered rate is within the client's measured
  capacity; otherwise INVALID with each reason;
- within the SLO when the share of requests that met every latency objective (SLO attainment)
  reaches the goodput target.

``find_peak`` doubles the rate from its start while a step is VALID and within the SLO (halves
while not), then bisects between the highest good rate and the lowest bad one, in at most
``steps`` steps; every step is recorded, and the peak is the highest good rate.

A sweep is recorded as a case of its own (its goodput at the SLOs, the headline, and the load of
its best step), then one case per step, and a check that some step was VALID.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from perfsuite import Check
from perfsuite.workloads.inference.serving import accuracy
from perfsuite.workloads.inference.serving.metrics import SLO, summarize

if TYPE_CHECKING:  # pragma: no cover - typing only
    from perfsuite import RunContext

MAX_SEND_LAG_MS = 50.0  # a client this late at p99 no longer offers the rate it was asked for


@dataclass(frozen=True)
class StepRules:
    slo: SLO
    goodput_target: float  # least SLO attainment of a step within the SLO
    error_budget: float  # most failed requests, as a fraction of those sent
    client_capacity_rps: float | None  # the client's measured streamed requests/s (None: not measured)
    client_rate_check: dict | None = None  # capacity.rate_check at the step's rate: judges it in place of the above


def judge(mode: str, load: float, results: list, rules: StepRules, energy_j: float | None) -> dict:
    """One step's row: its figures, verdict and reasons (JSON-ready)."""
    s = summarize(results, rules.slo, len(results) / load if mode == "rate" and load > 0 else None)
    reasons = []
    failed = s["errors"]["count"]
    if s["requests"] and failed / s["requests"] > rules.error_budget:
        by = ", ".join(f"{k} {v}" for k, v in s["errors"]["by_reason"].items())
        reasons.append(
            f"{failed} of {s['requests']} requests failed ({by}): over the error budget of {rules.error_budget:.1%}"
        )
    lag = s["send_lag_ms"].get("p99")
    if mode in ("rate", "trace") and lag is not None and lag > MAX_SEND_LAG_MS:  # a schedule to keep
        reasons.append(
            f"the client fell behind its schedule: send lag p99 {lag:.1f} ms (more than {MAX_SEND_LAG_MS:g} ms)"
        )
    offered = load if mode == "rate" else None
    check = rules.client_rate_check
    if offered is not None and check is not None:
        if check.get("held") is False:
            reasons.append(check["why"])
    elif offered is not None and rules.client_capacity_rps is not None and offered > rules.client_capacity_rps:
        reasons.append(
            f"the offered rate {offered:g}/s exceeds the client's measured capacity {rules.client_capacity_rps:.0f}/s"
        )
    row: dict[str, Any] = {
        "mode": mode,
        "load": load,
        "offered_rps": offered,
        "valid": not reasons,
        "invalid_reasons": reasons,
        "within_slo": not reasons and s["slo_attainment"] >= rules.goodput_target,
        **s,
    }
    if check is not None:
        row["client_rate_check"] = check
    if energy_j is not None and s["completed"]:
        row["energy"] = {
            "energy_j": energy_j,
            "power_w": energy_j / s["duration_s"] if s["duration_s"] else None,
            "per_request_j": energy_j / s["completed"],
            "per_output_token_j": energy_j / s["output_tokens"] if s["output_tokens"] else None,
        }
    return row


def find_peak(run_rate: Callable[[float], dict], start: float, steps: int) -> dict:
    """The highest rate whose step is VALID and within the SLO; ``run_rate(rate)`` measures one
    step and returns its row."""
    rows: list[dict] = []
    good: float | None = None
    bad: float | None = None
    rate = start
    for _ in range(steps):
        row = run_rate(rate)
        rows.append(row)
        if row["within_slo"]:
            good = rate if good is None else max(good, rate)
        else:
            bad = rate if bad is None else min(bad, rate)
        if bad is None:
            rate *= 2
        elif good is None:
            rate /= 2
        else:
            rate = (good + bad) / 2
    return {"start_rps": start, "max_steps": steps, "steps": rows, "peak_rps": good, "lowest_failing_rps": bad}


def record_step(ctx: "RunContext", case: str, row: dict) -> None:
    """One step's figures as metrics of its own case (goodput, throughput, latency percentiles,
    failures, energy where measured)."""
    add = ctx.add_metric
    add(case, "goodput_rps", "requests/s", [row["goodput_rps"]], higher_is_better=True)
    add(case, "goodput_tokens_per_s", "tokens/s", [row["goodput_tokens_per_s"]], higher_is_better=True)
    add(case, "completed_rps", "requests/s", [row["completed_rps"]], higher_is_better=True)
    add(case, "output_tokens_per_s", "tokens/s", [row["output_tokens_per_s"]], higher_is_better=True)
    add(case, "slo_attainment", "fraction", [row["slo_attainment"]], higher_is_better=True)
    for key, label in (("ttft_ms", "ttft"), ("tpot_ms", "tpot"), ("itl_ms", "itl"), ("e2e_ms", "e2e")):
        for pct in ("p50", "p99"):
            if pct in row[key]:
                add(case, f"{label}_{pct}_ms", "ms", [row[key][pct]], higher_is_better=False)
    add(case, "failed_requests", "requests", [float(row["errors"]["count"])], higher_is_better=False)
    if row.get("accuracy"):  # a check beside the speed, never the ranked figure
        add(case, "accuracy", "fraction", [row["accuracy"]["score"]], higher_is_better=True)
    _record_curve(ctx, case, row.get("curve") or {})
    from perfsuite.workloads.inference.serving.engine_report import record_engine

    record_engine(ctx, case, row)  # the engine's own figures and the step's prefix-cache hit rate
    energy = row.get("energy")
    if energy:
        add(case, "energy_per_request_j", "J/request", [energy["per_request_j"]], higher_is_better=False)
        if energy["per_output_token_j"]:
            add(case, "energy_per_output_token_j", "J/token", [energy["per_output_token_j"]], higher_is_better=False)


def _record_curve(ctx: "RunContext", case: str, point: dict) -> None:
    """The step's place in InferenceMAX's view (``serving.curve``) as metrics, so that ``export``
    carries it: tokens/s per GPU and per user, cost and energy per output token where known."""
    figures = {
        "output_tokens_per_s_per_gpu": ("tokens/s/GPU", True),
        "output_tokens_per_s_per_user": ("tokens/s/user", True),
        "cost_per_million_output_tokens": (f"{point.get('currency')}/million output tokens", False),
        "joules_per_output_token": ("J/token", False),
    }
    for name, (unit, better) in figures.items():
        if point.get(name):
            ctx.add_metric(case, name, unit, [point[name]], higher_is_better=better)


def record_sweep(
    ctx: "RunContext", case: str, rows: list[dict], best: dict | None, load_name: str, load_unit: str
) -> None:
    """The sweep's own case (goodput at its best step within the SLOs, its headline, and that
    step's load), then every step's case; a check that a step was VALID."""
    valid = [r for r in rows if r["valid"]]
    # the sweep's own case first: its goodput at the SLOs is the headline, its steps follow
    if best is not None:
        ctx.add_metric(case, "goodput_at_slo_rps", "requests/s", [best["goodput_rps"]], higher_is_better=True)
        ctx.add_metric(case, load_name, load_unit, [best["load"]], higher_is_better=True)
        ctx.add_metric(
            case, "goodput_at_slo_tokens_per_s", "tokens/s", [best["goodput_tokens_per_s"]], higher_is_better=True
        )
    for row in rows:
        record_step(ctx, row["case"], row)
    scored = accuracy.check(case, rows)
    if scored is not None:
        ctx.add_check(scored)
    ctx.add_check(
        Check(
            label=f"{case}: a VALID step",
            passed=bool(valid),
            method="failed requests within the error budget, the client on schedule and within its measured capacity",
            detail=f"{len(valid)} of {len(rows)} steps VALID; "
            f"{sum(r['within_slo'] for r in rows)} within the SLOs"
            + "".join(
                f"; {r['mode']} {r['load']:g}: " + "; ".join(r["invalid_reasons"]) for r in rows if not r["valid"]
            ),
        )
    )
