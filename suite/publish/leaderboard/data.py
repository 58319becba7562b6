"""What the leaderboard shows, read from the registry: one board per benchmark (workload), one
table per comparability key, rows = systems, columns = the benchmark's cases, each cell the
case's headline figure.

The rules are the schemas', never the site's own:

- a table holds the runs of one comparability key (``runs.comparability_key``, recomputed from
  each record's content when it is stored: ``perfsuite.schemas.comparability``), so burst,
  sustained and power-capped runs, L2-flushed or not, on 2 or on 4 GPUs, never pool;
- a table's filters are its key's settings (``runs.key_settings``, flattened by
  ``flat_settings``): harness parameters are not in them, and a key whose settings carry a
  ``self_test`` (a run steered by a self-test switch) is never ranked;
- each column is a case's headline metric as the record declares it
  (``perfsuite.schemas.headline.case_metric_names``: LoadGen's metric per inference scenario,
  busbw per collective mode, a data pipeline's images/s ...), and each cell carries that case's
  headline row of its latest run (its CI, LoadGen's VALID, the figures shown beside it).

Only runs whose status is ``success`` and whose verification ``passed`` are read: a run that
failed, timed out or did not verify is never ranked. A system is the one a run was submitted
under (``perfsuite import DIR``), else the machine the record describes. Several runs of one
system under one key make one cell: the olympic mean of their values (MLPerf's score: drop the
fastest and the slowest) from three runs on, else their median; the interval shown is the run's
own CI (one run) or the range of the runs. % of ceiling and cost come from the latest run; cost
is the run's own, else one at its submitted system's price (``schemas.cost``).

Built to stay fast on a public round (100,000 records): each key's headline is read from one of
its runs, then one query reads that metric's value for every ranked run (or aggregates it in
SQL), and only each cell's latest run is read further.
"""

from __future__ import annotations

import hashlib
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, NamedTuple

from sqlalchemy import func, select

from perfsuite.registry.models import Environment, Metric, Run, Submission, SubmittedSystem, System, Workload
from perfsuite.schemas.comparability import flat_settings, key_settings
from perfsuite.schemas.cost import cost_text, result_cost
from perfsuite.schemas.headline import case_metric_names, headline_rows

OLYMPIC_MIN_RUNS = 3
CHUNK = 2000  # ids per IN (...) list
# The order a configuration's settings are shown in: what people pick by first.
SETTING_ORDER = ("version", "scenario", "division", "regime", "world.", "timing.", "device", "deterministic", "param.")


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


@dataclass
class Head:
    """A case's headline metric under one key."""

    metric: str
    unit: str
    higher_is_better: bool


@dataclass
class KeyInfo:
    """One comparability key of a benchmark: its settings and its cases' headlines."""

    key: str
    workload: str
    category: str
    settings: dict  # perfsuite.schemas.comparability.key_settings
    heads: dict[str, Head]  # case -> its headline metric, in the record's order
    runs: int
    measured: int = 0  # the cases its first run measured (a sweep's every step, not only its headline)


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
    """One system's figure for one case under one key."""

    value: float
    unit: str
    higher_is_better: bool
    ci_low: float | None
    ci_high: float | None
    runs: list[RunValue]  # oldest first (only the latest when read without series)
    count: int  # runs in the cell
    note: str  # "1 run", "5 runs, olympic mean"
    regime: str  # the key's: burst, sustained, power-capped, unobserved
    fraction: float | None  # of its ceiling (the latest run)
    cost: str | None
    metric: str
    valid: bool | None = None  # the latest run's headline row: LoadGen's VALID, else None
    beside: list[dict] = field(default_factory=list)  # the latest run's figures shown beside, never ranked

    @property
    def latest(self) -> RunValue:
        return self.runs[-1]


@dataclass
class Row:
    system: SystemInfo
    cells: dict[str, Cell] = field(default_factory=dict)  # case -> cell


