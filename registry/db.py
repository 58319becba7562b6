"""Where the registry lives, how it is opened, and the :class:`Registry` handle.

``open_registry()`` connects to a SQLite file (the default, one per user) or PostgreSQL
(a shared registry for cluster jobs and a leaderboard), and brings the schema to the
Alembic head before returning. Migrations ship inside this package
(``registry/migrations``) and are run from code, so an installed wheel needs no
``alembic.ini``.

Several processes may open and write one registry at once (parallel runs, cluster jobs):
on SQLite the migration step (and the switch into WAL mode) is serialised with an
``fcntl`` lock file beside the database, the database is in WAL mode with a 30 s busy
timeout, and writes take the write lock up front (``BEGIN IMMEDIATE``); on PostgreSQL
migrations run under a ``pg_advisory_lock``.

Every failure to reach or use the database (a URL that does not parse, a server that
refuses connections, a SQLite path that is a folder, a device, not a database or not
writable) leaves here as a one-line :class:`RegistryError`; :func:`check_url` finds the
same problems cheaply, creating nothing, before a long run starts.

A SQLite registry that cannot be written (its filesystem mounted read-only, a file of
another user) is opened read-only: the read commands work, nothing is migrated or created
beside it, a write is one line, and a registry too old to be read without migrating it is
one line too.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import logging
import os
import re
import sqlite3
import sys
import time
import zlib
from collections.abc import Callable, Collection, Iterator
from datetime import datetime
from pathlib import Path
from typing import TypeVar

from sqlalchemy import Engine, create_engine, event, select, text
from sqlalchemy.engine import Connection
from sqlalchemy.exc import DBAPIError
from sqlalchemy.orm import Session, sessionmaker

from . import queries
from .errors import RegistryError, translated_errors
from .location import check_sqlite_path, check_sqlite_readable, parse_url, shown_url, writable_file

SQLITE_BUSY_TIMEOUT_S = 30.0
LOCKED_RETRY_S = 0.01  # between opens that met a lock SQLite does not wait for (migrate)
MIGRATIONS_DIR = Path(__file__).resolve().parent / "migrations"
# A fixed 64-bit key for pg_advisory_lock, so every perfsuite process agrees on it.
PG_MIGRATION_LOCK_KEY = zlib.crc32(b"perfsuite.registry.migrations")
# libpq waits for ever on a host that drops packets; a registry that cannot answer in this
# long is reported as unreachable.
PG_CONNECT_TIMEOUT_S = 10
# The PostgreSQL drivers SQLAlchemy knows by name and the package that provides each:
# perfsuite's 'postgres' extra installs psycopg 3 only.
PG_DRIVER_PACKAGES = {"psycopg": "'perfsuite[postgres]'", "psycopg2": "psycopg2-binary", "pg8000": "pg8000"}
# How many run ids one query asks about (SQLite's limit on bound parameters is far above it).
ID_QUERY_CHUNK = 500
# From this many run ids on, reading every stored run id once (the index alone) is cheaper than
# the IN lists (at 100,000 runs: one pass of the run_id index against 200 queries).
ID_SCAN_FROM = 5000

T = TypeVar("T")


def data_dir() -> Path:
    """The per-user data folder: ``$XDG_DATA_HOME/perfsuite`` (default ``~/.local/share``)."""
    base = os.environ.get("XDG_DATA_HOME") or os.path.join(os.path.expanduser("~"), ".local", "share")
    return Path(base) / "perfsuite"


def default_url() -> str:
    """``$PERFSUITE_DB`` if set, else the SQLite file ``<data dir>/registry.db``."""
    return os.environ.get("PERFSUITE_DB") or f"sqlite:///{data_dir() / 'registry.db'}"


def records_dir() -> Path:
    """Where run records are written as JSON files: ``$PERFSUITE_RECORDS`` or ``<data dir>/records``."""
    configured = os.environ.get("PERFSUITE_RECORDS")
    return Path(configured) if configured else data_dir() / "records"


def _sqlite_file(url) -> Path | None:
    database = url.database
    if not database or database == ":memory:" or database.startswith("file:"):
        return None
    return Path(database)


def translated(method: Callable[..., T]) -> Callable[..., T]:
    """Decorate a :class:`Registry` method so that its database errors are one line."""

    @functools.wraps(method)
    def wrapper(self: "Registry", *args, **kwargs) -> T:
        with translated_errors(f"registry {self.url}"):
            return method(self, *args, **kwargs)

    return wrapper


def check_url(url: str | None = None) -> str:
    """Check cheaply that the registry at ``url`` (default :func:`default_url`) can be opened,
    before work whose result it will store; return the URL as messages show it.

    Raises :class:`RegistryError` (one line) for a URL that does not parse, an unsupported
    database or missing driver, a SQLite path that is a folder, not a database or in a
    folder that cannot be written, or a server that does not accept a connection. Creates
    nothing: a new SQLite file is only checked for a writable folder.
    """
    url_text = url or default_url()
    shown = shown_url(url_text)
    with translated_errors(f"cannot open registry {shown}"):
        parsed = parse_url(url_text)
        if parsed.get_backend_name() == "sqlite":
            path = _sqlite_file(parsed)
            if path is not None:
                check_sqlite_path(path)
            return shown
        engine = _make_engine(url_text)
        try:
            with engine.connect() as connection:
                connection.execute(text("SELECT 1"))
        finally:
            engine.dispose()
    return shown


class _PoolLogLine(logging.Handler):
    """SQLAlchemy's connection pool logs an error with its traceback when closing a connection
    is cut short, and then re-raises what cut it; a Ctrl-C or SIGTERM in that moment is the
    command's to report (its summary names what was stored), so its traceback is dropped here,
    and any other error of the pool is one warning line on stderr."""

    def emit(self, record: logging.LogRecord) -> None:
        error = record.exc_info[1] if record.exc_info else None
        if error is not None and not isinstance(error, Exception):
            return  # KeyboardInterrupt or SystemExit: re-raised by the pool, reported by the command
        why = f": {type(error).__name__}: {error}" if error is not None else ""
        sys.stderr.write(f"Warning: registry connection pool: {record.getMessage()}{why}\n")


def _pool_errors_as_lines() -> None:
    """Route the pool's log records through :class:`_PoolLogLine` (once per process)."""
    pool_logger = logging.getLogger("sqlalchemy.pool")
    if not any(isinstance(h, _PoolLogLine) for h in pool_logger.handlers):
        pool_logger.addHandler(_PoolLogLine(level=logging.WARNING))
        pool_logger.propagate = False


