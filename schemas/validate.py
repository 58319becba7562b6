"""Whether a run record may be accepted: its nesting depth, the result schema, its timestamps
and the sha256 it states.

The schema is checked by ``jsonschema-rs`` (about a thousand times faster than the pure
Python validator on a record: a public round of 100,000 records is checked in seconds);
only a record it refuses goes through ``jsonschema`` again, for the most relevant message.
:func:`perfsuite.schemas.seal.seal` is the one caller outside the record rules' own modules
and the registry's bulk import (which checks a whole folder's records in worker processes).
"""

from __future__ import annotations

import functools
from datetime import datetime
from typing import Any

from perfsuite import schemas

from .canonical import SHA256_KEY, canonical_json, hashed_body
from .errors import RecordInvalid, one_line
from .reading import MAX_RECORD_DEPTH, nesting_depth

TIMESTAMP_FIELDS = ("started_at", "finished_at")


@functools.lru_cache(maxsize=1)
def _fast_validator():
    import jsonschema_rs

    return jsonschema_rs.validator_for(schemas.load("result"))


def _schema_ok(record: dict) -> bool:
    """The fast check; a value the Rust validator cannot take (an integer beyond 64 bits)
    counts as a refusal, so that the pure Python validator decides."""
    try:
        return _fast_validator().is_valid(record)
    except (ValueError, OverflowError, TypeError):
        return False


@functools.lru_cache(maxsize=1)
def _result_validator():
    from jsonschema import Draft202012Validator

    schema = schemas.load("result")
    Draft202012Validator.check_schema(schema)
    return Draft202012Validator(schema)  # format checking off: timestamps are parsed below


def _json_path(path) -> str:
    out = "$"
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else f".{part}"
    return out


def parse_timestamp(text: str, field: str) -> datetime:
    """An ISO 8601 timestamp with an explicit offset; naive times are refused (whose clock?)."""
    try:
        # Python 3.10's fromisoformat does not know "Z".
        value = datetime.fromisoformat(text[:-1] + "+00:00" if text.endswith("Z") else text)
    except ValueError as exc:
        raise RecordInvalid(one_line(f"$.{field}: {text!r} is not an ISO 8601 timestamp")) from exc
    if value.tzinfo is None or value.utcoffset() is None:
        raise RecordInvalid(one_line(f"$.{field}: {text!r} has no timezone offset"))
    return value


def validate_record(record: dict) -> None:
    """Raise :class:`RecordInvalid` naming the most relevant violation (JSON path: message).

    Checks the result schema, that the record is JSON (no NaN), and that its timestamps
    carry a timezone offset. It does not check the sha256: see :func:`check_sha256`.
    """
    validate_schema(record)
    canonical_json(record)


def validate_schema(record: dict) -> None:
    """:func:`validate_record` less the JSON check (which hashing does anyway)."""
    from jsonschema.exceptions import best_match

    if not isinstance(record, dict):
        raise RecordInvalid(f"a run record must be a JSON object, not {type(record).__name__}")
    if not _schema_ok(record):
        error = best_match(_result_validator().iter_errors(record))
        if error is not None:
            raise RecordInvalid(one_line(f"{_json_path(error.absolute_path)}: {error.message}"))
    for field in TIMESTAMP_FIELDS:
        parse_timestamp(record[field], field)


def check_record(record: Any) -> str:
    """Everything that must hold before a record is stored: its nesting depth, the schema
    (:func:`validate_record`) and its hash; return its sha256 or raise :class:`RecordInvalid`."""
    return check_record_body(record)[0]


def check_record_body(record: Any, finite: bool = False) -> tuple[str, str]:
    """:func:`check_record`, returning (sha256, the canonical text of the record less its
    sha256) so that a caller storing the record need not serialise it again.

    The nesting depth is walked only when the fast schema check refuses the record (before the
    recursive pure Python validator runs): a record the schema accepts nests deeper only in its
    free-form parts, and serialising one that nests too deeply for Python is refused as such."""
    if not isinstance(record, dict) or not _schema_ok(record):
        if nesting_depth(record, MAX_RECORD_DEPTH) > MAX_RECORD_DEPTH:
            raise RecordInvalid(f"record nests objects or arrays more than {MAX_RECORD_DEPTH} deep")
        validate_schema(record)
    else:
        for field in TIMESTAMP_FIELDS:
            parse_timestamp(record[field], field)
    try:
        return checked_body(record, finite)
    except UnicodeEncodeError as exc:  # a lone surrogate ("\ud800") parses as JSON but is not UTF-8
        raise RecordInvalid(one_line(f"record text is not valid Unicode: {exc.reason}")) from exc


def check_sha256(record: dict) -> str:
    """Return the record's sha256 after checking it equals a fresh hash of its content."""
    return checked_body(record)[0]


def checked_body(record: dict, finite: bool = False) -> tuple[str, str]:
    """(sha256, canonical body text) after checking the sha256 the record states."""
    actual, text = hashed_body(record, finite)
    claimed = record.get(SHA256_KEY)
    if claimed != actual:
        raise RecordInvalid(f"$.sha256: record says {claimed}, its content hashes to {actual}")
    return actual, text
