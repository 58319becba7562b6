"""The one implementation of a run record's canonical JSON, its sha256 and its validation.

The runner hashes and validates a record before writing its JSON file, ``perfsuite check``
re-hashes submitted files and the registry re-checks both before storing: all of them
import these functions, so a record has exactly one canonical form.

Canonical JSON is ``json.dumps(..., sort_keys=True, separators=(",", ":"),
ensure_ascii=False)`` encoded as UTF-8; the sha256 covers the record without its own
``sha256`` key and with every metric's samples as a JSON array (``schemas.samples``: long
lists are stored encoded, and decode to exactly those floats), so re-encoding samples never
changes a record's hash. NaN and infinities are refused: they are not JSON, and PostgreSQL
rejects them.

The schema is checked by ``jsonschema-rs`` (about a thousand times faster than the pure
Python validator on a record: a public round of 100,000 records is checked in seconds);
only a record it refuses goes through ``jsonschema`` again, for the most relevant message.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import re
from datetime import datetime
from typing import Any

import orjson

from perfsuite import schemas
from perfsuite.schemas.samples import SamplesError, compact_metrics, inline_metrics

from .errors import RecordInvalid, one_line
from .reading import nesting_depth, parse_json, read_regular

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
    except RecursionError:
        raise RecordInvalid("record nests objects or arrays too deeply to serialise") from None


# Where orjson's text of a document may differ from :func:`canonical_json`'s: a float below 1e-4
# in size (json writes ``1e-05``, orjson ``0.00001`` or ``1e-7``). Every other number, string,
# key order and escape is written alike (tests/test_records_canonical.py checks it over the range
# of floats), so text with no such number where a value starts is the canonical text. A string
# that looks like one only sends the document down the slow path.
_MAY_DIFFER = re.compile(rb"[:,\[]-?(?:[0-9]+(?:\.[0-9]+)?e-|0\.0000)")


_NUMBER_BYTES = b"0123456789."


def _may_differ(text: bytes) -> bool:
    """Whether :data:`_MAY_DIFFER` matches ``text``, found from the other end: every match holds
    ``e-`` or ``0.0000``, so only where one of these occurs is the pattern tried, at the start of
    the number that ends there. Searching the whole text with the pattern tried it at every comma
    and colon: 0.15 to 0.22 ms of a record's 0.86 ms (profiled on the scale bench), this takes 15 us."""
    for needle in (b"e-", b"0.0000"):
        at = text.find(needle)
        while at != -1:
            start = at
            while start > 0 and text[start - 1] in _NUMBER_BYTES:
                start -= 1
            if start > 0 and text[start - 1] == 0x2D:  # "-"
                start -= 1
            if start > 0 and _MAY_DIFFER.match(text, start - 1):
                return True
            at = text.find(needle, at + 1)
    return False


def canonical_bytes(document: Any, finite: bool = False) -> bytes:
    """:func:`canonical_json` encoded as UTF-8, by orjson where its text is provably the same.

    ``finite``: the document is known to hold no NaN or infinity (orjson parsed it: it refuses
    them), for orjson writes them as ``null`` where canonical JSON refuses the document."""
    if finite:
        try:
            fast = orjson.dumps(document, option=orjson.OPT_SORT_KEYS)
        except TypeError:  # an integer beyond 64 bits, a lone surrogate, a non-string key
            fast = None
        if fast is not None and not _may_differ(fast):
            return fast
    return canonical_json(document).encode("utf-8")


def record_sha256(record: dict) -> str:
    """sha256 (hex) of the canonical JSON of ``record`` without its ``sha256`` key, its
    samples as JSON arrays."""
    return hashed_body(record)[0]


def hashed_body(record: dict, finite: bool = False) -> tuple[str, str]:
    """(sha256, canonical JSON) of the record without its ``sha256`` key, samples as arrays
    (``finite``: see :func:`canonical_bytes`)."""
    body = {key: value for key, value in record.items() if key != SHA256_KEY}
    metrics = body.get("metrics")
    if isinstance(metrics, list) and any(isinstance(m, dict) and isinstance(m.get("samples"), dict) for m in metrics):
        try:
            body["metrics"] = inline_metrics(metrics)
        except (SamplesError, KeyError, TypeError) as exc:
            raise RecordInvalid(one_line(f"$.metrics: samples cannot be decoded: {exc}")) from exc
        finite = False  # decoded samples were never parsed by orjson
    data = canonical_bytes(body, finite)
    return hashlib.sha256(data).hexdigest(), data.decode("utf-8")


def compact_record(record: dict) -> dict:
    """The record with long sample lists encoded (``schemas.samples``); same sha256. The
    input is not changed; a record with nothing to encode is returned as is."""
    metrics = record.get("metrics") or []
    if not any(isinstance(m["samples"], list) and len(m["samples"]) >= 64 for m in metrics):
        return record
    return {**record, "metrics": compact_metrics(metrics)}


def record_text(record: dict) -> str:
    """A record file's text, samples encoded (the sha256 covers content, not layout)."""
    return json.dumps(compact_record(record), indent=1, sort_keys=True, ensure_ascii=False, allow_nan=False)


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


def load_record_file(path: str | os.PathLike) -> Any:
    """:func:`read_record_file`'s document."""
    return read_record_file(path)[0]


def read_record_file(path: str | os.PathLike) -> tuple[Any, bool]:
    """Read and parse one record file, refusing (as :class:`RecordInvalid`) anything but a
    regular file (checked before it is opened: no FIFO, device or symlink), a file over
    :data:`MAX_RECORD_BYTES` (before reading it), text that is not UTF-8 and text that is not
    JSON (integer size and nesting bounded: :mod:`perfsuite.registry.reading`). The document is
    returned unchecked (pass it to :func:`check_record`), with whether orjson parsed it (then it
    holds no NaN or infinity: the ``finite`` of :func:`check_record_body`)."""
    data = read_regular(path, MAX_RECORD_BYTES)
    try:
        return orjson.loads(data), True
    except orjson.JSONDecodeError:
        pass  # json decides, with its own message (and what orjson refuses that json reads: big integers)
    return parse_json(data, MAX_RECORD_DEPTH), False


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
