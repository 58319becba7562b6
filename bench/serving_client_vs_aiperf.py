"""The serving client's overhead beside AIPerf's, on the same null streaming server (16 chunks an
answer, answered at once): the TTFT each client adds at p50 (requests sent one at a time) and
the streamed requests/s each holds when asked for an open loop at ``--rate`` (Poisson arrivals;
AIPerf's own ``--request-rate``). The suite's figures come from
``perfsuite.workloads.inference.serving.capacity`` (what every record's ``client.capacity``
holds); AIPerf runs as a user runs it, from its own install (``--aiperf``, e.g. a separate venv),
and its figures are read from its ``profile_export_aiperf.json``. Prints JSON with both sides,
AIPerf's command lines and the machine's load; each client's added TTFT is its TTFT p50 over
that of a bare blocking socket on the same server (the loopback and the server alone). Both
open loops read their rate over first request sent to last one ended (AIPerf's
``request_throughput``); the suite's is also given over its schedule's span, as a record's rate
step reads it, with how late its requests left their schedule.

    python bench/serving_client_vs_aiperf.py --aiperf /tmp/aiperf-venv/bin/aiperf --rate 2000 --seconds 3
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path


def aiperf_once(aiperf: str, url: str, tokenizer: Path, out: Path, requests: int, load: list[str]) -> dict:
    """One ``aiperf profile`` against the null server; its TTFT p50 and request throughput."""
    prompts = out.parent / f"{out.name}-prompts.jsonl"
    prompts.write_text("".join(json.dumps({"text": f"bada {i}", "output_length": 16}) + "\n" for i in range(requests)))
    argv = [
        aiperf, "profile", "--model", "null", "--url", url, "--endpoint-type", "completions", "--streaming",
        "--input-file", str(prompts), "--custom-dataset-type", "single_turn",
        "--dataset-sampling-strategy", "sequential", "--request-count", str(requests),
        "--tokenizer", str(tokenizer), "--use-server-token-count", "--use-legacy-max-tokens", "--ui", "none",
        "--artifact-dir", str(out), *load,
    ]  # fmt: skip
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=900)
    if proc.returncode != 0:
        raise RuntimeError(f"aiperf failed ({proc.returncode}): {proc.stderr.strip()[-500:]}")
    data = json.loads((out / "profile_export_aiperf.json").read_text())

    def stat(tag: str, key: str) -> float | None:
        value = (data.get(tag) or {}).get(key)
        return float(value) if value is not None else None

    return {
        "command": " ".join(argv),
        "ttft_p50_ms": stat("time_to_first_token", "p50"),
        "ttft_p99_ms": stat("time_to_first_token", "p99"),
        "requests_per_s": stat("request_throughput", "avg"),
        "completed": stat("request_count", "avg"),
        "failed": stat("error_request_count", "avg") or 0.0,
        "aiperf_version": data.get("aiperf_version"),
    }


def socket_floor_ms(url: str, requests: int) -> float:
    """TTFT p50 of a bare blocking socket (one keep-alive connection, the request written whole,
    the clock stopped at the first bytes back): the loopback and the null server alone, the floor
    both clients are measured above."""
    import socket
    import statistics
    import time

    host, port = url.split("//", 1)[1].rsplit(":", 1)
    body = json.dumps({"model": "null", "prompt": "bada", "max_tokens": 16, "stream": True}).encode()
    head = f"POST /v1/completions HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n"
    request = (head + f"Content-Length: {len(body)}\r\n\r\n").encode() + body
    times = []
    with socket.create_connection((host, int(port)), timeout=10) as s:
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        for _ in range(requests):
            t0 = time.perf_counter_ns()
            s.sendall(request)
            data = s.recv(65536)
            times.append((time.perf_counter_ns() - t0) / 1e6)
            while b"[DONE]" not in data:
                more = s.recv(65536)
                if not more:
                    raise RuntimeError("the null server closed the connection mid-answer")
                data += more
    return statistics.median(times)


def main(argv: list[str] | None = None) -> int:
    from perfsuite.workloads.inference.serving.capacity import CHUNKS, measure, null_server
    from perfsuite.workloads.inference.serving.client import Endpoint, Timeouts
    from perfsuite.workloads.inference.serving.load import ClientPool, Job, arrival_offsets_s
    from perfsuite.workloads.inference.serving.metrics import SLO, summarize
    from perfsuite.workloads.inference.serving.model import ModelShape, build_and_save

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--aiperf", required=True, help="the aiperf command (its own venv's bin/aiperf)")
    ap.add_argument("--rate", type=float, default=2000.0, help="open-loop requests/s asked of both")
    ap.add_argument("--seconds", type=float, default=3.0, help="seconds of arrivals in the open loop")
    ap.add_argument("--idle-requests", type=int, default=200, help="requests sent one at a time for the idle TTFT")
    a = ap.parse_args(argv)
    if a.rate <= 0 or a.seconds <= 0 or a.idle_requests < 1:
        print("error: --rate and --seconds must be above 0, --idle-requests at least 1", file=sys.stderr)
        return 2
    if not Path(a.aiperf).exists():
        print(f"error: no aiperf at {a.aiperf}", file=sys.stderr)
        return 2
    n_open = int(a.rate * a.seconds)
    with tempfile.TemporaryDirectory() as tmp, null_server(1) as server, ClientPool(1) as pool:
        tok = Path(tmp) / "tokenizer"
        build_and_save(tok, ModelShape())
        floor = socket_floor_ms(server.url, a.idle_requests)
        cap = measure(pool, server, seconds=1.0)
        endpoint = Endpoint(server.url, "null")
        bodies = {i: endpoint.body(f"bada {i}", CHUNKS) for i in range(n_open)}
        offsets = arrival_offsets_s(n_open, a.rate, 1.0, 0)  # Poisson, as AIPerf's --request-rate
        results = pool.run(Job(endpoint, Timeouts(), bodies, list(range(n_open)), offsets, 1))
        on_schedule = summarize(results, SLO(), n_open / a.rate)  # as a record's rate step reads it
        over_run = summarize(results, SLO())  # first sent to last ended, as AIPerf's request_throughput
        idle = aiperf_once(a.aiperf, server.url, tok, Path(tmp) / "idle", a.idle_requests, ["--concurrency", "1"])
        loop = aiperf_once(a.aiperf, server.url, tok, Path(tmp) / "open", n_open, ["--request-rate", f"{a.rate:g}"])
    result = {
        "machine": {"cores": os.cpu_count(), "load_1m": os.getloadavg()[0]},
        "null_server": "perfsuite.workloads.inference.serving.null_server, 1 process, 16 chunks an answer",
        "bare_socket_ttft_p50_ms": floor,
        "perfsuite": {
            "idle_ttft_p50_ms": cap["idle_ttft_p50_ms"],
            "added_ttft_p50_ms": cap["idle_ttft_p50_ms"] - floor,
            "open_loop_asked_rps": a.rate,
            "open_loop_achieved_rps": over_run["completed_rps"],
            "open_loop_achieved_rps_over_schedule": on_schedule["completed_rps"],
            "open_loop_ttft_p50_ms": over_run["ttft_ms"].get("p50"),
            "open_loop_send_lag_p50_ms": over_run["send_lag_ms"].get("p50"),
            "open_loop_send_lag_p99_ms": over_run["send_lag_ms"].get("p99"),
            "open_loop_failed": over_run["errors"]["count"],
            "closed_loop_rps": cap["requests_per_s"],
        },
        "aiperf": {
            "version": idle["aiperf_version"],
            "idle_ttft_p50_ms": idle["ttft_p50_ms"],
            "added_ttft_p50_ms": idle["ttft_p50_ms"] - floor if idle["ttft_p50_ms"] is not None else None,
            "idle_command": idle["command"],
            "open_loop_asked_rps": a.rate,
            "open_loop_achieved_rps": loop["requests_per_s"],
            "open_loop_ttft_p50_ms": loop["ttft_p50_ms"],
            "open_loop_failed": loop["failed"],
            "open_loop_command": loop["command"],
        },
    }
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
