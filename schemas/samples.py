"""Raw samples stored compactly: the one encoder and the one decoder of a metric's ``samples``.

A metric's samples are either a JSON array of numbers (short lists, and every record written
before this encoding) or an object that says how to rebuild that array exactly, bit for bit:

``{"encoding": "table", "count": N, "table": B64, "index": B64, "index_dtype": "<u1"|"<u2"|"<u4"}``
    The distinct float64 values, as their IEEE-754 bit patterns read as little-endian int64,
    sorted, delta-coded (first value, then differences), split into byte planes (all first
    bytes, then all second bytes ...) and zlib-compressed: ``table``. The sample at position
    i is ``table[index[i]]``; ``index`` holds N little-endian unsigned integers of
    ``index_dtype``, split into byte planes and zlib-compressed. Timings repeat (a CUDA event
    ticks in steps of about 32 ns), so tables are short.

``{"encoding": "reciprocal", "count": N, "of": NAME, "numerator": K, "residual": B64, "residual_dtype": "<i1"|...}``
    A throughput derived from a time (GB/s = bytes per call / seconds): the sample i is
    ``K / of_samples[i]`` in float64, whose bit pattern (as int64) is then corrected by
    ``residual[i]`` units in the last place. ``of_samples`` are the samples of the metric NAME
    of the same case (never itself ``reciprocal``). ``residual`` holds N little-endian signed
    integers of ``residual_dtype``, split into byte planes and zlib-compressed.

B64 is standard base64. Every encoding is checked by decoding before it is used, so a record
decodes to exactly the floats it was written from; the record's sha256 covers that decoded
form (``schemas.canonical.record_sha256``), so a record keeps its hash when its samples are
re-encoded. The 4 MB ``data.host_to_device`` records (162,758 samples) come to under 200 KB.
"""

from __future__ import annotations

import base64
import zlib
from collections.abc import Sequence
from typing import Any

import numpy as np

# Fewer samples than this stay a JSON array: the encoded form would not be shorter.
MIN_ENCODED = 64
TABLE, RECIPROCAL = "table", "reciprocal"
ENCODINGS = (TABLE, RECIPROCAL)
_UNSIGNED = ("<u1", "<u2", "<u4")
_SIGNED = ("<i1", "<i2", "<i4", "<i8")


class SamplesError(ValueError):
    """Encoded samples that cannot be decoded (a damaged or hand-edited record)."""


def _pack(array: np.ndarray) -> str:
    planes = np.ascontiguousarray(array).view(np.uint8).reshape(-1, array.dtype.itemsize).T
    return base64.b64encode(zlib.compress(planes.tobytes(), 9)).decode("ascii")


def _unpack(text: str, dtype: str, count: int) -> np.ndarray:
    try:
        raw = zlib.decompress(base64.b64decode(text, validate=True))
    except (ValueError, zlib.error) as exc:
        raise SamplesError(f"samples data is not base64 zlib: {exc}") from exc
    width = np.dtype(dtype).itemsize
    if len(raw) != count * width:
        raise SamplesError(f"samples data holds {len(raw)} bytes, not {count} x {width}")
    return np.frombuffer(raw, np.uint8).reshape(width, count).T.copy().view(dtype).reshape(count)


def _smallest(dtypes: Sequence[str], low: int, high: int) -> str:
    for dtype in dtypes:
        info = np.iinfo(dtype)
        if info.min <= low and high <= info.max:
            return dtype
    raise SamplesError(f"no integer type holds {low}..{high}")


def _table(values: np.ndarray) -> dict[str, Any]:
    bits = values.view("<i8")
    distinct, index = np.unique(bits, return_inverse=True)
    deltas = np.diff(distinct, prepend=np.int64(0))  # wraps like int64 arithmetic; cumsum undoes it
    index_dtype = _smallest(_UNSIGNED, 0, len(distinct) - 1)
    return {
        "encoding": TABLE,
        "count": len(values),
        "table": _pack(deltas.astype("<i8")),
        "index": _pack(index.astype(index_dtype)),
        "index_dtype": index_dtype,
    }


def _reciprocal(values: np.ndarray, of_name: str, of_values: np.ndarray) -> dict[str, Any] | None:
    if len(of_values) != len(values) or not np.all(np.isfinite(of_values)) or not np.all(of_values > 0):
        return None
    numerator = float(np.median(values * of_values))
    if not np.isfinite(numerator) or numerator <= 0:
        return None
    with np.errstate(all="ignore"):
        predicted = numerator / of_values
    residual = values.view("<i8") - predicted.view("<i8")
    low, high = int(residual.min()), int(residual.max())
    if low < -(2**31) or high >= 2**31:  # a poor prediction: the table does better
        return None
    dtype = _smallest(_SIGNED, low, high)
    return {
        "encoding": RECIPROCAL,
        "count": len(values),
        "of": of_name,
        "numerator": numerator,
        "residual": _pack(residual.astype(dtype)),
        "residual_dtype": dtype,
    }


def _floats(samples: Any) -> np.ndarray | None:
    """The samples as float64 when every one is a Python float (ints would come back as floats)."""
    if not isinstance(samples, list) or len(samples) < MIN_ENCODED:
        return None
    if not all(type(s) is float for s in samples):
        return None
    return np.array(samples, dtype="<f8")


