"""Reading the registry: run summaries, full records, the latest ceilings of a device, history.

Summaries are plain JSON-friendly dicts (timestamps as ISO 8601 strings in UTC), so the CLI
can print them as a table or dump them with ``--json`` unchanged.
"""

from __future__ import annotations

import re
from datetime import datetime

from sqlalchemy import func, or_, select
from sqlalchemy.orm import Session, aliased, defer

from perfsuite.schemas import CEILINGS_WORKLOAD
from perfsuite.schemas.headline import headline
from perfsuite.schemas.throttle import case_summary, throttle_flag

from .errors import RegistryError
from .models import Metric, Run, System, Workload

_RUN_ID_PREFIX = re.compile(r"^[0-9a-f]{1,32}$")
# The headline metric the run's workload named (absent from records older than the field).
_PRIMARY_METRIC = Run.record[("workload", "primary_metric")].as_string()
# What NVML saw while each case was timed (absent from records older than the field, and
# from runs without NVML): read from the stored record, so older registries need no migration.
_THROTTLE = Run.record[("details", "throttle")]


def _summary_query():
    return (
        select(Run, Workload.name, Workload.version, System.hostname, _PRIMARY_METRIC, _THROTTLE)
        .join(Workload, Run.workload_id == Workload.id)
        .join(System, Run.system_id == System.id)
        .options(defer(Run.record))
    )  # summaries never need the whole record


def _summaries(session: Session, rows) -> list[dict]:
    rows = list(rows)
    by_run: dict[int, list[dict]] = {run.id: [] for run, *_ in rows}
    if by_run:
        metric_rows = session.execute(
            select(Metric.run_id, Metric.case, Metric.name, Metric.unit, Metric.value)
            .where(Metric.run_id.in_(list(by_run)))
            .order_by(Metric.run_id, Metric.position)
        )
        for run_pk, case, name, unit, value in metric_rows:
            by_run[run_pk].append({"case": case, "name": name, "unit": unit, "value": value})
    out = []
    for run, name, version, host, primary_name, throttle in rows:
        primary = headline(by_run[run.id], primary_name) or {}
        nvml = case_summary(throttle, primary.get("case"))
        out.append(
            {
                "run_id": run.run_id,
                "workload": name,
                "version": version,
                "device": run.device,
                "device_key": run.device_key,
                "host": host,
                "status": run.status,
                "error": run.error,
                "verification": run.verification_status,
                "started_at": run.started_at.isoformat(),
                "comparability_key": run.comparability_key,
                "case": primary.get("case"),
                "metric": primary.get("name"),
                "value": primary.get("value"),
                "unit": primary.get("unit"),
                # the headline case's NVML summary and its flag ("power-capped", "thermal slowdown")
                "throttle": nvml,
                "throttled": throttle_flag(nvml),
            }
        )
    return out


def results(
    session: Session,
    workload: str | None = None,
    since: datetime | None = None,
    limit: int | None = 50,
    status: str | None = None,
) -> list[dict]:
    """Summaries of stored runs, newest first, optionally filtered."""
    return _summaries(session, session.execute(_filtered(_summary_query(), workload, since, limit, status)))


def run_ids(
    session: Session,
    workload: str | None = None,
    since: datetime | None = None,
    limit: int | None = None,
    status: str | None = None,
) -> list[str]:
    """The run ids :func:`results` would list, newest first, and nothing else read (an export
    reads the records themselves next)."""
    query = select(Run.run_id).join(Workload, Run.workload_id == Workload.id)
    return list(session.scalars(_filtered(query, workload, since, limit, status)))


def _filtered(query, workload: str | None, since: datetime | None, limit: int | None, status: str | None):
    """``query`` (over runs joined to their workload) narrowed by the filters, newest first."""
    if workload is not None:
        query = query.where(Workload.name == workload)
    if since is not None:
        if since.tzinfo is None or since.utcoffset() is None:
            raise RegistryError(f"since={since.isoformat()} has no timezone; pass an aware datetime")
        query = query.where(Run.started_at >= since)
    if status is not None:
        query = query.where(Run.status == status)
    query = query.order_by(Run.started_at.desc(), Run.id.desc())
    if limit is not None:
        query = query.limit(limit)
    return query


def history(session: Session, workload: str, params: dict | None = None, device_key: str | None = None) -> list[dict]:
    """Summaries of one workload's runs, oldest first; with ``params``, only runs that
    resolved exactly those parameters (compared as JSON values)."""
    query = _summary_query().where(Workload.name == workload)
    if device_key is not None:
        query = query.where(Run.device_key == device_key)
    rows = list(session.execute(query.order_by(Run.started_at, Run.id)))
    if params is not None:
        rows = [row for row in rows if row[0].params == params]
    return _summaries(session, rows)


