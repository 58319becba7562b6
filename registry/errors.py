"""The registry's two exceptions (the record rules' own, :mod:`perfsuite.schemas.errors`: a
refused record is a registry refusal too), and the one place where database and file-system
failures become a one-line message."""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Iterator

from perfsuite.schemas.errors import RecordInvalid, one_line
from perfsuite.schemas.errors import Refused as RegistryError

__all__ = ["RecordInvalid", "RegistryError", "first_line", "one_line", "translated_errors"]


def first_line(exc: BaseException) -> str:
    """The useful line of a driver error: SQLAlchemy adds SQL and a help link below it."""
    from sqlalchemy.exc import DBAPIError

    inner = exc.orig if isinstance(exc, DBAPIError) and exc.orig is not None else exc
    lines = [line.strip() for line in str(inner).splitlines() if line.strip()]
    return one_line(lines[0] if lines else type(inner).__name__)


@contextlib.contextmanager
def translated_errors(what: str) -> Iterator[None]:
    """Turn database and file-system failures into a one-line :class:`RegistryError`.

    A race on a unique key is not one of them: the store handles ``IntegrityError`` itself.
    """
    from sqlalchemy.exc import SQLAlchemyError

    try:
        yield
    except RegistryError:
        raise
    except (SQLAlchemyError, sqlite3.Error, OSError) as exc:
        raise RegistryError(one_line(f"{what}: {first_line(exc)}")) from exc
    except Exception as exc:
        from alembic.util import (
            CommandError,  # a database at a revision this version does not know
        )

        if isinstance(exc, CommandError):
            raise RegistryError(one_line(f"{what}: {exc}")) from exc
        raise
