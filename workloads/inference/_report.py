"""The table ``perfsuite show`` prints for an inference record: one row per LoadGen scenario
with its verdict and reasons, the headline rates and percentiles, accuracy, and where
LoadGen's own logs are. Cells are plain text (rich Text), never markup: reasons come from
LoadGen and may hold brackets."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from perfsuite.workloads.inference._settings import SCENARIOS


def _ms(summary: Mapping[str, Any], kind: str, pct: str) -> str:
    ns = summary.get("latency_ns", {}).get(kind, {}).get(pct)
    return "-" if ns is None else f"{ns / 1e6:.2f}"


def render_table(record: Mapping[str, Any]) -> Any:
    """A rich Table of an inference record's scenarios, or None when it has none."""
    inf = (record.get("details") or {}).get("inference") or {}
    scenarios = inf.get("scenarios") or {}
    if not scenarios:
        return None
    from rich.table import Table
    from rich.text import Text

    t = Table(title=Text(f"LoadGen {inf.get('loadgen_version')}  logs: {inf.get('artifact_dir')}"))
    for name in (
        "scenario",
        "result",
        "samples/s",
        "tokens/s",
        "p90 latency (ms)",
        "p99 latency (ms)",
        "p99 TTFT (ms)",
        "p99 TPOT (ms)",
        "accuracy",
        "peak valid QPS",
    ):
        t.add_column(name, justify="left" if name in ("scenario", "result") else "right")
    order = {name: i for i, name in enumerate(SCENARIOS)}
    for scenario, out in sorted(scenarios.items(), key=lambda kv: order.get(kv[0], len(order))):
        perf = out.get("performance") or {}
        s = perf.get("summary") or {}
        rates = s.get("rates", {})
        samples = rates.get("completed_samples_per_s") or rates.get("samples_per_s") or rates.get("qps_with_overhead")
        tokens = rates.get("tokens_per_s") or rates.get("tokens_per_s_with_overhead")
        if s:
            verdict = "VALID" if s.get("valid") else "INVALID: " + "; ".join(s.get("invalid_reasons", []))
            if s.get("next_steps"):  # records before the next steps have none
                verdict += "; next step: " + "; ".join(s["next_steps"])
        else:
            verdict = "-"
        acc = out.get("accuracy")
        acc_text = "-" if acc is None else f"{acc['score']:.3f} (>= {acc['threshold']:g})"
        peak = (out.get("find_peak") or {}).get("peak_valid_qps")
        t.add_row(
            *(
                Text(c)
                for c in (
                    scenario,
                    verdict,
                    "-" if samples is None else f"{samples:.2f}",
                    "-" if tokens is None else f"{tokens:.1f}",
                    _ms(s, "latency", "p90"),
                    _ms(s, "latency", "p99"),
                    _ms(s, "ttft", "p99"),
                    _ms(s, "tpot", "p99"),
                    acc_text,
                    "-" if peak is None else f"{peak:g}",
                )
            )
        )
    return t