def _make_engine(url_text: str) -> Engine:
    _pool_errors_as_lines()
    url = parse_url(url_text)
    if url.get_backend_name() != "sqlite":
        if url.drivername == "postgresql":  # SQLAlchemy's default would be psycopg2; we ship psycopg 3
            url = url.set(drivername="postgresql+psycopg")
        # psycopg's dialect looks the hstore type up in the catalogue on its first connection, a
        # round trip for a type no table here has
        options = {"use_native_hstore": False} if url.get_driver_name() == "psycopg" else {}
        try:
            return create_engine(
                url, pool_pre_ping=True, connect_args={"connect_timeout": PG_CONNECT_TIMEOUT_S}, **options
            )
        except ModuleNotFoundError as exc:
            driver = url.get_driver_name()
            package = PG_DRIVER_PACKAGES.get(driver, exc.name or driver)
            hint = f"pip install {package}"
            if driver != "psycopg":
                hint += f", or use postgresql+psycopg://, the driver {PG_DRIVER_PACKAGES['psycopg']} installs"
            raise RegistryError(f"the {url.drivername} driver is not installed ({exc.name}): {hint}") from exc

    path = _sqlite_file(url)
    if path is not None:
        check_sqlite_path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
    engine = create_engine(url, connect_args={"timeout": SQLITE_BUSY_TIMEOUT_S})
    _sqlite_transactions(engine)
    return engine


def _sqlite_transactions(engine: Engine) -> None:
    """Pragmas on every connection, and a BEGIN of our own (IMMEDIATE for writers)."""

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection, _record) -> None:
        # sqlite3 would otherwise BEGIN lazily (not before SELECTs, never before DDL); we
        # emit BEGIN ourselves below, so reads and migrations are transactional too.
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        cursor.execute(f"PRAGMA busy_timeout = {int(SQLITE_BUSY_TIMEOUT_S * 1000)}")
        cursor.execute("PRAGMA foreign_keys = ON")
        cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(connection: Connection) -> None:
        # A writer takes the write lock at BEGIN: a deferred transaction that reads and then
        # writes can fail with "database is locked" at once, without waiting the busy timeout.
        mode = connection.get_execution_options().get("sqlite_begin", "DEFERRED")
        connection.exec_driver_sql(f"BEGIN {mode}")


