"""What the leaderboard shows, read from the registry: ranked rows per workload, case and
parameters, and every result of every system.

Only runs whose status is ``success`` and whose verification ``passed`` are read: a run
that failed, timed out or did not verify is never ranked. A system is the one a run was
submitted under (``perfsuite import DIR``), else the machine the record describes.
Several runs of one system with the same parameters make one row: the olympic mean of
their medians (MLPerf's score: drop the fastest and the slowest) when there are at least
three, else the median of their medians; the CI shown is the run's own (one run) or the
range of the runs' medians; energy and % of ceiling come from the latest stored run, and
so does the cost: the run's own, else one at its submitted system's price (``perfsuite.schemas.cost``).
"""

from __future__ import annotations

import hashlib
from collections import defaultdict
from dataclasses import dataclass, field

from sqlalchemy import func, select

from perfsuite.schemas import CEILINGS_WORKLOAD
from perfsuite.schemas.cost import cost_text, result_cost
from perfsuite.schemas.headline import case_headline

from ..models import Metric, Run, Submission, SubmittedSystem, System, Workload

OLYMPIC_MIN_RUNS = 3


@dataclass
class SystemInfo:
    key: str  # stable identity, also the page's file name
    name: str
    submitter: str
    accelerator: str
    accelerator_count: int
    framework: str
    availability: str
    description: dict | None  # the submitted description, when there is one
    host: str


@dataclass
class ResultRow:
    """One system's result for one workload, parameters and case."""

    system: SystemInfo
    division: str
    value: float
    unit: str
    higher_is_better: bool
    ci_low: float | None
    ci_high: float | None
    ceiling_fraction: float | None
    energy: str | None  # "947 GFLOP/J"
    run_ids: list[str]
    runs_note: str  # "1 run", "5 runs, olympic mean"
    cost: str | None = None  # "0.42 USD per 1M tokens": the latest run's cost, or its submitted system's price


@dataclass
class Board:
    """One ranked table: a workload at one version, parameters and case."""

    workload: str
    version: int
    comparability_key: str
    params: dict
    scenario: str | None
    case: str
    metric: str
    rows: list[ResultRow] = field(default_factory=list)

    @property
    def anchor(self) -> str:
        return hashlib.sha256(f"{self.comparability_key}|{self.case}".encode()).hexdigest()[:12]


@dataclass
class RunPoint:
    """A run's metrics as the system page and its roofline need them."""

    run_id: str
    workload: str
    case: str
    metrics: dict[str, tuple[float, str]]  # name -> (value, unit)
    roofline: dict[str, float | None]  # name -> fraction


def _system_key(kind: str, ident: str) -> str:
    return hashlib.sha256(f"{kind}|{ident}".encode()).hexdigest()[:16]


def _framework(env: dict) -> str:
    runtime = env.get("runtime") or {}
    torch = runtime.get("torch") or (env.get("packages") or {}).get("torch")
    return f"PyTorch {torch}" if torch else ""


def _ranked(query, workload: str | None):
    query = query.where(Run.status == "success", Run.verification_status == "passed")
    return query.where(Workload.name == workload) if workload is not None else query


