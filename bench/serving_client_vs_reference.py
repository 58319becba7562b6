"""The serving cross-check's question asked of a server on this machine: the suite's client (a
pool of ``--processes`` client processes) and the bare asyncio reference
(``perfsuite.crosscheck.serving_reference``) take turns sending the same closed loop to the
same null streaming server, timed as a GPU engine answers (``--event-gap-ms`` between tokens,
``--first-event-ms`` to the first; ``--batching``: one step clock for every answer, a step that
admits requests costs a prefill, as a continuous-batching engine's). Prints each round's TTFT
p50, inter-token latency p50 (AIPerf's: (end - first token) / (tokens - 1)) and output tokens/s
of both sides, their ratios and the 1-minute load average; the cross-check's bar is 10%.

    python bench/serving_client_vs_reference.py --processes 2 --concurrency 16 --requests 96 --tokens 64 \\
        --event-gap-ms 15 --first-event-ms 50 --batching
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

FIGURES = ("ttft_p50_ms", "itl_p50_ms", "output_tokens_per_s")


def main(argv: list[str] | None = None) -> int:
    from perfsuite.crosscheck.aiperf import reference_once
    from perfsuite.workloads.inference.serving.capacity import null_server
    from perfsuite.workloads.inference.serving.client import Endpoint, Timeouts
    from perfsuite.workloads.inference.serving.load import ClientPool, Job
    from perfsuite.workloads.inference.serving.metrics import SLO, summarize

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--processes", type=int, default=2, help="the suite's client processes")
    ap.add_argument("--concurrency", type=int, default=16)
    ap.add_argument("--requests", type=int, default=96)
    ap.add_argument("--tokens", type=int, default=64, help="output tokens an answer")
    ap.add_argument("--event-gap-ms", type=float, default=15.0)
    ap.add_argument("--first-event-ms", type=float, default=50.0)
    ap.add_argument("--batching", action="store_true")
    ap.add_argument("--rounds", type=int, default=2)
    a = ap.parse_args(argv)
    if min(a.processes, a.concurrency, a.requests, a.tokens, a.rounds) < 1 or a.event_gap_ms <= 0:
        print("error: counts must be at least 1 and --event-gap-ms above 0", file=sys.stderr)
        return 2
    extra = ("--first-event-ms", str(a.first_event_ms), *(("--batching",) if a.batching else ()))
    with (
        tempfile.TemporaryDirectory() as tmp,
        null_server(1, extra, event_gap_ms=a.event_gap_ms) as server,
        ClientPool(a.processes) as pool,
    ):
        endpoint = Endpoint(server.url, "null")
        texts = [f"bada {i}" for i in range(a.requests)]
        prompts = Path(tmp) / "prompts.jsonl"
        prompts.write_text("".join(json.dumps({"text": t, "output_length": a.tokens}) + "\n" for t in texts))
        bodies = {i: endpoint.body(t, a.tokens) for i, t in enumerate(texts)}
        spec = {
            "base_url": server.url,
            "model": "null",
            "api": "completions",
            "prompts_file": str(prompts),
            "requests": a.requests,
            "concurrency": a.concurrency,
            "rate": None,
            "burstiness": 1.0,
            "seed": 0,
            "ignore_eos": False,
            "api_key_env": None,
            "timeout_s": 120.0,
        }
        for k in range(1, a.rounds + 1):
            job = Job(endpoint, Timeouts(), bodies, list(range(a.requests)), None, a.concurrency)
            s = summarize(pool.run(job), SLO())
            mine = {
                "ttft_p50_ms": s["ttft_ms"]["p50"],
                "itl_p50_ms": s["tpot_ms"]["p50"],
                "output_tokens_per_s": s["output_tokens_per_s"],
            }
            theirs = reference_once("bare asyncio reference", spec, Path(tmp), k)
            row = {
                "round": k,
                "client_processes_sending": pool.senders(job),
                "suite": {f: round(mine[f], 2) for f in FIGURES},
                "reference": {f: round(theirs[f], 2) for f in FIGURES},
                "ratios": {f: round(mine[f] / theirs[f], 3) for f in FIGURES},
                "load_1m": round(os.getloadavg()[0], 2),
            }
            print(json.dumps(row), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
