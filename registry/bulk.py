"""Storing many records at once: a public round of 100,000 records in under a minute.

Each record is checked once (nesting depth, schema, timestamps, sha256), in worker processes
when there are many, and turned into the text its rows hold; the writer then stores batches
with one multi-row statement per table through the database driver itself: ``executemany``
on SQLite, ``COPY`` on PostgreSQL. What each record costs, measured with cProfile on 1,000
synthetic records (``bench/registry_scale.py``): the pure Python schema check was 20 ms of
the 23.5 ms (now ``jsonschema-rs``, 0.02 ms), the record's canonical JSON for its hash
0.23 ms (now also the stored text: one serialisation, not three), SQLAlchemy's ORM bulk
insert 2.5 ms (now the driver's own bulk paths).

Same rules as :meth:`Registry.store`: a run id already stored with the same hash is skipped
("duplicate"), one stored with another hash is refused. Batches are transactions of their
own (other writers get the lock between them), or one transaction for all (``atomic``).
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import orjson
from sqlalchemy import Engine, select

from perfsuite.schemas.canonical import SHA256_KEY, canonical_json, compact_record
from perfsuite.schemas.reading import MAX_RECORD_DEPTH, nesting_depth, read_record_file
from perfsuite.schemas.seal import seal_record
from perfsuite.schemas.validate import checked_body, parse_timestamp

from .errors import RecordInvalid, RegistryError
from .models import Environment, Run, System, Workload
from .store import check_physics, key_columns, system_key

DEFAULT_BATCH = 5000
# A records folder's import holds about two batches of rendered records (the one written, the
# next checked): 2,000 keeps that to a few hundred MB of a large folder's records.
FILES_BATCH = 2000
# Below this many records the checks run in this process: starting workers costs more.
PARALLEL_FROM = 2000
CHUNK = 250  # records per task sent to a worker

Item = dict | str | os.PathLike
Progress = Callable[[int], None]  # called with the number of records just done


@dataclass
class Prepared:
    """One checked record, as the text and values its rows hold."""

    run_id: str
    sha256: str
    system_key: str
    system_columns: dict
    environment_sha256: str
    environment_text: str
    workload: tuple[str, int, str]  # name, version, category
    started_at: datetime
    finished_at: datetime
    run_row: tuple  # the runs row's other columns, in _RUN_COLUMNS' order from comparability_key (the record last)
    metrics: list[tuple]  # per metric: position, case, name, unit, value, higher_is_better, samples,
    #                        statistics (JSON text or None), roofline resource, fraction, ceiling run id


@dataclass
class BulkOutcome:
    stored: int = 0
    duplicate: int = 0
    check_s: float = 0.0  # time waiting for checked records (in workers, or here)
    write_s: float = 0.0  # time spent writing, commits included
    wall_s: float = 0.0
    batches: list[float] = field(default_factory=list)


def _json(value) -> str:
    """JSON text for a stored column (not a hash: orjson's number format is not canonical,
    but reads back to the same floats)."""
    try:
        return orjson.dumps(value).decode("utf-8")
    except TypeError:  # an integer beyond 64 bits
        return json.dumps(value, ensure_ascii=False, allow_nan=False)


def prepare(item: Item) -> Prepared:
    """Check one record (a dict, or a record file's path) and render its rows. Raises
    :class:`RecordInvalid`."""
    record, finite = (item, False) if isinstance(item, dict) else read_record_file(item)
    sealed = seal_record(record, finite=finite)
    return _render(record, sealed.sha256, sealed.body)


def prepare_checked(record: dict) -> Prepared:
    """Render the rows of a record whose schema was checked; checks its sha256 (its only
    serialisation). Raises :class:`RecordInvalid`."""
    if nesting_depth(record, MAX_RECORD_DEPTH) > MAX_RECORD_DEPTH:
        raise RecordInvalid(f"record nests objects or arrays more than {MAX_RECORD_DEPTH} deep")
    sha, text = checked_body(record)
    return _render(record, sha, text)


def _render(record: dict, sha: str, text: str) -> Prepared:
    check_physics(record)  # the store's rule for figures no measurement can produce
    compact = compact_record(record)
    encoded = any(isinstance(m["samples"], dict) for m in compact["metrics"])
    if not encoded:  # the canonical body was just hashed as it is stored: keep that text, with the hash
        record_text = f'{{"{SHA256_KEY}":"{sha}",{text[1:]}' if len(text) > 2 else f'{{"{SHA256_KEY}":"{sha}"}}'
    else:
        record_text = _json(compact)
    env, wl = record["environment"], record["workload"]
    key, system_columns, env_text, env_sha = _environment_keys(env)
    keyed = key_columns(record)  # recomputed from the record: a stored key is never trusted
    # A tuple in column order, not a dict: it crosses from the worker to the writer (pickled) and
    # becomes a row as it is.
    run_row = (
        keyed["comparability_key"],
        _json(keyed["key_settings"]),
        keyed["regime"],
        _json(wl["params"]),
        record["controls"]["device"],
        env["measured_device"]["key"],
        record["status"],
        record["error"],
        record["verification"]["status"],
        wl["plugin"]["name"],
        wl["plugin"]["distribution"],
        wl["plugin"]["version"],
        record["launch"]["launcher"],
        record["launch"]["world_size"],
        sha,
        record_text,
    )
    from perfsuite.schemas.samples import standalone

    metrics = []
    for position, m in enumerate(compact["metrics"]):
        roofline = m["roofline"] or {}
        metrics.append(
            (
                position,
                m["case"],
                m["name"],
                m["unit"],
                m["value"],
                m["higher_is_better"],
                _json(standalone(m, compact["metrics"])),
                None if m["statistics"] is None else _json(m["statistics"]),
                roofline.get("resource"),
                roofline.get("fraction"),
                roofline.get("ceiling_run_id"),
            )
        )
    return Prepared(
        record["run_id"],
        sha,
        key,
        system_columns,
        env_sha,
        env_text,
        (wl["name"], wl["version"], wl["category"]),
        parse_timestamp(record["started_at"], "started_at"),
        parse_timestamp(record["finished_at"], "finished_at"),
        run_row,
        metrics,
    )


_ENVIRONMENTS: dict[bytes, tuple] = {}  # a round's records share a few environments: each is hashed once


def _environment_keys(env: dict) -> tuple[str, dict, str, str]:
    """(system key, system columns, canonical environment text, its sha256), cached by the
    environment's content (orjson's sorted bytes: fast, and equal for equal content)."""
    try:
        cache_key = orjson.dumps(env, option=orjson.OPT_SORT_KEYS)
    except TypeError:  # an integer beyond 64 bits: no cache
        cache_key = None
    found = _ENVIRONMENTS.get(cache_key) if cache_key is not None else None
    if found is None:
        key, system_columns = system_key(env)
        env_text = canonical_json(env)  # its hash names the shared row
        found = (key, system_columns, env_text, hashlib.sha256(env_text.encode("utf-8")).hexdigest())
        if cache_key is not None and len(_ENVIRONMENTS) < 10_000:
            _ENVIRONMENTS[cache_key] = found
    return found


def _prepare_chunk(items: list[Item]) -> list[Prepared | str]:
    """A worker's task: each item prepared, or the one-line reason it was refused."""
    out: list[Prepared | str] = []
    for item in items:
        try:
            out.append(prepare(item))
        except RecordInvalid as exc:
            out.append(str(exc))
    return out