def load(
    session, workload: str | None = None
) -> tuple[list[Board], dict[str, SystemInfo], dict[str, list[RunPoint]], dict[str, dict]]:
    """(boards, systems by key, run points by system key, ceilings by system key); with
    ``workload``, only that workload (one page's worth).

    Built to stay fast on a large registry: the headline metric of each (parameters, case)
    is chosen from one run (``perfsuite.schemas.headline``, the one rule), then SQL aggregates that
    metric per system (count, sum, min, max: enough for the olympic mean), and only each row's latest
    run is read in full.
    """
    sub_system = Submission.system_id.label("sub_system")
    # 1. one representative run per comparability key: its cases' headline metrics and key fields
    reps = session.execute(
        _ranked(
            select(Run.comparability_key, func.min(Run.id)).join(Workload, Run.workload_id == Workload.id), workload
        ).group_by(Run.comparability_key)
    ).all()
    headline: dict[tuple[str, str], str] = {}
    key_info: dict[str, tuple] = {}
    for ckey, rep in reps:
        record = session.execute(select(Run.record).where(Run.id == rep)).scalar_one()
        w = record["workload"]
        for case in dict.fromkeys(m["case"] for m in record["metrics"]):
            headline[(ckey, case)] = case_headline(record["metrics"], case, w.get("primary_metric"))["name"]
        key_info[ckey] = (w["name"], w["version"], w["params"], w["scenario"], w["division"])
    if not headline:
        return [], {}, {}, {}
    # 2. the headline metric aggregated per key, case and system
    groups = session.execute(
        _ranked(
            select(
                Run.comparability_key,
                Metric.case,
                Metric.name,
                Run.system_id,
                sub_system,
                func.count(),
                func.sum(Metric.value),
                func.min(Metric.value),
                func.max(Metric.value),
                func.max(Run.id),
            )
            .join(Workload, Run.workload_id == Workload.id)
            .join(Metric, Metric.run_id == Run.id)
            .outerjoin(Submission, Submission.run_id == Run.id),
            workload,
        )
        .where(Metric.name.in_(sorted(set(headline.values()))))
        .group_by(Run.comparability_key, Metric.case, Metric.name, Run.system_id, sub_system)
    ).all()
    groups = [g for g in groups if headline.get((g[0], g[1])) == g[2]]
    # 3. each row's latest run, in full (metrics without samples), and what describes its system
    latest_pks = sorted({g[9] for g in groups})
    latest_metrics: dict[int, list] = defaultdict(list)
    latest_runs: dict[int, tuple] = {}
    latest_costs: dict[int, dict] = {}
    for start in range(0, len(latest_pks), 2000):
        chunk = latest_pks[start : start + 2000]
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
        for row in session.execute(
            select(Run.id, Run.run_id, Run.environment_id, Run.started_at, Run.device, Run.world_size, Workload.name)
            .join(Workload, Run.workload_id == Workload.id)
            .where(Run.id.in_(chunk))
        ):
            latest_runs[row.id] = row
        # Only the record's cost section (a JSON path in the database), never the whole record.
        for pk, cost in session.execute(select(Run.id, Run.record["cost"]).where(Run.id.in_(chunk))):
            if cost:
                latest_costs[pk] = cost
    environments = _environments(session, {r.environment_id for r in latest_runs.values()})
    host_rows = {
        row.id: row
        for row in session.execute(
            select(System.id, System.key, System.hostname, System.gpu_name, System.gpu_count).where(
                System.id.in_({g[3] for g in groups})
            )
        )
    }
    submitted = {
        row.id: row
        for row in session.execute(
            select(SubmittedSystem.id, SubmittedSystem.org, SubmittedSystem.name, SubmittedSystem.description).where(
                SubmittedSystem.id.in_({g[4] for g in groups if g[4] is not None})
            )
        )
    }
    # 4. every ranked run id of each row, for the links to the records
    run_links: dict[tuple, list[str]] = defaultdict(list)
    for ckey, system_id, sub_id, run_id in session.execute(
        _ranked(
            select(Run.comparability_key, Run.system_id, sub_system, Run.run_id)
            .join(Workload, Run.workload_id == Workload.id)
            .outerjoin(Submission, Submission.run_id == Run.id),
            workload,
        )
        .where(Run.comparability_key.in_(list(key_info)))
        .order_by(Run.started_at, Run.id)
    ):
        run_links[(ckey, system_id, sub_id)].append(run_id)

    systems: dict[str, SystemInfo] = {}
    points: dict[str, list[RunPoint]] = defaultdict(list)
    ceilings: dict[str, dict] = {}
    ceilings_at: dict[str, object] = {}
    boards: dict[tuple, Board] = {}
    for ckey, case, name, system_id, sub_id, count, total, low_v, high_v, latest_pk in groups:
        run = latest_runs[latest_pk]
        env = environments[run.environment_id]
        info = _system_info(host_rows[system_id], submitted.get(sub_id), env)
        systems.setdefault(info.key, info)
        ms = [m for m in latest_metrics[latest_pk] if m.case == case]
        head = next(m for m in ms if m.name == name)
        energy = next((m for m in ms if m.name.endswith("_per_j")), None)
        point = RunPoint(
            run.run_id,
            run.name,
            case,
            {m.name: (m.value, m.unit) for m in ms},
            {m.name: m.roofline_fraction for m in ms},
        )
        points[info.key].append(point)
        if run.name == CEILINGS_WORKLOAD and (info.key not in ceilings_at or ceilings_at[info.key] < run.started_at):
            ceilings_at[info.key] = run.started_at
            ceilings[info.key] = {}
        if run.name == CEILINGS_WORKLOAD and ceilings_at[info.key] == run.started_at:
            wanted = "tflops" if case.startswith("matmul.") else "gbps"
            ceilings[info.key].update({case: (m.value, m.unit, m.name) for m in ms if m.name == wanted})  # noqa: B035 - the case's one metric
        # A run without its own cost is priced at its submitted system's price, labelled as such.
        price = info.description.get("accelerator_hour_price_usd") if info.description else None
        cost = result_cost(
            latest_costs.get(latest_pk),
            price,
            [{"case": m.case, "name": m.name, "unit": m.unit, "value": m.value} for m in ms],
            run.device,
            run.world_size,
        )
        wname, version, params, scenario, division = key_info[ckey]
        board = boards.setdefault(
            (wname, version, ckey, case), Board(wname, version, ckey, params, scenario, case, name)
        )
        if count >= OLYMPIC_MIN_RUNS:
            value, note, ci = (total - low_v - high_v) / (count - 2), f"{count} runs, olympic mean", (low_v, high_v)
        elif count == 2:
            value, note, ci = total / 2, "2 runs, median", (low_v, high_v)
        else:
            stats = head.statistics or {}
            value, note, ci = head.value, "1 run", (stats.get("ci95_low"), stats.get("ci95_high"))
        board.rows.append(
            ResultRow(
                info,
                division,
                value,
                head.unit,
                head.higher_is_better,
                ci[0],
                ci[1],
                head.roofline_fraction,
                f"{energy.value:.4g} {energy.unit}" if energy is not None else None,
                run_links[(ckey, system_id, sub_id)],
                note,
                cost_text(cost, case),
            )
        )
    out = []
    for key in sorted(boards, key=lambda k: (k[0], k[1], k[3], k[2])):
        board = boards[key]
        board.rows.sort(key=lambda row: -row.value if row.higher_is_better else row.value)
        out.append(board)
    return out, systems, points, ceilings


def _system_info(host, submitted, env: dict) -> SystemInfo:
    if submitted is not None:
        d = submitted.description
        return SystemInfo(
            _system_key("submitted", f"{submitted.org}/{submitted.name}"),
            submitted.name,
            d["submitter"],
            d["accelerator_model_name"],
            d["accelerators_per_node"] * d["number_of_nodes"],
            d["framework"],
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
        _framework(env),
        "",
        None,
        host.hostname,
    )


def _environments(session, ids: set[int]) -> dict[int, dict]:
    from ..models import Environment

    out = {}
    id_list = list(ids)
    for start in range(0, len(id_list), 5000):
        for env_id, data in session.execute(
            select(Environment.id, Environment.data).where(Environment.id.in_(id_list[start : start + 5000]))
        ):
            out[env_id] = data
    return out
