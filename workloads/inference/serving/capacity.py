"""The client's own capacity, measured against the null streaming server on this machine
(``serving.null_server``: every answer at once, ``CHUNKS`` chunks each), so that a serving run can
say how far its load generator reaches and flag a rate beyond it.

What :func:`client_capacity` records (``details["serving"]["client"]["capacity"]``):

- closed loop: streamed requests per second with ``CONCURRENCY_PER_PROCESS`` requests in flight
  per client process (``requests_per_s``: the figure a sweep's rate is checked against; a lower
  bound of the client's own, since the null server shares the machine), and its share per
  process (``requests_per_s_per_process``: what LoadGen's target rate is checked against, its
  SUT sending from one event loop);
- the median and p99 TTFT of requests sent one at a time (what the client and the loopback add
  to a TTFT: the null server answers in microseconds);
- open loop at ``OPEN_LOOP_RPS`` (where the closed loop reached it): the rate achieved, TTFT
  p50/p99 and how late requests left their schedule;
- CPU milliseconds per request of the client's processes and of the server's, each counted
  from its own processes (``/proc`` through psutil), so the capacity on a quiet machine follows
  from the CPU cost (``client_cpu_bound_rps``: the client's processes, one core each, fully
  busy), and the machine's load while it was measured (1-minute load average, cores kept busy
  by other processes).

    python -m perfsuite.workloads.inference.serving.capacity [--processes 2] [--rate 2000] [--seconds 3]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import psutil

from perfsuite.workloads.inference.serving.client import Endpoint, RequestResult, Timeouts
from perfsuite.workloads.inference.serving.load import ClientPool, Job, arrival_offsets_s
from perfsuite.workloads.inference.serving.metrics import SLO, summarize

CHUNKS = 16
CONCURRENCY_PER_PROCESS = 32
IDLE_REQUESTS = 200
OPEN_LOOP_RPS = 2000.0  # the open-loop rate every run's record shows the client holding (or not)
START_TIMEOUT_S = 30.0
# A rate step's capacity check: the client's open loop at the step's own rate against the null
# server, this long; below CHECK_MIN_RPS the step's own send lag is the check (the client idles).
CHECK_S = 0.5
CHECK_MIN_RPS = 100.0
HELD_FRACTION = 0.95  # an open loop holding less than this share of its rate fell behind


@dataclass
class NullServer:
    """A null server started for a with-block (:func:`null_server`): its URL and process."""

    url: str
    pid: int
    write_each_event: bool = False
    event_gap_ms: float = 0.0

    @property
    def writes(self) -> str:
        if self.event_gap_ms > 0:
            return f"each event {self.event_gap_ms:g} ms after the one before"
        return "each event its own write" if self.write_each_event else "each answer one write"

    def method(self, concurrency: int) -> str:
        return (
            f"against the null streaming server on this machine (perfsuite.workloads.inference.serving.null_server, "
            f"{CHUNKS} chunks an answer, {self.writes}): closed loop at {concurrency} in flight per client "
            "process; idle TTFT one request at a time; open loop with Poisson arrivals; CPU time per request "
            "from each side's own processes"
        )

    def cpu_s(self) -> float:
        """CPU seconds (user + system) of the server's processes so far."""
        root = psutil.Process(self.pid)
        return sum(_cpu_s(p) for p in [root, *root.children(recursive=True)])


@contextmanager
def null_server(
    processes: int = 1, extra: tuple[str, ...] = (), write_each_event: bool = False, event_gap_ms: float = 0.0
) -> Iterator[NullServer]:
    """A null server on a free port for the duration of the block."""
    argv = [sys.executable, "-m", "perfsuite.workloads.inference.serving.null_server", "--port", "0"]
    argv += ["--processes", str(processes), "--chunks", str(CHUNKS), "--event-gap-ms", str(event_gap_ms), *extra]
    if write_each_event:
        argv.append("--write-each-event")
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline().strip()
        if not line.startswith("listening on "):
            err = proc.stderr.read() if proc.stderr else ""
            raise RuntimeError(f"the null server did not start: {line or err.strip()[-300:]}")
        yield NullServer(line.split(" ", 2)[2], proc.pid, write_each_event, event_gap_ms)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=START_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _cpu_s(proc: psutil.Process) -> float:
    t = proc.cpu_times()
    return t.user + t.system


def _busy_s() -> float:
    """CPU seconds the whole machine has spent busy (all cores, neither idle nor waiting on I/O)."""
    t = psutil.cpu_times()
    return t.user + t.nice + t.system + getattr(t, "irq", 0.0) + getattr(t, "softirq", 0.0) + getattr(t, "steal", 0.0)