def _read_only_engine(path: Path, immutable: bool) -> Engine:
    """An engine on a SQLite file that opens it read-only (``mode=ro``), and ``immutable``
    where its filesystem is read-only and it has no write-ahead log to read (SQLite cannot
    otherwise open a WAL-mode file it may not make a ``-shm`` file for)."""
    from urllib.parse import quote

    uri = f"file:{quote(str(path.resolve()))}?mode=ro" + ("&immutable=1" if immutable else "")

    def connect() -> sqlite3.Connection:
        return sqlite3.connect(uri, uri=True, timeout=SQLITE_BUSY_TIMEOUT_S, check_same_thread=False)

    _pool_errors_as_lines()
    engine = create_engine("sqlite://", creator=connect)
    _sqlite_transactions(engine)
    return engine


def head_revision() -> str | None:
    """The newest migration this perfsuite ships."""
    from alembic.script import ScriptDirectory

    return ScriptDirectory.from_config(alembic_config()).get_current_head()


def _check_revision(engine: Engine, shown: str, why: str) -> None:
    """A registry that cannot be migrated must already be at this perfsuite's head."""
    from alembic.runtime.migration import MigrationContext
    from alembic.script import ScriptDirectory

    with engine.connect() as connection:
        current = MigrationContext.configure(connection).get_current_revision()
    head = head_revision()
    if current == head:
        return
    known = {rev.revision for rev in ScriptDirectory.from_config(alembic_config()).walk_revisions()}
    if current is None or current in known:
        raise RegistryError(
            f"registry {shown} is at revision {current or 'none'}, older than this perfsuite's {head}, "
            f"and cannot be migrated: {why}"
        )
    raise RegistryError(f"registry {shown} is at revision {current}, which this perfsuite ({head}) does not know")


def alembic_config(connection: Connection | None = None):
    """An Alembic config built in code: script location inside the installed package."""
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    config.set_main_option("path_separator", "os")  # paths may contain spaces or commas
    if connection is not None:
        config.attributes["connection"] = connection
    return config


@contextlib.contextmanager
def _migration_lock(engine: Engine, connection: Connection) -> Iterator[None]:
    if engine.dialect.name == "postgresql":
        connection.execute(text("SELECT pg_advisory_lock(:key)"), {"key": PG_MIGRATION_LOCK_KEY})
        connection.commit()
        try:
            yield
        finally:
            connection.rollback()  # a failed migration leaves the transaction aborted
            connection.execute(text("SELECT pg_advisory_unlock(:key)"), {"key": PG_MIGRATION_LOCK_KEY})
            connection.commit()
        return
    path = _sqlite_file(engine.url)
    if path is None:  # an in-memory database belongs to this process alone
        yield
        return
    with open(f"{path}.lock", "a") as lock_file:
        fcntl.flock(lock_file, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock_file, fcntl.LOCK_UN)


def _use_wal(connection: Connection) -> None:
    """Put the SQLite file in WAL mode (a setting the file keeps), under the migration lock.

    Switching a fresh file into WAL needs an exclusive lock, and SQLite answers "database
    is locked" at once, without waiting the busy timeout, when another process is doing
    the same: 28 of 200 rounds of four bare sqlite3 processes opening one fresh file
    failed so on two cores. Run outside any transaction, which SQLite requires for this
    pragma.
    """
    driver = connection.connection.driver_connection
    assert driver is not None  # an open connection has its driver's
    driver.execute("PRAGMA journal_mode = WAL")


_REVISION_LINE = re.compile(r"^(down_revision|revision)\s*=\s*(?:\"([^\"]*)\"|'([^']*)'|None)", re.MULTILINE)


@functools.cache
def shipped_head() -> str | None:
    """The newest migration's revision, read from the migration files' ``revision`` and
    ``down_revision`` lines without loading Alembic (a third of a second a command spends
    otherwise); None where the files do not name exactly one head."""
    revisions, parents = set(), set()
    for path in (MIGRATIONS_DIR / "versions").glob("*.py"):
        found = {m.group(1): m.group(2) or m.group(3) for m in _REVISION_LINE.finditer(path.read_text())}
        if "revision" in found:
            revisions.add(found["revision"])
            if found.get("down_revision"):
                parents.add(found["down_revision"])
    heads = revisions - parents
    return heads.pop() if len(heads) == 1 else None


def _at_head(engine: Engine) -> bool:
    """Whether the database already records the shipped head (the common case: nothing to
    migrate, and no need to take the migration lock or load Alembic)."""
    head = shipped_head()
    if head is None:
        return False
    with engine.connect() as connection:
        try:
            current = connection.execute(text("SELECT version_num FROM alembic_version")).scalars().all()
        except DBAPIError:  # no such table yet: a fresh database, which the full path migrates
            connection.rollback()
            return False
    return current == [head]


