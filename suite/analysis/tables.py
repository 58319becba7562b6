"""Rich tables for records: the summary after a run, the results listing, and ``show``.

Every value taken from a record goes through :func:`perfsuite.text.plain` (via :func:`add_row`):
error text and labels are data, never markup or terminal control.
"""

from __future__ import annotations

from typing import Any

from rich.table import Table
from rich.text import Text

from perfsuite.analysis import figures
from perfsuite.schemas.headline import case_headline
from perfsuite.text import plain


def fmt(v: float | None) -> str:
    if v is None:
        return ""
    a = abs(v)
    if a >= 1000:
        return f"{v:,.0f}"
    if a >= 10:
        return f"{v:.1f}"
    if a >= 0.01:
        return f"{v:.3f}"
    return f"{v:.3g}"


def add_row(table: Table, *cells: Any) -> None:
    """A table row of plain text: record values are never read as markup."""
    table.add_row(*(plain(c) for c in cells))


def _cases(metrics: list[dict]) -> list[str]:
    return list(dict.fromkeys(m["case"] for m in metrics))


def _check_for(record: dict, case: str) -> str:
    checks = [c for c in record["verification"]["checks"] if c["label"] == case]
    if not checks:
        return record["verification"]["status"]
    return "passed" if all(c["passed"] for c in checks) else "FAILED"


def _vs_baseline(record: dict, case: str) -> str:
    """ "1.83x eager": the case's speed-up over the run's baseline case; "baseline" for that one."""
    baseline = (record.get("details") or {}).get("baseline_case")
    if baseline is None:
        return ""
    if case == baseline:
        return "baseline"
    m = next((x for x in record["metrics"] if x["case"] == case and x["name"] == "speedup"), None)
    return f"{m['value']:.2f}x {baseline}" if m else ""


def results_table(records: list[dict]) -> Table:
    t = Table(title="results")
    for col, just in (
        ("workload", "left"),
        ("case", "left"),
        ("value", "right"),
        ("unit", "left"),
        ("95% CI", "right"),
        ("time ms", "right"),
        ("% of ceiling", "right"),
        ("% of spec", "right"),
        ("throttled", "left"),
        ("vs baseline", "right"),
        ("verified", "left"),
        ("status", "left"),
        ("run", "left"),
    ):
        # names and ids are never cut short; long errors fold instead
        t.add_column(col, justify=just, no_wrap=col in ("workload", "case", "run"), overflow="fold")
    for r in records:
        name = r["workload"]["name"]
        if r["status"] != "success" or not r["metrics"]:
            add_row(
                t,
                name,
                "",
                "",
                "",
                "",
                "",
                "",
                "",
                "",
                "",
                r["verification"]["status"],
                f"{r['status']}: {r['error']}" if r["error"] else r["status"],
                r["run_id"][:8],
            )
            continue
        for case in _cases(r["metrics"]):
            m = case_headline(r["metrics"], case, r["workload"].get("primary_metric"))
            time_m = next((x for x in r["metrics"] if x["case"] == case and x["name"] == "time_ms"), None)
            s = m["statistics"]
            ci = f"{fmt(s['ci95_low'])}–{fmt(s['ci95_high'])}" if s else ""
            add_row(
                t,
                name,
                case,
                fmt(m["value"]),
                m["unit"],
                ci,
                fmt(time_m["value"]) if time_m else "",
                figures.ceiling_cell(m),
                figures.spec_cell(r, m),
                figures.throttle_cell(r, case),
                _vs_baseline(r, case),
                _check_for(r, case),
                r["status"],
                r["run_id"][:8],
            )
    return t


def runs_table(rows: list[dict]) -> Table:
    t = Table(title="recorded runs")
    for col in ("run", "started (UTC)", "workload", "v", "device", "status", "verified", "headline", "throttled"):
        t.add_column(col)
    for r in rows:
        if r["status"] != "success":  # a run that did not succeed (or did not verify) has no headline figure
            head = f"{r['status']}: {r['error']}" if r.get("error") else ""
        else:
            head = f"{fmt(r['value'])} {r['unit']} ({r['case']})" if r.get("value") is not None else ""
        started = str(r["started_at"])[:19].replace("T", " ")
        add_row(
            t,
            r["run_id"][:12],
            started,
            r["workload"],
            str(r["version"]),
            r["device"],
            r["status"],
            r["verification"],
            head,
            figures.throttle_summary_cell(r.get("throttle")),
        )
    return t