@dataclass
class Config:
    """One table of a board: one comparability key, its cases and rows."""

    id: str  # a short prefix of the key: the table's permalink
    key: str
    settings: dict  # the key's settings (key_settings)
    shown: dict[str, str]  # its settings flattened and as text, in SETTING_ORDER (the filters)
    label: str  # the settings that differ from the board's other tables
    cases: list[str]
    heads: dict[str, Head]
    rows: list[Row]
    runs: int
    measured: int = 0  # the cases its first run measured (KeyInfo.measured)
    newest: datetime | None = None  # the start of its newest run
    default: bool = False
    category: str = ""

    @property
    def regime(self) -> str:
        return str(self.settings.get("regime") or "")

    @property
    def all_zero(self) -> bool:
        """Every figure of the table is zero: bus bandwidth at one rank, zero by nccl-tests' formula."""
        return all(cell.value == 0 for row in self.rows for cell in row.cells.values())

    @property
    def one_rank_collective(self) -> bool:
        """A collective ranked by bus bandwidth, among one rank (nccl-tests with one GPU): no byte
        crosses between devices, so its figure is a check that the call runs, not one of an
        interconnect. A broadcast or reduce in place is then a no-op, and reads above the memory's
        bandwidth (8,402 GB/s on an H100). A peer copy among the GPUs of one process is not one."""
        return (
            self.category == "collectives"
            and self.shown.get("world.world_size", "1") == "1"
            and any(head.metric == "busbw_gbps" for head in self.heads.values())
        )

    @property
    def version(self) -> int:
        return int(self.settings.get("version") or 0)

    @property
    def throughput_goal(self) -> bool:
        """A training table of runs whose goal is throughput (``goal=throughput``): each trained for a
        budget and reports its rate, the points of a scaling view, never a time to target; such a
        table never ranks the benchmark where one of time to target exists."""
        return self.category == "training" and self.shown.get("param.goal") == "throughput"


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


def _text(value: Any) -> str:
    if isinstance(value, list):
        return ",".join(str(v) for v in value)
    return str(value)


def _order(name: str) -> int:
    return next(
        (i for i, p in enumerate(SETTING_ORDER) if name == p or (p.endswith(".") and name.startswith(p))),
        len(SETTING_ORDER),
    )


def shown_settings(settings: dict) -> dict[str, str]:
    """A key's settings as a board shows and filters them: flattened (``param.m``,
    ``timing.l2_flush``, ``world.world_size``), as text, in :data:`SETTING_ORDER`; the workload
    (the board's own) and unset ones (no scenario) left out."""
    flat = {k: v for k, v in flat_settings(settings).items() if k != "workload" and v is not None}
    return {k: _text(flat[k]) for k in sorted(flat, key=lambda k: (_order(k), k))}


def setting_name(name: str) -> str:
    """``param.m`` -> ``m``, ``world.world_size`` -> ``world_size``."""
    return name.split(".", 1)[-1]


def settings_label(shown: dict[str, str], shared: dict[str, str] | None = None) -> str:
    """The settings that tell a table from the board's others (``v5 · burst · l2_flush True``);
    the version always."""
    shared = shared or {}
    parts = [f"v{shown.get('version', '?')}"]
    for k, v in shown.items():
        if k == "version" or shared.get(k) == v:
            continue
        parts.append(v if k == "regime" else f"{setting_name(k)} {v}")
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
        keys = _keys(session, workload)
        if not keys:
            return [], {}
        if series:
            cells, runs = _series_cells(session, workload, keys)
        else:
            cells, runs = _aggregated_cells(session, workload, keys)
        return _assemble(session, cells, runs, keys)
    finally:
        if enabled:
            gc.enable()


def _keys(session, workload: str | None) -> dict[str, KeyInfo]:
    """The ranked comparability keys (of ``workload``), each with its settings and its cases'
    headlines, read from its first stored run; self-test keys left out."""
    query = _ranked(
        select(Run.comparability_key, func.min(Run.id), func.count(), Workload.name, Workload.category).join(
            Workload, Run.workload_id == Workload.id
        )
    )
    if workload is not None:
        query = query.where(Workload.name == workload)
    found = session.execute(query.group_by(Run.comparability_key, Workload.name, Workload.category)).all()
    first = {pk: (key, count, name, category) for key, pk, count, name, category in found}
    out: dict[str, KeyInfo] = {}
    for chunk in _chunks(sorted(first)):
        for pk, stored_settings, record in session.execute(
            select(Run.id, Run.key_settings, Run.record).where(Run.id.in_(chunk))
        ):
            key, count, name, category = first[pk]
            settings = stored_settings or key_settings(record)  # registries older than 0004 hold none
            if "self_test" in settings:
                continue  # a self-test is recorded, never ranked
            heads = _heads(record)
            if heads:
                measured = len({m["case"] for m in record.get("metrics") or ()})
                out[key] = KeyInfo(key, name, category, settings, heads, count, measured)
    return out


