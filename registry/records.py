"""The one implementation of a run record's canonical JSON, its sha256 and its validation.

The runner hashes and validates a record before writing its JSON file, ``perfsuite check``
re-hashes submitted files and the registry re-checks both before storing: all of them
import these functions, so a record has exactly one canonical form.

Canonical JSON is ``json.dumps(..., sort_keys=True, separators=(",", ":"),
ensure_ascii=False)`` encoded as UTF-8; the sha256 covers the record without its own
``sha256`` key. NaN and infinities are refused: they are not JSON, and PostgreSQL rejects them.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
from datetime import datetime
from typing import Any

from perfsuite import schemas

from .errors import RecordInvalid, one_line
from .reading import load_json_file, nesting_depth

SHA256_KEY = "sha256"
TIMESTAMP_FIELDS = ("started_at", "finished_at")
# A record file larger than this is refused before it is read. Real records are far
# smaller (a few hundred KiB with every raw sample of a long sweep); the limit keeps a
# stray or hostile file from filling memory and the database.
MAX_RECORD_BYTES = 64 * 1024 * 1024
# Deepest nesting of objects and arrays a record may have. Records nest about 8 deep; the
# limit stays well below where Python's recursive JSON and schema code would overflow.
MAX_RECORD_DEPTH = 64


def canonical_json(record: Any) -> str:
    """The canonical text of a JSON document: sorted keys, no spaces, UTF-8 kept as is."""
    try:
        return json.dumps(record, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    except ValueError as exc:  # NaN or infinity somewhere in the document
        raise RecordInvalid(one_line(f"record is not valid JSON: {exc}")) from exc
    except TypeError as exc:  # a value json cannot encode (a datetime, a numpy scalar ...)
        raise RecordInvalid(one_line(f"record is not JSON-serialisable: {exc}")) from exc


def record_sha256(record: dict) -> str:
    """sha256 (hex) of the canonical JSON of ``record`` without its ``sha256`` key."""
    body = {key: value for key, value in record.items() if key != SHA256_KEY}
    return hashlib.sha256(canonical_json(body).encode("utf-8")).hexdigest()


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
    from jsonschema.exceptions import best_match

    if not isinstance(record, dict):
        raise RecordInvalid(f"a run record must be a JSON object, not {type(record).__name__}")
    error = best_match(_result_validator().iter_errors(record))
    if error is not None:
        raise RecordInvalid(one_line(f"{_json_path(error.absolute_path)}: {error.message}"))
    canonical_json(record)
    for field in TIMESTAMP_FIELDS:
        parse_timestamp(record[field], field)


def check_record(record: Any) -> str:
    """Everything that must hold before a record is stored: its nesting depth, the schema
    (:func:`validate_record`) and its hash; return its sha256 or raise :class:`RecordInvalid`."""
    if nesting_depth(record, MAX_RECORD_DEPTH) > MAX_RECORD_DEPTH:
        raise RecordInvalid(f"record nests objects or arrays more than {MAX_RECORD_DEPTH} deep")
    validate_record(record)
    try:
        return check_sha256(record)
    except UnicodeEncodeError as exc:  # a lone surrogate ("\ud800") parses as JSON but is not UTF-8
        raise RecordInvalid(one_line(f"record text is not valid Unicode: {exc.reason}")) from exc


def load_record_file(path: str | os.PathLike) -> Any:
    """Read and parse one record file, refusing (as :class:`RecordInvalid`) anything but a
    regular file, a file over :data:`MAX_RECORD_BYTES` (before reading it), text that is not
    UTF-8 and text that is not JSON (nesting and integer size bounded: perfsuite.registry.reading).
    The document is returned unchecked: pass it to :func:`check_record`."""
    return load_json_file(path, MAX_RECORD_BYTES, MAX_RECORD_DEPTH)


def check_sha256(record: dict) -> str:
    """Return the record's sha256 after checking it equals a fresh hash of its content."""
    actual = record_sha256(record)
    claimed = record.get(SHA256_KEY)
    if claimed != actual:
        raise RecordInvalid(f"$.sha256: record says {claimed}, its content hashes to {actual}")
    return actual
