"""A run record's canonical form: its canonical JSON, its sha256 and its file text.

Canonical JSON is ``json.dumps(..., sort_keys=True, separators=(",", ":"),
ensure_ascii=False)`` encoded as UTF-8; the sha256 covers the record without its own
``sha256`` key and with every metric's samples as a JSON array (``schemas.samples``: long
lists are stored encoded, and decode to exactly those floats), so re-encoding samples never
changes a record's hash. NaN and infinities are refused: they are not JSON, and PostgreSQL
rejects them.

Nothing here is called on its own to make or accept a record: :func:`perfsuite.schemas.seal.seal`
does (validation, hash, samples encoded), for the engine, ``perfsuite import`` and
``perfsuite submit`` alike, so a record has exactly one canonical form.
"""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any

import orjson

from .errors import RecordInvalid, one_line

SHA256_KEY = "sha256"


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
        from perfsuite.schemas.samples import SamplesError, inline_metrics  # numpy: only where samples are encoded

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
    from perfsuite.schemas.samples import compact_metrics  # numpy: only where samples are encoded

    return {**record, "metrics": compact_metrics(metrics)}


def record_text(record: dict) -> str:
    """A record file's text, samples encoded (the sha256 covers content, not layout)."""
    return compact_text(compact_record(record))


def compact_text(compact: dict) -> str:
    """The file text of a record whose samples are already encoded (:func:`compact_record`)."""
    return json.dumps(compact, indent=1, sort_keys=True, ensure_ascii=False, allow_nan=False)