def encode(samples: Any, siblings: dict[str, Any] | None = None) -> Any:
    """The compact form of one metric's samples, or ``samples`` unchanged where a JSON array
    is as short (few samples) or exact floats cannot be promised (integers in the list).

    ``siblings``: the other metrics of the same case by name, with their samples as JSON
    arrays; a throughput may then be stored as the reciprocal of one of them (a time).
    """
    values = _floats(samples)
    if values is None:
        return samples
    candidates = [_table(values)]
    for name, other in (siblings or {}).items():
        other_values = _floats(other)
        if other_values is not None:
            found = _reciprocal(values, name, other_values)
            if found is not None:
                candidates.append(found)
    for candidate in sorted(
        candidates, key=lambda c: len(c.get("table", "")) + len(c.get("index", "")) + len(c.get("residual", ""))
    ):
        decoded = _decode(
            candidate,
            {name: np.array(v, dtype="<f8") for name, v in (siblings or {}).items() if _floats(v) is not None},
        )
        if np.array_equal(decoded.view("<i8"), values.view("<i8")):
            return candidate
    return samples  # never reached in practice: the table is exact by construction


def _decode(encoded: dict, siblings: dict[str, np.ndarray]) -> np.ndarray:
    kind, count = encoded.get("encoding"), encoded.get("count")
    if not isinstance(count, int) or count < 0:
        raise SamplesError(f"encoded samples need a count, not {count!r}")
    if kind == TABLE:
        if encoded.get("index_dtype") not in _UNSIGNED:
            raise SamplesError(f"index_dtype {encoded.get('index_dtype')!r} is not one of {', '.join(_UNSIGNED)}")
        index = _unpack(encoded["index"], encoded["index_dtype"], count)
        table_bytes = zlib.decompress(base64.b64decode(encoded["table"], validate=True))
        distinct = np.cumsum(_unpack(encoded["table"], "<i8", len(table_bytes) // 8), dtype=np.int64)
        if count and int(index.max()) >= len(distinct):
            raise SamplesError(f"an index points past the table's {len(distinct)} values")
        return distinct[index.astype(np.int64)].view("<f8")
    if kind == RECIPROCAL:
        if encoded.get("residual_dtype") not in _SIGNED:
            raise SamplesError(f"residual_dtype {encoded.get('residual_dtype')!r} is not one of {', '.join(_SIGNED)}")
        of = siblings.get(str(encoded.get("of")))
        if of is None:
            raise SamplesError(f"samples are the reciprocal of metric {encoded.get('of')!r}, which the case lacks")
        if len(of) != count:
            raise SamplesError(f"metric {encoded['of']!r} has {len(of)} samples, not {count}")
        residual = _unpack(encoded["residual"], encoded["residual_dtype"], count).astype(np.int64)
        with np.errstate(all="ignore"):
            predicted = float(encoded["numerator"]) / of
        return (predicted.view("<i8") + residual).view("<f8")
    raise SamplesError(f"unknown samples encoding {kind!r}: one of {', '.join(ENCODINGS)}")


def decode(samples: Any, siblings: dict[str, Any] | None = None) -> list[float]:
    """The samples as a list of floats, whichever form they are stored in.

    ``siblings``: the other metrics of the same case by name (their ``samples`` fields, in
    any form); needed only for the ``reciprocal`` encoding.
    """
    if isinstance(samples, list):
        return samples
    if not isinstance(samples, dict):
        raise SamplesError(f"samples must be a list or an encoded object, not {type(samples).__name__}")
    plain = {}
    if samples.get("encoding") == RECIPROCAL:
        ref = (siblings or {}).get(str(samples.get("of")))
        if ref is not None:
            if isinstance(ref, dict) and ref.get("encoding") == RECIPROCAL:
                raise SamplesError(f"metric {samples['of']!r} is itself a reciprocal: chains are not allowed")
            plain[samples["of"]] = np.array(decode(ref), dtype="<f8")
    try:
        return _decode(samples, plain).tolist()
    except (KeyError, TypeError) as exc:
        raise SamplesError(f"encoded samples lack a field or hold the wrong type: {exc}") from exc


def metric_samples(metric: dict, metrics: Sequence[dict] = ()) -> list[float]:
    """The one way every reader gets a metric's samples: ``metric`` and the record's metrics
    (for a ``reciprocal`` encoding, which reads a sibling of the same case)."""
    samples = metric["samples"]
    if isinstance(samples, list):
        return samples
    siblings = {m["name"]: m["samples"] for m in metrics if m["case"] == metric["case"] and m is not metric}
    return decode(samples, siblings)


def compact_metrics(metrics: list[dict]) -> list[dict]:
    """The metrics with long sample lists encoded (new dicts; the input is not changed).

    A throughput (higher is better) may be stored as the reciprocal of a time of its case
    (lower is better), which is itself stored as a table: never a chain of reciprocals.
    """
    times: dict[str, dict[str, Any]] = {}
    for m in metrics:
        if not m["higher_is_better"] and isinstance(m["samples"], list):
            times.setdefault(m["case"], {})[m["name"]] = m["samples"]
    out = []
    for m in metrics:
        samples = m["samples"]
        if isinstance(samples, list) and len(samples) >= MIN_ENCODED:
            m = {**m, "samples": encode(samples, times.get(m["case"]) if m["higher_is_better"] else None)}
        out.append(m)
    return out


def standalone(metric: dict, metrics: Sequence[dict] = ()) -> Any:
    """The metric's samples in a form that decodes without its siblings (what the registry's
    metric rows hold): a ``reciprocal`` is re-encoded as a table."""
    samples = metric["samples"]
    if isinstance(samples, dict) and samples.get("encoding") == RECIPROCAL:
        return encode(metric_samples(metric, metrics))
    return samples


def inline_metrics(metrics: list[dict]) -> list[dict]:
    """The metrics with every encoded sample list decoded into a JSON array (new dicts)."""
    if all(isinstance(m["samples"], list) for m in metrics):
        return metrics
    return [m if isinstance(m["samples"], list) else {**m, "samples": metric_samples(m, metrics)} for m in metrics]