def _chunks(items: Iterable[Any], size: int) -> Iterator[list[Any]]:
    chunk: list[Any] = []
    for item in items:
        chunk.append(item)
        if len(chunk) == size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def map_chunks(
    function: Callable[[list], list],
    items: Iterable,
    workers: int | None = None,
    total: int | None = None,
    chunk_size: int | None = None,
    parallel_from: int = PARALLEL_FROM,
    ahead: int | None = None,
) -> Iterator[tuple[list, list]]:
    """(chunk, ``function(chunk)``) for chunks of ``chunk_size`` items (default :data:`CHUNK`),
    in order; in worker processes (one per CPU by default) when there are ``parallel_from``
    items or more. ``function`` must be importable (a module-level function). At most ``ahead``
    chunks (default four per worker) are given out before the caller takes their results: enough
    that the workers go on while the caller spends time on what it took, and memory stays bounded."""
    size = chunk_size or CHUNK
    if workers is None:
        workers = os.cpu_count() or 1
    if total is None and isinstance(items, (list, tuple)):
        total = len(items)
    if workers <= 1 or total is None or total < parallel_from:
        for chunk in _chunks(items, size):
            yield chunk, function(chunk)
        return
    import multiprocessing
    from collections import deque

    # spawn, not fork: the caller may hold threads (a progress bar) and open connections
    executor = ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn"))
    try:
        in_flight: deque = deque()
        for chunk in _chunks(items, size):
            in_flight.append((chunk, executor.submit(function, chunk)))
            if len(in_flight) >= (ahead or workers * 4):
                done, future = in_flight.popleft()
                yield done, future.result()
        while in_flight:
            done, future = in_flight.popleft()
            yield done, future.result()
    finally:
        executor.shutdown(cancel_futures=True)


