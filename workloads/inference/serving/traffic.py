"""Traffic shapes of ``inference.serving`` other than single-turn prompts: trace replay and
shared-prefix traffic, and the prefix-cache hit rate every step states.

- **Trace replay** (``trace``): requests sent at a trace's timestamps times ``trace_time_scale``,
  each a synthetic prompt of the trace's input length (words of ``serving.prompts``) asking for
  its output length as ``max_tokens``. Two formats, one JSON object a line: Mooncake's
  (``timestamp`` in ms, ``input_length``, ``output_length``, optional ``hash_ids``: the ids of
  the prompt's 512-token blocks, equal ids meaning an equal block, so requests that share ids
  share a prefix here too) and a plain one (``timestamp_s``, ``input_tokens``,
  ``output_tokens``). A trace is read within bounds (a regular file of at most
  ``MAX_TRACE_BYTES``, at most ``MAX_TRACE_REQUESTS`` requests, lengths up to
  ``MAX_INPUT_TOKENS`` / ``MAX_OUTPUT_TOKENS``, at most ``MAX_TRACE_INPUT_TOKENS`` input tokens
  in all); a line that breaks a rule is refused in one line
  naming its number. Requests leave in timestamp order (a stable sort), the first at once.
- **Shared prefixes** (``prefixes`` x ``suffixes_per_prefix``, ``prefix_tokens``): N prefixes of
  P words, each followed by M suffixes of ``input_tokens`` words; request (i, j) is prefix i and
  its suffix j. Sent round by round: suffix 0 of every prefix, then suffix 1 of every prefix,
  and so on, so each prefix is first seen once before any request can reuse it, and the cache
  must hold all N prefixes to serve the later rounds. Each step draws prefixes of its own (seeded
  by the step's number), so one step's requests never warm the next's cache. A cache that keeps
  every prefix serves (M-1)/M of the prefix words from the cache.
- **Prefix-cache hit rate**: summed ``usage.prompt_tokens_details.cached_tokens`` over summed
  prompt tokens of the step's completed requests, where the engine reports them; else "not
  reported" (the record says which).
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import orjson

from perfsuite.workloads.inference.serving.capped_read import read_capped
from perfsuite.workloads.inference.serving.prompts import words_text

TRACE_FORMATS = ("mooncake", "jsonl")
MAX_TRACE_BYTES = 64 * 1024 * 1024
MAX_TRACE_REQUESTS = 100_000
MAX_INPUT_TOKENS = 1_000_000
MAX_OUTPUT_TOKENS = 100_000
# every prompt is built before the replay starts: about 5 bytes a word, so this bounds the
# prompts' memory near 1.25 GB (the Mooncake conversation trace holds about 150 million tokens)
MAX_TRACE_INPUT_TOKENS = 250_000_000
MAX_TRACE_SPAN_S = 7 * 86_400.0  # a week of traffic, scaled or not, is longer than any run
MOONCAKE_BLOCK_TOKENS = 512  # Mooncake's hash_ids name blocks of this many tokens
# the fields of each format: time (and its unit in seconds), input length, output length
_FIELDS = {
    "mooncake": ("timestamp", 1e-3, "input_length", "output_length"),
    "jsonl": ("timestamp_s", 1.0, "input_tokens", "output_tokens"),
}


class TraceError(ValueError):
    """A trace that cannot be replayed (one line naming the file and, where one is at fault, the line)."""


@dataclass(frozen=True)
class TraceRequest:
    line: int  # its line in the file (from 1)
    time_s: float
    input_tokens: int
    output_tokens: int
    hash_ids: tuple[int, ...] = ()


@dataclass(frozen=True)
class Trace:
    path: Path
    fmt: str
    sha256: str
    requests: tuple[TraceRequest, ...]  # in send order

    def offsets_s(self, scale: float) -> list[float]:
        """Each request's send time from the first, times ``scale``."""
        t0 = self.requests[0].time_s
        return [(r.time_s - t0) * scale for r in self.requests]

    def describe(self, scale: float) -> dict:
        offsets = self.offsets_s(scale)
        return {
            "file": self.path.name,
            "sha256": self.sha256,
            "format": self.fmt,
            "requests": len(self.requests),
            "time_scale": scale,
            "trace_span_s": self.requests[-1].time_s - self.requests[0].time_s,
            "scaled_span_s": offsets[-1],
            "input_tokens_total": sum(r.input_tokens for r in self.requests),
            "output_tokens_total": sum(r.output_tokens for r in self.requests),
            "with_hash_ids": sum(bool(r.hash_ids) for r in self.requests),
        }


def _number(obj: dict, key: str, where: str, integer: bool, low: float, high: float) -> Any:
    if key not in obj:
        raise TraceError(f"{where}: no {key!r}")
    value = obj[key]
    if isinstance(value, bool) or not isinstance(value, int if integer else (int, float)):
        kind = "an integer" if integer else "a number"
        raise TraceError(f"{where}: {key!r} must be {kind}, not {value!r}"[:300])
    if not (math.isfinite(value) and low <= value <= high):
        raise TraceError(f"{where}: {key!r} must lie from {low:g} to {high:g}, not {value!r}"[:300])
    return value


