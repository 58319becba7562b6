"""Sealing a run record: the one call through which a record is made or accepted.

The engine seals the record it has just built (``new``: its sha256 is computed and set),
``perfsuite import`` seals each record it reads before the registry stores it, and
``perfsuite submit`` seals each registry record it files: the same checks (nesting depth,
result schema, timestamps, JSON without NaN), the same hash over the same canonical bytes and
the same file text, so one record is the same bytes whichever way it went.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from .canonical import SHA256_KEY, compact_record, compact_text, hashed_body
from .validate import check_record_body, validate_schema


@dataclass(frozen=True)
class Sealed:
    """A record that passed its checks, with what its seal covers."""

    record: dict  # the record as given, its sha256 included (set by a new seal)
    sha256: str
    body: str  # the canonical JSON of the record less its sha256, samples as arrays: what sha256 covers

    @property
    def canonical(self) -> bytes:
        """The bytes the sha256 is the hash of."""
        return self.body.encode("utf-8")

    @functools.cached_property
    def compact(self) -> dict:
        """The record with long sample lists encoded (``schemas.samples``): what a file and the
        registry hold. Encoded on first use: an import that stores the canonical body needs none."""
        return compact_record(self.record)

    @property
    def text(self) -> str:
        """A record file's text: samples encoded, keys sorted, one space of indent (the sha256
        covers content, not layout)."""
        return compact_text(self.compact)


def seal_record(record: dict, *, new: bool = False, finite: bool = False) -> Sealed:
    """Check ``record`` and return it sealed, or raise
    :class:`~perfsuite.schemas.errors.RecordInvalid` with a one-line reason.

    ``new``: the record is being made (by the engine): its sha256 key, if any, is replaced by the
    hash of its content, in place. Otherwise the record states its sha256 (a file, the registry's
    copy) and it must be its content's hash. ``finite``: the record was parsed by orjson (which
    refuses NaN and infinity), so its canonical bytes may be written by orjson where they are
    provably the same (:func:`~perfsuite.schemas.canonical.canonical_bytes`).
    """
    if not new:
        sha256, body = check_record_body(record, finite)
        return Sealed(record, sha256, body)
    record.pop(SHA256_KEY, None)
    sha256, body = hashed_body(record)  # refuses NaN, infinity and values JSON cannot hold
    record[SHA256_KEY] = sha256
    validate_schema(record)
    return Sealed(record, sha256, body)
