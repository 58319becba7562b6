"""One metric of one workload over time: the points ``perfsuite history`` plots and scans
for change points, each with its comparability key and the key's settings (a series never
mixes keys). Reads metric rows by (workload, system or device, start time), the order the 0002
indexes serve."""

from __future__ import annotations

import json
from dataclasses import dataclass

from sqlalchemy import ColumnElement, Text, cast, null, select
from sqlalchemy.orm import Session

from perfsuite.schemas.headline import case_metric_names

from .compare import _system_filter
from .models import Metric, Run, Workload


@dataclass
class Point:
    run_id: str
    started_at: str
    comparability_key: str
    key_settings: dict
    params: dict
    host_key: str  # the registry's system id: one line per machine unless --system picks one
    case: str
    metric: str
    unit: str
    higher_is_better: bool
    median: float
    ci_low: float | None
    ci_high: float | None
    samples: list[float]


def metric_history(
    session: Session,
    workload: str,
    *,
    case: str | None = None,
    metric: str | None = None,
    system: str | None = None,
    samples: bool = True,
) -> list[Point]:
    """Successful, verified runs of ``workload`` oldest first, one point per run and case.

    Without ``metric``, each case's headline metric (``perfsuite.schemas.headline``), as the first
    run of its key declares it. ``samples=False`` leaves each point's raw samples out (empty):
    neither the series' medians nor their change points need them, and over thousands of runs
    they are most of what is read."""
    workload_ids: list[int] | None = None
    of_workload: ColumnElement[bool] = Workload.name == workload
    if session.get_bind().dialect.name == "postgresql":
        # The workload's ids first, so that PostgreSQL plans the runs' query knowing which workload
        # it reads: planning a join on the name, it guessed a twentieth of the runs and scanned
        # every run's row in parallel workers (0.14 s at 100,000 runs; with the ids, its index
        # entries: 0.07 s). SQLite's plan for the join is already the index's, and a little faster.
        workload_ids = list(session.scalars(select(Workload.id).where(Workload.name == workload)))
        of_workload = Run.workload_id.in_(workload_ids)
    query = select(
        Run.id,
        Run.run_id,
        Run.started_at,
        Run.comparability_key,
        cast(Run.params, Text).label("params"),  # as text: decoded once per distinct value below
        Run.system_id,
        Metric.case,
        Metric.name,
        Metric.unit,
        Metric.higher_is_better,
        Metric.value,
        # the two figures a point shows, read by the database (not a JSON document per run here)
        Metric.statistics["ci95_low"].as_float().label("ci_low"),
        Metric.statistics["ci95_high"].as_float().label("ci_high"),
        Metric.samples if samples else null().label("samples"),
        Metric.position,
    ).where(of_workload, Run.status == "success", Run.verification_status == "passed")
    if workload_ids is None:
        query = query.join(Workload, Run.workload_id == Workload.id)
    query = query.join(Metric, Metric.run_id == Run.id)
    if system is not None:
        query = query.where(_system_filter(system))
    if case is not None:
        query = query.where(Metric.case == case)
    if metric is not None:
        query = query.where(Metric.name == metric)
    rows = session.execute(query.order_by(Run.started_at, Run.id, Metric.position)).all()
    firsts: dict[str, int] = {}
    for r in rows:
        firsts.setdefault(r[3], r[0])  # the comparability key -> its first run's row id
    # A key's settings are what its hash was made of: read once per key, not per run (on SQLite
    # the column sits after the stored record in each row, so reading it reads the record too).
    settings: dict[str, dict] = {}
    if firsts:
        for ckey, found in session.execute(
            select(Run.comparability_key, Run.key_settings).where(Run.id.in_(list(firsts.values())))
        ):
            settings[ckey] = found or {}
    heads: dict[tuple[str, str], str] = {}
    if metric is None:  # each case's headline, by the one rule, from the first run of its key
        for ckey, pk in firsts.items():
            record = session.execute(select(Run.record).where(Run.id == pk)).scalar_one()
            for case, name in case_metric_names(record).items():
                heads[(ckey, case)] = name
    decode = _sample_decoder() if samples else None
    params: dict[str, dict] = {}  # a key's runs share their parameters' text: each decoded once
    points: list[Point] = []
    for (
        _pk,
        run_id,
        started_at,
        ckey,
        params_text,
        system_id,
        case_label,
        name,
        unit,
        higher_is_better,
        value,
        ci_low,
        ci_high,
        raw_samples,
        _position,
    ) in rows:  # unpacked, not read by name: a history is thousands of rows
        if metric is None and heads.get((ckey, case_label)) != name:
            continue
        decoded = params.get(params_text)
        if decoded is None:
            decoded = params[params_text] = json.loads(params_text)
        points.append(
            Point(
                run_id,
                started_at.isoformat(),
                ckey,
                settings.get(ckey, {}),
                decoded,
                str(system_id),
                case_label,
                name,
                unit,
                higher_is_better,
                value,
                ci_low,
                ci_high,
                decode(raw_samples) if decode is not None else [],
            )
        )
    return points


def _sample_decoder():
    """The samples' decoder, imported only where samples are read: it loads numpy, a tenth of
    a second that a history without samples does not need."""
    from perfsuite.schemas.samples import decode

    return decode
