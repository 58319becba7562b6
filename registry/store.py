"""Storing a run record: validate, re-hash, then write it and its rows in one transaction.

Idempotent by run id + sha256, so the runner, ``perfsuite import`` and a retry after a
crash can all store the same file: same run id and same hash is a no-op ("duplicate"),
same run id with a different hash is refused (two different records claim one run).

Shared rows (system, environment, workload) are inserted with ``ON CONFLICT DO NOTHING``
and then read back: two processes storing runs of the same box at once both succeed
instead of one losing a unique-constraint race.
"""

from __future__ import annotations

import hashlib

from sqlalchemy import select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session
from sqlalchemy.sql import Executable

from perfsuite.schemas import physics
from perfsuite.schemas.canonical import canonical_json, compact_record
from perfsuite.schemas.comparability import key_settings, settings_key
from perfsuite.schemas.seal import seal_record
from perfsuite.schemas.validate import parse_timestamp

from .errors import RecordInvalid, RegistryError
from .models import Environment, Metric, Run, System, Workload

STORED = "stored"
DUPLICATE = "duplicate"


def system_key(environment: dict) -> tuple[str, dict]:
    """The natural key of a system (host, CPU model, GPU names) and its column values."""
    gpu_names = [gpu["name"] for gpu in environment["gpus"]]
    identity = {"host": environment["host"], "cpu_model": environment["cpu"]["model"], "gpus": gpu_names}
    key = hashlib.sha256(canonical_json(identity).encode("utf-8")).hexdigest()
    distinct = list(dict.fromkeys(gpu_names))
    return key, {
        "hostname": environment["host"],
        "cpu_model": environment["cpu"]["model"],
        "gpu_name": ", ".join(distinct) if distinct else None,
        "gpu_count": len(gpu_names),
    }


def key_columns(record: dict) -> dict:
    """The run's comparability key, its settings and its regime, recomputed from the record's own
    content: a key stored in the record is never trusted (records with different parameters and one
    planted key must not pool)."""
    settings = key_settings(record)
    return {"comparability_key": settings_key(settings), "key_settings": settings, "regime": settings["regime"]}


def _insert_ignore(session: Session, model, conflict_columns: list[str], values: dict) -> None:
    dialect = session.get_bind().dialect.name
    statement: Executable
    if dialect == "postgresql":
        from sqlalchemy.dialects.postgresql import insert as pg_insert

        statement = pg_insert(model).values(**values).on_conflict_do_nothing(index_elements=conflict_columns)
    elif dialect == "sqlite":
        from sqlalchemy.dialects.sqlite import insert as sqlite_insert

        statement = sqlite_insert(model).values(**values).on_conflict_do_nothing(index_elements=conflict_columns)
    else:  # open_registry refuses other URLs; this guards direct use of a session
        raise RegistryError(f"unsupported database dialect {dialect!r}")
    session.execute(statement)


def _get_or_create(session: Session, model, match: dict, extra: dict) -> int:
    _insert_ignore(session, model, list(match), {**match, **extra})
    query = select(model.id)
    for column, value in match.items():
        query = query.where(getattr(model, column) == value)
    return session.execute(query).scalar_one()


def _existing(session: Session, run_id: str, sha256: str) -> str | None:
    found = session.execute(select(Run.record_sha256).where(Run.run_id == run_id)).scalar_one_or_none()
    if found is None:
        return None
    if found != sha256:
        raise RegistryError(
            f"run {run_id} is already stored with sha256 {found}; refusing a different record (sha256 {sha256})"
        )
    return DUPLICATE