class CPUMeter:
    """CPU time of the client's processes, the server's and the whole machine over one window."""

    def __init__(self, pool: ClientPool, server: NullServer) -> None:
        self.clients = [psutil.Process(pid) for pid in pool.pids]
        self.server = server

    def __enter__(self) -> CPUMeter:
        self.load_1m = os.getloadavg()[0]
        self.t0 = time.perf_counter()
        self.busy0 = _busy_s()
        self.client0 = sum(_cpu_s(p) for p in self.clients)
        self.server0 = self.server.cpu_s()
        return self

    def __exit__(self, *exc: object) -> None:
        self.client_s = sum(_cpu_s(p) for p in self.clients) - self.client0
        self.server_s = self.server.cpu_s() - self.server0
        self.busy_s = _busy_s() - self.busy0
        self.wall_s = time.perf_counter() - self.t0

    def figures(self, requests: int) -> dict:
        n = max(1, requests)
        return {
            "client_cpu_ms_per_request": self.client_s / n * 1e3,
            "server_cpu_ms_per_request": self.server_s / n * 1e3,
            "machine": {
                "cores": psutil.cpu_count(),
                "load_1m": self.load_1m,
                "other_busy_cores": max(0.0, self.busy_s - self.client_s - self.server_s) / self.wall_s,
            },
        }


def _job(url: str, n: int, concurrency: int = 1, offsets: list[float] | None = None, processes: int = 0) -> Job:
    endpoint = Endpoint(url, "null")
    body = endpoint.body("bada bebe kiki", CHUNKS)
    return Job(
        endpoint,
        Timeouts(stall_s=10.0, request_s=30.0),
        dict.fromkeys(range(n), body),
        list(range(n)),
        offsets,
        concurrency,
        processes=processes,
    )


def _reads_per_request(results: list[RequestResult]) -> float:
    """Distinct read times among a request's content chunks, on average: how many reads the
    client made of the answers (1: each answer arrived whole)."""
    ok = [r for r in results if r.ok]
    return sum(len(set(r.chunk_ns)) for r in ok) / len(ok) if ok else 0.0


def measure(
    pool: ClientPool, server: NullServer, seconds: float = 1.5, concurrency_per_process: int = CONCURRENCY_PER_PROCESS
) -> dict:
    """Closed-loop requests/s, idle TTFT and CPU per request of ``pool`` against ``server``."""
    url = server.url
    in_flight = concurrency_per_process * pool.processes
    every = pool.processes  # a closed loop spread over every process: what the client can reach
    pool.run(_job(url, 64 * pool.processes, in_flight, processes=every))  # connections, imports
    probe = summarize(pool.run(_job(url, 400 * pool.processes, in_flight, processes=every)), SLO())
    n = max(200, int(probe["completed_rps"] * seconds))
    with CPUMeter(pool, server) as meter:
        results = pool.run(_job(url, n, in_flight, processes=every))
    burst = summarize(results, SLO())
    idle = summarize(pool.run(_job(url, IDLE_REQUESTS, 1)), SLO())
    cpu = meter.figures(n)
    return {
        "requests_per_s": burst["completed_rps"],
        "requests_per_s_per_process": burst["completed_rps"] / pool.processes,
        "requests": n,
        "wall_s": meter.wall_s,
        "chunks_per_request": CHUNKS,
        "reads_per_request": _reads_per_request(results),
        "concurrency": in_flight,
        "processes": pool.processes,
        "failed": burst["errors"]["count"] + idle["errors"]["count"],
        "idle_ttft_p50_ms": idle["ttft_ms"].get("p50"),
        "idle_ttft_p99_ms": idle["ttft_ms"].get("p99"),
        **cpu,
        "client_cpu_bound_rps": min(pool.processes, cpu["machine"]["cores"] or 1)
        / max(cpu["client_cpu_ms_per_request"], 1e-6)
        * 1e3,
        "method": server.method(concurrency_per_process),
    }


