"""The refusals of the record rules, each carrying a one-line message fit for a CLI error.

They live with the rules (not with the registry) because the engine, ``perfsuite import`` and
``perfsuite submit`` all refuse a record through them. The registry names :class:`Refused` its
``RegistryError``, so a caller that catches the registry's refusals catches a bad record too.
"""

from __future__ import annotations


class Refused(Exception):
    """An operation on records was refused: a bad record here; a conflicting record, an unknown run
    id or a bad URL in the registry (``perfsuite.registry.errors.RegistryError`` is this class)."""


class RecordInvalid(Refused):
    """A run record breaks the result schema, or its sha256 does not match its content."""


def one_line(text: str, limit: int = 300) -> str:
    """Collapse whitespace and cut long text, so that a message stays one readable line."""
    flat = " ".join(str(text).split())
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."
