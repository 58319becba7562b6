"""What ``perfsuite show`` prints for an ``inference.serving`` record, and the record's shape
that the leaderboard reads to draw latency against throughput.

``details["serving"]`` (all times in ms, rates per second):

- ``endpoint``: ``base_url``, ``model``, ``api``, ``started_by_suite`` (with ``server``: argv,
  log file name, seconds to ready, the stop) or a ``note`` that it ran already; ``engine``
  (``name``, ``version``); ``self_report`` (what its endpoints answered).
- ``client``: ``libraries``, ``processes``, ``event_loop``, ``capacity`` (``requests_per_s``,
  ``idle_ttft_p50_ms``, ``chunks_per_request``, ``method``).
- ``prompts``, ``slo`` (``ttft_ms``, ``tpot_ms``, ``e2e_ms`` where set, ``goodput_target``,
  ``error_budget``), ``warm_up``, ``energy`` (how energy was measured, or why not).
- ``loadgen``: ``scenarios`` -> name -> ``performance``: ``valid``, ``invalid_reasons``,
  ``summary`` (LoadGen's, parsed), ``client`` (the step figures below, for LoadGen's requests).
- ``rate_sweep`` / ``concurrency_sweep``: ``steps``, each a step row: ``mode`` ("rate" or
  "concurrency"), ``load``, ``offered_rps``, ``valid``, ``invalid_reasons``, ``within_slo``,
  ``completed_rps``, ``output_tokens_per_s``, ``goodput_rps``, ``goodput_tokens_per_s``,
  ``slo_attainment``, the span the rates divide by and why (``rate_span_s``, ``rate_span``),
  ``kept_schedule``, ``steady_state`` and ``steady_window`` (what was delivered and offered from
  the first request's end to the last arrival, ``serving.metrics.rate_span``; a step of an older
  record is judged from its other fields, ``perfsuite.serving_steady``), ``ttft_ms`` / ``tpot_ms`` /
  ``itl_ms`` / ``e2e_ms`` / ``send_lag_ms``
  (each ``{p50, p90, p99, mean, min, max}``), ``errors`` (``count``, ``by_reason``,
  ``examples``), ``energy`` (``per_request_j``, ``per_output_token_j``, ``power_w``) where
  measured, ``requests_file`` (every request's row, JSONL, beside the record). The rate sweep
  adds ``peak_rps`` and, with find_peak, ``find_peak`` (``peak_rps``, ``lowest_failing_rps``).
  Every step also states ``traffic`` (``shape``: single_turn, trace, shared_prefix or
  multi_turn, with the shape's parameters) and ``prefix_cache`` (``hit_rate``, None where the
  engine reports no cached tokens, and its ``source``); a multi-turn step adds ``sessions``
  (``per_turn``, ``per_session``). Each step's ``curve`` is its place in InferenceMAX's view
  (``serving.curve``: ``output_tokens_per_s_per_gpu``, ``output_tokens_per_s_per_user``,
  ``ttft_p50_ms``, ``cost_per_million_output_tokens`` and ``currency``,
  ``joules_per_output_token`` and ``power_source``), ``server_power`` the NVML power sampled on
  the server's GPUs where it was.
- ``curve_basis``: what the curve divides by and prices with (``gpus``, ``gpus_source``,
  ``gpus_assumed``, the definitions, price, currency, how power is known).
- ``traffic``: the run's traffic shape; ``trace_replay``: the trace (``file``, ``sha256``,
  ``requests``, ``time_scale``, spans) and its one step in ``steps``.

:func:`curve` flattens the steps into the points a latency-throughput chart draws.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from perfsuite.serving_steady import no_steady_state

CURVE_FIELDS = (
    "mode",
    "load",
    "offered_rps",
    "completed_rps",
    "output_tokens_per_s",
    "goodput_rps",
    "slo_attainment",
    "valid",
    "within_slo",
    "kept_schedule",  # False: the server fell behind the offered rate, which the rates then are not
)


# Each step's place in InferenceMAX's view (``serving.curve``), carried by every point.
INFERENCEMAX_FIELDS = (
    "gpus",
    "output_tokens_per_s_per_gpu",
    "output_tokens_per_s_per_user",
    "total_tokens_per_s_per_gpu",
    "cost_per_million_output_tokens",
    "currency",
    "joules_per_output_token",
    "power_source",
)


def curve(record: Mapping[str, Any]) -> dict:
    """The latency-throughput points of a record's sweeps, with the SLO lines:
    ``{"slo": {...}, "points": [{mode, load, offered_rps, completed_rps, output_tokens_per_s,
    goodput_rps, slo_attainment, valid, within_slo, ttft_p50_ms, ttft_p99_ms, tpot_p50_ms,
    tpot_p99_ms, itl_p50_ms, e2e_p99_ms, no_steady_state}, ...]}`` (points in the order measured;
    ``no_steady_state``: why a rate step's throughput is not a steady-state figure, else None,
    ``perfsuite.serving_steady``, for records of every version)."""
    serving = (record.get("details") or {}).get("serving") or {}
    points = []
    for key in ("rate_sweep", "concurrency_sweep", "trace_replay"):
        for row in (serving.get(key) or {}).get("steps", []):
            point = {f: row.get(f) for f in CURVE_FIELDS}
            point["traffic_shape"] = (row.get("traffic") or {}).get("shape", "single_turn")
            point["no_steady_state"] = no_steady_state(row)  # why its rates are no steady-state figure
            point["prefix_cache_hit_rate"] = (row.get("prefix_cache") or {}).get("hit_rate")
            for kind in ("ttft", "tpot", "itl", "e2e"):
                for pct in ("p50", "p99"):
                    point[f"{kind}_{pct}_ms"] = (row.get(f"{kind}_ms") or {}).get(pct)
            inferencemax = row.get("curve") or {}
            for f in INFERENCEMAX_FIELDS:
                point[f] = inferencemax.get(f)
            points.append(point)
    return {"slo": serving.get("slo") or {}, "basis": serving.get("curve_basis") or {}, "points": points}


def _f(value: Any, fmt: str = ".2f") -> str:
    return "-" if value is None else format(value, fmt)


def render(record: Mapping[str, Any]) -> Any:
    """rich renderables for the record (plain-text cells: reasons come from servers)."""
    serving = (record.get("details") or {}).get("serving")
    if not serving:
        return None
    from rich.console import Group
    from rich.table import Table
    from rich.text import Text

    ep = serving.get("endpoint") or {}
    engine = ep.get("engine") or {}
    cap = (serving.get("client") or {}).get("capacity") or {}
    slo = serving.get("slo") or {}
    lines = [
        Text(
            f"endpoint {ep.get('base_url')} model {ep.get('model')} ({ep.get('api')}); "
            f"{'started by the suite' if ep.get('started_by_suite') else 'already running'}; engine "
            f"{engine.get('name')} {engine.get('version') or ''}".rstrip()
        ),
        Text(
            f"SLOs: TTFT {slo.get('ttft_ms')} ms, TPOT {slo.get('tpot_ms')} ms"
            + (f", E2E {slo['e2e_ms']} ms" if slo.get("e2e_ms") else "")
            + f"; goodput target {slo.get('goodput_target')}, error budget {slo.get('error_budget')}"
        ),
        Text(
            f"client: {_f(cap.get('requests_per_s'), '.0f')} streamed requests/s against the null server, "
            f"idle TTFT p50 {_f(cap.get('idle_ttft_p50_ms'))} ms"
            if cap
            else "client capacity: not measured"
        ),
    ]
    parts: list[Any] = list(lines)
    scenarios = (serving.get("loadgen") or {}).get("scenarios") or {}
    if scenarios:
        t = Table(title=Text(f"LoadGen {serving['loadgen'].get('loadgen_version')} against the endpoint"))
        for col in (
            "scenario",
            "result",
            "tokens/s",
            "samples/s",
            "TTFT p99",
            "TPOT p99",
            "latency p90",
            "client TTFT p50",
            "failed",
        ):
            t.add_column(col, justify="left" if col in ("scenario", "result") else "right")
        for name, out in scenarios.items():
            perf = out.get("performance") or {}
            s = perf.get("summary") or {}
            rates, lat = s.get("rates", {}), s.get("latency_ns", {})
            client = perf.get("client") or {}
            verdict = "VALID" if perf.get("valid") else "INVALID: " + "; ".join(perf.get("invalid_reasons", []))
            samples = (
                rates.get("completed_samples_per_s") or rates.get("samples_per_s") or rates.get("qps_with_overhead")
            )
            t.add_row(
                *(
                    Text(c)
                    for c in (
                        name,
                        verdict,
                        _f(rates.get("tokens_per_s"), ".1f"),
                        _f(samples),
                        _f((lat.get("ttft") or {}).get("p99", None) and lat["ttft"]["p99"] / 1e6),
                        _f((lat.get("tpot") or {}).get("p99", None) and lat["tpot"]["p99"] / 1e6),
                        _f((lat.get("latency") or {}).get("p90", None) and lat["latency"]["p90"] / 1e6),
                        _f((client.get("ttft_ms") or {}).get("p50")),
                        str((client.get("errors") or {}).get("count", "-")),
                    )
                )
            )
        parts.append(t)
    points = curve(record)["points"]
    if points:
        t = Table(title=Text("latency against throughput (ms; rates per second)"))
        for col in (
            "load",
            "offered",
            "achieved",
            "tokens/s",
            "goodput",
            "in SLO",
            "TTFT p50",
            "TTFT p99",
            "TPOT p50",
            "TPOT p99",
            "ITL p50",
            "E2E p99",
            "cache hit",
            "verdict",
        ):
            t.add_column(col, justify="left" if col in ("load", "verdict") else "right")
        for p in points:
            verdict = ("VALID" if p["valid"] else "INVALID") + (", within SLO" if p["within_slo"] else "")
            verdict += "; no steady state" if p["no_steady_state"] else ""
            t.add_row(
                *(
                    Text(c)
                    for c in (
                        f"{p['mode']} {p['load']:g}"
                        + ("" if p["traffic_shape"] == "single_turn" else f" ({p['traffic_shape']})"),
                        _f(p["offered_rps"]),
                        _f(p["completed_rps"]),
                        _f(p["output_tokens_per_s"], ".1f"),
                        _f(p["goodput_rps"]),
                        _f(p["slo_attainment"], ".0%"),
                        _f(p["ttft_p50_ms"]),
                        _f(p["ttft_p99_ms"]),
                        _f(p["tpot_p50_ms"]),
                        _f(p["tpot_p99_ms"]),
                        _f(p["itl_p50_ms"]),
                        _f(p["e2e_p99_ms"]),
                        _f(p["prefix_cache_hit_rate"], ".0%"),
                        verdict,
                    )
                )
            )
        parts.append(t)
        parts += [
            Text(f"{p['mode']} {p['load']:g}: {p['no_steady_state']}; its throughput is not a steady-state figure")
            for p in points
            if p["no_steady_state"]
        ]
        parts += _per_gpu_table(points, serving.get("curve_basis") or {})
        peak = (serving.get("rate_sweep") or {}).get("peak_rps")
        if peak is not None:
            parts.append(Text(f"peak rate within the SLOs: {peak:g} requests/s"))
    from perfsuite.workloads.inference.serving.engine_report import engine_table

    parts += engine_table(serving)  # the engine's own figures beside the client's, and the cache's state
    return Group(*parts)


def _per_gpu_table(points: list[dict], basis: Mapping[str, Any]) -> list[Any]:
    """InferenceMAX's view of the steps: output tokens/s per GPU against per user, TTFT, cost and
    energy, with what they divide by; nothing for a record made before the curve was kept."""
    from rich.table import Table
    from rich.text import Text

    if not basis or not any(p.get("output_tokens_per_s_per_gpu") is not None for p in points):
        return []
    currency = basis.get("currency") or ""
    t = Table(title=Text("output tokens/s per GPU against output tokens/s per user (InferenceMAX's view)"))
    for col in ("load", "tok/s/user", "tok/s/GPU", "TTFT p50 ms", f"{currency} per M tok".strip(), "J/tok"):
        t.add_column(col, justify="left" if col == "load" else "right")
    for p in points:
        t.add_row(
            *(
                Text(c)
                for c in (
                    f"{p['mode']} {p['load']:g}"
                    + ("" if p["traffic_shape"] == "single_turn" else f" ({p['traffic_shape']})"),
                    _f(p.get("output_tokens_per_s_per_user"), ".1f"),
                    _f(p.get("output_tokens_per_s_per_gpu"), ".1f"),
                    _f(p.get("ttft_p50_ms")),
                    _f(p.get("cost_per_million_output_tokens"), ".4g"),
                    _f(p.get("joules_per_output_token"), ".4g"),
                )
            )
        )
    gpus = f"{basis.get('gpus')} GPU(s) from {basis.get('gpus_source')}"
    lines = [
        t,
        Text(f"per GPU: {gpus}; per user: {basis.get('per_user')}"),
        Text(f"cost: {basis.get('cost')}; energy: {basis.get('power')}"),
    ]
    return lines
