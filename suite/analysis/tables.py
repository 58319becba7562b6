"""The tables of records: the summary after a run, ``perfsuite results``, ``perfsuite show``.

Each is declared as columns and rows of plain text (:mod:`perfsuite.analysis.layout` fits them
to the terminal: empty columns left out, names and run ids never cut, prose wrapped between
words) with figures in scaled units (:mod:`perfsuite.analysis.units`). Run ids are shown as
their shortest unique prefix (:func:`id_prefixes`), at least eight digits, as git shows commits.
Every value from a record is data, never markup (:func:`perfsuite.text.plain`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from rich.text import Text

from perfsuite.analysis import figures
from perfsuite.analysis.layout import Column, FittedTable, refit
from perfsuite.analysis.units import alike, interval, number, parts, quantity
from perfsuite.schemas.headline import headline_rows, statistic_of, value_ci
from perfsuite.schemas.regime import POWER_CAPPED, UNOBSERVED, case_regime
from perfsuite.text import plain

MIN_ID = 8  # run ids are shown at least this long, longer where another id shares the prefix


def id_prefixes(ids: Iterable[str], others: Iterable[str] = (), min_len: int = MIN_ID) -> dict[str, str]:
    """Each id -> its shortest prefix (at least ``min_len``) that no other id of ``ids`` or
    ``others`` starts with: what ``perfsuite show PREFIX`` finds unambiguously."""
    wanted = list(dict.fromkeys(ids))
    every = sorted(set(wanted) | set(others))
    where = {run_id: i for i, run_id in enumerate(every)}
    out = {}
    for run_id in wanted:
        # in sorted order the id sharing the longest prefix with this one is a neighbour: two
        # looks per id, not one per other id (a history of 5,000 runs: 25 million otherwise)
        i = where[run_id]
        n = min_len
        for other in every[max(i - 1, 0) : i] + every[i + 1 : i + 2]:
            common = next((k for k, (a, b) in enumerate(zip(run_id, other, strict=False)) if a != b), None)
            if common is None:  # one is a prefix of the other: the whole id
                common = min(len(run_id), len(other))
            n = max(n, common + 1)
        out[run_id] = run_id[: min(n, len(run_id))]
    return out


def _ids(records_or_rows: Iterable[Mapping], ids: Mapping[str, str] | None) -> Mapping[str, str]:
    return ids if ids is not None else id_prefixes(r["run_id"] for r in records_or_rows)


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


def status_cell(status: str, verification: str) -> str:
    """A run's (or a case's) outcome in one word: ``passed`` (succeeded and its output verified),
    ``unverified`` (succeeded, nothing checked its output), else its status: failed, invalid
    (its verification failed), skipped, timeout, aborted. The error is a column of its own."""
    if status != "success":
        return status
    if verification.lower() == "failed":
        return "invalid"
    return "passed" if verification == "passed" else "unverified"


def size_text(size: int) -> str:
    """A message size as people say it: ``8 B``, ``64 KiB``, ``1 GiB`` (exact powers of two), else bytes."""
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if size >= scale and size % scale == 0:
            return f"{size // scale} {unit}"
    return f"{size} B"


def summary_rows(record: dict) -> list[dict]:
    """The record's headline rows (:func:`perfsuite.schemas.headline.headline_rows`), a sweep's
    folded to its largest size per mode (the sweep table has every size), each with ``at``: the
    size it was taken at, or None."""
    rows = headline_rows(record)
    out: list[dict] = []
    largest: dict[str, dict] = {}
    for row in rows:
        if row.get("size_bytes") is None:
            out.append({**row, "at": None})
        elif row["case"] not in largest or row["size_bytes"] > largest[row["case"]]["size_bytes"]:
            largest[row["case"]] = row
    out += [{**row, "at": row["size_bytes"], "valid": None} for row in largest.values()]
    return out


def regime_cell(record: dict, case: str) -> str:
    """How the figure was measured: ``burst``, ``sustained``, or ``power-capped (SM 1,230-1,980
    MHz)``; '' where nothing was observed (a CPU run)."""
    found = case_regime(record, case)
    if found == UNOBSERVED:
        return ""
    if found == POWER_CAPPED:
        return figures.throttle_cell(record, case) or found
    return found


def valid_cell(valid: bool | None) -> str:
    """LoadGen's verdict on a scenario's figure ('' where there is none)."""
    return "" if valid is None else ("VALID" if valid else "INVALID")


def case_cell(row: dict) -> str:
    """The case a headline row is of, with the size a sweep's row was taken at: ``in-place 1 GiB``."""
    return row["case"] + (f" {size_text(row['at'])}" if row.get("at") is not None else "")