def migrate(engine: Engine) -> None:
    """Bring the database to the Alembic head, one process at a time.

    On SQLite an open can meet "database is locked" without the busy timeout being waited:
    SQLite's WAL notes name the moment the last connection to a file closes, when it holds an
    exclusive lock while it removes the WAL and shared-memory files. Processes opening a fresh
    file at once and closing it at once can meet that moment (in a loaded test run, 1 open of
    160 failed with that message), so a locked open is tried again until the busy timeout has
    passed. Any other error, and any on PostgreSQL, is raised at once.
    """
    deadline = time.monotonic() + SQLITE_BUSY_TIMEOUT_S
    while True:
        try:
            _migrate_once(engine)
            return
        except (DBAPIError, sqlite3.OperationalError) as exc:
            if engine.dialect.name != "sqlite" or not _locked(exc) or time.monotonic() > deadline:
                raise
        time.sleep(LOCKED_RETRY_S)


def _locked(exc: BaseException) -> bool:
    return "database is locked" in str(getattr(exc, "orig", None) or exc)


def _migrate_once(engine: Engine) -> None:
    if _at_head(engine):
        return
    from alembic import command

    with engine.connect() as connection, _migration_lock(engine, connection):
        if engine.dialect.name == "sqlite":
            _use_wal(connection)
        command.upgrade(alembic_config(connection), "head")
        connection.commit()


class Registry:
    """An open registry: store records and query them. Close it (or use ``with``) when done."""

    def __init__(self, engine: Engine, read_only: str | None = None):
        self.engine = engine
        self.read_only = read_only  # why it cannot be written, where it cannot
        self._read_sessions = sessionmaker(engine)
        self._write_sessions = sessionmaker(engine.execution_options(sqlite_begin="IMMEDIATE"))

    def writable(self) -> None:
        """Raise :class:`RegistryError` (one line) when this registry is open read-only."""
        if self.read_only:
            raise RegistryError(f"registry {self.url} is open read-only ({self.read_only}): nothing can be stored")

    @property
    def url(self) -> str:
        return self.engine.url.render_as_string(hide_password=True)

    def session(self) -> Session:
        """A read session for queries not covered below (the caller closes it)."""
        return self._read_sessions()

    @translated
    def store(self, record: dict) -> str:
        """Validate, re-hash and store a record: "stored", or "duplicate" if already there.

        Raises :class:`RecordInvalid` for a record that breaks the schema or whose sha256 is
        wrong, :class:`RegistryError` when its run id is stored with a different hash.
        """
        from .store import store_record  # the record rules: what a read command never needs

        self.writable()
        return store_record(self._write_sessions, record)

    @translated
    def store_all(self, records: list[dict]) -> list[str]:
        """Store several records in one transaction: all of them, or none.

        Every record is validated and its sha256 checked before anything is written; a
        refusal (:class:`RecordInvalid` naming the record's position, or a conflict with a
        stored run) leaves the registry as it was. Returns "stored"/"duplicate" per record.
        """
        from .store import store_records

        self.writable()
        return store_records(self._write_sessions, records)

    @translated
    def stored_hashes(self, run_ids: list[str]) -> dict[str, str]:
        """Run id -> stored record's sha256, for those of ``run_ids`` the registry holds."""
        from .models import Run

        found: dict[str, str] = {}
        if len(run_ids) >= ID_SCAN_FROM:  # a records folder's worth: ask only for the ids stored
            stored = self.stored_ids(run_ids)
            run_ids = [run_id for run_id in run_ids if run_id in stored]
        with self._read_sessions() as session:
            for start in range(0, len(run_ids), ID_QUERY_CHUNK):
                chunk = run_ids[start : start + ID_QUERY_CHUNK]
                query = select(Run.run_id, Run.record_sha256).where(Run.run_id.in_(chunk))
                for run_id, sha in session.execute(query):
                    found[run_id] = sha
        return found

    @translated
    def stored_ids(self, run_ids: Collection[str]) -> set[str]:
        """Those of ``run_ids`` the registry holds. For many ids (a records folder's), one pass
        over the run id index (100,000 ids in 0.03 s of SQLite's time), not the rows: on SQLite
        each row holds its record, and reading 100,000 of them reads the whole file."""
        from .models import Run

        with self._read_sessions() as session:
            if len(run_ids) >= ID_SCAN_FROM:
                return _all_run_ids(session).intersection(run_ids)
            run_ids = list(run_ids)
            found: set[str] = set()
            for start in range(0, len(run_ids), ID_QUERY_CHUNK):
                found.update(
                    session.scalars(select(Run.run_id).where(Run.run_id.in_(run_ids[start : start + ID_QUERY_CHUNK])))
                )
            return found

    @translated
    def contents_stamp(self) -> list | None:
        """What changes when a run is stored or removed, or when this is another database: the
        SQLite file's device and inode (PostgreSQL: the database's oid), the number of runs and
        the largest run key; None where the database cannot be told from another (an in-memory
        or read-only SQLite one). Cheap (the count reads an index): a caller remembers an answer
        about the registry's runs until this changes."""
        from sqlalchemy import func

        from .models import Run

        with self._read_sessions() as session:
            count, top = session.execute(select(func.count(Run.id), func.max(Run.id))).one()
            if self.engine.dialect.name == "postgresql":
                identity = [
                    session.execute(text("SELECT oid FROM pg_database WHERE datname = current_database()")).scalar_one()
                ]
            else:
                path = _sqlite_file(self.engine.url)
                if path is None:
                    return None
                found = os.stat(path)
                identity = [found.st_dev, found.st_ino]
        return [self.url, *identity, count, top]

    @translated
    def results(
        self,
        workload: str | None = None,
        since: datetime | None = None,
        limit: int | None = 50,
        status: str | None = None,
    ) -> list[dict]:
        with self._read_sessions() as session:
            return queries.results(session, workload=workload, since=since, limit=limit, status=status)

    @translated
    def run_ids(
        self,
        workload: str | None = None,
        since: datetime | None = None,
        limit: int | None = None,
        status: str | None = None,
    ) -> list[str]:
        """The ids of the runs :meth:`results` would list (newest first), read alone."""
        with self._read_sessions() as session:
            return queries.run_ids(session, workload=workload, since=since, limit=limit, status=status)

    @translated
    def history(self, workload: str, params: dict | None = None, device_key: str | None = None) -> list[dict]:
        with self._read_sessions() as session:
            return queries.history(session, workload, params=params, device_key=device_key)

    @translated
    def get(self, run_id_or_prefix: str) -> dict:
        with self._read_sessions() as session:
            return queries.get(session, run_id_or_prefix)

    @translated
    def latest_passed(self, workload: str, device_key: str) -> dict | None:
        with self._read_sessions() as session:
            return queries.latest_passed(session, workload, device_key)

    @translated
    def latest_ceiling(self, workload: str, device_key: str, *, quick_allowed: bool) -> dict | None:
        with self._read_sessions() as session:
            return queries.latest_ceiling(session, workload, device_key, quick_allowed=quick_allowed)

    @translated
    def latest_ceilings(self, device_key: str) -> dict | None:
        with self._read_sessions() as session:
            return queries.latest_ceilings(session, device_key)

    def close(self) -> None:
        self.engine.dispose()

    def __enter__(self) -> "Registry":
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()