def load_trace(path: str | Path, fmt: str) -> Trace:
    """Read and check a trace; a :class:`TraceError` names the file and the line at fault."""
    if fmt not in TRACE_FORMATS:
        raise TraceError(f"trace_format must be one of {', '.join(TRACE_FORMATS)}, not {fmt!r}")
    p = Path(path)
    data = read_capped(p, MAX_TRACE_BYTES, "trace", TraceError)
    time_key, unit, in_key, out_key = _FIELDS[fmt]
    rows: list[TraceRequest] = []
    for number, raw in enumerate(data.split(b"\n"), start=1):
        if not raw.strip():
            continue
        where = f"trace {p.name} line {number}"
        if len(rows) >= MAX_TRACE_REQUESTS:
            raise TraceError(f"{where}: more than {MAX_TRACE_REQUESTS:,} requests")
        try:
            obj = orjson.loads(raw)
        except orjson.JSONDecodeError as exc:
            raise TraceError(f"{where}: not JSON ({exc})"[:300]) from None
        if not isinstance(obj, dict):
            raise TraceError(f"{where}: not a JSON object")
        t = _number(obj, time_key, where, False, 0, MAX_TRACE_SPAN_S / unit)
        n_in = _number(obj, in_key, where, True, 1, MAX_INPUT_TOKENS)
        n_out = _number(obj, out_key, where, True, 1, MAX_OUTPUT_TOKENS)
        ids: tuple[int, ...] = ()
        if fmt == "mooncake" and "hash_ids" in obj:
            h = obj["hash_ids"]
            if not isinstance(h, list) or not all(isinstance(x, int) and not isinstance(x, bool) for x in h):
                raise TraceError(f"{where}: 'hash_ids' must be a list of integers")
            ids = tuple(h)
        rows.append(TraceRequest(number, float(t) * unit, n_in, n_out, ids))
    if not rows:
        raise TraceError(f"trace {p} holds no requests")
    total = sum(r.input_tokens for r in rows)
    if total > MAX_TRACE_INPUT_TOKENS:
        raise TraceError(f"trace {p} asks for {total:,} input tokens in all: at most {MAX_TRACE_INPUT_TOKENS:,}")
    rows.sort(key=lambda r: r.time_s)  # stable: equal times keep the file's order
    if rows[-1].time_s - rows[0].time_s > MAX_TRACE_SPAN_S:
        raise TraceError(f"trace {p} spans more than {MAX_TRACE_SPAN_S:g} s")
    return Trace(p, fmt, hashlib.sha256(data).hexdigest(), tuple(rows))


def trace_prompt(req: TraceRequest, index: int, seed: int) -> str:
    """A prompt of ``req.input_tokens`` words: with ``hash_ids``, block k is the words seeded by
    its id (equal ids, equal blocks), the rest of the prompt the request's own words."""
    if not req.hash_ids:
        return words_text(req.input_tokens, seed * 1_000_003 + index, first=index)
    parts: list[str] = []
    left = req.input_tokens
    for block in req.hash_ids:
        if left <= 0:
            break
        take = min(left, MOONCAKE_BLOCK_TOKENS)
        parts.append(" ".join(_block(seed, block)[:take]))
        left -= take
    if left > 0:
        parts.append(words_text(left, seed * 1_000_003 + 10**9 + index))
    return " ".join(parts)


@lru_cache(maxsize=65_536)
def _block(seed: int, block: int) -> tuple[str, ...]:
    """The words of one Mooncake block (a trace repeats its blocks: each is drawn once)."""
    return tuple(words_text(MOONCAKE_BLOCK_TOKENS, seed * 1_000_003 + block).split())


@dataclass(frozen=True)
class SharedPrefix:
    prefixes: int  # N
    suffixes_per_prefix: int  # M
    prefix_tokens: int  # P (words)
    suffix_tokens: int  # words of each suffix
    output_tokens: int  # max_tokens of each request

    def prompts(self, seed: int, step: int) -> list[str]:
        """The N x M prompts in send order (round by round); request k is prefix k mod N with its
        suffix k // N."""
        base = (seed * 1_000_003 + step) * 1_000_003
        heads = [words_text(self.prefix_tokens, base + i, first=i) for i in range(self.prefixes)]
        out = []
        for j in range(self.suffixes_per_prefix):
            for i in range(self.prefixes):
                tail = words_text(self.suffix_tokens, base + 500_000 + i * self.suffixes_per_prefix + j)
                out.append(heads[i] + " " + tail)
        return out

    def describe(self) -> dict:
        n, m, p = self.prefixes, self.suffixes_per_prefix, self.prefix_tokens
        return {
            "shape": "shared_prefix",
            "prefixes": n,
            "suffixes_per_prefix": m,
            "prefix_tokens": p,
            "suffix_tokens": self.suffix_tokens,
            "requests": n * m,
            "order": "round by round: suffix 0 of prefixes 0..N-1, then suffix 1 of each, ... (request k: "
            "prefix k mod N, suffix k // N)",
            "prefixes_per_step": "drawn afresh for every step (a step never warms the next one's cache)",
            "expected_hit_rate_if_every_prefix_stays_cached": (m - 1) * p / (m * (p + self.suffix_tokens)),
            "unit": "words of serving.prompts (one token each under the suite's word-level tokenizer)",
        }


def hit_rate(results: list) -> dict:
    """The step's prefix-cache hit rate from the engine's ``cached_tokens``: summed cached over
    summed prompt tokens of the completed requests that reported both."""
    done = [r for r in results if r.ok]
    both = [r for r in done if r.cached_tokens is not None and r.prompt_tokens]
    if not both:
        return {
            "hit_rate": None,
            "source": "not reported (the engine gave no usage.prompt_tokens_details.cached_tokens)",
        }
    cached = sum(r.cached_tokens for r in both)
    prompt = sum(r.prompt_tokens for r in both)
    return {
        "hit_rate": cached / prompt,
        "cached_tokens": cached,
        "prompt_tokens": prompt,
        "requests_reporting": len(both),
        "requests_completed": len(done),
        "source": "usage.prompt_tokens_details.cached_tokens / usage.prompt_tokens",
    }