def _run_row(session: Session, record: dict, sha256: str) -> Run:
    from perfsuite.schemas.samples import standalone

    record = compact_record(record)  # long sample lists encoded; the same sha256
    env = record["environment"]
    wl = record["workload"]
    key, system_columns = system_key(env)
    system_id = _get_or_create(session, System, {"key": key}, system_columns)
    env_sha = hashlib.sha256(canonical_json(env).encode("utf-8")).hexdigest()
    environment_id = _get_or_create(session, Environment, {"sha256": env_sha}, {"data": env})
    workload_id = _get_or_create(
        session, Workload, {"name": wl["name"], "version": wl["version"]}, {"category": wl["category"]}
    )
    run = Run(
        run_id=record["run_id"],
        workload_id=workload_id,
        system_id=system_id,
        environment_id=environment_id,
        **key_columns(record),
        params=wl["params"],
        device=record["controls"]["device"],
        device_key=env["measured_device"]["key"],
        status=record["status"],
        error=record["error"],
        started_at=parse_timestamp(record["started_at"], "started_at"),
        finished_at=parse_timestamp(record["finished_at"], "finished_at"),
        verification_status=record["verification"]["status"],
        plugin_name=wl["plugin"]["name"],
        plugin_distribution=wl["plugin"]["distribution"],
        plugin_version=wl["plugin"]["version"],
        launcher=record["launch"]["launcher"],
        world_size=record["launch"]["world_size"],
        record_sha256=sha256,
        record=record,
    )
    for position, m in enumerate(record["metrics"]):
        roofline = m["roofline"] or {}
        run.metrics.append(
            Metric(
                position=position,
                case=m["case"],
                name=m["name"],
                unit=m["unit"],
                value=m["value"],
                higher_is_better=m["higher_is_better"],
                samples=standalone(m, record["metrics"]),
                statistics=m["statistics"],
                roofline_resource=roofline.get("resource"),
                roofline_fraction=roofline.get("fraction"),
                ceiling_run_id=roofline.get("ceiling_run_id"),
            )
        )
    return run


def _store_in(session: Session, record: dict, sha256: str) -> str:
    """Store one checked record inside the caller's transaction."""
    if _existing(session, record["run_id"], sha256):
        return DUPLICATE
    try:
        with session.begin_nested():  # a concurrent writer may insert this run id first
            session.add(_run_row(session, record, sha256))
            session.flush()
    except IntegrityError as exc:
        if _existing(session, record["run_id"], sha256):
            return DUPLICATE
        raise RegistryError(f"storing run {record['run_id']} failed: {str(exc.orig).splitlines()[0]}") from exc
    return STORED


IMPOSSIBLE = "impossible figure: "  # how a refusal of check_physics begins


def check_physics(record: dict) -> None:
    """Raise :class:`RecordInvalid` for a figure no measurement can produce
    (:mod:`perfsuite.schemas.physics`): the first, and how many more."""
    found = physics.problems(record)
    if found:
        more = f" (and {len(found) - 1} more)" if len(found) > 1 else ""
        raise RecordInvalid(f"{IMPOSSIBLE}{found[0]}{more}")


def check_storable(record) -> str:
    """Everything a record must pass to be stored: its seal (depth, schema, hash:
    :func:`~perfsuite.schemas.seal.seal_record`) and :func:`check_physics`; its sha256."""
    sha256 = seal_record(record).sha256
    check_physics(record)
    return sha256


def store_record(session_factory, record: dict) -> str:
    """Validate and store one record; "stored" or "duplicate". Raises on any refusal.

    ``session_factory`` must open write transactions (on SQLite: ``BEGIN IMMEDIATE``, so the
    duplicate check and the insert happen under one write lock).
    """
    sha256 = check_storable(record)
    with session_factory() as session, session.begin():
        return _store_in(session, record, sha256)


def store_records(session_factory, records: list[dict]) -> list[str]:
    """Check every record, then store them all in one transaction: all or none.

    A record that fails its checks raises :class:`RecordInvalid` naming its position
    (1-based) before anything is written; a conflict while storing rolls back the lot.
    """
    hashes = []
    for position, record in enumerate(records, start=1):
        try:
            hashes.append(check_storable(record))
        except RecordInvalid as exc:
            raise RecordInvalid(f"record {position} of {len(records)}: {exc}") from exc
    with session_factory() as session, session.begin():
        return [_store_in(session, record, sha256) for record, sha256 in zip(records, hashes)]
