"""Whether a registry URL can name a registry: parse it, and check a SQLite path without
creating anything. Used when a registry is opened and by :func:`registry.check_url`
before a long run, so that a bad ``--db`` is one line before any work is done."""

from __future__ import annotations

import os
import shutil
import stat
import tempfile
from pathlib import Path

from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import ArgumentError

from perfsuite.schemas.reading import kind

from .errors import RegistryError

SUPPORTED_DIALECTS = ("sqlite", "postgresql")
URL_FORMS = "use sqlite:///PATH or postgresql+psycopg://USER@HOST/DB"
SQLITE_HEADER = b"SQLite format 3\x00"


def shown_url(url_text: str) -> str:
    """The URL as messages show it: password hidden where it parses."""
    try:
        return make_url(url_text).render_as_string(hide_password=True)
    except ArgumentError:
        return repr(url_text)


def parse_url(url_text: str) -> URL:
    try:
        url = make_url(url_text)
    except ArgumentError:
        raise RegistryError(f"registry URL {url_text!r} is not a database URL: {URL_FORMS}") from None
    if url.get_backend_name() not in SUPPORTED_DIALECTS:
        raise RegistryError(f"unsupported registry URL {url.render_as_string(hide_password=True)}: {URL_FORMS}")
    return url


def writable_folder(folder: Path) -> None:
    """Prove that files can be created in ``folder`` (root ignores permission bits, and
    ``/proc`` says it is writable): make and remove a temporary folder there."""
    try:
        shutil.rmtree(tempfile.mkdtemp(prefix=".perfsuite-check-", dir=folder))
    except OSError as exc:
        raise RegistryError(f"cannot create files in {folder}: {exc.strerror or exc}") from exc


def _existing_database(path: Path) -> bool:
    """Whether ``path`` exists; a folder, a device, a FIFO or a socket there is refused
    before anything opens it (opening a FIFO waits for ever; SQLite would create its
    journal and the lock file beside ``/dev/null``)."""
    try:
        mode = path.stat().st_mode
    except (FileNotFoundError, NotADirectoryError):
        return False  # what is in the way is named by the folder checks
    except OSError as exc:
        raise RegistryError(f"registry {path} cannot be looked at: {exc.strerror or exc}") from exc
    if stat.S_ISDIR(mode):
        raise RegistryError(f"registry {path} is a folder, not a SQLite database file")
    if not stat.S_ISREG(mode):
        raise RegistryError(f"registry {path} is {kind(mode)}, not a SQLite database file")
    return True


def _check_header(path: Path, mode: str) -> None:
    with open(path, mode) as f:  # "r+b": readable and writable; nothing is written
        header = f.read(len(SQLITE_HEADER))
    if header and header != SQLITE_HEADER:
        raise RegistryError(f"registry {path} is not a SQLite database")


def writable_file(path: Path) -> str | None:
    """Why the existing SQLite file ``path`` cannot be written (its filesystem is read-only,
    or this user may not write it or its folder, where SQLite keeps its journal), or None."""
    if os.statvfs(path).f_flag & os.ST_RDONLY:
        return "its filesystem is read-only"
    if not os.access(path, os.W_OK):
        return "this user may not write it"
    if not os.access(path.parent, os.W_OK | os.X_OK):
        return f"this user may not create files in {path.parent}"
    return None


def check_sqlite_readable(path: Path) -> None:
    """Raise :class:`RegistryError` if the existing ``path`` cannot be read as a SQLite registry."""
    if not _existing_database(path):
        raise RegistryError(f"registry {path} does not exist")
    _check_header(path, "rb")


def check_sqlite_path(path: Path) -> None:
    """Raise :class:`RegistryError` if ``path`` cannot be a SQLite registry; creates nothing."""
    if _existing_database(path):
        _check_header(path, "r+b")
        writable_folder(path.parent)  # WAL and lock files live beside it
        return
    existing = path.parent
    while not existing.exists():
        existing = existing.parent
    if not existing.is_dir():
        raise RegistryError(f"cannot create registry {path}: {existing} is not a folder")
    try:
        writable_folder(existing)
    except RegistryError as exc:
        raise RegistryError(f"cannot create registry {path}: {exc}") from exc