def prepared(
    items: Iterable[Item], workers: int | None = None, total: int | None = None, ahead: int | None = None
) -> Iterator[Prepared]:
    """Check and render ``items`` in order (in worker processes when there are many, ``ahead``
    chunks of them at most given out: see :func:`map_chunks`); raises :class:`RecordInvalid`
    naming the first refused record's position."""
    position = 0
    for _chunk, chunk_out in map_chunks(_prepare_chunk, items, workers, total, ahead=ahead):
        for one in chunk_out:
            position += 1
            if isinstance(one, str):
                raise RecordInvalid(f"record {position}{_total(total)}: {one}")
            yield one


@dataclass
class FilesOutcome:
    """What :func:`store_files` did: counts, and each refused file with why (one line)."""

    stored: int = 0
    duplicate: int = 0
    refused: list[tuple[str, str]] = field(default_factory=list)
    check_s: float = 0.0
    write_s: float = 0.0


def _prepare_files(items: list[tuple[str, str]]) -> list[Prepared | str]:
    """A worker's task: each (run id, path) prepared, or the one-line reason it was refused
    (a file whose record names another run id than its file name is refused too)."""
    out: list[Prepared | str] = []
    for run_id, path in items:
        try:
            one = prepare(path)
            if one.run_id != run_id:
                raise RecordInvalid(f"its run id is {one.run_id}, not its file name's")
            out.append(one)
        except RecordInvalid as exc:
            out.append(str(exc))
    return out