def _heads(record: dict) -> dict[str, Head]:
    """case -> its headline metric (name, unit, direction) as ``record`` declares it."""
    names = case_metric_names(record)
    heads: dict[str, Head] = {}
    for m in record.get("metrics") or ():
        if names.get(m["case"]) == m["name"] and m["case"] not in heads:
            heads[m["case"]] = Head(m["name"], m["unit"], bool(m["higher_is_better"]))
    return heads


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
        )
        .join(Workload, Run.workload_id == Workload.id)
        .outerjoin(Submission, Submission.run_id == Run.id)
    )
    return query.where(Workload.name == workload) if workload is not None else query


# A cell's key: (comparability key, system id, submitted system id, case); its value: (runs
# oldest first, (count, sum, min, max) of their values, the latest run's primary key).
CellKey = tuple[str, int, int | None, str]
CellData = tuple[list[RunValue], tuple[int, float, float, float], int]


def _series_cells(session, workload: str | None, keys: dict[str, KeyInfo]) -> tuple[dict, dict[int, _RunRow]]:
    # plain tuples, oldest first: every group below is then built in time order without sorting
    runs = {
        r[0]: _RunRow(*r)
        for r in sorted(session.execute(_runs_query(workload)), key=lambda r: (r.started_at, r.id))
        if r.comparability_key in keys
    }
    names = sorted({h.metric for k in keys.values() for h in k.heads.values()})
    values: dict[tuple[int, str], float] = {}
    base = select(Metric.run_id, Metric.case, Metric.name, Metric.value).where(Metric.name.in_(names))
    # by run ids for one workload (the index on metrics.run_id), in one pass for the whole board
    queries = [base.where(Metric.run_id.in_(chunk)) for chunk in _chunks(sorted(runs))] if workload else [base]
    for query in queries:
        for run_pk, case, name, value in session.execute(query):
            run = runs.get(run_pk)
            if run is None:
                continue  # not ranked
            head = keys[run.comparability_key].heads.get(case)
            if head is not None and head.metric == name:
                values[(run_pk, case)] = value
    pks_of: dict[CellKey, list[int]] = defaultdict(list)
    for pk, r in runs.items():  # oldest first
        for case in keys[r.comparability_key].heads:
            if (pk, case) in values:
                pks_of[(r.comparability_key, r.system_id, r.sub_system, case)].append(pk)
    cells: dict[CellKey, CellData] = {}
    for cell_key, pks in pks_of.items():
        case = cell_key[-1]
        series = [RunValue(runs[p].run_id, runs[p].started_at, values[(p, case)]) for p in pks]
        figures = [v.value for v in series]
        cells[cell_key] = (series, (len(figures), sum(figures), min(figures), max(figures)), pks[-1])
    return cells, runs


def _aggregated_cells(session, workload: str | None, keys: dict[str, KeyInfo]) -> tuple[dict, dict[int, _RunRow]]:
    """Each cell aggregated in SQL, and only its latest stored run read."""
    names = sorted({h.metric for k in keys.values() for h in k.heads.values()})
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
    groups = []
    for g in session.execute(
        aggregate.group_by(Run.comparability_key, Run.system_id, sub_system, Metric.case, Metric.name)
    ):
        info = keys.get(g[0])
        head = info.heads.get(g[3]) if info is not None else None
        if head is not None and head.metric == g[4]:
            groups.append(g)
    latest_pks = sorted({g[9] for g in groups})
    runs: dict[int, _RunRow] = {}
    latest_values = {}
    for chunk in _chunks(latest_pks):
        runs.update({r[0]: _RunRow(*r) for r in session.execute(_runs_query(workload).where(Run.id.in_(chunk)))})
        for run_pk, case, name, value in session.execute(
            select(Metric.run_id, Metric.case, Metric.name, Metric.value).where(
                Metric.run_id.in_(chunk), Metric.name.in_(names)
            )
        ):
            latest_values[(run_pk, case, name)] = value
    cells: dict[CellKey, CellData] = {}
    for key, system_id, sub_id, case, name, count, total, low, high, latest in groups:
        run = runs[latest]
        series = [RunValue(run.run_id, run.started_at, latest_values[(latest, case, name)])]
        cells[(key, system_id, sub_id, case)] = (series, (count, total, low, high), latest)
    return cells, runs


