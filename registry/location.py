"""Whether a registry URL can name a registry: parse it, and check a SQLite path without
creating anything. Used when a registry is opened and by :func:`registry.check_url`
before a long run, so that a bad ``--db`` is one line before any work is done."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import ArgumentError

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


def check_sqlite_path(path: Path) -> None:
    """Raise :class:`RegistryError` if ``path`` cannot be a SQLite registry; creates nothing."""
    if path.is_dir():
        raise RegistryError(f"registry {path} is a folder, not a SQLite database file")
    if path.exists():
        with open(path, "r+b") as f:  # readable and writable; nothing is written
            header = f.read(len(SQLITE_HEADER))
        if header and header != SQLITE_HEADER:
            raise RegistryError(f"registry {path} is not a SQLite database")
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
