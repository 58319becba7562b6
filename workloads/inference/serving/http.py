"""The HTTP/1.1 layer of ``inference.serving``'s client: keep-alive connections to one or more
servers, each an asyncio ``Protocol`` whose responses are parsed by httptools (llhttp, the
parser uvicorn serves with), and a streamed response handed to a sink read by read.

Why not aiohttp: the client must stay far below the endpoint it measures, and aiohttp's
request path costs about 0.3 ms of CPU per streamed request on this house's 2-core machine
(its request, response, header and timer objects), so that one process saturated near 2,000
short streams per second; a protocol over llhttp costs a tenth of that. The connections are a
pool kept for a run: a request takes an idle one (the most recently used, dropped after
``KEEPALIVE_S`` idle, before servers drop theirs) or opens one; nothing limits how many are
open at once (the load shape decides how many requests are in flight).

Every wait has a bound: connecting (``connect_s``, never past the request's deadline), the
silence between two reads (``stall_s``), the whole exchange from the request's first byte to the
answer's last (``request_s``), and the answer's size (its headers ``MAX_HEAD_BYTES``, all of it
``MAX_ANSWER_BYTES``), so that a server trickling one byte at a time or sending without end ends
its request at a stated moment, with the memory of one read. :func:`get` is the same exchange for
the probes of a server (health, self-report), one call at a time.

Failures are values, never exceptions: an :class:`Outcome` names what went wrong with one of
the client's reasons (``connect``, ``stall``, ``timeout``, ``truncated``, ``malformed_chunk``,
``oversized``). An exception raised by the sink is a bug of the caller and is raised where the
request awaits.
"""

from __future__ import annotations

import asyncio
import socket
import ssl
from collections.abc import Callable
from dataclasses import dataclass
from time import perf_counter_ns
from typing import Any
from urllib.parse import urlsplit

import httptools

KEEPALIVE_S = 2.0  # an idle connection is not reused after this long (uvicorn closes its own after 5 s)
ERROR_BODY_BYTES = 300  # of a non-200 answer kept as its detail
MAX_HEAD_BYTES = 64 * 1024  # an answer's status line and headers (engines send well under 1 KiB)
# All of one answer: a 32k-token stream with logprobs is tens of MiB; more is a server gone wrong.
MAX_ANSWER_BYTES = 256 * 1024 * 1024
USER_AGENT = b"perfsuite-serving"

# A sink receives the body of a 200 answer as it arrives, with the read's time (perf_counter_ns);
# it returns True to stop the exchange there (the stream is already known bad).
Sink = Callable[[bytes, int], bool]


@dataclass(frozen=True)
class Target:
    """Where one kind of request goes: the server's address and the request's first lines."""

    scheme: str
    host: str
    port: int
    path: str
    host_header: str

    @classmethod
    def parse(cls, url: str) -> Target:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"not an http(s) URL: {url!r}")
        port = parts.port or (443 if parts.scheme == "https" else 80)
        return cls(parts.scheme, parts.hostname, port, parts.path or "/", parts.netloc.rpartition("@")[2])

    @property
    def key(self) -> tuple[str, str, int]:
        return self.scheme, self.host, self.port

    def get_request(self, headers: tuple[tuple[str, str], ...] = ()) -> bytes:
        """A whole GET of this target's path."""
        lines = [f"GET {self.path} HTTP/1.1", f"Host: {self.host_header}", "Accept: application/json"]
        lines += [f"{name}: {value}" for name, value in headers]
        return ("\r\n".join(lines) + "\r\n").encode("latin-1") + b"User-Agent: " + USER_AGENT + b"\r\n\r\n"

    def post_head(self, headers: tuple[tuple[str, str], ...]) -> bytes:
        """A POST's request line and headers, without Content-Length and the blank line."""
        lines = [f"POST {self.path} HTTP/1.1", f"Host: {self.host_header}", "Content-Type: application/json"]
        lines += [f"{name}: {value}" for name, value in headers]
        return ("\r\n".join(lines) + "\r\n").encode("latin-1") + b"User-Agent: " + USER_AGENT + b"\r\n"


@dataclass
class Outcome:
    """How one exchange ended: the status (0: no answer), the start of a non-200 answer's body,
    and a failure as (reason, detail) where it failed; the ``Server`` header where one came."""

    status: int = 0
    error_body: bytes = b""
    failure: tuple[str, str] | None = None
    server: str = ""


