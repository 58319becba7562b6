"""A null OpenAI-compatible streaming server: answers every completion at once with N chunks.

It measures the load generator, not a model: against it, whatever time a request takes is
the client's own (and the loopback's). ``bench/serving_client_capacity.py`` drives it to state
how many streamed requests per second ``inference.serving``'s client sustains and how much it
adds to TTFT. With ``--fail-every`` / ``--stall-every`` / ``--malformed-every`` /
``--truncate-every`` it is also the bad server of the tests: every Nth request answers HTTP 500,
stalls mid-stream, sends a chunk that is not JSON, or drops the connection mid-stream; with
``--cut-every`` every Nth stream ends properly (``[DONE]``, the end chunk) after half its tokens
and no finish reason, as an engine that gives up mid-answer does. Other engines' shapes:
``--prefix-cache BLOCK`` (a prefix cache: a prompt's leading
whole blocks of BLOCK words that an earlier prompt began with are reported as
``usage.prompt_tokens_details.cached_tokens``, its words as ``prompt_tokens``, and each answer's
words name the request, `` r{n}w{i}``, so that a conversation's history can be traced),
``--batching --step-per-answer-ms MS`` (a batching engine whose step grows by MS per answer in
flight: it admits everything and slows every stream, processor sharing, at most one token per MS
in all), ``--max-in-flight N`` (at most N completions answered at once per server process, the rest
waiting their turn in arrival order: with ``--event-gap-ms`` a server of known capacity, N
answers per answer's time, that a load above it makes fall behind),
``--metrics`` (a Prometheus ``/metrics`` under vLLM's names whose figures move with the traffic:
running and waiting requests, a TTFT histogram, prefix-cache hits; ``serving.null_metrics``),
``--loading-s S`` (``/health`` answers 503 for its first S seconds, as llama.cpp's does while its
model loads, while ``/v1/models`` answers 200 at once),
``--no-health`` (no ``/health``), ``--no-models`` (no ``/v1/models`` either), ``--no-usage`` (no
token counts in the stream), ``--server-header TEXT`` (the ``Server`` header, ``uvicorn`` for one
built on a web framework), ``--owned-by TEXT`` (``/v1/models``' ``owned_by``; empty: none).

Plain asyncio (no web framework) so that the server costs as little CPU as it can on a
machine it shares with the client: HTTP/1.1 with keep-alive, an answer as one write, or with
``--write-each-event`` each event as its own write, as an engine sends its tokens (the client
then gets them in as many reads as the kernel delivers), or with ``--event-gap-ms`` each event
that long after the one before, so that each arrives in a read of its own as tokens do.

    python bench/serving_null_server.py --port 8123 [--chunks 16] [--processes 1] [--write-each-event]
        [--event-gap-ms 1]
    GET /health, GET /v1/models, POST /v1/completions, POST /v1/chat/completions

``max_tokens`` in a request sets its chunk count (one token each); without it ``--chunks``.
The first line on stdout is ``listening on http://HOST:PORT``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import socket
import sys
import time
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import orjson

from perfsuite.workloads.inference.serving.null_metrics import NullMetrics

MODEL = "null"
MAX_HEADER_BYTES = 65536
COMPLETION_PATHS = ("/v1/completions", "/v1/chat/completions")


@dataclass(frozen=True)
class Faults:
    """Every Nth request (counted per process, from 1) misbehaves; 0: never."""

    fail_every: int = 0
    stall_every: int = 0
    stall_s: float = 30.0
    malformed_every: int = 0
    truncate_every: int = 0
    cut_every: int = 0

    def pick(self, n: int) -> str | None:
        for name, every in (
            ("fail", self.fail_every),
            ("stall", self.stall_every),
            ("malformed", self.malformed_every),
            ("truncate", self.truncate_every),
            ("cut", self.cut_every),
        ):
            if every and n % every == 0:
                return name
        return None


def _chunk(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


def _event(obj: object) -> bytes:
    return _chunk(b"data: " + json.dumps(obj, separators=(",", ":")).encode() + b"\n\n")


def _answer_events(pieces: Iterable[str], chat: bool, usage: dict | None) -> tuple[bytes, ...]:
    """The SSE events of one streamed answer, each an HTTP chunk: a content chunk per piece,
    one with the finish reason and ``usage`` (None: none), then ``[DONE]``."""
    kind = "chat.completion.chunk" if chat else "text_completion"

    def choice(text: str | None, finish: str | None) -> dict:
        if chat:
            return {"index": 0, "delta": {} if text is None else {"content": text}, "finish_reason": finish}
        return {"index": 0, "text": text or "", "finish_reason": finish}

    events = [_event({"id": "null", "object": kind, "model": MODEL, "choices": [choice(p, None)]}) for p in pieces]
    end: dict[str, Any] = {"id": "null", "object": kind, "model": MODEL, "choices": [choice(None, "length")]}
    if usage is not None:
        end["usage"] = usage
    events.append(_event(end))
    events.append(_chunk(b"data: [DONE]\n\n"))
    return tuple(events)


@lru_cache(maxsize=256)
def stream_events(n: int, chat: bool, usage: bool = True) -> tuple[bytes, ...]:
    """The SSE events of one streamed answer of ``n`` tokens, each an HTTP chunk: n content
    chunks, one with the finish reason and usage (``usage``: else none), then ``[DONE]``."""
    counts = {"prompt_tokens": 0, "completion_tokens": n, "total_tokens": n}
    return _answer_events((f" t{i}" for i in range(n)), chat, counts if usage else None)


SERVER_HEADER = "perfsuite-null/1"


def stream_head(server: str) -> bytes:
    return (
        b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\n"
        b"Transfer-Encoding: chunked\r\nServer: %s\r\n\r\n" % server.encode("latin-1")
    )


STREAM_HEAD = stream_head(SERVER_HEADER)
END = b"0\r\n\r\n"


def json_response(status: int, obj: object, server: str = SERVER_HEADER) -> bytes:
    body = json.dumps(obj).encode()
    reason = {
        200: "OK",
        404: "Not Found",
        400: "Bad Request",
        500: "Internal Server Error",
        503: "Service Unavailable",
    }[status]
    return b"HTTP/1.1 %d %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\nServer: %s\r\n\r\n%s" % (
        status,
        reason.encode(),
        len(body),
        server.encode("latin-1"),
        body,
    )


def text_response(text: str, server: str = SERVER_HEADER) -> bytes:
    body = text.encode()
    head = b"HTTP/1.1 200 OK\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: %d\r\nServer: %s\r\n\r\n"
    return head % (len(body), server.encode("latin-1")) + body


class NullHTTP(asyncio.Protocol):
    """One connection: requests parsed as they arrive, answered in order (keep-alive)."""

    def __init__(self, state: "ServerState") -> None:
        self.state = state
        self.buffer = b""
        self.transport: Any = None  # asyncio's Transport, or uvloop's (not a subclass of it)
        self.busy = False  # a stalled answer is being written: later requests wait their turn
        self.arrived = 0.0  # --metrics: when the answer under way was asked for (perf_counter)
        self.first_due = False  # --metrics: its first token is still to be written
        self.streaming = False  # --metrics: it counts as a stream under way
        self.holds_slot = False  # --max-in-flight: the answer under way holds one of the gate's slots
        self.pending: tuple[str, str, bytes] | None = None  # --max-in-flight: a request waiting for a slot

    def connection_made(self, transport: Any) -> None:
        self.transport = transport
        sock = transport.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        if not self.busy:
            self._drain()

    def _drain(self) -> None:
        while self.transport is not None and not self.transport.is_closing():
            end = self.buffer.find(b"\r\n\r\n")
            if end < 0:
                if len(self.buffer) > MAX_HEADER_BYTES:
                    self.transport.close()
                return
            head = self.buffer[:end].decode("latin-1").split("\r\n")
            length = 0
            for line in head[1:]:
                name, _, value = line.partition(":")
                if name.strip().lower() == "content-length":
                    length = int(value.strip())
            if len(self.buffer) < end + 4 + length:
                return
            body = self.buffer[end + 4 : end + 4 + length]
            self.buffer = self.buffer[end + 4 + length :]
            method, path, _ = [*head[0].split(" "), "", "", ""][:3]
            gate = self.state.gate
            if gate is not None and method == "POST" and path in COMPLETION_PATHS:
                if not gate.enter(self):  # the server is full: this request (and the rest) wait their turn
                    self.pending, self.busy = (method, path, body), True
                    return
                self.holds_slot = True
            if self._answer(method, path, body):  # a stalled answer: the rest waits for it
                return
            self._release()  # answered at once

    def admitted(self) -> None:
        """--max-in-flight: the gate gave the waiting request a slot; answer it, then the rest."""
        self.holds_slot, self.busy = True, False
        assert self.pending is not None
        method, path, body = self.pending
        self.pending = None
        if self.transport is None or self.transport.is_closing():
            self._release()  # the client went away while it waited
            return
        if self._answer(method, path, body):
            return
        self._release()
        self._drain()

    def _release(self) -> None:
        if self.holds_slot and self.state.gate is not None:
            self.holds_slot = False
            self.state.gate.leave()

    def _answer(self, method: str, path: str, body: bytes) -> bool:
        t = self.transport
        assert t is not None
        st = self.state
        json_response = st.json_response
        if method == "GET" and path == "/health" and st.health:
            if time.monotonic() < st.loaded_at:
                t.write(json_response(503, {"error": {"code": 503, "message": "Loading model"}}))
            else:
                t.write(json_response(200, {"status": "ok"}))
            return False
        if method == "GET" and path == "/metrics" and st.metrics is not None:
            waiting = len(st.batcher.waiting) if st.batcher is not None else 0
            cache = (st.cache.queries, st.cache.hits) if st.cache is not None else None
            t.write(text_response(st.metrics.text(waiting, cache), st.server_header))
            return False
        if method == "GET" and path == "/v1/models" and st.models:
            model: dict[str, Any] = {"id": MODEL, "object": "model"}
            if st.owned_by:
                model["owned_by"] = st.owned_by
            t.write(json_response(200, {"object": "list", "data": [model]}))
            return False
        if method != "POST" or path not in ("/v1/completions", "/v1/chat/completions"):
            t.write(json_response(404, {"error": f"no route {method} {path}"}))
            return False
        try:
            req = orjson.loads(body or b"{}")
        except orjson.JSONDecodeError:
            req = None
        if not isinstance(req, dict):
            t.write(json_response(400, {"error": "body is not a JSON object"}))
            return False
        self.state.count += 1
        fault = self.state.faults.pick(self.state.count)
        n = int(req.get("max_tokens") or req.get("max_completion_tokens") or self.state.chunks)
        events = stream_events(n, path.endswith("chat/completions"), st.usage)
        if st.cache is not None:
            events = st.cache.answer(req, n, path.endswith("chat/completions"), st.count, st.usage)
        head = st.stream_head
        if fault == "fail":
            t.write(json_response(500, {"error": "injected failure (--fail-every)"}))
            return False
        if not req.get("stream"):
            text = "".join(f" t{i}" for i in range(n))
            t.write(
                json_response(
                    200,
                    {
                        "id": "null",
                        "object": "text_completion",
                        "model": MODEL,
                        "choices": [{"index": 0, "text": text, "finish_reason": "length"}],
                        "usage": {"prompt_tokens": 0, "completion_tokens": n, "total_tokens": n},
                    },
                )
            )
            return False
        if st.metrics is not None and fault is None:
            self._metered(st.metrics)
        half = max(1, n // 2)
        if fault == "cut":  # a proper end ([DONE], the end chunk) after half the tokens, no finish reason
            t.write(head + b"".join(events[:half]) + events[-1] + END)
            return False
        if fault == "truncate":
            t.write(head + b"".join(events[:half]))
            t.close()  # mid-stream, without the terminating chunk
            return True
        if fault == "malformed":
            t.write(head + b"".join(events[:half]) + _chunk(b'data: {"choices": [\n\n') + b"".join(events[half:]) + END)
            return False
        if fault == "stall":
            t.write(head + b"".join(events[:half]))
            self.busy = True
            asyncio.get_running_loop().call_later(self.state.faults.stall_s, self._resume, events[half:])
            return True
        if self.state.batcher is not None:
            t.write(head)
            self.busy = True  # later requests on this connection wait for the end of this answer
            self.state.batcher.admit(self, events)
            return True
        if self.state.event_gap_s > 0 or self.state.first_event_s > 0:
            first, gap = self.state.first_event_s, self.state.event_gap_s
            loop = asyncio.get_running_loop()
            t.write(head)  # the headers at once, as an engine answers before its first token
            for k, event in enumerate(events):
                loop.call_later(first + k * gap, self._write, event)
            self.busy = True  # later requests on this connection wait for the end of this answer
            loop.call_later(first + len(events) * gap, self._resume, ())
            return True
        if self.state.write_each_event:
            t.write(head + events[0])
            for event in events[1:]:
                t.write(event)
            t.write(END)
        else:
            t.write(head + b"".join(events) + END)
        self._metered_end(first=True)
        return False

    def _metered(self, metrics: NullMetrics) -> None:
        """--metrics: a streamed answer starts (it is counted until its end or its connection's)."""
        self.arrived, self.first_due, self.streaming = time.perf_counter(), True, True
        metrics.streams += 1
        if self.state.batcher is None:
            metrics.queue.observe(0.0)  # admitted at once

    def _metered_end(self, first: bool = False) -> None:
        m = self.state.metrics
        if m is None or not self.streaming:
            return
        if first and self.first_due:
            m.ttft.observe(time.perf_counter() - self.arrived)
        self.first_due = self.streaming = False
        m.streams -= 1

    def _write(self, event: bytes) -> None:
        if self.first_due and self.state.metrics is not None:
            self.state.metrics.ttft.observe(time.perf_counter() - self.arrived)
            self.first_due = False
        if self.transport is not None and not self.transport.is_closing():
            self.transport.write(event)

    def _resume(self, rest: tuple[bytes, ...]) -> None:
        self.busy = False
        self._metered_end(first=bool(rest))
        self._release()  # the answer is ending: a waiting request may start
        if self.transport is not None and not self.transport.is_closing():
            self.transport.write(b"".join(rest) + END)
            self._drain()

    def connection_lost(self, exc: Exception | None) -> None:
        self.transport = None
        self._metered_end()
        self._release()


class Gate:
    """``--max-in-flight``: at most ``limit`` completions answered at once (per server process);
    the rest wait in arrival order, as requests queue at an engine that is full. A slot freed
    goes to the longest waiting request on the next turn of the loop (never from inside the
    answer that freed it, so a run of answers given at once does not recurse)."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.active = 0
        self.waiting: deque[NullHTTP] = deque()

    def enter(self, conn: "NullHTTP") -> bool:
        """A slot for ``conn``'s request now (True), else it waits its turn (False)."""
        if self.active < self.limit and not self.waiting:
            self.active += 1
            return True
        self.waiting.append(conn)
        return False

    def leave(self) -> None:
        self.active -= 1
        loop = asyncio.get_running_loop()
        while self.waiting and self.active < self.limit:
            conn = self.waiting.popleft()
            if conn.transport is None:
                continue  # the client went away while it waited
            self.active += 1
            loop.call_soon(conn.admitted)


class Batcher:
    """Answers as a continuous-batching engine times them (``--batching``): one step clock for
    every answer in flight, one token each per step; idle, the engine starts a step one step after
    a request wakes it (those arriving meanwhile join it). A request arriving during a step waits
    for the next; a step that admits requests takes ``prefill_s`` (their prompts, the running
    answers' next token beside), any other ``step_s``. So requests that arrive together share one
    prefill step and those that arrive a moment apart each cost the running answers one: the
    TTFT and inter-token latency an engine shows depend on how the load generator bunches its
    requests, as a GPU engine's do. With ``per_answer_s`` (``--step-per-answer-ms``) every step
    is that much longer per answer in it: the engine admits every request and slows every stream
    as more are in flight (processor sharing), delivering at most one token per ``per_answer_s``
    in all, as a batching engine past its batch's sweet spot does."""

    def __init__(self, step_s: float, prefill_s: float, per_answer_s: float = 0.0) -> None:
        self.step_s, self.prefill_s, self.per_answer_s = step_s, prefill_s, per_answer_s
        self.waiting: list[tuple[NullHTTP, list[bytes]]] = []
        self.running: list[tuple[NullHTTP, list[bytes]]] = []
        self.stepping = False

    def admit(self, conn: "NullHTTP", events: tuple[bytes, ...]) -> None:
        self.waiting.append((conn, list(events)))
        if not self.stepping:  # idle: the first request wakes the engine, which starts a step later
            self.stepping = True
            asyncio.get_running_loop().call_later(self.step_s, self._step)

    def _step(self) -> None:
        """Start a step with the answers in flight and those waiting (a step under way is
        never joined)."""
        if not self.waiting and not self.running:
            self.stepping = False
            return
        admitted, self.waiting = self.waiting, []
        metrics = admitted[0][0].state.metrics if admitted else None
        if metrics is not None:
            now = time.perf_counter()
            for conn, _ in admitted:
                metrics.queue.observe(now - conn.arrived)
        batch = self.running + admitted
        self.running = []
        duration = (self.prefill_s if admitted else self.step_s) + self.per_answer_s * len(batch)
        asyncio.get_running_loop().call_later(duration, self._emit, batch)

    def _emit(self, batch: list[tuple["NullHTTP", list[bytes]]]) -> None:
        """A step's end: each answer in it gets its next token; an answer whose last token this
        was gets its usage, ``[DONE]`` and the end of the stream."""
        for conn, rest in batch:
            if conn.transport is None or conn.transport.is_closing():
                continue  # the client went away: the engine drops its request
            if len(rest) > 2:  # a token, then more tokens or the usage and [DONE]
                conn._write(rest.pop(0))
                if len(rest) > 2:
                    self.running.append((conn, rest))
                    continue
            conn._resume(tuple(rest))
        self._step()


class PrefixCache:
    """A prefix cache as an engine keeps one (vLLM's, in blocks): a prompt's words in whole
    blocks; the leading blocks some earlier prompt began with are a hit, the last word never is
    (an engine always computes the prompt's last token). Bounded: past ``MAX_BLOCKS`` remembered
    prefixes it forgets them all, as a full cache evicts."""

    MAX_BLOCKS = 1_000_000

    def __init__(self, block: int) -> None:
        self.block = block
        self.seen: set[int] = set()
        self.queries = 0  # prompt words looked up (--metrics reports them)
        self.hits = 0  # of which served from the cache

    def lookup(self, words: list[str]) -> int:
        """Words of ``words`` served from the cache; remembers every whole block's prefix."""
        cached = 0
        hits = True
        self.queries += len(words)
        for end in range(self.block, len(words) + 1, self.block):
            key = hash(tuple(words[:end]))
            if hits and key in self.seen and end < len(words):
                cached = end
            else:
                hits = False
            self.seen.add(key)
        if len(self.seen) > self.MAX_BLOCKS:
            self.seen.clear()
        self.hits += cached
        return cached

    def answer(self, req: dict, n: int, chat: bool, count: int, usage: bool) -> tuple[bytes, ...]:
        """The events of an answer whose words name the request and whose usage gives the
        prompt's words and the cached ones."""
        if chat:
            messages = req.get("messages") or []
            text = " ".join(str(m.get("content", "")) for m in messages if isinstance(m, dict))
        else:
            text = str(req.get("prompt", ""))
        words = text.split()
        cached = self.lookup(words)
        counts = {
            "prompt_tokens": len(words),
            "completion_tokens": n,
            "total_tokens": len(words) + n,
            "prompt_tokens_details": {"cached_tokens": cached},
        }
        return _answer_events((f" r{count}w{i}" for i in range(n)), chat, counts if usage else None)


@dataclass
class ServerState:
    chunks: int
    faults: Faults
    write_each_event: bool = False
    event_gap_s: float = 0.0  # above 0: each event this long after the one before
    first_event_s: float = 0.0  # above 0: the first event this long after the request (a time to first token)
    batcher: Batcher | None = None  # answers timed by one step clock (--batching)
    gate: Gate | None = None  # at most so many completions answered at once (--max-in-flight)
    count: int = 0  # requests answered by this process
    health: bool = True  # answers GET /health
    loaded_at: float = 0.0  # time.monotonic() before which /health answers 503 (--loading-s)
    models: bool = True  # answers GET /v1/models
    usage: bool = True  # token counts in the stream
    server_header: str = SERVER_HEADER
    owned_by: str = "perfsuite-null"
    cache: PrefixCache | None = None  # --prefix-cache
    metrics: NullMetrics | None = None  # --metrics

    @property
    def stream_head(self) -> bytes:
        return STREAM_HEAD if self.server_header == SERVER_HEADER else stream_head(self.server_header)

    def json_response(self, status: int, obj: object) -> bytes:
        return json_response(status, obj, self.server_header)


async def serve(sock: socket.socket, state: ServerState) -> None:
    loop = asyncio.get_running_loop()
    server = await loop.create_server(lambda: NullHTTP(state), sock=sock, backlog=4096)
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    async with server:
        await stop.wait()


def run_process(sock: socket.socket, state: ServerState) -> None:
    try:
        import uvloop  # the event loop of the serving engines, where it is installed

        uvloop.install()
    except ImportError:
        pass  # asyncio's own loop
    asyncio.run(serve(sock, state))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=0, help="0: any free port (printed)")
    ap.add_argument("--chunks", type=int, default=16, help="tokens per answer when a request names no max_tokens")
    ap.add_argument("--processes", type=int, default=1, help="server processes sharing the listening socket")
    ap.add_argument("--write-each-event", action="store_true", help="each event its own write, not one per answer")
    ap.add_argument("--event-gap-ms", type=float, default=0.0, help="each event this long after the one before")
    ap.add_argument("--first-event-ms", type=float, default=0.0, help="the first event this long after the request")
    ap.add_argument(
        "--batching",
        action="store_true",
        help="a continuous-batching engine's timing: one step clock, --event-gap-ms a step, --first-event-ms a step "
        "that admits requests",
    )
    ap.add_argument(
        "--step-per-answer-ms",
        type=float,
        default=0.0,
        help="with --batching, each step this much longer per answer in it (processor sharing: every stream "
        "slows as more are in flight)",
    )
    ap.add_argument(
        "--max-in-flight",
        type=int,
        default=0,
        metavar="N",
        help="answer at most N completions at once per process, the rest waiting their turn (0: no limit)",
    )
    ap.add_argument("--fail-every", type=int, default=0)
    ap.add_argument("--stall-every", type=int, default=0)
    ap.add_argument("--stall-s", type=float, default=30.0)
    ap.add_argument("--malformed-every", type=int, default=0)
    ap.add_argument("--truncate-every", type=int, default=0)
    ap.add_argument("--cut-every", type=int, default=0, help="every Nth stream ends with [DONE], no finish reason")
    ap.add_argument(
        "--prefix-cache", type=int, default=0, metavar="BLOCK", help="a prefix cache of BLOCK-word blocks (0: none)"
    )
    ap.add_argument("--metrics", action="store_true", help="GET /metrics: Prometheus text under vLLM's names")
    ap.add_argument("--no-health", action="store_true", help="no GET /health (404)")
    ap.add_argument(
        "--loading-s", type=float, default=0.0, help="GET /health answers 503 for this long after the start"
    )
    ap.add_argument("--no-models", action="store_true", help="no GET /v1/models (404)")
    ap.add_argument("--no-usage", action="store_true", help="no usage (token counts) in the stream")
    ap.add_argument("--server-header", default=SERVER_HEADER, help="the Server header of every answer")
    ap.add_argument("--owned-by", default="perfsuite-null", help="owned_by of /v1/models (empty: none)")
    a = ap.parse_args(argv)
    if a.chunks < 1 or a.processes < 1 or not 0 <= a.event_gap_ms < 60_000 or not 0 <= a.first_event_ms < 60_000:
        print(
            "error: --chunks and --processes must be at least 1, --event-gap-ms and --first-event-ms from 0 to 60000",
            file=sys.stderr,
        )
        return 2
    faults = Faults(a.fail_every, a.stall_every, a.stall_s, a.malformed_every, a.truncate_every, a.cut_every)
    state = ServerState(a.chunks, faults, a.write_each_event, a.event_gap_ms / 1e3, a.first_event_ms / 1e3)
    state.health, state.models, state.usage = not a.no_health, not a.no_models, not a.no_usage
    state.loaded_at = time.monotonic() + max(a.loading_s, 0.0)
    state.server_header, state.owned_by = a.server_header, a.owned_by
    if a.prefix_cache < 0:
        print("error: --prefix-cache must be 0 (none) or a block of at least 1 word", file=sys.stderr)
        return 2
    state.cache = PrefixCache(a.prefix_cache) if a.prefix_cache else None
    if a.max_in_flight < 0:
        print("error: --max-in-flight must be 0 (no limit) or at least 1", file=sys.stderr)
        return 2
    state.gate = Gate(a.max_in_flight) if a.max_in_flight else None
    state.metrics = NullMetrics() if a.metrics else None
    if not 0 <= a.step_per_answer_ms < 60_000:
        print("error: --step-per-answer-ms must be from 0 to 60000", file=sys.stderr)
        return 2
    if a.batching:
        if not a.event_gap_ms > 0:
            print("error: --batching needs --event-gap-ms above 0 (the step)", file=sys.stderr)
            return 2
        state.batcher = Batcher(
            a.event_gap_ms / 1e3, (a.first_event_ms or a.event_gap_ms) / 1e3, a.step_per_answer_ms / 1e3
        )
    elif a.step_per_answer_ms:
        print("error: --step-per-answer-ms needs --batching (it lengthens the batch's step)", file=sys.stderr)
        return 2
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((a.host, a.port))
    sock.listen(4096)
    sock.setblocking(False)
    print(f"listening on http://{a.host}:{sock.getsockname()[1]}", flush=True)
    children = []
    for _ in range(a.processes - 1):
        pid = os.fork()
        if pid == 0:
            run_process(sock, state)
            os._exit(0)
        children.append(pid)
    try:
        run_process(sock, state)
    finally:
        for pid in children:
            os.kill(pid, signal.SIGTERM)
            os.waitpid(pid, 0)
    return 0


if __name__ == "__main__":
    sys.exit(main())
