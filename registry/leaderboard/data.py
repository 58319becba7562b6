"""What the leaderboard shows, read from the registry: one board per benchmark (workload), a
table per configuration of its comparability key's settings, rows = systems, columns = the
benchmark's cases, each cell the case's headline figure.

Only runs whose status is ``success`` and whose verification ``passed`` are read: a run that
failed, timed out or did not verify is never ranked. A system is the one a run was submitted
under (``perfsuite import DIR``), else the machine the record describes. Several runs of one
system in one configuration make one cell: the olympic mean of their values (MLPerf's score:
drop the fastest and the slowest) from three runs on, else their median; the interval shown
is the run's own CI (one run) or the range of the runs. The regime (power-capped, thermal),
% of ceiling and cost come from the latest run; cost is the run's own, else one at its
submitted system's price (``schemas.cost``).

Built to stay fast on a public round (100,000 records): the headline metric of each
(comparability key, case) is chosen from one run, then one query reads that metric's value
for every ranked run, and only each cell's latest run is read further.
"""

from __future__ import annotations

import hashlib
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime
from typing import NamedTuple

from sqlalchemy import func, select

from perfsuite.schemas.cost import cost_text, result_cost
from perfsuite.schemas.throttle import case_summary, throttle_flag

from ..models import Environment, Metric, Run, Submission, SubmittedSystem, System, Workload
from .keys import case_headline, key_settings, settings_id, settings_label

OLYMPIC_MIN_RUNS = 3
CHUNK = 2000  # ids per IN (...) list


class _RunRow(NamedTuple):
    id: int
    run_id: str
    comparability_key: str
    system_id: int
    sub_system: int | None
    started_at: datetime
    environment_id: int
    device: str
    world_size: int
    name: str
    category: str


@dataclass
class SystemInfo:
    key: str  # stable identity, also the page's file name
    name: str
    submitter: str
    accelerator: str
    accelerator_count: int
    software: str  # "PyTorch 2.11 · CUDA 13.0"
    availability: str
    description: dict | None  # the submitted description, when there is one
    host: str


@dataclass
class RunValue:
    run_id: str
    started_at: datetime
    value: float


@dataclass
class Cell:
    """One system's figure for one case of one configuration."""

    value: float
    unit: str
    higher_is_better: bool
    ci_low: float | None
    ci_high: float | None
    runs: list[RunValue]  # oldest first (only the latest when read without series)
    count: int  # runs in the cell
    note: str  # "1 run", "5 runs, olympic mean"
    regime: str  # "", "power-capped", "thermal slowdown" ... (the latest run)
    fraction: float | None  # of its ceiling (the latest run)
    cost: str | None
    metric: str

    @property
    def latest(self) -> RunValue:
        return self.runs[-1]


@dataclass
class Row:
    system: SystemInfo
    cells: dict[str, Cell] = field(default_factory=dict)  # case -> cell


@dataclass
class Config:
    """One table of a board: a set of key settings (a tab), its cases and rows."""

    id: str
    settings: dict
    label: str
    cases: list[str]
    rows: list[Row]
    runs: int
    default: bool = False


@dataclass
class Board:
    workload: str
    category: str
    configs: list[Config]

    @property
    def default(self) -> Config:
        return self.configs[0]


def _system_key(kind: str, ident: str) -> str:
    return hashlib.sha256(f"{kind}|{ident}".encode()).hexdigest()[:16]


def software(env: dict) -> str:
    runtime = env.get("runtime") or {}
    packages = env.get("packages") or {}
    parts = []
    torch = runtime.get("torch") or packages.get("torch")
    if torch:
        parts.append(f"PyTorch {torch}")
    if runtime.get("cuda"):
        parts.append(f"CUDA {runtime['cuda']}")
    nccl = runtime.get("nccl")
    if nccl:
        parts.append(f"NCCL {nccl}")
    return " · ".join(parts)


def _ranked(query):
    return query.where(Run.status == "success", Run.verification_status == "passed")


def _chunks(ids: list) -> list[list]:
    return [ids[i : i + CHUNK] for i in range(0, len(ids), CHUNK)]