def beside_cell(row: dict) -> str:
    """What is shown beside a headline, never ranked: ``ttft_p90_ms 9.51 ms``, ``algbw 85.1 GB/s``."""
    return ", ".join(f"{b['metric']} {quantity(b['value'], b['unit'])}" for b in row.get("beside") or ())


def metric_cell(name: str, statistic: str | None) -> str:
    """A metric's name with the statistic its value is where that is not the median the suite
    records (``tflops (best)``: a ceiling's fastest call), so that the label names the figure."""
    return f"{name} ({statistic})" if statistic not in (None, "median") else name


def ci_cell(low: float | None, high: float | None, value: float, unit: str, statistic: str | None) -> str:
    """The 95% CI beside a value in its unit, or for a best call (which has no interval of the
    median to stand in) ``best call``: the column that is never left out says what the figure is."""
    if statistic == "best":
        return "best call"
    return interval(low, high, value, unit)


# The suite's own columns (value, CI, % of ceiling, regime, status) are never left out for the
# width: decoration (the metric's name, what is shown beside, time per call, the datasheet) goes first.
SUMMARY_COLUMNS = (
    Column("workload"),
    Column("case", wrap=True),
    Column("metric", split="_"),  # names the figure: broken after an underscore, never left out
    Column("value", justify="right"),
    Column("unit"),
    Column("95% CI", justify="right"),
    Column("beside", wrap=True, drop=6),
    Column("time/call", justify="right", drop=5),
    Column("% of ceiling", wrap=True),
    Column("% of spec", wrap=True, drop=8),
    Column("regime", wrap=True),
    Column("vs baseline", wrap=True, drop=5),
    Column("valid", drop=2),
    Column("status"),
    Column("error", wrap=True, drop=1),
    Column("run"),
)


def _time_cell(record: dict, case: str) -> str:
    time_m = next((x for x in record["metrics"] if x["case"] == case and x["name"] == "time_ms"), None)
    return quantity(time_m["value"], time_m["unit"]) if time_m else ""


def _metric(record: dict, case: str, name: str) -> dict | None:
    return next((m for m in record["metrics"] if m["case"] == case and m["name"] == name), None)


def results_table(records: list[dict], ids: Mapping[str, str] | None = None) -> FittedTable:
    """The summary after a run: each record's headline rows (a kernel's throughput per case, an
    inference scenario's LoadGen metric with VALID or INVALID, a collective's busbw at its
    largest size per mode), with the CI, the figures shown beside it, the time of one call, its
    fraction of the ceiling and the datasheet, the regime it was measured in, and its run id."""
    ids = _ids(records, ids)
    t = FittedTable(SUMMARY_COLUMNS, title="results")
    for r in records:
        name, run = r["workload"]["name"], ids[r["run_id"]]
        rows = summary_rows(r) if r["status"] == "success" else []
        if not rows:
            status = status_cell(r["status"], r["verification"]["status"])
            t.add_row(name, "", "", "", "", "", "", "", "", "", "", "", "", status, r["error"] or "", run)
            continue
        for row in rows:
            case = row["case"]
            metric = _metric(r, case, row["metric"]) if row["at"] is None else None
            value, unit = parts(row["value"], row["unit"])
            low, high = row["ci95"] or (None, None)
            t.add_row(
                name,
                case_cell(row),
                metric_cell(row["metric"], row.get("statistic")),
                value,
                unit,
                ci_cell(low, high, row["value"], row["unit"], row.get("statistic")),
                beside_cell(row),
                _time_cell(r, case) if metric is not None and row["metric"] != "time_ms" else "",
                figures.ceiling_cell(metric) if metric else "",
                figures.spec_cell(r, metric) if metric else "",
                regime_cell(r, case),
                _vs_baseline(r, case),
                valid_cell(row["valid"]),
                # LoadGen's INVALID is the case's status too: it stays where the width drops "valid"
                status_cell(r["status"], "failed" if row["valid"] is False else _check_for(r, case)),
                "",
                run,
            )
    return t