class _Connection(asyncio.Protocol):
    """One HTTP/1.1 connection, one exchange at a time (keep-alive, no pipelining)."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.parser = httptools.HttpResponseParser(self)
        self.transport: Any = None  # asyncio's Transport, or uvloop's (not a subclass of it)
        self.closed = False
        self.idle_since = 0.0
        # the exchange in progress
        self.done: asyncio.Future[Outcome] | None = None
        self.sink: Sink | None = None
        self.outcome = Outcome()
        self.received = False  # a byte of the answer has arrived
        self.framed = False  # the answer says where it ends (Content-Length or chunked)
        self.headed = False  # the answer's headers are complete
        self.bytes_in = 0  # of the answer so far, framing included
        self.read_ns = 0
        self.stall_ns = 0
        self.deadline_ns = 0
        self.timer: asyncio.TimerHandle | None = None
        self.timeouts: tuple[float, float] = (0.0, 0.0)  # (stall_s, request_s) of the details

    # -- asyncio's callbacks
    def connection_made(self, transport: Any) -> None:
        self.transport = transport
        sock = transport.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def data_received(self, data: bytes) -> None:
        if self.done is None:
            self.transport.close()  # bytes nobody asked for: the connection is no longer in step
            return
        self.read_ns = perf_counter_ns()
        self.received = True
        self.bytes_in += len(data)
        if self.bytes_in > MAX_ANSWER_BYTES:
            self._fail("oversized", f"the answer passed {MAX_ANSWER_BYTES >> 20} MiB")
            return
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserCallbackError as exc:  # raised by the sink: a bug, for the request to raise
            self._finish(keep=False, error=exc.__context__ or exc)
            return
        except httptools.HttpParserError as exc:
            self._fail("malformed_chunk", f"the HTTP answer could not be parsed ({type(exc).__name__}: {exc})")
            return
        except httptools.HttpParserUpgrade:
            self._fail("malformed_chunk", "the server switched protocols")
            return
        if not self.headed and self.bytes_in > MAX_HEAD_BYTES and self.done is not None:
            self._fail("oversized", f"the answer's status line and headers passed {MAX_HEAD_BYTES >> 10} KiB")

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        if self.done is None:
            return
        why = f" ({type(exc).__name__}: {exc})" if exc is not None else ""
        if not self.received:
            self._fail("truncated", f"the server closed the connection before answering{why}")
        elif self.framed or self.outcome.status == 0:
            self._fail("truncated", f"the connection closed mid-stream{why}")
        else:
            self._finish(keep=False)  # an answer without framing ends when its connection does

    # -- httptools' callbacks
    def on_header(self, name: bytes, value: bytes) -> None:
        name = name.lower()
        if name == b"content-length" or (name == b"transfer-encoding" and b"chunked" in value.lower()):
            self.framed = True
        elif name == b"server":
            self.outcome.server = value[:200].decode("latin-1")

    def on_headers_complete(self) -> None:
        self.headed = True
        self.outcome.status = self.parser.get_status_code()

    def on_body(self, body: bytes) -> None:
        if self.done is None or self.done.done():
            return
        if self.outcome.status != 200:
            room = ERROR_BODY_BYTES - len(self.outcome.error_body)
            if room > 0:
                self.outcome.error_body += body[:room]
            return
        assert self.sink is not None
        if self.sink(body, self.read_ns):
            self._finish(keep=False)

    def on_message_complete(self) -> None:
        if self.outcome.status < 200:
            return  # an interim answer (100 Continue): the real one follows
        self._finish(keep=self.parser.should_keep_alive())

    # -- the exchange
    def start(self, request: bytes, sink: Sink, stall_s: float, request_s: float, deadline_ns: int) -> asyncio.Future:
        done = self.done = self.loop.create_future()
        self.sink = sink
        self.outcome = Outcome()
        self.received = self.framed = self.headed = False
        self.bytes_in = 0
        self.timeouts = (stall_s, request_s)
        self.read_ns = perf_counter_ns()
        self.stall_ns = int(stall_s * 1e9)
        self.deadline_ns = deadline_ns
        self._arm()
        if self.transport.is_closing():  # closed by the server while idle, not yet seen as lost
            self._fail("truncated", "the server closed the connection before answering")
        else:
            self.transport.write(request)
        return done  # settled already where the connection was found closed

    def _arm(self) -> None:
        """One timer per exchange for both limits; a read only notes its time, the timer re-arms
        itself at the next moment a limit could pass."""
        due_ns = min(self.deadline_ns, self.read_ns + self.stall_ns)
        self.timer = self.loop.call_later(max(0.0, (due_ns - perf_counter_ns()) * 1e-9), self._check)

    def _check(self) -> None:
        now = perf_counter_ns()
        stall_s, request_s = self.timeouts
        if now >= self.deadline_ns:
            self._fail("timeout", f"the request took longer than {request_s:g} s")
        elif now - self.read_ns >= self.stall_ns:
            self._fail("stall", f"no data for {stall_s:g} s mid-stream")
        else:
            self._arm()

    def _fail(self, reason: str, detail: str) -> None:
        if self.outcome.failure is None:
            self.outcome.failure = (reason, detail)
        self._finish(keep=False)

    def _finish(self, keep: bool, error: BaseException | None = None) -> None:
        done, self.done = self.done, None
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        self.sink = None
        if not keep and not self.closed:
            self.closed = True
            self.transport.close()
        if done is not None and not done.done():
            if error is not None:
                done.set_exception(error)
            else:
                done.set_result(self.outcome)


class Session:
    """Keep-alive connections to the servers a run talks to, reused by every request of the run;
    bound to the event loop it is first used on."""

    def __init__(self) -> None:
        self._idle: dict[tuple[str, str, int], list[_Connection]] = {}
        self._open: set[_Connection] = set()
        self._ssl: ssl.SSLContext | None = None

    async def exchange(self, target: Target, request: bytes, sink: Sink, timeouts: Any) -> Outcome:
        """Send ``request`` (head and body) to ``target`` and feed the answer's body to ``sink``;
        ``timeouts`` has ``connect_s``, ``stall_s`` and ``request_s``. A connection the server
        closed while it sat idle is replaced once, as browsers do, when not a byte came back."""
        loop = asyncio.get_running_loop()
        deadline_ns = perf_counter_ns() + int(timeouts.request_s * 1e9)
        conn = self._take_idle(target.key, loop)
        if conn is not None:
            outcome = await conn.start(request, sink, timeouts.stall_s, timeouts.request_s, deadline_ns)
            dropped = not conn.received and outcome.failure is not None and outcome.failure[0] == "truncated"
            if not dropped:
                return self._settle(conn, outcome, target.key, loop)
            self._open.discard(conn)
        made = await self._connect(target, loop, min(timeouts.connect_s, timeouts.request_s))
        if not isinstance(made, _Connection):
            return Outcome(failure=made)
        outcome = await made.start(request, sink, timeouts.stall_s, timeouts.request_s, deadline_ns)
        return self._settle(made, outcome, target.key, loop)

    def _settle(
        self, conn: _Connection, outcome: Outcome, key: tuple[str, str, int], loop: asyncio.AbstractEventLoop
    ) -> Outcome:
        """After an exchange: its connection back among the idle ones, or forgotten if closed."""
        if conn.closed:
            self._open.discard(conn)
        else:
            conn.idle_since = loop.time()
            self._idle.setdefault(key, []).append(conn)
        return outcome

    def _take_idle(self, key: tuple[str, str, int], loop: asyncio.AbstractEventLoop) -> _Connection | None:
        idle = self._idle.get(key)
        now = loop.time()
        while idle:
            conn = idle.pop()
            if not conn.closed and now - conn.idle_since < KEEPALIVE_S:
                return conn
            self._drop(conn)
        return None

    async def _connect(
        self, target: Target, loop: asyncio.AbstractEventLoop, connect_s: float
    ) -> _Connection | tuple[str, str]:
        """A new connection, or why there is none (a failure's reason and detail)."""
        tls: dict[str, Any] = {}
        if target.scheme == "https":
            if self._ssl is None:
                self._ssl = ssl.create_default_context()
            tls = {"ssl": self._ssl, "server_hostname": target.host}
        try:
            _, conn = await asyncio.wait_for(
                loop.create_connection(lambda: _Connection(loop), target.host, target.port, **tls), connect_s
            )
        except TimeoutError:
            return "connect", f"connecting timed out after {connect_s:g} s"
        except OSError as exc:  # refused, unreachable, no such host, TLS handshake failed
            return "connect", f"cannot connect to {target.host}:{target.port}: {exc}"
        self._open.add(conn)
        return conn

    def _drop(self, conn: _Connection) -> None:
        self._open.discard(conn)
        if not conn.closed:
            conn.closed = True
            conn.transport.close()

    async def close(self) -> None:
        for conn in list(self._open):
            self._drop(conn)
        self._idle.clear()
        await asyncio.sleep(0)  # the transports' close callbacks run

    async def __aenter__(self) -> Session:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


@dataclass(frozen=True)
class _GetTimeouts:
    connect_s: float
    stall_s: float
    request_s: float


def get(
    url: str, timeout_s: float, headers: tuple[tuple[str, str], ...] = (), max_body: int = 65536
) -> tuple[Outcome, bytes]:
    """A GET of ``url`` on a connection of its own, whole within ``timeout_s`` (connecting, every
    read, the end), in an event loop of its own: the probes of a server (health, self-report),
    bounded as the measured requests are. The outcome and the answer's body (a 200's first
    ``max_body`` bytes, else the start of the error's); raises ValueError for a bad URL."""
    target = Target.parse(url)
    body = bytearray()

    def sink(data: bytes, _ns: int) -> bool:
        body.extend(data[: max_body - len(body)])
        return len(body) >= max_body  # enough read: the rest is not kept

    async def one() -> Outcome:
        async with Session() as session:
            return await session.exchange(
                target, target.get_request(headers), sink, _GetTimeouts(timeout_s, timeout_s, timeout_s)
            )

    loop = asyncio.new_event_loop()
    try:
        outcome = loop.run_until_complete(one())
    finally:
        loop.close()
    return outcome, bytes(body) if outcome.status == 200 else outcome.error_body
