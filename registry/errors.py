"""The registry's two exceptions, each carrying a one-line message fit for a CLI error."""
from __future__ import annotations


class RegistryError(Exception):
    """The registry refused an operation: a conflicting record, an unknown run id, a bad URL."""


class RecordInvalid(RegistryError):
    """A run record breaks the result schema, or its sha256 does not match its content."""


def one_line(text: str, limit: int = 300) -> str:
    """Collapse whitespace and cut long text, so that a message stays one readable line."""
    flat = " ".join(str(text).split())
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."
