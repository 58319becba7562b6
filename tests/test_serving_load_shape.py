"""The load the suite's client puts on a server is the load the cross-check's reference puts on
it: against the null server timed as a continuous-batching engine (``--batching``: one step
clock, a step that admits requests costs a prefill), a closed loop from a pool of two client
processes measures what the one-loop reference client measures (TTFT p50, inter-token latency
p50, output tokens/s within the cross-check's 10%), keeps as many requests in flight as it says
(one at concurrency 1, not one per process) and sends from one event loop, whose connections
are the only ones open to the server afterwards; an open loop still spreads over every process.

The figures are judged where other processes leave the host at least half its cores (as the
transformers cross-check's test judges them); the requests in flight and the one sending process always. CPU only, against
servers on this machine; about fifteen seconds."""

from __future__ import annotations

import json
import statistics

import psutil
import pytest
from support.host_load import OtherLoad

from perfsuite.crosscheck.aiperf import AGREEMENT, reference_once
from perfsuite.workloads.inference.serving.capacity import null_server
from perfsuite.workloads.inference.serving.client import Endpoint, Timeouts
from perfsuite.workloads.inference.serving.load import ClientPool, Job, arrival_offsets_s
from perfsuite.workloads.inference.serving.metrics import SLO, summarize

pytest.importorskip("httptools")

STEP_MS = 15.0  # a decode step of a small model on a GPU engine
PREFILL_MS = 50.0  # a step that admits requests: their time to first token
TOKENS = 16
FIGURES = ("ttft_p50_ms", "itl_p50_ms", "output_tokens_per_s")  # the cross-check's, ITL as AIPerf's


def _figures(results) -> dict:
    s = summarize(results, SLO())
    return {
        "ttft_p50_ms": s["ttft_ms"]["p50"],
        "itl_p50_ms": s["tpot_ms"]["p50"],
        "output_tokens_per_s": s["output_tokens_per_s"],
        "completed": s["completed"],
    }


def _reference(url: str, tmp_path, n: int, concurrency: int, k: int) -> dict:
    prompts = tmp_path / f"prompts-{k}.jsonl"
    prompts.write_text("".join(json.dumps({"text": f"bada {i}", "output_length": TOKENS}) + "\n" for i in range(n)))
    spec = {
        "base_url": url,
        "model": "null",
        "api": "completions",
        "prompts_file": str(prompts),
        "requests": n,
        "concurrency": concurrency,
        "rate": None,
        "burstiness": 1.0,
        "seed": 0,
        "ignore_eos": False,
        "api_key_env": None,
        "timeout_s": 60.0,
    }
    return reference_once("bare asyncio reference", spec, tmp_path, k)


def _connections_to(port: int, pids: list[int]) -> list[int]:
    """Open TCP connections of each process to ``port`` (the keep-alive ones a job left)."""
    return [
        sum(1 for c in psutil.Process(pid).net_connections("tcp") if c.raddr and c.raddr.port == port) for pid in pids
    ]


@pytest.mark.alone
def test_a_closed_loop_from_two_client_processes_measures_what_the_one_loop_reference_measures(tmp_path):
    extra = ("--batching", "--first-event-ms", str(PREFILL_MS))
    with OtherLoad() as other, null_server(1, extra, event_gap_ms=STEP_MS) as server, ClientPool(2) as pool:
        port = int(server.url.rsplit(":", 1)[1])
        endpoint = Endpoint(server.url, "null")
        bodies = {i: endpoint.body(f"bada {i}", TOKENS) for i in range(48)}
        turns = iter(range(1, 100))
        medians = {}
        # rounds in turns, judged by the median of each round's ratio as the cross-check judges them
        for n, concurrency, rounds in ((4, 1, 3), (48, 16, 3)):
            ratios: dict[str, list[float]] = {figure: [] for figure in FIGURES}
            for _ in range(rounds):
                job = Job(endpoint, Timeouts(stall_s=10.0, request_s=60.0), bodies, list(range(n)), None, concurrency)
                mine = _figures(pool.run(job))
                left_open = _connections_to(port, pool.pids)
                theirs = _reference(server.url, tmp_path, n, concurrency, next(turns))
                assert mine["completed"] == theirs["completed"] == n
                for figure in FIGURES:
                    ratios[figure].append(mine[figure] / theirs[figure])
                # sent from one event loop: its connections are the ones left open, all in one process
                assert sorted(left_open) == [0, concurrency], (concurrency, left_open)
            medians[concurrency] = {figure: statistics.median(values) for figure, values in ratios.items()}
        # an open loop's requests leave at their scheduled times from every process
        offsets = arrival_offsets_s(8, 100.0, 1.0, seed=0)
        job = Job(endpoint, Timeouts(stall_s=10.0, request_s=60.0), bodies, list(range(8)), offsets)
        assert pool.senders(job) == 2 and len(pool.run(job)) == 8
    # Run alone (scripts/test.sh), only work outside the tests can crowd it: with other processes keeping more
    # than half the cores busy, a process waits tens of milliseconds for a core (a late timer of the server,
    # a late read of either client): timings are not judged then, as the transformers cross-check's are not.
    if other.busy():
        pytest.skip(f"other processes kept {other.cores:.1f} cores busy: ratios not judged ({medians})")
    for concurrency, figures in medians.items():
        for figure, ratio in figures.items():
            assert abs(ratio - 1.0) <= AGREEMENT, (concurrency, figure, medians)
