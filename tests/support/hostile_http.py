"""HTTP servers that misbehave on purpose, run as their own process on 127.0.0.1, for the tests
of the serving client's bounds. Each stops itself after ``--lifetime`` seconds, so a test that
fails cannot leave one behind.

- ``trickle-all``: every answer, status line included, arrives one byte per ``--interval``
  seconds and never ends (the health probe and the self-report meet it first).
- ``trickle-stream``: ``/health`` and ``/v1/models`` answer at once, the self-report's other
  paths (``/version``, ``/info``...) trickle as above; a completion answers its headers, then well-formed stream events one byte per ``--interval`` seconds, for ever: no
  silence is ever long enough to be a stall, only the whole request's deadline can end it.
- ``no-newline``: ``/health`` and ``/v1/models`` answer at once; a completion answers its headers,
  then ``data: `` and 1 GiB of ``x`` with no line end, sent from one reused 1 MiB buffer (the
  server never holds the gigabyte).

    python tests/support/hostile_http.py MODE [--interval 0.5] [--lifetime 120]

prints ``PORT <n>`` once it listens.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import socket
import threading
import time

MODEL = "hostile"
EVENT = b'data: {"choices":[{"text":"a"}]}\n\n'
HUGE_BYTES = 1 << 30
PIECE = b"x" * (1 << 20)


def _read_request(conn: socket.socket) -> tuple[str, str] | None:
    """The method and path of the next request (its body read and dropped), or None at EOF."""
    buf = b""
    while b"\r\n\r\n" not in buf:
        data = conn.recv(65536)
        if not data:
            return None
        buf += data
        if len(buf) > 1 << 20:
            return None
    head, _, rest = buf.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    method, path, _ = lines[0].split(" ", 2)
    length = 0
    for line in lines[1:]:
        name, _, value = line.partition(":")
        if name.strip().lower() == "content-length":
            length = int(value.strip())
    while len(rest) < length:
        data = conn.recv(65536)
        if not data:
            return None
        rest += data
    return method, path


def _answer_json(conn: socket.socket, status: int, body: dict) -> None:
    data = json.dumps(body).encode()
    head = f"HTTP/1.1 {status} X\r\nContent-Type: application/json\r\nContent-Length: {len(data)}\r\n\r\n"
    conn.sendall(head.encode() + data)


def _stream_head(conn: socket.socket) -> None:
    conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n")


def _trickle(conn: socket.socket, source: itertools.cycle, interval_s: float) -> None:
    for byte in source:
        conn.sendall(bytes((byte,)))
        time.sleep(interval_s)


def _serve(conn: socket.socket, mode: str, interval_s: float) -> None:
    with conn:
        try:
            while (request := _read_request(conn)) is not None:
                method, path = request
                if mode == "trickle-all":
                    _trickle(conn, itertools.cycle(b"HTTP/1.1 200 OK\r\nX-Trickle: " + b"a" * 64), interval_s)
                elif method == "GET" and path == "/health":
                    _answer_json(conn, 200, {"status": "ok"})
                elif method == "GET" and path == "/v1/models":
                    _answer_json(conn, 200, {"object": "list", "data": [{"id": MODEL, "object": "model"}]})
                elif method == "GET" and mode == "trickle-stream":  # the self-report's other paths
                    _trickle(conn, itertools.cycle(b"HTTP/1.1 200 OK\r\nX-Trickle: " + b"a" * 64), interval_s)
                elif method == "GET":
                    _answer_json(conn, 404, {"error": "no such path"})
                elif mode == "trickle-stream":
                    _stream_head(conn)
                    _trickle(conn, itertools.cycle(EVENT), interval_s)
                else:  # no-newline
                    _stream_head(conn)
                    conn.sendall(b"data: ")
                    for _ in range(HUGE_BYTES // len(PIECE)):
                        conn.sendall(PIECE)
                    return
        except OSError:
            return  # the client hung up: what a bounded client does


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("mode", choices=("trickle-all", "trickle-stream", "no-newline"))
    ap.add_argument("--interval", type=float, default=0.5)
    ap.add_argument("--lifetime", type=float, default=120.0)
    a = ap.parse_args()
    server = socket.create_server(("127.0.0.1", 0))
    print(f"PORT {server.getsockname()[1]}", flush=True)

    def accept() -> None:
        while True:
            conn, _ = server.accept()
            threading.Thread(target=_serve, args=(conn, a.mode, a.interval), daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()
    time.sleep(a.lifetime)
    os._exit(0)  # threads mid-send included: the server stops itself


if __name__ == "__main__":
    main()