def open_loop(pool: ClientPool, server: NullServer, rate: float, seconds: float) -> dict:
    """One open-loop step at ``rate`` (Poisson arrivals) against ``server``, with its CPU cost;
    ``achieved_rps`` over the step's rate span (``serving.metrics.rate_span``: the schedule's,
    n / rate seconds, where what was delivered in the step's steady state kept pace with it; the
    delivered rate where the client or the server fell behind)."""
    n = max(1, int(rate * seconds))
    job = _job(server.url, n, offsets=arrival_offsets_s(n, rate, 1.0, seed=0))
    with CPUMeter(pool, server) as meter:
        results = pool.run(job)
    s = summarize(results, SLO(), n / rate)
    return {
        "offered_rps": rate,
        "achieved_rps": s["completed_rps"],
        "requests": n,
        "processes": pool.processes,
        "failed": s["errors"]["count"],
        "ttft_p50_ms": s["ttft_ms"].get("p50"),
        "ttft_p99_ms": s["ttft_ms"].get("p99"),
        "send_lag_p50_ms": s["send_lag_ms"].get("p50"),
        "send_lag_p99_ms": s["send_lag_ms"].get("p99"),
        "reads_per_request": _reads_per_request(results),
        **meter.figures(n),
    }


def rate_check(pool: ClientPool, rate: float, closed_loop_rps: float | None) -> dict:
    """Whether the client holds ``rate`` open loop, the check a sweep's rate step is judged by:
    a rate above the closed loop (``closed_loop_rps``, the most the client streams with requests
    always in flight) is beyond it unmeasured; from ``CHECK_MIN_RPS`` up to it, an open loop at
    ``rate`` for ``CHECK_S`` against a null server of its own must hold ``HELD_FRACTION`` of the
    rate with no failure and a send lag p99 within the step's own bound (the closed loop reads
    5 to 8 times what an open loop holds, so it is never the bound of one); below, the client
    idles and the step's own send lag is the check (``held`` None)."""
    from perfsuite.workloads.inference.serving.sweep import MAX_SEND_LAG_MS

    if closed_loop_rps is not None and rate > closed_loop_rps:
        return {
            "offered_rps": rate,
            "held": False,
            "why": f"the offered rate {rate:g}/s exceeds the client's measured capacity {closed_loop_rps:.0f}/s",
        }
    if rate < CHECK_MIN_RPS:
        return {
            "offered_rps": rate,
            "held": None,
            "note": f"below {CHECK_MIN_RPS:g}/s not measured: the step's own send lag is the check",
        }
    with null_server() as server:
        out = open_loop(pool, server, rate, CHECK_S)
    lag = out["send_lag_p99_ms"]
    out["held"] = (
        out["failed"] == 0 and out["achieved_rps"] >= HELD_FRACTION * rate and (lag is None or lag <= MAX_SEND_LAG_MS)
    )
    if not out["held"]:
        out["why"] = (
            f"the client held {out['achieved_rps']:.0f}/s of the offered {rate:g}/s open loop against the null "
            f"server (send lag p99 {lag or 0:.1f} ms, {out['failed']} failed)"
        )
    return out


def client_capacity(pool: ClientPool, seconds: float = 1.0) -> dict:
    """What a serving run records of its client: :func:`measure`, and :func:`open_loop` at
    ``OPEN_LOOP_RPS`` where the closed loop reached that rate, against a null server of its own."""
    with null_server() as server:
        out = measure(pool, server, seconds)
        if out["requests_per_s"] >= OPEN_LOOP_RPS:
            out["open_loop"] = open_loop(pool, server, OPEN_LOOP_RPS, seconds)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="The serving client's capacity against the null streaming server.")
    ap.add_argument("--processes", type=int, default=1, help="client processes")
    ap.add_argument("--server-processes", type=int, default=1)
    ap.add_argument("--rate", type=float, default=OPEN_LOOP_RPS, help="open-loop rate to hold (requests/s); 0: skip")
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--concurrency", type=int, default=CONCURRENCY_PER_PROCESS, help="closed loop: in flight a process")
    ap.add_argument("--write-each-event", action="store_true", help="the null server writes each event on its own")
    ap.add_argument("--event-gap-ms", type=float, default=0.0, help="the null server spaces events this far apart")
    a = ap.parse_args(argv)
    if a.processes < 1 or a.server_processes < 1 or a.concurrency < 1 or a.seconds <= 0 or a.rate < 0:
        print(
            "error: --processes, --server-processes and --concurrency must be at least 1, --seconds above 0, "
            "--rate >= 0",
            file=sys.stderr,
        )
        return 2
    with (
        null_server(a.server_processes, (), a.write_each_event, a.event_gap_ms) as server,
        ClientPool(a.processes) as pool,
    ):
        out = {"closed_loop": measure(pool, server, a.seconds, a.concurrency)}
        if a.rate > 0:
            out["open_loop"] = open_loop(pool, server, a.rate, a.seconds)
    print(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
