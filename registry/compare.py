"""Finding the runs to compare: by run id, or the latest run of a workload on a system or
at a suite commit. The statistics live with the host (``perfsuite.analysis.compare``); this module only
reads the registry."""

from __future__ import annotations

from sqlalchemy import or_, select
from sqlalchemy.orm import Session

from .errors import RegistryError
from .models import Run, Submission, SubmittedSystem, System, Workload


def _system_filter(system: str):
    """A system is named by its submitted name, its host name or a device-key prefix."""
    submitted = (
        select(Submission.run_id)
        .join(SubmittedSystem, Submission.system_id == SubmittedSystem.id)
        .where(SubmittedSystem.name == system)
    )
    hosts = select(System.id).where(System.hostname == system)
    return or_(Run.id.in_(submitted), Run.system_id.in_(hosts), Run.device_key.startswith(system.lower()))


def latest_run(
    session: Session,
    workload: str,
    *,
    system: str | None = None,
    commit: str | None = None,
    comparability_key: str | None = None,
) -> dict:
    """The newest successful run of ``workload`` matching the filters (full record)."""
    query = (
        select(Run.id, Run.record)
        .join(Workload, Run.workload_id == Workload.id)
        .where(Workload.name == workload, Run.status == "success")
    )
    if system is not None:
        query = query.where(_system_filter(system))
    if comparability_key is not None:
        query = query.where(Run.comparability_key == comparability_key)
    query = query.order_by(Run.started_at.desc(), Run.id.desc())
    if commit is None:
        found = session.execute(query.limit(1)).first()
    else:  # the commit lives inside the record's environment: scan this workload's runs
        want = commit.lower()
        found = next(
            (
                row
                for row in session.execute(query)
                if (row.record["environment"]["suite"].get("git_commit") or "").startswith(want)
            ),
            None,
        )
    if found is None:
        where = ", ".join(f"{k} {v}" for k, v in (("system", system), ("commit", commit)) if v)
        raise RegistryError(
            f"no successful run of {workload}"
            + (f" with {where}" if where else "")
            + (" and the same parameters" if comparability_key else "")
        )
    return found.record


def runs_of_key(
    session: Session,
    workload: str,
    comparability_key: str,
    *,
    system: str | None = None,
    commit: str | None = None,
    limit: int = 5,
) -> list[dict]:
    """The newest ``limit`` successful runs of ``workload`` with this key (full records, newest
    first), on a system and at a suite commit where given; an empty side raises RegistryError."""
    query = (
        select(Run.record)
        .join(Workload, Run.workload_id == Workload.id)
        .where(Workload.name == workload, Run.status == "success", Run.comparability_key == comparability_key)
    )
    if system is not None:
        query = query.where(_system_filter(system))
    query = query.order_by(Run.started_at.desc(), Run.id.desc())
    want = commit.lower() if commit is not None else None
    found = []
    for (record,) in session.execute(query):
        if want is not None and not (record["environment"]["suite"].get("git_commit") or "").startswith(want):
            continue
        found.append(record)
        if len(found) == limit:
            break
    if not found:
        where = ", ".join(f"{k} {v}" for k, v in (("system", system), ("commit", commit)) if v)
        raise RegistryError(
            f"no successful run of {workload} with the same settings" + (f" and {where}" if where else "")
        )
    return found