def load(session, workload: str | None = None, series: bool = True) -> tuple[list[Board], dict[str, SystemInfo]]:
    """The boards (one per workload; only ``workload``'s when given) and the systems by key.

    ``series``: read every ranked run's value (what trends and system-against-system need);
    without it, each cell is aggregated in SQL (count, sum, min, max: enough for the olympic
    mean) and only its latest stored run is read: one benchmark's table of a public round in
    well under 200 ms.

    The cyclic garbage collector is paused meanwhile: the rows read make no cycles, and its
    passes over a public round's hundreds of thousands of new objects cost more than the
    reading itself (0.75 of 2 s for one workload of 100,000 records, measured with cProfile)."""
    import gc

    enabled = gc.isenabled()
    gc.disable()
    try:
        return _load(session, workload) if series else _load_aggregated(session, workload)
    finally:
        if enabled:
            gc.enable()


def _runs_query(workload: str | None):
    sub_system = Submission.system_id.label("sub_system")
    query = _ranked(
        select(
            Run.id,
            Run.run_id,
            Run.comparability_key,
            Run.system_id,
            sub_system,
            Run.started_at,
            Run.environment_id,
            Run.device,
            Run.world_size,
            Workload.name,
            Workload.category,
        )
        .join(Workload, Run.workload_id == Workload.id)
        .outerjoin(Submission, Submission.run_id == Run.id)
    )
    return query.where(Workload.name == workload) if workload is not None else query


def _headlines(session, first_of_key: dict[str, int], category_of: dict[str, str]) -> tuple[dict, dict]:
    """(workload section by key, headline metric by (key, case)) from one run of each key."""
    key_of = {pk: ckey for ckey, pk in first_of_key.items()}
    key_workload: dict[str, dict] = {}
    rep_metrics: dict[int, list[dict]] = defaultdict(list)
    for chunk in _chunks(sorted(key_of)):
        for pk, wl in session.execute(select(Run.id, Run.record["workload"]).where(Run.id.in_(chunk))):
            key_workload[key_of[pk]] = wl
        for m in session.execute(
            select(Metric.run_id, Metric.case, Metric.name, Metric.unit, Metric.higher_is_better)
            .where(Metric.run_id.in_(chunk))
            .order_by(Metric.run_id, Metric.position)
        ):
            rep_metrics[m.run_id].append(
                {"case": m.case, "name": m.name, "unit": m.unit, "higher_is_better": m.higher_is_better}
            )
    heads: dict[tuple[str, str], dict] = {}
    for ckey, pk in first_of_key.items():
        metrics = rep_metrics[pk]
        for case in dict.fromkeys(m["case"] for m in metrics):
            head = case_headline(metrics, case, category_of[ckey], key_workload[ckey].get("primary_metric"))
            if head is not None:
                heads[(ckey, case)] = head
    return key_workload, heads