def _latest_reads(session, cells: dict[CellKey, CellData], runs: dict[int, _RunRow]) -> tuple:
    """What each cell's latest run adds: its metrics, the record's workload section and
    verification (for its headline rows), its cost, its environment."""
    latest_pks = sorted({latest for _, _, latest in cells.values()})
    metrics: dict[int, list[dict]] = defaultdict(list)
    parts: dict[int, dict] = {}
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
            metrics[m.run_id].append(
                {
                    "case": m.case,
                    "name": m.name,
                    "unit": m.unit,
                    "value": m.value,
                    "higher_is_better": m.higher_is_better,
                    "statistics": m.statistics,
                    "roofline_fraction": m.roofline_fraction,
                }
            )
        for pk, workload, verification, cost in session.execute(
            select(Run.id, Run.record["workload"], Run.record["verification"], Run.record["cost"]).where(
                Run.id.in_(chunk)
            )
        ):
            parts[pk] = {"workload": workload, "verification": verification, "cost": cost}
    environments = {}
    for chunk in _chunks(sorted({runs[pk].environment_id for pk in latest_pks})):
        environments.update(
            dict(session.execute(select(Environment.id, Environment.data).where(Environment.id.in_(chunk))).all())
        )
    return metrics, parts, environments


def _systems(session, cells: dict[CellKey, CellData]) -> tuple[dict, dict]:
    hosts = {
        row.id: row
        for chunk in _chunks(sorted({key[1] for key in cells}))
        for row in session.execute(
            select(System.id, System.key, System.hostname, System.gpu_name, System.gpu_count).where(
                System.id.in_(chunk)
            )
        )
    }
    sub_ids = sorted({key[2] for key in cells if key[2] is not None})
    submitted = {
        row.id: row
        for chunk in _chunks(sub_ids)
        for row in session.execute(
            select(SubmittedSystem.id, SubmittedSystem.org, SubmittedSystem.name, SubmittedSystem.description).where(
                SubmittedSystem.id.in_(chunk)
            )
        )
    }
    return hosts, submitted