RUNS_COLUMNS = (
    Column("run"),
    Column("started (UTC)", drop=3),
    Column("workload"),
    Column("v", justify="right", drop=5),
    Column("device", drop=6),
    Column("case", wrap=True),  # which case the figure is of: `perfsuite show` has every case
    Column("metric", split="_"),  # names the figure: broken after an underscore, never left out
    Column("value", justify="right"),
    Column("unit"),
    Column("95% CI", justify="right"),
    Column("% of ceiling", wrap=True),
    Column("regime", wrap=True),  # qualifies the figure (burst, sustained, power-capped): before the date
    Column("valid", drop=2),
    Column("status"),
    Column("error", wrap=True, drop=4),
)
# The terminal's layout: a line of its own per run (id, workload, version, device, date; a run
# without a figure its status, and its error under it), and under it a row per headline figure.
# What names and qualifies a figure is never left out for the width; the share of the ceiling
# goes first, then LoadGen's verdict (``perfsuite show`` has both).
NESTED_COLUMNS = (
    Column("run / case", wrap=True),
    Column("metric", split="_"),
    Column("value", justify="right"),
    Column("unit"),
    Column("95% CI", justify="right"),
    Column("% of ceiling", wrap=True, drop=2),
    Column("regime", wrap=True),
    Column("valid", drop=1),
    Column("status"),
)
CASE_INDENT = "  "  # a case under its run's line, in the nested layout


def _run_lines(r: dict, record: dict | None, ids: Mapping[str, str] | None = None) -> list[tuple[str, ...]]:
    """(case, metric, value, unit, CI, % of ceiling, regime, valid, status) per headline row of a
    stored run: from its record where given, else the registry's one-line summary (no CI, no
    ceiling); none for a run without a figure. ``ids``: run id -> the prefix shown for it (a
    ceiling's run named in an understated share)."""
    if r["status"] != "success":
        return []
    if record is not None:
        out: list[tuple[str, ...]] = []
        for row in summary_rows(record):
            case = case_cell(row)
            regime = regime_cell(record, row["case"])  # power-capped with the SM clocks seen
            status = status_cell(r["status"], _check_for(record, row["case"]))
            value, unit = parts(row["value"], row["unit"])
            low, high = row["ci95"] or (None, None)
            ci = ci_cell(low, high, row["value"], row["unit"], row.get("statistic"))
            metric = _metric(record, row["case"], row["metric"]) if row.get("at") is None else None
            ceiling = figures.ceiling_cell(metric, ids=ids) if metric else ""
            name = metric_cell(row["metric"], row.get("statistic"))
            out.append((case, name, value, unit, ci, ceiling, regime, valid_cell(row["valid"]), status))
        return out
    if r.get("value") is None:
        return []
    value, unit = parts(r["value"], r["unit"])
    status = status_cell(r["status"], r["verification"])
    return [(r.get("case") or "", r.get("metric") or "", value, unit, "", "", r.get("throttled") or "", "", status)]


def started_minute(started_at: object) -> str:
    """A run's start as the tables show it: ``2026-11-27 13:42`` (UTC), from a datetime or its ISO text."""
    return str(started_at)[:16].replace("T", " ")


def run_line(run: str, r: dict, status: str = "") -> str:
    """A run's line of its own in the nested layout: ``c0a33717  inference.serving  v4  cuda
    2026-11-27 13:42 UTC``, and its status where it has no figure to carry one."""
    started = started_minute(r["started_at"])
    words = [run, r["workload"], f"v{r['version']}", r["device"] or "", f"{started} UTC" if started else "", status]
    return "  ".join(w for w in words if w)