def _load(session, workload: str | None) -> tuple[list[Board], dict[str, SystemInfo]]:
    # plain tuples, oldest first: every group below is then built in time order without sorting
    runs = {
        r[0]: _RunRow(*r) for r in sorted(session.execute(_runs_query(workload)), key=lambda r: (r.started_at, r.id))
    }
    if not runs:
        return [], {}
    # 1. one representative run per comparability key: its settings and its cases' headlines
    first_of_key: dict[str, int] = {}
    for pk, r in runs.items():
        if r.comparability_key not in first_of_key or pk < first_of_key[r.comparability_key]:
            first_of_key[r.comparability_key] = pk
    key_workload, heads = _headlines(session, first_of_key, {r.comparability_key: r.category for r in runs.values()})
    # 2. the headline value of every ranked run: by run ids for one workload (the index on
    # metrics.run_id), in one pass over the named metrics for the whole board
    values: dict[tuple[int, str], float] = {}
    names = sorted({h["name"] for h in heads.values()})
    base = select(Metric.run_id, Metric.case, Metric.name, Metric.value).where(Metric.name.in_(names))
    queries = [base.where(Metric.run_id.in_(chunk)) for chunk in _chunks(sorted(runs))] if workload else [base]
    for query in queries:
        for run_pk, case, name, value in session.execute(query):
            run = runs.get(run_pk)
            if run is None:
                continue  # not ranked
            head = heads.get((run.comparability_key, case))
            if head is not None and head["name"] == name:
                values[(run_pk, case)] = value
    # 3. group: (workload, settings) -> (system, case) -> runs
    cases_of: dict[str, list[str]] = defaultdict(list)
    for ckey, case in heads:
        cases_of[ckey].append(case)
    # keys whose settings differ only in harness-only parameters share a table: their runs pool
    sid_of = {ckey: settings_id(key_settings(wl)) for ckey, wl in key_workload.items()}
    pks_of: dict[tuple, list[int]] = defaultdict(list)
    runs_of_key: dict[str, int] = defaultdict(int)
    for pk, r in runs.items():  # oldest first
        runs_of_key[r.comparability_key] += 1
        for case in cases_of[r.comparability_key]:
            if (pk, case) in values:
                pks_of[(r.name, sid_of[r.comparability_key], r.system_id, r.sub_system, case)].append(pk)
    cells = {}
    for cell_key, pks in pks_of.items():
        case = cell_key[-1]
        series = [RunValue(runs[p].run_id, runs[p].started_at, values[(p, case)]) for p in pks]
        figures = [v.value for v in series]
        cells[cell_key] = (
            series,
            (len(figures), sum(figures), min(figures), max(figures)),
            pks[-1],
        )
    return _assemble(session, cells, runs, key_workload, heads, runs_of_key)


def _load_aggregated(session, workload: str | None) -> tuple[list[Board], dict[str, SystemInfo]]:
    """:func:`_load` with each cell aggregated in SQL and only its latest stored run read."""
    ranked_runs = _ranked(
        select(Run.comparability_key, func.min(Run.id), func.count(), Workload.category).join(
            Workload, Run.workload_id == Workload.id
        )
    )
    if workload is not None:
        ranked_runs = ranked_runs.where(Workload.name == workload)
    keys = session.execute(ranked_runs.group_by(Run.comparability_key, Workload.category)).all()
    if not keys:
        return [], {}
    key_workload, heads = _headlines(session, {k: pk for k, pk, _, _ in keys}, {k: c for k, _, _, c in keys})
    names = sorted({h["name"] for h in heads.values()})
    sub_system = Submission.system_id.label("sub_system")
    aggregate = _ranked(
        select(
            Run.comparability_key,
            Run.system_id,
            sub_system,
            Metric.case,
            Metric.name,
            func.count(),
            func.sum(Metric.value),
            func.min(Metric.value),
            func.max(Metric.value),
            func.max(Run.id),
        )
        .join(Run, Metric.run_id == Run.id)
        .join(Workload, Run.workload_id == Workload.id)
        .outerjoin(Submission, Submission.run_id == Run.id)
        .where(Metric.name.in_(names))
    )
    if workload is not None:
        aggregate = aggregate.where(Workload.name == workload)
    groups = [
        g
        for g in session.execute(
            aggregate.group_by(Run.comparability_key, Run.system_id, sub_system, Metric.case, Metric.name)
        )
        if heads.get((g[0], g[3]), {}).get("name") == g[4]
    ]
    latest_pks = sorted({g[9] for g in groups})
    runs: dict[int, _RunRow] = {}
    for chunk in _chunks(latest_pks):
        runs.update({r[0]: _RunRow(*r) for r in session.execute(_runs_query(workload).where(Run.id.in_(chunk)))})
    latest_values = {}
    for chunk in _chunks(latest_pks):
        for run_pk, case, name, value in session.execute(
            select(Metric.run_id, Metric.case, Metric.name, Metric.value).where(
                Metric.run_id.in_(chunk), Metric.name.in_(names)
            )
        ):
            latest_values[(run_pk, case, name)] = value
    sid_of = {ckey: settings_id(key_settings(wl)) for ckey, wl in key_workload.items()}
    cells: dict[tuple, tuple] = {}
    for ckey, system_id, sub_id, case, name, count, total, low, high, latest in groups:
        cell_key = (runs[latest].name, sid_of[ckey], system_id, sub_id, case)
        held = cells.get(cell_key)
        if held is not None:  # another key of the same settings (harness-only parameters differ): pool
            _, (n0, t0, lo0, hi0), latest0 = held
            count, total, low, high = count + n0, total + t0, min(low, lo0), max(high, hi0)
            if latest0 > latest:
                cells[cell_key] = (held[0], (count, total, low, high), latest0)
                continue
        run = runs[latest]
        series = [RunValue(run.run_id, run.started_at, latest_values[(latest, case, name)])]
        cells[cell_key] = (series, (count, total, low, high), latest)
    return _assemble(session, cells, runs, key_workload, heads, {k: n for k, _, n, _ in keys})


