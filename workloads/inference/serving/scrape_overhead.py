"""Whether scraping the engine's ``/metrics`` during a step (``serving.engine_metrics``) adds load
the client's figures can see: the same open-loop step against the null server (``--metrics``)
with the scrape on and off, in alternating rounds (off-on, on-off, ...), so that a drift of the
machine's load falls on both; per mode the median over rounds of the client's TTFT p50 and p99,
completed requests/s, output tokens/s and send lag p99, with the scrapes taken. A figure to read,
never a timed assertion: on a shared machine the rounds move with the load, which is printed.

    python bench/serving_metrics_overhead.py --rate 500 --seconds 3 --rounds 4 --interval-s 1
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

PROMPTS = 64
PROMPT_WORDS = 32
OUTPUT_TOKENS = 16


def measure(rate: float, seconds: float, rounds: int, interval_s: float, folder: Path) -> dict:
    """The step's figures with the scrape off and on (``rounds`` of each), scrapes written under
    ``folder``."""
    from perfsuite.workloads.inference.serving.capacity import null_server
    from perfsuite.workloads.inference.serving.client import Endpoint, Timeouts
    from perfsuite.workloads.inference.serving.engine_metrics import StepScrape
    from perfsuite.workloads.inference.serving.load import ClientPool, Job, arrival_offsets_s
    from perfsuite.workloads.inference.serving.metrics import SLO, summarize
    from perfsuite.workloads.inference.serving.prompts import words_text

    n = max(1, round(rate * seconds))
    per_mode: dict[str, list[dict]] = {"off": [], "on": []}
    with null_server(extra=("--metrics",)) as server, ClientPool(1) as pool:
        endpoint = Endpoint(server.url, "null")
        bodies = {i: endpoint.body(words_text(PROMPT_WORDS, i, first=i), OUTPUT_TOKENS) for i in range(PROMPTS)}
        offsets = arrival_offsets_s(n, rate, 1.0, 0)

        def step() -> list:
            return pool.run(Job(endpoint, Timeouts(), bodies, [i % PROMPTS for i in range(n)], offsets, 1))

        step()  # connections opened, the server's first answers behind it
        for r in range(rounds):
            for mode in ("off", "on") if r % 2 == 0 else ("on", "off"):
                scrape = StepScrape(f"{server.url}/metrics", interval_s, folder / f"round-{r}.metrics.jsonl")
                cpu_ms = None
                if mode == "on":
                    with scrape:
                        results = step()
                    scrapes = len(scrape.rows())
                    cpu_ms = scrape.summary().get("scraper_cpu_ms_per_scrape")
                else:
                    results = step()
                    scrapes = 0
                s = summarize(results, SLO(), n / rate)
                per_mode[mode].append(
                    {
                        "ttft_p50_ms": s["ttft_ms"].get("p50"),
                        "ttft_p99_ms": s["ttft_ms"].get("p99"),
                        "completed_rps": s["completed_rps"],
                        "output_tokens_per_s": s["output_tokens_per_s"],
                        "send_lag_p99_ms": s["send_lag_ms"].get("p99"),
                        "failed": s["errors"]["count"],
                        "scrapes": scrapes,
                        "scraper_cpu_ms_per_scrape": cpu_ms,
                    }
                )
    out: dict[str, Any] = {
        "rate_rps": rate,
        "requests_per_step": n,
        "rounds": rounds,
        "interval_s": interval_s,
        "load_1m": os.getloadavg()[0],
        "cores": os.cpu_count(),
        "method": "one open-loop step (Poisson arrivals) from one client process against the null server "
        "(--metrics), the scrape off and on in alternating rounds; medians over rounds",
    }
    for mode, rows in per_mode.items():
        out[mode] = {
            k: statistics.median(v) if (v := [r[k] for r in rows if r[k] is not None]) else None for k in rows[0]
        }
        out[mode]["each_round"] = rows
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rate", type=float, default=500.0, help="requests/s of the step")
    ap.add_argument("--seconds", type=float, default=3.0, help="seconds of arrivals a step")
    ap.add_argument("--rounds", type=int, default=4, help="rounds of each mode")
    ap.add_argument("--interval-s", type=float, default=1.0, help="seconds between scrapes")
    a = ap.parse_args(argv)
    if not (a.rate > 0 and a.seconds > 0 and a.rounds >= 1 and a.interval_s > 0):
        print("error: --rate, --seconds and --interval-s must be above 0, --rounds at least 1", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="perfsuite-scrape-") as tmp:
        out = measure(a.rate, a.seconds, a.rounds, a.interval_s, Path(tmp))
    print(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
