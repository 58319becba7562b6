"""A bare reference client for OpenAI-compatible streaming endpoints: the Python standard
library's asyncio and HTTP/1.1 by hand, written apart from ``inference.serving``'s client so
that the cross-check compares two independent implementations where AIPerf is not installed.

It runs on uvloop's event loop where uvloop is installed, as the suite's client and AIPerf do:
on a host of few cores a CPU-served model shares them with its clients, and stdlib asyncio's
costlier loop slowed the server during the reference's turns. Bytes are stamped as they arrive
(``Arrivals``). ``--warmup-request-count`` requests go first, untimed, as AIPerf's option of that
name.

It sends the prompts of a JSONL file (``{"text": ..., "output_length": N}`` a line, AIPerf's
single-turn format) as streamed completions, either N at a time (``--concurrency``), at a
rate (``--request-rate``, gamma gaps of shape ``--burstiness``), or each at its line's
``"timestamp"`` (milliseconds from the start, ``--fixed-schedule``, as AIPerf's option of that
name: the cross-check replays the suite's own arrival times on both sides), and writes the figures the
cross-check compares: TTFT p50/p99 (request written to first content chunk), inter-token
latency p50 ((end - first chunk) / (tokens - 1) per request, as AIPerf defines it) and output
tokens per second (tokens over first send to last end); tokens from the server's ``usage``,
else one per content chunk.

    python -m perfsuite.crosscheck.serving_reference --url http://127.0.0.1:8000 --model M --input-file P.jsonl
        --request-count 64 (--concurrency 4 | --request-rate 8 | --fixed-schedule) --output OUT.json
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import itertools
import json
import os
import random
import sys
import time
from collections.abc import Callable
from urllib.parse import urlparse


def loop_factory() -> Callable[[], asyncio.AbstractEventLoop] | None:
    """uvloop's event loop where it is installed, else asyncio's own (None)."""
    try:
        import uvloop
    except ImportError:
        return None
    return uvloop.new_event_loop


def percentile(values: list[float], q: float) -> float | None:
    """numpy's default (linear) percentile, without numpy."""
    if not values:
        return None
    s = sorted(values)
    pos = (len(s) - 1) * q / 100.0
    lo = int(pos)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)