def show_record(console: Any, record: dict, cls: Any) -> None:
    w = record["workload"]
    env = record["environment"]
    console.print(
        Text.assemble(
            plain(w["name"], style="bold"),
            plain(
                f" v{w['version']}  run {record['run_id']}  status {record['status']}"
                + (f"  error: {record['error']}" if record["error"] else "")
            ),
        )
    )
    console.print(
        plain(
            f"device: {env['measured_device']['name']}  host: {env['host']}  "
            f"launcher: {record['launch']['launcher']} x{record['launch']['world_size']}  "
            f"seed: {record['controls']['seed']}  started: {record['started_at']}"
        )
    )
    console.print(plain(f"params: {w['params']}"))
    if record["metrics"]:
        t = Table(title="metrics")
        for col in (
            "case",
            "metric",
            "median",
            "unit",
            "mean",
            "stdev",
            "min",
            "max",
            "p95",
            "95% CI",
            "n",
            "% of ceiling",
            "% of spec",
        ):
            t.add_column(col)
        for m in record["metrics"]:
            s = m["statistics"] or {}
            add_row(
                t,
                m["case"],
                m["name"],
                fmt(m["value"]),
                m["unit"],
                fmt(s.get("mean")),
                fmt(s.get("stdev")),
                fmt(s.get("min")),
                fmt(s.get("max")),
                fmt(s.get("p95")),
                f"{fmt(s.get('ci95_low'))}–{fmt(s.get('ci95_high'))}" if s else "",
                str(s.get("n", "")),
                figures.ceiling_cell(m, long=True),
                figures.spec_cell(record, m),
            )
        console.print(t)
    for case, summary in ((record.get("details") or {}).get("throttle") or {}).items():
        flag = figures.throttle_cell(record, case)
        console.print(
            plain(
                f"NVML during {case}: {summary['samples']} samples, SM {summary['sm_clock_mhz_min']}"
                f"-{summary['sm_clock_mhz_max']} MHz (median {summary['sm_clock_mhz_median']}), "
                f"max power {summary['power_w_max']} W, clock events: "
                f"{', '.join(summary['clock_events']) or 'none'}" + (f"  FLAG: {flag}" if flag else "")
            )
        )
    show_skipped_cases(console, record)
    show_cost(console, record)
    show_preflight(console, record)
    show_profile(console, record)
    checks = record["verification"]["checks"]
    if checks:
        t = Table(title=plain(f"verification: {record['verification']['status']}"))
        for col in ("case", "passed", "method", "error", "tolerance", "detail"):
            t.add_column(col)
        for c in checks:
            add_row(
                t,
                c["label"],
                "yes" if c["passed"] else "NO",
                c["method"],
                fmt(c["error"]),
                fmt(c["tolerance"]),
                c["detail"],
            )
        console.print(t)
    for obs in (record.get("gpu_state") or {}).get("after", []):
        console.print(
            plain(
                f"GPU {obs['index']} after: SM {obs['sm_clock_mhz']} MHz (max {obs.get('max_sm_clock_mhz')}), "
                f"power limit {obs['power_limit_w']} W, {obs['temperature_c']} C, "
                f"clock events: {', '.join(obs['throttle_reasons']) or 'none'}, "
                f"processes: {len(obs['processes'])}"
            )
        )
    if cls is not None:
        extra = cls.render_details(record)
        if extra is not None:
            console.print(extra)


def skipped_cases_table(record: dict) -> Table | None:
    """The cases a run was asked for but did not run, each with its reason
    (``details["skipped_cases"]``, written by ``RunContext.skip_case`` or a family's own
    bookkeeping), or None when every case ran: one rendering for every workload."""
    skipped = (record.get("details") or {}).get("skipped_cases") or {}
    if not skipped:
        return None
    table = Table(title="cases not run")
    table.add_column("case")
    table.add_column("reason")
    for label, reason in skipped.items():
        add_row(table, label, reason)
    return table


def show_skipped_cases(console: Any, record: dict) -> None:
    table = skipped_cases_table(record)
    if table is not None:
        console.print(table)


def show_cost(console: Any, record: dict) -> None:
    """The cost section (next to the energy figures in the metrics table above)."""
    cost = record.get("cost")
    if not cost:
        return
    head = (
        f"cost: {cost['price_per_accelerator_hour_usd']:g} USD per accelerator-hour x "
        f"{cost['accelerators']} ({cost['source']})"
    )
    if not cost["lines"]:
        console.print(plain(head + ": no throughput in items/s or time to target to price"))
        return
    console.print(plain(head))
    for line in cost["lines"]:
        console.print(plain(f"  {line['case']}: {line['usd']:.4g} USD per {line['per']} (from {line['metric']})"))


def show_preflight(console: Any, record: dict) -> None:
    """The pre-flight verdict and each warning or failure (ok and unknown checks are in --json)."""
    pre = record.get("preflight")
    if not pre:
        return
    flagged = [c for c in pre["checks"] if c["verdict"] in ("warn", "fail")]
    unknown = sum(c["verdict"] == "unknown" for c in pre["checks"])
    console.print(
        plain(f"pre-flight: {pre['verdict']} ({len(pre['checks'])} checks, {len(flagged)} flagged, {unknown} unknown)")
    )
    for c in flagged:
        console.print(plain(f"  {c['verdict'].upper()} {c['scope']} {c['check']}: {c['value']} ({c['why']})"))


def show_profile(console: Any, record: dict) -> None:
    """Each profile summary: its top entries by total time and their share."""
    details = record.get("details") or {}
    if details.get("profile_not_applied"):
        console.print(plain(details["profile_not_applied"]))
    for key, summary in (details.get("profile") or {}).items():
        ncu = summary.get("tool") == "ncu"
        where = f"cases {', '.join(summary.get('cases') or [])}" if ncu else f"case {key}"
        title = (
            f"profile ({summary.get('tool')}, {summary.get('calls')} calls after the timed loop, {where}"
            + (f", {summary['time_basis']}" if summary.get("time_basis") else "")
            + ")"
        )
        if summary.get("error"):
            console.print(plain(f"{title}: {summary['error']}"))
            continue
        t = Table(title=plain(title))
        cols = ["name", "calls", "total us", "share"] + (["mem %", "SM %"] if ncu else [])
        for col in cols:
            t.add_column(col, overflow="fold")
        for e in summary.get("top") or []:
            row = [e["name"], str(e["calls"]), fmt(e["total_us"]), f"{100 * e['share']:.1f}%"]
            if ncu:
                row += [fmt(e.get("memory_throughput_pct")), fmt(e.get("sm_throughput_pct"))]
            add_row(t, *row)
        console.print(t)
        trace = summary.get("trace") or summary.get("log")
        if trace:
            console.print(plain(f"  file: artifacts/{record['run_id']}/{trace} (beside the record)"))