def _assemble(
    session, cells: dict[CellKey, CellData], runs: dict[int, _RunRow], keys: dict[str, KeyInfo]
) -> tuple[list[Board], dict[str, SystemInfo]]:
    """Boards from the cells: each cell's latest run read for its headline row, roofline
    fraction, cost and environment; rows are systems, tables the keys."""
    latest_metrics, latest_parts, environments = _latest_reads(session, cells, runs)
    hosts, submitted = _systems(session, cells)
    systems: dict[str, SystemInfo] = {}
    tables: dict[str, dict[str, Row]] = defaultdict(dict)
    rows_of_latest: dict[int, dict[tuple[str, str], dict]] = {}
    newest: dict[str, datetime] = {}
    for (key, system_id, sub_id, case), (series, aggregate, latest) in cells.items():
        run, info = runs[latest], keys[key]
        system = _system_info(hosts[system_id], submitted.get(sub_id), environments[run.environment_id])
        system = systems.setdefault(system.key, system)
        if latest not in rows_of_latest:
            part = latest_parts[latest]
            partial = {**part, "metrics": latest_metrics[latest], "details": {}}
            rows_of_latest[latest] = {(r["case"], r["metric"]): r for r in headline_rows(partial)}
        row = tables[key].setdefault(system.key, Row(system))
        newest[key] = max(newest.get(key, run.started_at), run.started_at)
        row.cells[case] = _cell(
            case,
            series,
            aggregate,
            info,
            rows_of_latest[latest].get((case, info.heads[case].metric)),
            latest_metrics[latest],
            latest_parts[latest]["cost"],
            system,
            run,
        )
    boards: dict[str, list[Config]] = defaultdict(list)
    for key, rows in tables.items():
        info = keys[key]
        shown = shown_settings(info.settings)
        cases = [case for case in info.heads if any(case in r.cells for r in rows.values())]
        boards[info.workload].append(
            Config(
                key[:12],
                key,
                info.settings,
                shown,
                "",
                cases,
                info.heads,
                list(rows.values()),
                info.runs,
                info.measured,
                newest[key],
                category=info.category,
            )
        )
    out = []
    for name in sorted(boards):
        configs = boards[name]
        shared = _shared([c.shown for c in configs])
        for c in configs:
            c.label = settings_label(c.shown, shared)
            c.rows.sort(key=lambda row: _rank_key(row, c.cases[0]))
        # training is ranked by time to target (MLPerf's figure): a table of throughput runs leads
        # only a board that has no other, whatever its version
        leading = [c for c in configs if not c.throughput_goal] or configs
        latest_version = max(c.version for c in leading)
        # the standard table: time to target before throughput (training), the latest version, one
        # with a figure other than zero, a collective among more than one rank, then the one most
        # systems ran, then most runs, then the one that measured most cases (a sweep before one
        # step of it), then the newest (a round's settings before an older one's)
        configs.sort(
            key=lambda c: (
                c.throughput_goal,
                c.version != latest_version,
                c.all_zero,
                c.one_rank_collective,
                -len(c.rows),
                -c.runs,
                -c.measured,
                -(c.newest.timestamp() if c.newest else 0.0),
                c.label,
            )
        )
        configs[0].default = True
        out.append(Board(name, keys[configs[0].key].category, configs))
    return out, systems


def _shared(all_shown: list[dict[str, str]]) -> dict[str, str]:
    first = all_shown[0]
    return {k: v for k, v in first.items() if all(s.get(k) == v for s in all_shown[1:])}


def _rank_key(row: Row, case: str) -> tuple:
    cell = row.cells.get(case)
    if cell is None:
        return (1, 0.0, row.system.name)
    return (0, -cell.value if cell.higher_is_better else cell.value, row.system.name)


def _cell(
    case: str,
    series: list[RunValue],
    aggregate: tuple[int, float, float, float],
    info: KeyInfo,
    head_row: dict | None,
    latest_metrics: list[dict],
    cost,
    system: SystemInfo,
    run: _RunRow,
) -> Cell:
    """``aggregate``: (count, sum, min, max) of the cell's run values; ``series``: its runs
    (oldest first; at least the latest); ``head_row``: the latest run's headline row of the case."""
    count, total, low, high = aggregate
    head = info.heads[case]
    ci: tuple[float | None, float | None]
    if count >= OLYMPIC_MIN_RUNS:
        value = (total - low - high) / (count - 2)
        note, ci = f"{count} runs, olympic mean", (low, high)
    elif count == 2:
        value, note, ci = total / 2, "2 runs, median", (low, high)
    else:
        within = (head_row or {}).get("ci95") or (None, None)
        value, note, ci = series[-1].value, "1 run", (within[0], within[1])
    mine = [m for m in latest_metrics if m["case"] == case]
    latest_head = next((m for m in mine if m["name"] == head.metric), None)
    price = system.description.get("accelerator_hour_price_usd") if system.description else None
    priced = result_cost(
        cost,
        price,
        [{"case": m["case"], "name": m["name"], "unit": m["unit"], "value": m["value"]} for m in mine],
        run.device,
        run.world_size,
    )
    return Cell(
        value,
        head.unit,
        head.higher_is_better,
        ci[0],
        ci[1],
        series,
        count,
        note,
        str(info.settings.get("regime") or ""),
        latest_head["roofline_fraction"] if latest_head is not None else None,
        cost_text(priced, case),
        head.metric,
        (head_row or {}).get("valid"),
        list((head_row or {}).get("beside") or ()),
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
