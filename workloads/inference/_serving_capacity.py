"""The client's own capacity, measured against the null streaming server on this machine
(``_serving_null``: every answer at once, ``chunks`` chunks each), so that a serving run can
say how far its load generator reaches and flag a rate beyond it.

Two figures: streamed requests per second with ``concurrency`` requests in flight per client
process (the most the client sends when the server costs nothing), and the median TTFT of
requests sent one at a time (what the client and the loopback add to a TTFT: the null server
answers in microseconds). ``open_loop`` measures a stated rate as a sweep step sends it: the
achieved rate, the TTFT median and how late requests left their schedule.

    python -m perfsuite.workloads.inference._serving_capacity [--processes 2] [--rate 2000] [--seconds 3]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager

from perfsuite.workloads.inference._serving_client import Endpoint, Timeouts
from perfsuite.workloads.inference._serving_load import ClientPool, Job, arrival_offsets_s
from perfsuite.workloads.inference._serving_metrics import SLO, summarize

CHUNKS = 16
CONCURRENCY_PER_PROCESS = 32
IDLE_REQUESTS = 200
START_TIMEOUT_S = 30.0


@contextmanager
def null_server(processes: int = 1, extra: tuple[str, ...] = ()) -> Iterator[str]:
    """A null server on a free port for the duration of the block; yields its base URL."""
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "perfsuite.workloads.inference._serving_null",
            "--port",
            "0",
            "--processes",
            str(processes),
            "--chunks",
            str(CHUNKS),
            *extra,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline().strip()
        if not line.startswith("listening on "):
            err = proc.stderr.read() if proc.stderr else ""
            raise RuntimeError(f"the null server did not start: {line or err.strip()[-300:]}")
        yield line.split(" ", 2)[2]
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=START_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _job(url: str, n: int, concurrency: int = 1, offsets: list[float] | None = None) -> Job:
    endpoint = Endpoint(url, "null")
    body = endpoint.body("bada bebe kiki", CHUNKS)
    return Job(
        endpoint,
        Timeouts(stall_s=10.0, request_s=30.0),
        dict.fromkeys(range(n), body),
        list(range(n)),
        offsets,
        concurrency,
    )


def measure(pool: ClientPool, url: str, seconds: float = 1.5) -> dict:
    """Closed-loop requests/s and idle TTFT of ``pool`` against the null server at ``url``."""
    pool.run(_job(url, 64 * pool.processes, CONCURRENCY_PER_PROCESS * pool.processes))  # connections, imports
    probe = summarize(pool.run(_job(url, 400 * pool.processes, CONCURRENCY_PER_PROCESS * pool.processes)), SLO())
    n = max(200, int(probe["completed_rps"] * seconds))
    t0 = time.perf_counter()
    burst = summarize(pool.run(_job(url, n, CONCURRENCY_PER_PROCESS * pool.processes)), SLO())
    wall = time.perf_counter() - t0
    idle = summarize(pool.run(_job(url, IDLE_REQUESTS, 1)), SLO())
    return {
        "requests_per_s": burst["completed_rps"],
        "requests": n,
        "wall_s": wall,
        "chunks_per_request": CHUNKS,
        "concurrency": CONCURRENCY_PER_PROCESS * pool.processes,
        "processes": pool.processes,
        "failed": burst["errors"]["count"] + idle["errors"]["count"],
        "idle_ttft_p50_ms": idle["ttft_ms"].get("p50"),
        "idle_ttft_p99_ms": idle["ttft_ms"].get("p99"),
        "method": "closed loop against the null streaming server on this machine (perfsuite.workloads.inference."
        "_serving_null); idle TTFT: one request at a time",
    }


def open_loop(pool: ClientPool, url: str, rate: float, seconds: float) -> dict:
    """One open-loop step at ``rate`` (Poisson arrivals) against the null server."""
    n = max(1, int(rate * seconds))
    s = summarize(pool.run(_job(url, n, offsets=arrival_offsets_s(n, rate, 1.0, seed=0))), SLO())
    return {
        "offered_rps": rate,
        "achieved_rps": s["completed_rps"],
        "requests": n,
        "failed": s["errors"]["count"],
        "ttft_p50_ms": s["ttft_ms"].get("p50"),
        "ttft_p99_ms": s["ttft_ms"].get("p99"),
        "send_lag_p50_ms": s["send_lag_ms"].get("p50"),
        "send_lag_p99_ms": s["send_lag_ms"].get("p99"),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="The serving client's capacity against the null streaming server.")
    ap.add_argument("--processes", type=int, default=1, help="client processes")
    ap.add_argument("--server-processes", type=int, default=1)
    ap.add_argument("--rate", type=float, default=2000.0, help="open-loop rate to hold (requests/s); 0: skip")
    ap.add_argument("--seconds", type=float, default=3.0)
    a = ap.parse_args(argv)
    if a.processes < 1 or a.server_processes < 1 or a.seconds <= 0:
        print("error: --processes and --server-processes must be at least 1, --seconds above 0", file=sys.stderr)
        return 2
    with null_server(a.server_processes) as url, ClientPool(a.processes) as pool:
        out = {"closed_loop": measure(pool, url, a.seconds)}
        if a.rate > 0:
            out["open_loop"] = open_loop(pool, url, a.rate, a.seconds)
    print(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