class Arrivals(asyncio.Protocol):
    """One connection's bytes, each piece stamped when the event loop hands it over. A waiting
    reader runs a loop turn later (later still when other requests' bytes share that turn), so
    stamping there would add the client's own wake-up to every TTFT and inter-token latency."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.buf = bytearray()
        self.base = 0  # bytes consumed before buf[0]
        self.marks: collections.deque[tuple[int, float]] = collections.deque()  # (end offset, arrival)
        self.waiter: asyncio.Future | None = None
        self.eof = False
        self.lost: Exception | None = None
        self.last_arrival = 0.0  # when the last byte handed to the reader arrived

    # -- asyncio's callbacks
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        self.buf += data
        self.marks.append((self.base + len(self.buf), time.perf_counter()))
        self._wake()

    def eof_received(self) -> bool:
        self.eof = True
        self._wake()
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        self.eof, self.lost = True, exc
        self._wake()

    def _wake(self) -> None:
        if self.waiter is not None and not self.waiter.done():
            self.waiter.set_result(None)

    # -- the reader's side
    async def _more(self) -> None:
        if self.eof:
            if self.lost is not None:
                raise ConnectionError(str(self.lost))
            raise asyncio.IncompleteReadError(bytes(self.buf), None)
        self.waiter = asyncio.get_running_loop().create_future()
        await self.waiter

    def _take(self, n: int) -> bytes:
        data = bytes(self.buf[:n])
        del self.buf[:n]
        self.base += n
        while self.marks and self.marks[0][0] < self.base:  # pieces wholly read before the last byte
            self.marks.popleft()
        if n and self.marks:
            self.last_arrival = self.marks[0][1]
        return data

    async def readline(self) -> bytes:
        while (i := self.buf.find(b"\n")) < 0:
            await self._more()
        return self._take(i + 1)

    async def readexactly(self, n: int) -> bytes:
        while len(self.buf) < n:
            await self._more()
        return self._take(n)

    async def read_some(self) -> bytes:
        """What has arrived, waiting for some; empty at the end of the stream."""
        while not self.buf:
            if self.eof:
                return b""
            await self._more()
        return self._take(len(self.buf))

    def write(self, data: bytes) -> None:
        assert self.transport is not None
        self.transport.write(data)

    def close(self) -> None:
        if self.transport is not None:
            self.transport.close()


class Connections:
    """Idle keep-alive connections to one server, reused by later requests."""

    def __init__(self, host: str, port: int) -> None:
        self.host, self.port = host, port
        self.idle: list[Arrivals] = []

    async def get(self) -> Arrivals:
        if self.idle:
            return self.idle.pop()
        _, conn = await asyncio.get_running_loop().create_connection(Arrivals, self.host, self.port)
        return conn

    def put(self, conn: Arrivals) -> None:
        self.idle.append(conn)

    def close(self) -> None:
        for conn in self.idle:
            conn.close()


async def one(conns: Connections, path: str, host: str, body: bytes, headers: str, timeout_s: float) -> dict:
    row: dict = {"sent": 0.0, "first": None, "end": None, "tokens": 0, "chunks": 0, "error": None}
    conn = await conns.get()
    request = (
        f"POST {path} HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n{headers}"
        f"Content-Length: {len(body)}\r\nAccept: text/event-stream\r\n\r\n"
    ).encode() + body
    row["sent"] = time.perf_counter()
    conn.write(request)
    try:
        await asyncio.wait_for(_read(conn, row), timeout_s)
    except (TimeoutError, ConnectionError, asyncio.IncompleteReadError, ValueError) as exc:
        row["error"] = f"{type(exc).__name__}: {exc}"
        conn.close()
        return row
    if row.pop("keep", False):
        conns.put(conn)
    else:
        conn.close()
    return row


async def _read(conn: Arrivals, row: dict) -> None:
    status = (await conn.readline()).decode("latin-1").split(" ")
    if len(status) < 2 or status[1] != "200":
        raise ValueError(f"HTTP status {' '.join(status[1:]).strip()}")
    chunked, length, keep = False, None, True
    while True:
        line = (await conn.readline()).decode("latin-1").strip()
        if not line:
            break
        name, _, value = line.partition(":")
        name, value = name.strip().lower(), value.strip().lower()
        if name == "transfer-encoding" and "chunked" in value:
            chunked = True
        elif name == "content-length":
            length = int(value)
        elif name == "connection" and value == "close":
            keep = False
    buffer = b""
    while True:
        if chunked:
            size = int((await conn.readline()).split(b";")[0].strip() or b"0", 16)
            if size == 0:
                await conn.readline()
                break
            data = await conn.readexactly(size)
            now = conn.last_arrival  # when the chunk's last byte arrived, not when this line ran
            await conn.readexactly(2)
        else:
            data = await conn.read_some() if length is None else await conn.readexactly(length)
            if not data:
                break
            now = conn.last_arrival
        buffer += data
        while b"\n\n" in buffer:
            event, buffer = buffer.split(b"\n\n", 1)
            _event(event, now, row)
        if not chunked and length is not None:
            break
    row["end"] = time.perf_counter()
    row["keep"] = keep and (chunked or length is not None)


def _event(event: bytes, now: float, row: dict) -> None:
    for line in event.replace(b"\r", b"").split(b"\n"):
        if not line.startswith(b"data:"):
            continue
        payload = line[5:].strip()
        if payload == b"[DONE]":
            return
        obj = json.loads(payload)
        usage = obj.get("usage") or {}
        if usage.get("completion_tokens") is not None:
            row["tokens"] = int(usage["completion_tokens"])
            row["usage"] = True
        for choice in obj.get("choices") or []:
            text = choice.get("text")
            if text is None:
                text = (choice.get("delta") or {}).get("content")
            if text:
                row["chunks"] += 1
                if row["first"] is None:
                    row["first"] = now


def read_prompts(input_file: str) -> list[dict]:
    with open(input_file) as f:
        return [json.loads(line) for line in f if line.strip()]


async def run(a: argparse.Namespace, prompts: list[dict]) -> dict:
    url = urlparse(a.url)
    host, port = url.hostname or "127.0.0.1", url.port or 80
    path = "/v1/chat/completions" if a.api == "chat" else "/v1/completions"
    extra = json.loads(a.extra_body) if a.extra_body else {}
    key = os.environ.get(a.api_key_env, "") if a.api_key_env else ""
    headers = f"Authorization: Bearer {key}\r\n" if key else ""

    def body(i: int) -> bytes:
        p = prompts[i % len(prompts)]
        b = {
            "model": a.model,
            "max_tokens": p["output_length"],
            "stream": True,
            "temperature": 0.0,
            "stream_options": {"include_usage": True},
            **extra,
        }
        if a.api == "chat":
            b["messages"] = [{"role": "user", "content": p["text"]}]
        else:
            b["prompt"] = p["text"]
        return json.dumps(b).encode()

    conns = Connections(host, port)
    rows: list[dict] = []

    async def closed_loop(count: int, concurrency: int, out: list[dict]) -> None:
        todo = iter(range(count))

        async def slot() -> None:
            for i in todo:
                out.append(await one(conns, path, url.netloc, body(i), headers, a.timeout))

        await asyncio.gather(*(slot() for _ in range(concurrency)))

    # untimed requests first, as AIPerf's option of that name: this process and its connections
    # start cold each run, where the client it is compared with has served before
    warmup: list[dict] = []
    await closed_loop(a.warmup_request_count, 1 if a.request_rate or a.fixed_schedule else a.concurrency, warmup)
    if a.request_rate or a.fixed_schedule:
        if a.fixed_schedule:
            due = [float(prompts[i % len(prompts)]["timestamp"]) / 1e3 for i in range(a.request_count)]
        else:
            rng = random.Random(a.seed)
            shape = a.burstiness
            gaps = [rng.gammavariate(shape, 1.0 / (a.request_rate * shape)) for _ in range(a.request_count - 1)]
            due = list(itertools.accumulate(gaps, initial=0.0))
        t0 = time.perf_counter()
        tasks = []
        for i in range(a.request_count):
            wait = t0 + due[i] - time.perf_counter()
            if wait > 0:
                await asyncio.sleep(wait)
            tasks.append(asyncio.create_task(one(conns, path, url.netloc, body(i), headers, a.timeout)))
        rows = list(await asyncio.gather(*tasks))
    else:
        await closed_loop(a.request_count, a.concurrency, rows)
    conns.close()
    failed = sum(r["error"] is not None for r in warmup)
    ran_on = "uvloop" if type(asyncio.get_running_loop()).__module__.startswith("uvloop") else "asyncio"
    return {**summarize(rows), "event_loop": ran_on, "warmup_requests": len(warmup), "warmup_failed": failed}


def summarize(rows: list[dict]) -> dict:
    ok = [r for r in rows if r["error"] is None and r["first"] is not None]
    for r in ok:
        if not r.get("usage"):
            r["tokens"] = r["chunks"]
    ttft = [(r["first"] - r["sent"]) * 1e3 for r in ok]
    itl = [(r["end"] - r["first"]) * 1e3 / (r["tokens"] - 1) for r in ok if r["tokens"] > 1]
    start = min((r["sent"] for r in rows), default=0.0)
    end = max((r["end"] or r["sent"] for r in rows), default=0.0)
    tokens = sum(r["tokens"] for r in ok)
    return {
        "tool": "perfsuite bare asyncio reference (suite.serving_reference)",
        "requests": len(rows),
        "completed": len(ok),
        "failed": len(rows) - len(ok),
        "errors": sorted({r["error"] for r in rows if r["error"]})[:5],
        "ttft_p50_ms": percentile(ttft, 50),
        "ttft_p99_ms": percentile(ttft, 99),
        "itl_p50_ms": percentile(itl, 50),
        "output_tokens_per_s": tokens / (end - start) if end > start else 0.0,
        "duration_s": end - start,
        "token_count_source": "/".join(sorted({"usage" if r.get("usage") else "chunks" for r in ok})) or None,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--url", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--api", choices=("completions", "chat"), default="completions")
    ap.add_argument("--input-file", required=True)
    ap.add_argument("--request-count", type=int, required=True)
    ap.add_argument("--concurrency", type=int, default=1)
    ap.add_argument("--request-rate", type=float, default=0.0)
    ap.add_argument("--burstiness", type=float, default=1.0)
    ap.add_argument("--fixed-schedule", action="store_true", help="send each prompt at its 'timestamp' (ms)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--warmup-request-count", type=int, default=0, help="untimed requests sent first")
    ap.add_argument("--timeout", type=float, default=600.0)
    ap.add_argument("--extra-body", default="", help="JSON object merged into every request body")
    ap.add_argument("--api-key-env", default="", help="environment variable holding an API key (bearer token)")
    ap.add_argument("--output", required=True)
    a = ap.parse_args(argv)
    bad = a.request_count < 1 or a.concurrency < 1 or a.request_rate < 0 or a.burstiness <= 0
    if bad or a.warmup_request_count < 0:
        print(
            "error: --request-count and --concurrency must be at least 1, --request-rate and "
            "--warmup-request-count not negative, --burstiness above 0",
            file=sys.stderr,
        )
        return 2
    prompts = read_prompts(a.input_file)
    if a.fixed_schedule and (not prompts or any(not isinstance(x.get("timestamp"), (int, float)) for x in prompts)):
        print(f"error: --fixed-schedule needs a numeric 'timestamp' on every line of {a.input_file}", file=sys.stderr)
        return 2
    with asyncio.Runner(loop_factory=loop_factory()) as runner:
        out = runner.run(run(a, prompts))
    with open(a.output, "w") as f:
        json.dump(out, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