def _assemble(
    session,
    cells: dict[tuple, tuple],
    runs: dict[int, _RunRow],
    key_workload: dict[str, dict],
    heads: dict,
    runs_of_key: dict[str, int],
) -> tuple[list[Board], dict[str, SystemInfo]]:
    """Boards from the cells ((workload, settings id, system, submitted system, case) -> (series, (count, sum, min,
    max), latest run pk)): each cell's latest run read for its statistics, roofline fraction,
    regime, cost and environment; rows are systems, tables the key settings."""
    settings_of = {ckey: key_settings(wl) for ckey, wl in key_workload.items()}
    sid_of = {ckey: settings_id(settings) for ckey, settings in settings_of.items()}
    latest_pks = sorted({latest for _, _, latest in cells.values()})
    latest_metrics: dict[int, list] = defaultdict(list)
    throttles: dict[int, dict] = {}
    costs: dict[int, dict] = {}
    for chunk in _chunks(latest_pks):
        for m in session.execute(
            select(
                Metric.run_id,
                Metric.case,
                Metric.name,
                Metric.unit,
                Metric.value,
                Metric.higher_is_better,
                Metric.statistics,
                Metric.roofline_fraction,
            )
            .where(Metric.run_id.in_(chunk))
            .order_by(Metric.run_id, Metric.position)
        ):
            latest_metrics[m.run_id].append(m)
        for pk, throttle, cost in session.execute(
            select(Run.id, Run.record[("details", "throttle")], Run.record["cost"]).where(Run.id.in_(chunk))
        ):
            if throttle:
                throttles[pk] = throttle
            if cost:
                costs[pk] = cost
    environments = {}
    for chunk in _chunks(sorted({runs[pk].environment_id for pk in latest_pks})):
        environments.update(
            dict(session.execute(select(Environment.id, Environment.data).where(Environment.id.in_(chunk))).all())
        )
    hosts = {
        row.id: row
        for row in session.execute(
            select(System.id, System.key, System.hostname, System.gpu_name, System.gpu_count).where(
                System.id.in_(sorted({key[2] for key in cells}))
            )
        )
    }
    sub_ids = sorted({key[3] for key in cells if key[3] is not None})
    submitted = (
        {
            row.id: row
            for row in session.execute(
                select(
                    SubmittedSystem.id, SubmittedSystem.org, SubmittedSystem.name, SubmittedSystem.description
                ).where(SubmittedSystem.id.in_(sub_ids))
            )
        }
        if sub_ids
        else {}
    )

    systems: dict[str, SystemInfo] = {}
    tables: dict[tuple[str, str], dict[str, Row]] = defaultdict(dict)
    table_cases: dict[tuple[str, str], dict[str, None]] = defaultdict(dict)
    table_runs: dict[tuple[str, str], int] = defaultdict(int)
    categories: dict[str, str] = {}
    for ckey, n in runs_of_key.items():
        table_runs[(key_workload[ckey]["name"], sid_of[ckey])] += n
    for (wname, sid, system_id, sub_id, case), (series, aggregate, latest) in cells.items():
        run = runs[latest]
        ckey = run.comparability_key
        where = (wname, sid)
        categories[run.name] = run.category
        info = _system_info(hosts[system_id], submitted.get(sub_id), environments[run.environment_id])
        systems.setdefault(info.key, info)
        row = tables[where].setdefault(info.key, Row(systems[info.key]))
        row.cells[case] = _cell(
            case,
            series,
            aggregate,
            heads[(ckey, case)],
            latest_metrics[latest],
            throttles.get(latest),
            costs.get(latest),
            info,
            run.device,
            run.world_size,
        )
        table_cases[where][case] = None
    settings_by_table = {(key_workload[k]["name"], sid_of[k]): settings_of[k] for k in key_workload}
    boards: dict[str, list[Config]] = defaultdict(list)
    for (wname, sid), rows in tables.items():
        ordered_cases = [
            c
            for c in dict.fromkeys(case for (k, case) in heads if sid_of[k] == sid and key_workload[k]["name"] == wname)
            if c in table_cases[(wname, sid)]
        ]
        settings = settings_by_table[(wname, sid)]
        boards[wname].append(
            Config(
                sid, settings, settings_label(settings), ordered_cases, list(rows.values()), table_runs[(wname, sid)]
            )
        )
    out = []
    for wname in sorted(boards):
        configs = boards[wname]
        shared = _shared_settings([c.settings for c in configs])
        for c in configs:
            c.label = settings_label(c.settings, shared)
            c.rows.sort(key=lambda row: _rank_key(row, c.cases[0]))
        latest_version = max(c.settings["version"] for c in configs)
        # default tab: the latest version, then the configuration most runs used (the standard one)
        configs.sort(key=lambda c: (c.settings["version"] != latest_version, -c.runs, c.label))
        configs[0].default = True
        out.append(Board(wname, categories[wname], configs))
    return out, systems


