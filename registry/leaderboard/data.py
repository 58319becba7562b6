"""What the leaderboard shows, read from the registry: ranked rows per workload, case and
parameters, and every result of every system.

Only runs whose status is ``success`` and whose verification ``passed`` are read: a run
that failed, timed out or did not verify is never ranked. A system is the one a run was
submitted under (``perfsuite import DIR``), else the machine the record describes.
Several runs of one system with the same parameters make one row: the olympic mean of
their medians (MLPerf's score: drop the fastest and the slowest) when there are at least
three, else the median of their medians.
"""
from __future__ import annotations

import hashlib
import statistics
from collections import defaultdict
from dataclasses import dataclass, field

from sqlalchemy import select

from ..models import Metric, Run, Submission, SubmittedSystem, System, Workload
from ..queries import is_primary_candidate

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


def load(session) -> tuple[list[Board], dict[str, SystemInfo], dict[str, list[RunPoint]], dict[str, dict]]:
    """(boards, systems by key, run points by system key, ceilings records by system key)."""
    ranked = (select(Run.id, Run.run_id, Run.comparability_key, Run.params, Run.environment_id, Run.started_at,
                     Workload.name, Workload.version, System.key, System.hostname, System.gpu_name,
                     System.gpu_count, SubmittedSystem.org, SubmittedSystem.name.label("submitted_name"),
                     SubmittedSystem.description)
              .join(Workload, Run.workload_id == Workload.id)
              .join(System, Run.system_id == System.id)
              .outerjoin(Submission, Submission.run_id == Run.id)
              .outerjoin(SubmittedSystem, Submission.system_id == SubmittedSystem.id)
              .where(Run.status == "success", Run.verification_status == "passed"))
    runs = session.execute(ranked).all()
    metrics_by_run: dict[int, list] = defaultdict(list)
    run_pks = [r.id for r in runs]
    for start in range(0, len(run_pks), 5000):
        chunk = run_pks[start:start + 5000]
        for m in session.execute(
                select(Metric.run_id, Metric.case, Metric.name, Metric.unit, Metric.value, Metric.higher_is_better,
                       Metric.statistics, Metric.roofline_fraction)
                .where(Metric.run_id.in_(chunk)).order_by(Metric.run_id, Metric.position)):
            metrics_by_run[m.run_id].append(m)
    environments = _environments(session, {r.environment_id for r in runs})

    systems: dict[str, SystemInfo] = {}
    points: dict[str, list[RunPoint]] = defaultdict(list)
    ceilings: dict[str, dict] = {}
    grouped: dict[tuple, dict] = {}
    for r in runs:
        env = environments[r.environment_id]
        if r.description is not None:
            d = r.description
            key = _system_key("submitted", f"{r.org}/{r.submitted_name}")
            info = SystemInfo(key, r.submitted_name, d["submitter"], d["accelerator_model_name"],
                              d["accelerators_per_node"] * d["number_of_nodes"], d["framework"], d["status"], d,
                              d.get("host", r.hostname))
        else:
            key = _system_key("host", r.key)
            info = SystemInfo(key, r.hostname, "", r.gpu_name or env["measured_device"]["name"], r.gpu_count,
                              _framework(env), "", None, r.hostname)
        systems.setdefault(key, info)
        by_case: dict[str, list] = defaultdict(list)
        for m in metrics_by_run[r.id]:
            by_case[m.case].append(m)
        for case, ms in by_case.items():
            points[key].append(RunPoint(r.run_id, r.name, case, {m.name: (m.value, m.unit) for m in ms},
                                        {m.name: m.roofline_fraction for m in ms}))
            head = next((m for m in ms if is_primary_candidate(m.name)), ms[0])
            energy = next((m for m in ms if m.name.endswith("_per_j")), None)
            slot = grouped.setdefault((r.name, r.version, r.comparability_key, case), {
                "params": r.params, "metric": head.name, "systems": defaultdict(list)})
            if head.name != slot["metric"]:
                continue  # a run whose case reports another metric does not rank in this table
            slot["systems"][key].append((r, head, energy))
        if r.name == "kernels.ceilings":
            latest = ceilings.get(key)
            if latest is None or latest["started_at"] < r.started_at:
                ceilings[key] = {"started_at": r.started_at, "run_id": r.run_id, "pk": r.id}

    boards = []
    for (workload, version, ckey, case), slot in sorted(grouped.items(), key=lambda kv: kv[0][:2] + kv[0][3:]):
        first_pk = next(iter(slot["systems"].values()))[0][0].id
        division, scenario = _key_fields(session, first_pk)
        board = Board(workload, version, ckey, slot["params"], scenario, case, slot["metric"])
        for key, entries in slot["systems"].items():
            entries.sort(key=lambda e: e[0].started_at)
            values = [head.value for _, head, _ in entries]
            head = entries[-1][1]
            stats = head.statistics or {}
            if len(values) >= OLYMPIC_MIN_RUNS:
                value = statistics.fmean(sorted(values)[1:-1])
                note = f"{len(values)} runs, olympic mean"
                low, high = min(values), max(values)
            else:
                value = statistics.median(values)
                note = f"{len(values)} run" + ("s, median" if len(values) > 1 else "")
                low, high = (stats.get("ci95_low"), stats.get("ci95_high")) if len(values) == 1 else (min(values), max(values))
            energy = entries[-1][2]
            board.rows.append(ResultRow(
                systems[key], division,
                value, head.unit, head.higher_is_better, low, high, head.roofline_fraction,
                f"{energy.value:.4g} {energy.unit}" if energy is not None else None,
                [e[0].run_id for e in entries], note))
        board.rows.sort(key=lambda row: -row.value if row.higher_is_better else row.value)
        boards.append(board)
    ceiling_metrics = {}
    for key, found in ceilings.items():
        ceiling_metrics[key] = {m.case: (m.value, m.unit, m.name) for m in metrics_by_run[found["pk"]]
                                if m.name == ("tflops" if m.case.startswith("matmul.") else "gbps")}
    return boards, systems, points, ceiling_metrics


def _key_fields(session, run_pk: int) -> tuple[str, str | None]:
    """Division and scenario: part of the comparability key, so one run of a board tells them."""
    record = session.execute(select(Run.record).where(Run.id == run_pk)).scalar_one()
    return record["workload"]["division"], record["workload"]["scenario"]


def _environments(session, ids: set[int]) -> dict[int, dict]:
    from ..models import Environment

    out = {}
    id_list = list(ids)
    for start in range(0, len(id_list), 5000):
        for env_id, data in session.execute(select(Environment.id, Environment.data)
                                            .where(Environment.id.in_(id_list[start:start + 5000]))):
            out[env_id] = data
    return out