def runs_table(
    rows: list[dict],
    ids: Mapping[str, str] | None = None,
    records: Mapping[str, dict] | None = None,
    nested: bool = True,
) -> FittedTable:
    """``perfsuite results``: each stored run with its headline figures, one line per headline row
    where its record is given (``records``: run id -> record), else the registry's summary.

    ``nested`` (the terminal's layout): a line of its own per run (its id, workload, version,
    device and date; for a run without a figure its status, and its error under it), and under
    it a row per headline figure with the case indented, so that a long workload name costs the
    figures no room: at 100 columns the case, metric, value, unit, CI, regime and status of the
    filed submissions fit side by side (:data:`NESTED_COLUMNS` says what goes first where they do
    not). Otherwise (Markdown, where nothing has to fit) one flat row per headline row with a
    column for each. ``ids`` may name more runs than ``rows`` (the ceilings' runs, shown by the
    same prefixes)."""
    ids = _ids(rows, ids)
    t = FittedTable(NESTED_COLUMNS if nested else RUNS_COLUMNS, title="recorded runs")
    for r in rows:
        lines = _run_lines(r, (records or {}).get(r["run_id"]), ids)
        error = r.get("error") or ""
        if not nested:
            shared = (ids[r["run_id"]], started_minute(r["started_at"]), r["workload"], str(r["version"]))
            status = status_cell(r["status"], r["verification"])
            for line in lines or [("",) * 8 + (status,)]:
                t.add_row(*shared, r["device"], *line, error)
            continue
        t.add_line(run_line(ids[r["run_id"]], r, "" if lines else status_cell(r["status"], r["verification"])))
        if error:
            t.add_line(error, indent=len(CASE_INDENT))
        for case, *rest in lines:
            t.add_row(CASE_INDENT + case, *rest)
    return t


SWEEP_HEADERS = {"time": "time (us)", "alg_bw": "algbw (GB/s)", "bus_bw": "busbw (GB/s)", "nwrong": "#wrong"}
SWEEP_MODE_LABELS = {"out_of_place": "out-of-place", "in_place": "in-place"}


def sweep_table(record: dict, run: str) -> FittedTable:
    """A collective's sweep as nccl-tests prints it: per size, time, algbw and busbw out of place
    and in place, and the wrong elements (modes the collective does not have are left out)."""
    from perfsuite.analysis.export import SWEEP_COLUMNS, sweep_rows

    columns = [
        Column("size (B)", justify="right"),
        Column("count (elements)", justify="right", drop=3),
        Column("type", drop=2),
        Column("redop", drop=2),
        Column("root", justify="right", drop=2),
    ]
    for name in SWEEP_COLUMNS[5:]:
        mode, _, field = name.partition("_place_")
        label = SWEEP_MODE_LABELS[mode + "_place"]
        columns.append(Column(f"{label} {SWEEP_HEADERS[field]}", justify="right", drop=1 if field == "alg_bw" else 0))
    d = record.get("details") or {}
    title = f"{record['workload']['name']} {run}: the sweep as nccl-tests prints it"
    title += f" ({record['launch']['world_size']} ranks, {d.get('backend') or record['launch'].get('backend')})"
    t = FittedTable(columns, title=title)
    for row in sweep_rows(record):
        cells = [str(row[c]) for c in SWEEP_COLUMNS[:5]]
        for name in SWEEP_COLUMNS[5:]:
            v = row[name]
            if v is None:
                cells.append("")
            elif name.endswith("_nwrong"):
                cells.append(str(int(v)))
            elif name.endswith("_time"):
                cells.append(f"{v:.2f}" if v < 100 else f"{v:.1f}" if v < 10_000 else f"{v:.0f}")
            else:
                cells.append(f"{v:.2f}")
        t.add_row(*cells)
    return t


def sweep_tables(records: list[dict], ids: Mapping[str, str] | None = None) -> list[FittedTable]:
    """The nccl-tests table of each collective record among ``records`` (the run summary prints
    them below its own table: a collective's headline is its busbw at every size)."""
    from perfsuite.analysis.export import is_sweep

    ids = _ids(records, ids)
    return [sweep_table(r, ids[r["run_id"]]) for r in records if r["status"] == "success" and is_sweep(r)]


METRIC_COLUMNS = (
    Column("case"),
    Column("metric"),
    Column("value", justify="right"),  # the median, or the statistic the metric's cell names
    Column("unit"),
    Column("95% CI", justify="right"),
    Column("mean", justify="right", drop=5),
    Column("stdev", justify="right", drop=4),
    Column("min", justify="right", drop=6),
    Column("max", justify="right", drop=6),
    Column("p95", justify="right", drop=7),
    Column("n", justify="right", drop=3),
    Column("% of ceiling", wrap=True),
    Column("% of spec", wrap=True, drop=3),
)


