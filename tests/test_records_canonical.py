"""orjson's text of a record is taken as its canonical JSON only where it is the same bytes:
checked against ``json.dumps`` over floats of every magnitude, awkward strings and keys; a
document that may hold NaN still goes through ``json`` (which refuses it), and a record's sha256
is the same either way."""

from __future__ import annotations

import random

import orjson
import pytest
from support.factories import make_record

from perfsuite.registry.errors import RecordInvalid
from perfsuite.schemas.canonical import _MAY_DIFFER, _may_differ, canonical_bytes, canonical_json, hashed_body


def _floats(n: int) -> list[float]:
    rng = random.Random(7)
    out = [0.0, -0.0, 1e-4, 1e-5, 9.999999999999999e-05, 1e16, 1e15, 5e-324, 1.7976931348623157e308, 2.0**53]
    for _ in range(n):
        out.append(rng.choice((1, -1)) * rng.random() * 10.0 ** rng.randint(-320, 307))
    return out


def test_orjson_text_is_taken_only_where_it_equals_canonical_json():
    floats = _floats(20_000)
    taken = 0
    for i in range(0, len(floats), 5):
        doc = {"values": floats[i : i + 5], "one": floats[i], "n": i, "z": None, "t": True}
        fast = canonical_bytes(doc, finite=True)
        assert fast == canonical_json(doc).encode("utf-8")
        taken += orjson.dumps(doc, option=orjson.OPT_SORT_KEYS) == fast
    assert taken > 400  # the fast path is really used


def test_strings_keys_and_integers_are_written_alike():
    doc = {
        "é": 'a\x7f\u2028\x01\x1f\n\t"\\é😀\ud7ff/<>&',
        "z": [2**63, -(2**63), 2**64 - 1, 0],
        "😀": {"b": 1, "a": [{}, []]},
        "\uffff": "1e-05 0.00001",  # looks like a small float only inside a string
        "A": 1e-300,
    }
    assert canonical_bytes(doc, finite=True) == canonical_json(doc).encode("utf-8")
    big = {"n": 2**70}  # beyond orjson: json writes it
    assert canonical_bytes(big, finite=True) == b'{"n":1180591620717411303424}'


def test_nan_is_refused_unless_the_document_is_known_finite():
    with pytest.raises(RecordInvalid, match="not valid JSON"):
        canonical_bytes({"x": float("nan")})


def test_a_records_hash_is_the_same_on_either_path():
    record = make_record(metrics=None)
    assert hashed_body(record, finite=True) == hashed_body(record, finite=False)
    assert hashed_body(record)[0] == record["sha256"]


def test_the_quick_look_for_small_floats_finds_what_the_pattern_finds():
    texts = [orjson.dumps({"v": _floats(400)[i : i + 5], "x": -(10.0**-i)}) for i in range(0, 400, 5)]
    texts += [
        b'{"a":"x:1e-5","b":[0.00001],"c":"0.0000","d":[-0.00001]}',
        b'{"uuid":"GPU-876e-713b","x":[1.5]}',  # "e-" in a string: not a number
        b"[1e-7]",
        b":-1.25e-300",
        b"[0.00000.0000]",
        b":1.5.5e-",
        b"e-0.0000",
        b"",
    ]
    assert any(_MAY_DIFFER.search(t) for t in texts) and not all(_MAY_DIFFER.search(t) for t in texts)
    for text in texts:
        assert _may_differ(text) == (_MAY_DIFFER.search(text) is not None), text
