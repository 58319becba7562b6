"""Storing many records at once: the same checks as :meth:`Registry.store` (schema, sha256,
one hash per run id), written with one multi-row INSERT per table and batch.

For imports of whole archives (a leaderboard's history, a cluster's nightly runs) where
one transaction per record would dominate. A batch is all-or-nothing; records already
stored with the same hash are skipped, a run id stored with another hash is refused.
"""

from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass, field

from sqlalchemy import insert, select

from .errors import RegistryError
from .models import Environment, Metric, Run, System, Workload
from .records import canonical_json, check_sha256, parse_timestamp, validate_record
from .store import _get_or_create, key_columns, system_key

DEFAULT_BATCH = 1000


@dataclass
class BulkOutcome:
    stored: int = 0
    duplicate: int = 0
    validate_s: float = 0.0  # time spent in schema and hash checks
    write_s: float = 0.0  # time spent writing, commits included
    batches: list[float] = field(default_factory=list)


def store_many(registry, records, batch: int = DEFAULT_BATCH) -> BulkOutcome:
    """Store an iterable of records in batches of ``batch``; returns counts and timings."""
    outcome = BulkOutcome()
    chunk: list[dict] = []
    for record in records:
        chunk.append(record)
        if len(chunk) == batch:
            _store_batch(registry, chunk, outcome)
            chunk = []
    if chunk:
        _store_batch(registry, chunk, outcome)
    return outcome


def _store_batch(registry, records: list[dict], outcome: BulkOutcome) -> None:
    start = time.perf_counter()
    hashes = []
    for record in records:
        validate_record(record)
        hashes.append(check_sha256(record))
    checked = time.perf_counter()
    outcome.validate_s += checked - start
    with registry._write_sessions() as session, session.begin():
        ids = [r["run_id"] for r in records]
        existing = dict(session.execute(select(Run.run_id, Run.record_sha256).where(Run.run_id.in_(ids))).all())
        shared: dict[tuple, int] = {}
        run_rows, metric_rows, seen = [], [], set()
        for record, sha in zip(records, hashes):
            rid = record["run_id"]
            if rid in existing or rid in seen:
                stored_sha = existing.get(rid) or next(h for r, h in zip(records, hashes) if r["run_id"] == rid)
                if stored_sha != sha:
                    raise RegistryError(
                        f"run {rid} is already stored with sha256 {stored_sha}; "
                        f"refusing a different record (sha256 {sha})"
                    )
                outcome.duplicate += 1
                continue
            seen.add(rid)
            run_rows.append(_run_values(session, record, sha, shared))
            metric_rows.append(record["metrics"])
        if run_rows:
            pks = session.execute(insert(Run).returning(Run.id, sort_by_parameter_order=True), run_rows).scalars().all()
            rows = []
            for pk, metrics in zip(pks, metric_rows):
                for position, m in enumerate(metrics):
                    roofline = m["roofline"] or {}
                    rows.append(
                        {
                            "run_id": pk,
                            "position": position,
                            "case": m["case"],
                            "name": m["name"],
                            "unit": m["unit"],
                            "value": m["value"],
                            "higher_is_better": m["higher_is_better"],
                            "samples": m["samples"],
                            "statistics": m["statistics"],
                            "roofline_resource": roofline.get("resource"),
                            "roofline_fraction": roofline.get("fraction"),
                            "ceiling_run_id": roofline.get("ceiling_run_id"),
                        }
                    )
            if rows:
                session.execute(insert(Metric), rows)
            outcome.stored += len(run_rows)
    done = time.perf_counter()
    outcome.write_s += done - checked
    outcome.batches.append(done - start)


def _run_values(session, record: dict, sha256: str, shared: dict[tuple, int]) -> dict:
    env, wl = record["environment"], record["workload"]
    key, system_columns = system_key(env)
    if ("system", key) not in shared:
        shared[("system", key)] = _get_or_create(session, System, {"key": key}, system_columns)
    env_sha = hashlib.sha256(canonical_json(env).encode("utf-8")).hexdigest()
    if ("env", env_sha) not in shared:
        shared[("env", env_sha)] = _get_or_create(session, Environment, {"sha256": env_sha}, {"data": env})
    wkey = ("workload", wl["name"], wl["version"])
    if wkey not in shared:
        shared[wkey] = _get_or_create(
            session, Workload, {"name": wl["name"], "version": wl["version"]}, {"category": wl["category"]}
        )
    return {
        "run_id": record["run_id"],
        "workload_id": shared[wkey],
        "system_id": shared[("system", key)],
        "environment_id": shared[("env", env_sha)],
        **key_columns(record),
        "params": wl["params"],
        "device": record["controls"]["device"],
        "device_key": env["measured_device"]["key"],
        "status": record["status"],
        "error": record["error"],
        "started_at": parse_timestamp(record["started_at"], "started_at"),
        "finished_at": parse_timestamp(record["finished_at"], "finished_at"),
        "verification_status": record["verification"]["status"],
        "plugin_name": wl["plugin"]["name"],
        "plugin_distribution": wl["plugin"]["distribution"],
        "plugin_version": wl["plugin"]["version"],
        "launcher": record["launch"]["launcher"],
        "world_size": record["launch"]["world_size"],
        "record_sha256": sha256,
        "record": record,
    }
