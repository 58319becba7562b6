"""The HTTP layer of inference.serving's client (``serving.http``) against a scripted server on a
real socket: answers framed by Content-Length, by chunks or by the connection's end, events with
CRLF line ends split across reads, keep-alive connections reused by later requests, a connection
the server dropped while idle replaced once, and a refused connection named. The fault paths a
whole run sees (HTTP 500, stalls, malformed chunks, truncation) are in test_serving.py."""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections import deque

import pytest

pytest.importorskip("httptools")

from perfsuite.workloads.inference.serving.client import (
    Endpoint,
    RequestResult,
    Timeouts,
    new_session,
    stream_request,
)

CRLF_EVENTS = (
    b'data: {"choices":[{"text":"a"}]}\r\n\r\ndata: {"choices":[{"text":" b"}]}\r\n\r\n'
    b'data: {"choices":[{"text":"","finish_reason":"length"}],"usage":{"completion_tokens":2}}\r\n\r\n'
    b"data: [DONE]\r\n\r\n"
)
LF_EVENTS = b'data: {"choices":[{"text":"c"}]}\n\ndata: {"choices":[{"text":"","finish_reason":"stop"}]}\n\n'


def _chunked(body: bytes) -> bytes:
    return b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n%x\r\n%s\r\n0\r\n\r\n" % (len(body), body)


class ScriptedServer:
    """Answers each request with the next scripted action, in order over every connection:
    ``("answer", pieces)`` sends the pieces (a short pause between them, so they arrive as
    separate reads) and keeps the connection; ``("answer_close", pieces)`` closes it after;
    ``("drop", ())`` closes it without answering. With no script left it answers with chunks.
    ``later_pieces_ns``: when each piece after a first one went out (the client's clock)."""

    def __init__(self, script: list[tuple[str, tuple[bytes, ...]]]) -> None:
        self.script = deque(script)
        self.connections = 0
        self.later_pieces_ns: list[int] = []
        self.lock = threading.Lock()
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return  # closed by the test
            with self.lock:
                self.connections += 1
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        buf = b""
        with conn:
            while True:
                while b"\r\n\r\n" not in buf:
                    data = conn.recv(65536)
                    if not data:
                        return
                    buf += data
                head, _, buf = buf.partition(b"\r\n\r\n")
                length = next(
                    int(line.split(b":")[1])
                    for line in head.split(b"\r\n")
                    if line.lower().startswith(b"content-length")
                )
                while len(buf) < length:
                    buf += conn.recv(65536)
                buf = buf[length:]
                with self.lock:
                    kind, pieces = self.script.popleft() if self.script else ("answer", (_chunked(LF_EVENTS),))
                for k, piece in enumerate(pieces):
                    if k:
                        time.sleep(0.05)
                        self.later_pieces_ns.append(time.perf_counter_ns())
                    conn.sendall(piece)
                if kind != "answer":
                    return

    def close(self) -> None:
        self.sock.close()


def _send(endpoint: Endpoint, n: int, concurrency: int) -> list[RequestResult]:
    async def run() -> list[RequestResult]:
        body = endpoint.body("bada", 2)
        out: list[RequestResult] = []
        todo = iter(range(n))
        async with new_session() as session:

            async def slot() -> None:
                for i in todo:
                    out.append(await stream_request(session, endpoint, body, RequestResult(i, 1), Timeouts(stall_s=5)))

            await asyncio.gather(*(slot() for _ in range(concurrency)))
        return out

    return asyncio.run(run())


def test_answers_framed_three_ways_are_read_and_a_dropped_idle_connection_is_replaced_once():
    length_framed = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nContent-Length: %d\r\n\r\n" % len(
        CRLF_EVENTS
    )
    first_end = CRLF_EVENTS.index(b"\r\n\r\n") + 4
    split = CRLF_EVENTS.index(b"\r\n\r\n", first_end) + 3  # the second event, but for the LF of its last CRLF
    server = ScriptedServer(
        [
            ("answer", (length_framed + CRLF_EVENTS[:split], CRLF_EVENTS[split:])),  # a CRLF split between reads
            ("drop", ()),  # the server closed the kept connection as the next request went out
            (
                "answer_close",
                (b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n" + LF_EVENTS,),
            ),  # ends with the connection
        ]
    )
    try:
        first, second = _send(Endpoint(server.url, "m"), 2, 1)
    finally:
        server.close()
    assert first.ok and first.text == "a b" and (first.output_tokens, first.token_source) == (2, "usage")
    # each event stamped at its own read: the first before the second piece left the server
    (second_piece_ns,) = server.later_pieces_ns
    assert len(first.chunk_ns) == 2 and first.chunk_ns[0] < second_piece_ns <= first.chunk_ns[1]
    assert second.ok and second.text == "c" and second.finish_reason == "stop"
    assert server.connections == 2  # the dropped one replaced, once


def test_keep_alive_connections_are_reused_and_never_more_than_the_requests_in_flight():
    server = ScriptedServer([])
    try:
        rows = _send(Endpoint(server.url, "m"), 60, 4)
    finally:
        server.close()
    assert len(rows) == 60 and all(r.ok and r.text == "c" for r in rows)
    assert 1 <= server.connections <= 4


def test_a_refused_connection_and_an_error_status_are_named():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again: nothing listens there
    (refused,) = _send(Endpoint(f"http://127.0.0.1:{port}", "m"), 1, 1)
    assert refused.reason == "connect" and f"127.0.0.1:{port}" in refused.detail
    body = b'{"error": "model not loaded"}'
    server = ScriptedServer([("answer", (b"HTTP/1.1 503 Busy\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body),))])
    try:
        busy, after = _send(Endpoint(server.url, "m"), 2, 1)
    finally:
        server.close()
    assert busy.reason == "http_status" and busy.detail == f"HTTP 503: {body.decode()}"
    assert after.ok and server.connections == 1  # an error answer read to its end keeps the connection