def _all_run_ids(session: Session) -> set[str]:
    """Every stored run id, through the driver's cursor, fetched at once: SQLAlchemy's row at a
    time is most of the time at 100,000 ids (a COPY on PostgreSQL is no faster: a message a row)."""
    cursor = session.connection().connection.cursor()
    try:
        cursor.execute("SELECT run_id FROM runs")
        return {run_id for (run_id,) in cursor.fetchall()}
    finally:
        cursor.close()


def open_registry(url: str | None = None) -> Registry:
    """Open (creating and migrating if needed) the registry at ``url`` or :func:`default_url`.

    Raises :class:`RegistryError` with one line when it cannot (see :func:`check_url`).
    """
    url_text = url or default_url()
    shown = shown_url(url_text)
    with translated_errors(f"cannot open registry {shown}"):
        parsed = parse_url(url_text)
        path = _sqlite_file(parsed) if parsed.get_backend_name() == "sqlite" else None
        why = writable_file(path) if path is not None and path.exists() else None
        if path is not None and why is not None:
            check_sqlite_readable(path)
            engine = _read_only_engine(path, immutable=_read_only_filesystem(path) and not _wal_file(path).exists())
            try:
                _check_revision(engine, shown, why)
            except BaseException:
                engine.dispose()
                raise
            return Registry(engine, read_only=why)
        engine = _make_engine(url_text)
        try:
            migrate(engine)
        except BaseException:
            engine.dispose()
            raise
    return Registry(engine)


def _read_only_filesystem(path: Path) -> bool:
    return bool(os.statvfs(path).f_flag & os.ST_RDONLY)


def _wal_file(path: Path) -> Path:
    return path.with_name(path.name + "-wal")