def store_files(
    registry,
    files: dict[str, str | os.PathLike],
    batch: int = FILES_BATCH,
    *,
    workers: int | None = None,
    progress: Progress | None = None,
    parallel_from: int = PARALLEL_FROM,
) -> FilesOutcome:
    """Store the record files ``files`` (run id -> path, as a records folder names them) that
    the registry lacks, streaming, in batches of ``batch`` files, one transaction each, so
    memory stays bounded whatever the folder holds and a run cut off half way keeps the batches
    before (the next run skips them: idempotent by run id and hash).

    From ``parallel_from`` files on (and a registry other processes can open), each worker
    process (one per CPU by default) reads, checks and writes whole batches through its own
    connection: a record crosses no pipe, and one worker checks while another writes (SQLite
    takes one writer at a time; PostgreSQL's COPYs run side by side). Below that, files are
    checked here (:func:`map_chunks`) and written by this process.

    A file that fails its checks is refused with its reason and the others are stored; a run id
    stored with another record is refused. ``progress`` is called with the number of files just
    checked (and, in workers, written). Raises :class:`RegistryError` when the database refuses
    a write."""
    from .errors import translated_errors

    if workers is None:
        workers = os.cpu_count() or 1
    items = [(run_id, os.fspath(path)) for run_id, path in sorted(files.items())]
    if workers > 1 and len(items) >= parallel_from and _shareable(registry):
        return _store_files_in_workers(registry, items, batch, workers, progress)
    out = FilesOutcome()
    known = registry.stored_hashes(list(files))

    def batches() -> Iterator[list[Prepared]]:
        pending: list[Prepared] = []
        # two batches' worth given out: the workers check the next batch while this one is written
        ahead = max(2 * batch // CHUNK, 1)
        for chunk, chunk_out in map_chunks(_prepare_files, items, workers, len(items), ahead=ahead):
            for (run_id, path), one in zip(chunk, chunk_out):
                if isinstance(one, str):
                    out.refused.append((path, one))
                elif run_id not in known:
                    pending.append(one)
                elif known[run_id] == one.sha256:
                    out.duplicate += 1
                else:
                    out.refused.append((path, f"run {run_id} is stored with another record (sha256 {known[run_id]})"))
            if progress is not None:
                progress(len(chunk))
            if len(pending) >= batch:
                registry.writable()  # refused only where there is something to store
                yield pending
                pending = []
        if pending:
            registry.writable()
            yield pending

    written = BulkOutcome()
    with translated_errors(f"registry {registry.url}"):
        store_prepared(registry.engine, batches(), written)
    out.stored = written.stored
    out.duplicate += written.duplicate  # stored meanwhile by another process
    out.check_s, out.write_s = written.check_s, written.write_s
    return out


def _shareable(registry) -> bool:
    """Whether worker processes can open this registry and write to it: not an in-memory SQLite
    database, not one open read-only (that path refuses only where there is something to store)."""
    url = registry.engine.url
    if registry.read_only:
        return False
    if url.get_backend_name() != "sqlite":
        return True
    database = url.database or ""
    return database not in ("", ":memory:") and not database.startswith("file:")


# A worker process's own connection to the registry and its writer (shared rows cached across
# the batches it writes): set by _start_worker, once per process.
_WORKER: dict[str, Any] = {}


def _start_worker(url: str) -> None:
    from .db import _make_engine

    engine = _make_engine(url)
    _WORKER.update(engine=engine, writer=_Writer(engine), url=engine.url.render_as_string(hide_password=True))


@dataclass
class _BatchDone:
    """What a worker did with one batch of files."""

    stored: int
    duplicate: int
    refused: list[tuple[str, str]]
    check_s: float
    write_s: float


def _store_batch(items: list[tuple[str, str]]) -> _BatchDone:
    """A worker's task: read and check a batch of files, ask the registry which of their runs it
    holds, and store the rest in one transaction. Raises :class:`RegistryError` (one line)."""
    from .errors import translated_errors

    start = time.perf_counter()
    refused: list[tuple[str, str]] = []
    checked: list[Prepared] = []
    for (_run_id, path), one in zip(items, _prepare_files(items), strict=True):
        if isinstance(one, str):
            refused.append((path, one))
        else:
            checked.append(one)
    paths = dict(items)
    engine, writer = _WORKER["engine"], _WORKER["writer"]
    outcome = BulkOutcome()
    with translated_errors(f"registry {_WORKER['url']}"):
        known: dict[str, str] = {}
        with engine.connect() as connection:
            ids = [p.run_id for p in checked]
            for at in range(0, len(ids), 500):
                query = select(Run.run_id, Run.record_sha256).where(Run.run_id.in_(ids[at : at + 500]))
                known.update((run_id, sha) for run_id, sha in connection.execute(query))
        pending = []
        for p in checked:
            if p.run_id not in known:
                pending.append(p)
            elif known[p.run_id] == p.sha256:
                outcome.duplicate += 1
            else:
                refused.append(
                    (paths[p.run_id], f"run {p.run_id} is stored with another record (sha256 {known[p.run_id]})")
                )
        check_s = time.perf_counter() - start
        if pending:
            try:
                writer.commit_shared(engine, pending)
                with engine.execution_options(sqlite_begin="IMMEDIATE").begin() as connection:
                    writer.write(connection, pending, outcome)
            except BaseException:
                writer.shared.clear()  # ids read in a rolled-back transaction may not exist
                raise
    return _BatchDone(outcome.stored, outcome.duplicate, refused, check_s, time.perf_counter() - start - check_s)


def _store_files_in_workers(
    registry, items: list[tuple[str, str]], batch: int, workers: int, progress: Progress | None
) -> FilesOutcome:
    """:func:`store_files` with each batch read, checked and written by a worker process, two
    batches a worker given out at most (memory: about two batches of records a worker)."""
    import multiprocessing
    from collections import deque

    out = FilesOutcome()
    url = registry.engine.url.render_as_string(hide_password=False)
    # spawn, not fork: the caller may hold threads (a progress bar) and open connections
    executor = ProcessPoolExecutor(
        workers, mp_context=multiprocessing.get_context("spawn"), initializer=_start_worker, initargs=(url,)
    )
    try:
        in_flight: deque = deque()

        def take() -> None:
            size, future = in_flight.popleft()
            done: _BatchDone = future.result()
            out.stored += done.stored
            out.duplicate += done.duplicate
            out.refused += done.refused
            out.check_s += done.check_s
            out.write_s += done.write_s
            if progress is not None:
                progress(size)

        for chunk in _chunks(items, batch):
            in_flight.append((len(chunk), executor.submit(_store_batch, chunk)))
            if len(in_flight) >= 2 * workers:
                take()
        while in_flight:
            take()
    finally:
        executor.shutdown(cancel_futures=True)
    return out


def _total(total: int | None) -> str:
    return f" of {total}" if total is not None else ""


# -- writing --------------------------------------------------------------------------------------
_RUN_COLUMNS = (
    "id",
    "run_id",
    "workload_id",
    "system_id",
    "environment_id",
    "started_at",
    "finished_at",
    # from here on, Prepared.run_row
    "comparability_key",
    "key_settings",
    "regime",
    "params",
    "device",
    "device_key",
    "status",
    "error",
    "verification_status",
    "plugin_name",
    "plugin_distribution",
    "plugin_version",
    "launcher",
    "world_size",
    "record_sha256",
    "record",
)
_METRIC_COLUMNS = (
    "run_id",
    "position",
    "case",
    "name",
    "unit",
    "value",
    "higher_is_better",
    "samples",
    "statistics",
    "roofline_resource",
    "roofline_fraction",
    "ceiling_run_id",
)


class _Writer:
    """Writes prepared batches through one connection; shared rows are cached across batches."""

    def __init__(self, engine: Engine):
        self.engine = engine
        self.dialect = engine.dialect.name
        self.shared: dict[tuple, int] = {}
        datetime_type = Run.__table__.c.started_at.type
        self._datetime = datetime_type._cached_bind_processor(engine.dialect) or (lambda v: v)

    def _shared_id(self, connection, model, match: dict, extra: dict) -> int:
        cache_key = (model.__tablename__, *match.values())
        found = self.shared.get(cache_key)
        if found is not None:
            return found
        if self.dialect == "postgresql":
            from sqlalchemy.dialects import postgresql as dialect_module
        else:
            from sqlalchemy.dialects import sqlite as dialect_module  # type: ignore[no-redef]
        statement = dialect_module.insert(model).values(**match, **extra)
        connection.execute(statement.on_conflict_do_nothing(index_elements=list(match)))
        query = select(model.id)
        for column, value in match.items():
            query = query.where(getattr(model, column) == value)
        found = connection.execute(query).scalar_one()
        self.shared[cache_key] = found
        return found

    def commit_shared(self, engine: Engine, batch: list[Prepared]) -> None:
        """Each shared row the batch names (its systems, environments, workloads) that this writer
        has not met, inserted or found in a short transaction of its own, in the same order in
        every writer: writers storing batches side by side then never wait for one another's
        batch on a new shared row, nor deadlock on two (which PostgreSQL's unique indexes give
        two transactions inserting the same new rows in turn). A batch that fails afterwards
        leaves such a row unreferenced, never missing."""
        wanted: dict[tuple, tuple] = {}
        for p in batch:
            name, version, category = p.workload
            wanted[("systems", p.system_key)] = (System, {"key": p.system_key}, p.system_columns)
            wanted[("environments", p.environment_sha256)] = (Environment, {"sha256": p.environment_sha256}, p)
            wanted[("workloads", name, version)] = (
                Workload,
                {"name": name, "version": version},
                {"category": category},
            )
        writes = engine.execution_options(sqlite_begin="IMMEDIATE")
        for key in sorted(k for k in wanted if k not in self.shared):
            model, match, extra = wanted[key]
            if isinstance(extra, Prepared):  # an environment's document, read only where it is new here
                extra = {"data": json.loads(extra.environment_text)}
            with writes.begin() as connection:
                self._shared_id(connection, model, match, extra)

    def write(self, connection, batch: list[Prepared], outcome: BulkOutcome) -> None:
        ids = [p.run_id for p in batch]
        existing = dict(connection.execute(select(Run.run_id, Run.record_sha256).where(Run.run_id.in_(ids))).all())
        fresh: list[Prepared] = []
        seen: dict[str, str] = {}
        for p in batch:
            stored_sha = existing.get(p.run_id) or seen.get(p.run_id)
            if stored_sha is not None:
                if stored_sha != p.sha256:
                    raise RegistryError(
                        f"run {p.run_id} is already stored with sha256 {stored_sha}; "
                        f"refusing a different record (sha256 {p.sha256})"
                    )
                outcome.duplicate += 1
                continue
            seen[p.run_id] = p.sha256
            fresh.append(p)
        if not fresh:
            return
        run_rows: list[tuple] = []
        metric_rows: list[tuple] = []
        pks = self._reserve_ids(connection, len(fresh))
        for pk, p in zip(pks, fresh):
            system_id = self._shared_id(connection, System, {"key": p.system_key}, p.system_columns)
            environment_id = self.shared.get(("environments", p.environment_sha256))
            if environment_id is None:
                environment_id = self._shared_id(
                    connection, Environment, {"sha256": p.environment_sha256}, {"data": json.loads(p.environment_text)}
                )
            name, version, category = p.workload
            workload_id = self._shared_id(
                connection, Workload, {"name": name, "version": version}, {"category": category}
            )
            run_rows.append(
                (
                    pk,
                    p.run_id,
                    workload_id,
                    system_id,
                    environment_id,
                    self._datetime(p.started_at),
                    self._datetime(p.finished_at),
                    *p.run_row,
                )
            )
            metric_rows.extend((pk, *m) for m in p.metrics)
        raw = connection.connection.driver_connection
        if self.dialect == "postgresql":
            _copy(raw, "runs", _RUN_COLUMNS, run_rows)
            _copy(raw, "metrics", _METRIC_COLUMNS, metric_rows)
        else:
            _executemany(raw, "runs", _RUN_COLUMNS, run_rows)
            _executemany(raw, "metrics", _METRIC_COLUMNS, metric_rows)
        outcome.stored += len(fresh)

    def _reserve_ids(self, connection, count: int) -> list[int]:
        """Primary keys for ``count`` new runs: from the sequence on PostgreSQL (other writers
        draw from it too), after the largest id on SQLite (whose write lock this transaction holds)."""
        from sqlalchemy import text

        if self.dialect == "postgresql":
            return list(
                connection.execute(
                    text("SELECT nextval(pg_get_serial_sequence('runs', 'id')) FROM generate_series(1, :n)"),
                    {"n": count},
                ).scalars()
            )
        top = connection.execute(text("SELECT COALESCE(MAX(id), 0) FROM runs")).scalar_one()
        return list(range(top + 1, top + 1 + count))


def _executemany(raw, table: str, columns: tuple[str, ...], rows: list[tuple]) -> None:
    quoted = ", ".join(f'"{c}"' for c in columns)
    raw.executemany(f"INSERT INTO {table} ({quoted}) VALUES ({', '.join('?' * len(columns))})", rows)


def _copy(raw, table: str, columns: tuple[str, ...], rows: list[tuple]) -> None:
    quoted = ", ".join(f'"{c}"' for c in columns)
    with raw.cursor() as cursor, cursor.copy(f"COPY {table} ({quoted}) FROM STDIN") as copy:
        for row in rows:
            copy.write_row(row)


def store_prepared(
    engine: Engine,
    batches: Iterable[list[Prepared]],
    outcome: BulkOutcome,
    *,
    atomic: bool = False,
    progress: Progress | None = None,
) -> None:
    """Write ``batches`` of prepared records: each batch in its own transaction, or all of
    them in one (``atomic``: all or none)."""
    writer = _Writer(engine)
    write_engine = engine.execution_options(sqlite_begin="IMMEDIATE")
    if atomic:
        with write_engine.begin() as connection:
            for batch in _timed(batches, outcome):
                start = time.perf_counter()
                writer.write(connection, batch, outcome)
                _done(outcome, start, len(batch), progress)
        return
    for batch in _timed(batches, outcome):
        start = time.perf_counter()
        try:
            with write_engine.begin() as connection:
                writer.write(connection, batch, outcome)
        except BaseException:
            writer.shared.clear()  # ids read in a rolled-back transaction may not exist
            raise
        _done(outcome, start, len(batch), progress)


def _timed(batches: Iterable[list[Prepared]], outcome: BulkOutcome) -> Iterator[list[Prepared]]:
    iterator = iter(batches)
    while True:
        start = time.perf_counter()
        try:
            batch = next(iterator)
        except StopIteration:
            return
        outcome.check_s += time.perf_counter() - start
        yield batch


def _done(outcome: BulkOutcome, start: float, count: int, progress: Progress | None) -> None:
    spent = time.perf_counter() - start
    outcome.write_s += spent
    outcome.batches.append(spent)
    if progress is not None:
        progress(count)


def store_many(
    registry,
    records: Iterable[Item],
    batch: int = DEFAULT_BATCH,
    *,
    workers: int | None = None,
    total: int | None = None,
    atomic: bool = False,
    progress: Progress | None = None,
) -> BulkOutcome:
    """Check and store ``records`` (dicts, or paths of record files) in batches of ``batch``.

    ``total`` (the number of records, when known) decides whether workers are worth starting
    and goes into messages; ``progress`` is called with each batch's size once it is written.
    Raises :class:`RecordInvalid` for the first record that fails its checks (the batches
    before it are stored, unless ``atomic``), :class:`RegistryError` for a conflicting run id.
    """
    from .errors import translated_errors

    outcome = BulkOutcome()
    start = time.perf_counter()
    with translated_errors(f"registry {registry.url}"):
        store_prepared(
            registry.engine,
            # two batches' worth given out: the workers check the next batch while this one is written
            _chunks(prepared(records, workers, total, ahead=max(2 * batch // CHUNK, 1)), batch),
            outcome,
            atomic=atomic,
            progress=progress,
        )
    outcome.wall_s = time.perf_counter() - start
    return outcome