def metrics_table(record: dict) -> FittedTable:
    """Every metric of a record with its statistics, each row in the unit its value reads best in
    (the statistics beside it in the same unit, with the same prefix). The value is the median,
    or the statistic the metric's cell names (``tflops (best)``); the CI is shown only beside the
    median it is of."""
    t = FittedTable(METRIC_COLUMNS, title="metrics")
    for m in record["metrics"]:
        s = m["statistics"] or {}
        value, unit = parts(m["value"], m["unit"])

        def same(key: str, s: dict = s, m: dict = m) -> str:
            return alike(s.get(key), m["value"], m["unit"])

        low, high = value_ci(m) or (None, None)
        t.add_row(
            m["case"],
            metric_cell(m["name"], statistic_of(m)),
            value,
            unit,
            ci_cell(low, high, m["value"], m["unit"], statistic_of(m)).rstrip("%"),
            same("mean"),
            same("stdev"),
            same("min"),
            same("max"),
            same("p95"),
            str(s.get("n", "")),
            figures.ceiling_cell(m, long=True),
            figures.spec_cell(record, m),
        )
    return t


def verification_table(record: dict) -> FittedTable:
    t = FittedTable(
        (
            Column("case", wrap=True),
            Column("passed"),
            Column("method", wrap=True),
            Column("error", justify="right"),
            Column("tolerance", justify="right"),
            Column("detail", wrap=True),
        ),
        title=f"verification: {record['verification']['status']}",
    )
    for c in record["verification"]["checks"]:
        t.add_row(
            c["label"],
            "yes" if c["passed"] else "NO",
            c["method"],
            number(c["error"]) if c["error"] is not None else "",
            number(c["tolerance"]) if c["tolerance"] is not None else "",
            c["detail"],
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
    console.print(plain("params: " + "  ".join(f"{k}={_param(v)}" for k, v in w["params"].items())))
    if record["metrics"]:
        console.print(metrics_table(record))
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
    if record["verification"]["checks"]:
        console.print(verification_table(record))
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
            console.print(_sweep_in_place_of(extra, record) or refit(extra))


def _sweep_in_place_of(report: Any, record: dict) -> FittedTable | None:
    """A collective's nccl-tests table as the host lays it out (its columns ranked, so that it
    fits), with the title and caption the workload's own report gave it; None for other reports."""
    from rich.table import Table

    from perfsuite.analysis.export import is_sweep
    from perfsuite.analysis.layout import plain_text

    if not (isinstance(report, Table) and is_sweep(record)):
        return None
    table = sweep_table(record, record["run_id"])
    table.title = plain_text(report.title) or table.title
    table.caption = plain_text(report.caption) or None
    return table


def skipped_cases_table(record: dict) -> FittedTable | None:
    """The cases a run was asked for but did not run, each with its reason
    (``details["skipped_cases"]``, written by ``RunContext.skip_case`` or a family's own
    bookkeeping), or None when every case ran: one rendering for every workload."""
    skipped = (record.get("details") or {}).get("skipped_cases") or {}
    if not skipped:
        return None
    table = FittedTable((Column("case", wrap=True), Column("reason", wrap=True)), title="cases not run")
    for label, reason in skipped.items():
        table.add_row(label, reason)
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
        cols = [Column("name", wrap=True), Column("calls", justify="right"), Column("total", justify="right")]
        cols += [Column("share", justify="right")]
        if ncu:
            cols += [Column("mem %", justify="right", drop=1), Column("SM %", justify="right", drop=1)]
        t = FittedTable(cols, title=title)
        for e in summary.get("top") or []:
            row = [e["name"], str(e["calls"]), quantity(e["total_us"], "us"), f"{100 * e['share']:.1f}%"]
            if ncu:
                row += [_pct(e.get("memory_throughput_pct")), _pct(e.get("sm_throughput_pct"))]
            t.add_row(*row)
        console.print(t)
        trace = summary.get("trace") or summary.get("log")
        if trace:
            console.print(plain(f"  file: artifacts/{record['run_id']}/{trace} (beside the record)"))


def _pct(value: float | None) -> str:
    return number(value) if value is not None else ""


def _param(value: Any) -> str:
    """A parameter as ``-p`` takes it: lists comma-joined."""
    return ",".join(map(str, value)) if isinstance(value, list) else str(value)