def _shared_settings(all_settings: list[dict]) -> dict:
    first = all_settings[0]
    return {k: v for k, v in first.items() if all(s.get(k, object()) == v for s in all_settings[1:])}


def _rank_key(row: Row, case: str) -> tuple:
    cell = row.cells.get(case)
    if cell is None:
        return (1, 0.0, row.system.name)
    return (0, -cell.value if cell.higher_is_better else cell.value, row.system.name)


def _cell(
    case: str,
    series: list[RunValue],
    aggregate: tuple[int, float, float, float],
    head: dict,
    latest_metrics: list,
    throttle,
    cost,
    info: SystemInfo,
    device: str,
    world_size: int,
) -> Cell:
    """``aggregate``: (count, sum, min, max) of the cell's run values; ``series``: its runs
    (oldest first; at least the latest)."""
    count, total, low, high = aggregate
    ci: tuple[float | None, float | None]
    mine = [m for m in latest_metrics if m.case == case]
    latest_head = next((m for m in mine if m.name == head["name"]), None)
    if count >= OLYMPIC_MIN_RUNS:
        value = (total - low - high) / (count - 2)
        note, ci = f"{count} runs, olympic mean", (low, high)
    elif count == 2:
        value, note, ci = total / 2, "2 runs, median", (low, high)
    else:
        stats = (latest_head.statistics if latest_head is not None else None) or {}
        value, note, ci = series[-1].value, "1 run", (stats.get("ci95_low"), stats.get("ci95_high"))
    price = info.description.get("accelerator_hour_price_usd") if info.description else None
    priced = result_cost(
        cost,
        price,
        [{"case": m.case, "name": m.name, "unit": m.unit, "value": m.value} for m in mine],
        device,
        world_size,
    )
    return Cell(
        value,
        head["unit"],
        head["higher_is_better"],
        ci[0],
        ci[1],
        series,
        count,
        note,
        throttle_flag(case_summary(throttle, case)) or "",
        latest_head.roofline_fraction if latest_head is not None else None,
        cost_text(priced, case),
        head["name"],
    )


def _system_info(host, submitted, env: dict) -> SystemInfo:
    if submitted is not None:
        d = submitted.description
        return SystemInfo(
            _system_key("submitted", f"{submitted.org}/{submitted.name}"),
            submitted.name,
            d["submitter"],
            d["accelerator_model_name"],
            d["accelerators_per_node"] * d["number_of_nodes"],
            software(env) or d["framework"],
            d["status"],
            d,
            d.get("host", host.hostname),
        )
    return SystemInfo(
        _system_key("host", host.key),
        host.hostname,
        "",
        host.gpu_name or env["measured_device"]["name"],
        host.gpu_count,
        software(env),
        "",
        None,
        host.hostname,
    )
