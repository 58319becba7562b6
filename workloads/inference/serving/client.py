"""The streaming HTTP client of ``inference.serving``: one OpenAI-style streamed completion,
timed chunk by chunk, and everything that can go wrong with it named.

A request is sent on a keep-alive connection of the run's :class:`Session` (``serving.http``:
asyncio protocols over httptools) and its Server-Sent Events parsed read by read, one
``orjson.loads`` per event. Times are ``time.perf_counter_ns()`` (CLOCK_MONOTONIC on Linux, so
comparable between the client's processes): sent, first content chunk (time to first token),
every content chunk (the inter-token latencies), end of stream. An event's time is that of the
read that completed it. A request that fails keeps its reason, one of
:data:`REASONS`, and a line of detail; it never raises, and it never waits longer than its
timeouts: ``stall_timeout_s`` between two reads (a server that stops mid-stream) and
``request_timeout_s`` in all, from the request's first byte to the answer's last (a server that
trickles a byte at a time meets it). Nor does it hold more than its bounds: an event longer than
``MAX_EVENT_BYTES`` without its end fails the request (``oversized``), as does an answer past
``serving.http``'s size bounds.

Output tokens come from the server's ``usage`` (asked for with ``stream_options``), else from
a tokenizer over the text where one is given, else one per content chunk; each result says
which (``token_source``). An answer is truncated (a failure) when its stream ends without a
finish reason, ``[DONE]`` or not, or, where the request asked the engine to ignore
end-of-sequence, when the server's own count is below ``max_tokens``.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from itertools import pairwise
from time import perf_counter_ns
from typing import Any

import orjson

from perfsuite.workloads.inference.serving.http import Session, Target

# Why a request failed; the error budget counts these.
REASONS = (
    "http_status",
    "connect",
    "stall",
    "timeout",
    "malformed_chunk",
    "oversized",
    "truncated",
    "server_error_event",
    "empty",
)
# One Server-Sent Event, unfinished: engines send a few hundred bytes (a few KiB with logprobs);
# a server sending a gigabyte with no blank line must not make the client hold it.
MAX_EVENT_BYTES = 1024 * 1024
TOKEN_SOURCES = ("usage", "tokenizer", "chunks")


@dataclass(frozen=True)
class Endpoint:
    """Where and how to send: the server's base URL (``http://host:port``), the model name,
    the API (``completions`` or ``chat``), headers (an API key from the environment, never
    recorded) and fields added to every request body (``ignore_eos`` and the like)."""

    base_url: str
    model: str
    api: str = "completions"
    headers: tuple[tuple[str, str], ...] = ()
    extra_body: tuple[tuple[str, Any], ...] = ()

    @property
    def url(self) -> str:
        return self.base_url.rstrip("/") + ("/v1/chat/completions" if self.api == "chat" else "/v1/completions")

    @cached_property
    def target(self) -> Target:
        return Target.parse(self.url)

    @cached_property
    def _head(self) -> bytes:
        return self.target.post_head(self.headers)

    def request(self, body: bytes) -> bytes:
        """The whole HTTP request that sends ``body`` (a :meth:`body`)."""
        return self._head + b"Content-Length: %d\r\n\r\n" % len(body) + body

    @cached_property
    def ignores_eos(self) -> bool:
        return bool(dict(self.extra_body).get("ignore_eos"))

    def expected_tokens(self, body: bytes) -> int | None:
        """The tokens an answer to ``body`` must hold: its ``max_tokens`` where the request asks
        the engine to ignore end-of-sequence, else None (an answer may end early)."""
        if not self.ignores_eos:
            return None
        n = orjson.loads(body).get("max_tokens")
        return int(n) if isinstance(n, int) else None

    def fields(self, prompt: str, max_tokens: int, messages: list[dict[str, str]] | None = None) -> dict[str, Any]:
        """The JSON object of a request: ``messages`` (chat: a conversation) in place of the one
        user message of ``prompt``."""
        body: dict[str, Any] = {
            "model": self.model,
            "max_tokens": max_tokens,
            "stream": True,
            "stream_options": {"include_usage": True},
            "temperature": 0.0,
        }
        if self.api == "chat":
            body["messages"] = messages if messages is not None else [{"role": "user", "content": prompt}]
        else:
            body["prompt"] = prompt
        body.update(dict(self.extra_body))
        return body

    def body(self, prompt: str, max_tokens: int) -> bytes:
        return json.dumps(self.fields(prompt, max_tokens)).encode()


@dataclass(frozen=True)
class Timeouts:
    stall_s: float = 30.0  # longest silence between two reads of a stream
    request_s: float = 600.0  # longest a request may take in all
    connect_s: float = 10.0


@dataclass
class RequestResult:
    """One request as the client saw it (nanoseconds on the shared monotonic clock)."""

    index: int  # the prompt's index
    scheduled_ns: int  # when the load shape meant it to leave (== sent_ns for LoadGen's own queries)
    sent_ns: int = 0
    first_ns: int = 0  # first content chunk; 0: none
    done_ns: int = 0
    chunk_ns: list[int] = field(default_factory=list)  # every content chunk's arrival
    output_tokens: int = 0
    prompt_tokens: int | None = None
    cached_tokens: int | None = None  # usage.prompt_tokens_details.cached_tokens (None: the engine gave none)
    token_source: str = "chunks"
    finish_reason: str | None = None
    text: str = ""
    reason: str | None = None  # one of REASONS when the request failed
    detail: str = ""

    @property
    def ok(self) -> bool:
        return self.reason is None

    @property
    def ttft_s(self) -> float:
        return (self.first_ns - self.sent_ns) * 1e-9

    @property
    def e2e_s(self) -> float:
        return (self.done_ns - self.sent_ns) * 1e-9

    @property
    def tpot_s(self) -> float | None:
        """Time per output token after the first: (end - first token) / (tokens - 1), as vLLM's
        TPOT, AIPerf's inter-token latency and LoadGen's TPOT define it; None for one token."""
        if self.output_tokens < 2:
            return None
        return (self.done_ns - self.first_ns) * 1e-9 / (self.output_tokens - 1)

    @property
    def itl_s(self) -> list[float]:
        """Gaps between consecutive content chunks (vLLM's ITL)."""
        return [(b - a) * 1e-9 for a, b in pairwise(self.chunk_ns)]

    def to_row(self) -> dict:
        """A compact JSON-ready row (the record keeps these per request)."""
        return {
            "i": self.index,
            "sched_ns": self.scheduled_ns,
            "sent_ns": self.sent_ns,
            "first_ns": self.first_ns,
            "done_ns": self.done_ns,
            "tokens": self.output_tokens,
            "prompt_tokens": self.prompt_tokens,
            "cached_tokens": self.cached_tokens,
            "source": self.token_source,
            "itl_ms": [round(x * 1e3, 4) for x in self.itl_s],
            "reason": self.reason,
            "detail": self.detail or None,
        }


class StreamParser:
    """Server-Sent Events of an OpenAI-style stream, fed as bytes arrive (LF or CRLF lines)."""

    def __init__(self, result: RequestResult, on_first: Callable[[RequestResult], None] | None = None) -> None:
        self.result = result
        self.buffer = b""
        self.done = False  # saw ``data: [DONE]``
        self.on_first = on_first
        self.texts: list[str] = []

    def feed(self, data: bytes, now_ns: int) -> bool:
        """Parse the events ``data`` completes; True once the stream has failed (the rest of it
        need not be read)."""
        buf = self.buffer + data if self.buffer else data
        if b"\r" in buf:  # CRLF or CR line ends; a CR last may be the first half of a CRLF
            tail = b"\r" if buf.endswith(b"\r") else b""
            buf = buf[: len(buf) - len(tail)].replace(b"\r\n", b"\n").replace(b"\r", b"\n") + tail
        start = 0
        while (end := buf.find(b"\n\n", start)) >= 0:
            self._event(buf[start:end], now_ns)
            start = end + 2
            if self.result.reason is not None:
                self.buffer = b""
                return True
        self.buffer = buf[start:]
        if len(self.buffer) > MAX_EVENT_BYTES:
            self.buffer = b""
            self.fail("oversized", f"a stream event passed {MAX_EVENT_BYTES >> 20} MiB without its end (a blank line)")
            return True
        return False

    def _event(self, event: bytes, now_ns: int) -> None:
        r = self.result
        if event.startswith(b"data:") and b"\n" not in event:  # what every engine sends: one data line
            payload = event[5:].strip()
        else:
            payload = b"\n".join(line[5:].lstrip() for line in event.split(b"\n") if line.startswith(b"data:"))
        if not payload:
            return  # a comment or a keep-alive
        if payload == b"[DONE]":
            self.done = True
            return
        try:
            obj = orjson.loads(payload)
        except orjson.JSONDecodeError:
            self.fail("malformed_chunk", f"a stream chunk is not JSON: {payload[:80]!r}")
            return
        if not isinstance(obj, dict):
            self.fail("malformed_chunk", f"a stream chunk is not a JSON object: {payload[:80]!r}")
            return
        if "error" in obj:
            self.fail("server_error_event", f"the server sent an error event: {str(obj['error'])[:160]}")
            return
        usage = obj.get("usage")
        if usage and isinstance(usage, dict) and usage.get("completion_tokens") is not None:
            r.output_tokens = int(usage["completion_tokens"])
            r.prompt_tokens = usage.get("prompt_tokens")
            r.token_source = "usage"
            details = usage.get("prompt_tokens_details")
            if isinstance(details, dict) and isinstance(details.get("cached_tokens"), int):
                r.cached_tokens = details["cached_tokens"]
        choices = obj.get("choices")
        if not isinstance(choices, list):
            self.fail("malformed_chunk", f"a stream chunk has no choices list: {payload[:80]!r}")
            return
        if not choices:
            return  # the usage-only chunk
        choice = choices[0]
        if not isinstance(choice, dict):
            self.fail("malformed_chunk", f"a stream chunk's choice is not a JSON object: {payload[:80]!r}")
            return
        text = choice.get("text")
        if text is None:
            text = (choice.get("delta") or {}).get("content")
        if choice.get("finish_reason"):
            r.finish_reason = choice["finish_reason"]
        if text:
            if not r.first_ns:
                r.first_ns = now_ns
                if self.on_first is not None:
                    self.on_first(r)
            r.chunk_ns.append(now_ns)
            self.texts.append(text)

    def fail(self, reason: str, detail: str) -> None:
        if self.result.reason is None:
            self.result.reason, self.result.detail = reason, detail

    def finish(
        self, now_ns: int, count_tokens: Callable[[str], int] | None, expected_tokens: int | None = None
    ) -> RequestResult:
        """The stream has ended: name a truncation (no finish reason, or fewer than
        ``expected_tokens`` by the server's own count: given when the request asked the engine to
        ignore end-of-sequence), count tokens where the server gave no usage."""
        r = self.result
        r.done_ns = now_ns
        r.text = "".join(self.texts)
        if r.reason is None and self.buffer.strip():
            self.fail("truncated", f"the stream ended inside an event ({len(self.buffer)} bytes unparsed)")
        if r.reason is None and r.finish_reason is None and (r.chunk_ns or not self.done):
            ended = "with [DONE]" if self.done else "without [DONE]"
            self.fail("truncated", f"the stream ended {ended} after {len(r.chunk_ns)} chunk(s) without a finish reason")
        if r.reason is None and not r.chunk_ns:
            self.fail("empty", "the stream carried no content")
        if r.token_source != "usage":
            if count_tokens is not None:
                r.output_tokens, r.token_source = count_tokens(r.text), "tokenizer"
            else:
                r.output_tokens, r.token_source = len(r.chunk_ns), "chunks"
        if r.reason is None and expected_tokens and r.token_source == "usage" and r.output_tokens < expected_tokens:
            self.fail(
                "truncated",
                f"{r.output_tokens} of {expected_tokens} tokens (the engine was asked to ignore end-of-sequence; "
                f"finish reason {r.finish_reason!r})",
            )
        return r


async def stream_request(
    session: Session,
    endpoint: Endpoint,
    body: bytes,
    result: RequestResult,
    timeouts: Timeouts,
    on_first: Callable[[RequestResult], None] | None = None,
    count_tokens: Callable[[str], int] | None = None,
) -> RequestResult:
    """Send one streamed request on ``session`` and fill ``result``; never raises for what the
    server or the network does (the reason is in ``result.reason``)."""
    parser = StreamParser(result, on_first)
    request = endpoint.request(body)
    result.sent_ns = perf_counter_ns()
    outcome = await session.exchange(endpoint.target, request, parser.feed, timeouts)
    if outcome.failure is not None:
        parser.fail(*outcome.failure)
    elif outcome.status != 200:
        text = outcome.error_body.decode("utf-8", "replace")
        parser.fail("http_status", f"HTTP {outcome.status}: {text.strip()[:200]}")
    return parser.finish(perf_counter_ns(), count_tokens, endpoint.expected_tokens(body))


def new_session() -> Session:
    """The keep-alive connections of one client process for a run (``serving.http.Session``)."""
    return Session()