def get(session: Session, run_id_or_prefix: str) -> dict:
    """The full stored record of a run, by its id or a unique prefix of it."""
    prefix = run_id_or_prefix.strip().lower()
    if not _RUN_ID_PREFIX.match(prefix):
        raise RegistryError(f"{run_id_or_prefix!r} is not a run id (1 to 32 hex digits)")
    # a range, not LIKE 'prefix%' (which SQLite answers by reading every run): ids are lowercase
    # hex, so every id starting with the prefix sorts between it and prefix + "g"
    in_range = (Run.run_id >= prefix) & (Run.run_id < prefix + "g")
    found = session.execute(select(Run.run_id).where(in_range).order_by(Run.run_id).limit(6)).all()
    if not found:
        raise RegistryError(f"no run with id {prefix}")
    if len(found) > 1:
        shown = ", ".join(row.run_id for row in found[:5])
        raise RegistryError(
            f"run id prefix {prefix} is ambiguous: matches {shown}{' and more' if len(found) > 5 else ''}"
        )
    return session.execute(select(Run.record).where(Run.run_id == found[0].run_id)).scalar_one()


def latest_passed(session: Session, workload: str, device_key: str) -> dict | None:
    """The newest successful, verified record of ``workload`` measured on ``device_key``."""
    return session.execute(_passed_newest_first(workload, device_key).limit(1)).scalar_one_or_none()


def latest_ceiling(session: Session, workload: str, device_key: str, *, quick_allowed: bool) -> dict | None:
    """The newest passed record of a ceiling workload on ``device_key`` that ran its full
    preset. A quick run times small shapes and sizes, so its figures are no upper bound
    for anything: it is returned only where ``quick_allowed`` and no full run exists."""
    newest_quick = None
    for record in session.execute(_passed_newest_first(workload, device_key).execution_options(yield_per=16)).scalars():
        if not record["workload"].get("quick"):
            return record
        newest_quick = newest_quick or record
    return newest_quick if quick_allowed else None


def latest_ceilings(session: Session, device_key: str) -> dict | None:
    """The ``kernels.ceilings`` record the device's roofline is drawn under: its newest full
    run, or its newest quick run where it has no full one."""
    return latest_ceiling(session, CEILINGS_WORKLOAD, device_key, quick_allowed=True)


def _passed_newest_first(workload: str, device_key: str):
    return (
        select(Run.record)
        .join(Workload, Run.workload_id == Workload.id)
        .where(
            Workload.name == workload,
            Run.device_key == device_key,
            Run.status == "success",
            Run.verification_status == "passed",
        )
        .order_by(Run.started_at.desc(), Run.id.desc())
    )


# From this many ids on, one pass over the stored ids beats a range query per prefix.
_PREFIX_SCAN_FROM = 200


def ids_sharing_prefixes(session: Session, run_ids: list[str], length: int) -> set[str]:
    """The stored run ids that share their first ``length`` digits with one of ``run_ids``:
    what deciding each id's shortest unique prefix needs. A range query per prefix for a few
    ids (ids are lowercase hex: every id starting with a prefix sorts between it and prefix +
    "g"); one pass over the run_id index for many (a history of 5,000 runs)."""
    prefixes = {run_id[:length] for run_id in run_ids}
    if len(prefixes) >= _PREFIX_SCAN_FROM:
        # The stored ids that share their first digits with another, found by the database along
        # the run_id index (each id beside its neighbours in order): a handful of rows, not every
        # id. PostgreSQL compares each id with the one before and after it (lag, lead: 0.05 s at
        # 100,000 runs; its plan for the self-join takes 0.3 s), SQLite joins each id to those
        # after it sharing its digits (0.02 s; its window functions take 0.2 s).
        def head(column):
            return func.substr(column, 1, length)

        if session.get_bind().dialect.name == "postgresql":
            ordered = select(
                Run.run_id,
                func.lag(Run.run_id).over(order_by=Run.run_id).label("before"),
                func.lead(Run.run_id).over(order_by=Run.run_id).label("after"),
            ).subquery()
            shared = select(ordered.c.run_id).where(
                or_(head(ordered.c.before) == head(ordered.c.run_id), head(ordered.c.after) == head(ordered.c.run_id))
            )
            sharing = set(session.scalars(shared))
        else:
            later = aliased(Run)
            pairs = session.execute(
                select(Run.run_id, later.run_id).join(
                    later, (later.run_id > Run.run_id) & (later.run_id < head(Run.run_id).concat("g"))
                )
            )
            sharing = {run_id for pair in pairs for run_id in pair}
        return {run_id for run_id in sharing if run_id[:length] in prefixes}
    found: set[str] = set()
    for prefix in prefixes:
        found.update(session.scalars(select(Run.run_id).where(Run.run_id >= prefix, Run.run_id < prefix + "g")))
    return found
