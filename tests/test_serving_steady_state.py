"""An open-loop step's throughput is what the server delivered in its steady state, not the
offered rate. Real rate steps through the workload against the null server over HTTP:

- a server that keeps up (every request its own 0.1 s, far inside the step) reads the offered
  rate exactly;
- a processor-sharing server (``--batching --step-per-answer-ms``: it admits every request and
  every step lengthens with the answers in flight, so every stream slows as the backlog grows)
  reads the tokens it delivered, far below the offered, and did not keep its schedule, where the
  rule this replaced (completions' spread against the arrivals' plus one request's time) said it
  kept up, as it said of ``transformers serve`` at 128 requests/s;
- a step shorter than its requests says "no steady state" and reads its duration.

(A server that queues, one answer at a time, is ``test_serving_saturation``'s.) Then the reading
of stored rows that ``show``, ``export`` and the leaderboard share: rows like the filed 5 s steps
are marked, rows measured with the window carry their own verdict, and the workload's reading and
the record rules' agree."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from support.factories import make_metric, make_record, sign

from perfsuite import serving_steady as steady  # the workload's reading
from perfsuite.registry import open_registry
from perfsuite.schemas import serving_steady
from perfsuite.testing import run_in_process
from perfsuite.workloads.inference.serving.capacity import null_server
from perfsuite.workloads.inference.serving.workload import Serving

pytest.importorskip("httptools")

TOKENS = 8


def _step(url: str, rate: float, requests: int) -> tuple[dict, list[dict]]:
    """One evenly spaced rate step against ``url``: its row and its requests file's rows."""
    params = dict(
        url=url,
        model="null",
        scenarios="",
        rates=f"{rate:g}",
        sweep_requests=requests,
        sweep_duration_s=0,
        burstiness="inf",
        output_tokens=TOKENS,
        warmup_requests=1,
        measure_client=False,
        request_timeout_s=30,
    )
    serving = run_in_process(Serving, params, quick=False).details["serving"]
    (row,) = serving["rate_sweep"]["steps"]
    path = Path(serving["artifact_dir"]) / row["requests_file"]
    return row, [json.loads(line) for line in path.read_text().splitlines()]


def test_a_server_that_keeps_up_reads_the_offered_rate_exactly():
    # each answer 10 events 10 ms apart (0.1 s), two in flight at 20/s: the window is most of the step
    with null_server(event_gap_ms=10.0) as server:
        row, _ = _step(server.url, 20.0, 40)
    assert row["steady_state"] is True and row["kept_schedule"] is True, row["rate_span"]
    assert row["rate_span"].startswith("schedule: requests / offered rate (the server kept up: ")
    assert row["completed_rps"] == 20.0 and row["output_tokens_per_s"] == 20.0 * TOKENS
    assert row["steady_window"]["span_s"] >= row["arrival_spread_s"] / 2
    assert steady.no_steady_state(row) is None


def _old_rule_kept_up(rows: list[dict]) -> bool:
    """The rule this version replaced: completions spread at most the arrivals' x 1.1 plus TTFT
    p10 and stream p90."""
    arrivals = (max(r["sched_ns"] for r in rows) - min(r["sched_ns"] for r in rows)) * 1e-9
    completions = (max(r["done_ns"] for r in rows) - min(r["done_ns"] for r in rows)) * 1e-9
    ttft_p10 = np.percentile([(r["first_ns"] - r["sent_ns"]) * 1e-9 for r in rows], 10)
    stream_p90 = np.percentile([(r["done_ns"] - r["first_ns"]) * 1e-9 for r in rows], 90)
    return bool(completions <= arrivals * 1.1 + ttft_p10 + stream_p90)


def test_a_processor_sharing_server_reads_what_it_delivered_not_the_offered_rate():
    """Steps of 2 ms plus 4 ms per answer in flight: at most 250 tokens/s in all, offered 800."""
    per_answer_ms, rate, requests = 4.0, 100.0, 150
    capacity = 1e3 / per_answer_ms
    with null_server(event_gap_ms=2.0, extra=("--batching", "--step-per-answer-ms", f"{per_answer_ms:g}")) as server:
        row, rows = _step(server.url, rate, requests)
    assert row["completed"] == requests, row["errors"]
    assert _old_rule_kept_up(rows)  # the completions stayed spread like the arrivals: the old rule read 800
    assert row["steady_state"] is True and row["kept_schedule"] is False, row["rate_span"]
    assert row["rate_span"].startswith("delivered: the server fell behind its schedule"), row["rate_span"]
    window = row["steady_window"]
    assert window["unit"] == "tokens" and window["offered_per_s"] == pytest.approx(rate * TOKENS, rel=0.1)
    assert row["output_tokens_per_s"] == pytest.approx(window["delivered_per_s"], rel=1e-9)
    # no more than the engine's ceiling (a timer may fire a little early), far below the offered
    assert capacity * 0.5 < row["output_tokens_per_s"] <= capacity * 1.05 < rate * TOKENS / 2
    assert row["completed_rps"] == pytest.approx(row["output_tokens_per_s"] / TOKENS, rel=1e-12)
    assert row["curve"]["output_tokens_per_s_per_gpu"] == pytest.approx(row["output_tokens_per_s"], rel=1e-12)


def test_a_step_shorter_than_its_requests_has_no_steady_state_and_reads_its_duration():
    # each answer 10 events 50 ms apart (0.5 s); 4 requests at 20/s arrive over 0.15 s
    with null_server(event_gap_ms=50.0) as server:
        row, rows = _step(server.url, 20.0, 4)
    assert row["completed"] == 4 and row["steady_state"] is False and row["kept_schedule"] is None
    assert row["rate_span"].startswith(
        "duration: first request sent to last one ended (no steady state: arrivals 0.15 s"
    )
    duration_s = (max(r["done_ns"] for r in rows) - min(r["sent_ns"] for r in rows)) * 1e-9
    assert row["rate_span_s"] == row["duration_s"] == pytest.approx(duration_s, rel=1e-9)
    assert row["completed_rps"] == pytest.approx(4 / duration_s, rel=1e-9) and row["completed_rps"] < 20.0 / 2
    mark = steady.no_steady_state(row)
    assert mark is not None and mark.startswith("no steady state: arrivals 0.15 s, requests' E2E p50 0.5")


# -- stored rows ---------------------------------------------------------------------------------
def _filed(load: float, requests: int, spread_s: float | None, e2e_p50_ms: float) -> dict:
    """A rate step as version 2 or 3 filed it (no window): 5 s of arrivals, its figures."""
    row = {
        "case": f"rate {load:g}/s",
        "mode": "rate",
        "load": load,
        "requests": requests,
        "output_tokens_per_s": load * 64,
        "e2e_ms": {"p50": e2e_p50_ms, "min": e2e_p50_ms * 0.9},
        "kept_schedule": True,
    }
    if spread_s is not None:  # version 3 kept the arrivals' spread; version 2 did not
        row["arrival_spread_s"] = spread_s
    return row


STORED = [
    _filed(128.0, 640, 4.99, 23_964.0),  # the filed H200 step that read 8,192 tokens/s
    _filed(16.0, 80, 4.94, 6_812.0),
    _filed(2.0, 16, None, 4_582.0),  # version 2: arrivals 8 s from requests over the rate, E2E 4.6 s
    {**_filed(2.0, 64, 32.0, 4_036.0), "case": "rate 2/s, 64 requests"},  # 32 s of arrivals for 4 s requests
    {"mode": "concurrency", "load": 16, "requests": 32, "e2e_ms": {"p50": 4_500.0}},  # closed loop: not judged
    {**_filed(8.0, 160, 19.9, 6_000.0), "steady_state": True},  # measured: its own verdict
    {**_filed(8.0, 40, 4.9, 1_000.0), "steady_state": False},
]


def test_steps_filed_before_the_window_are_marked_where_their_arrivals_last_less_than_twice_their_requests():
    marks = [steady.no_steady_state(row) for row in STORED]
    assert marks[0] == (
        "no steady state: arrivals 4.99 s, requests' E2E p50 24 s (estimated: filed before the window was measured)"
    )
    assert marks[1] is not None and marks[2] is not None and "arrivals 8 s" in marks[2]
    assert marks[3] is None and marks[4] is None and marks[5] is None
    assert marks[6] == "no steady state: arrivals 4.9 s, requests' E2E p50 1 s"
    # the record rules read rows as the workload does, and the same share: one rule, which the
    # workload's show and rates reach through the public module
    assert [serving_steady.no_steady_state(row) for row in STORED] == marks
    assert serving_steady.STEADY_WINDOW_SHARE == steady.STEADY_WINDOW_SHARE
    from perfsuite.workloads.inference.serving import metrics, report

    assert report.no_steady_state is serving_steady.no_steady_state
    assert metrics.STEADY_WINDOW_SHARE == serving_steady.STEADY_WINDOW_SHARE


def test_export_and_show_mark_a_filed_steps_throughput_and_keep_its_figure(cli, perfsuite_env):
    """Through the real CLI on the test's own registry: the export's steady_state column names
    why, ``show`` marks the step, and the figure itself is the one filed."""
    steps = [dict(row) for row in STORED[:4]]
    metrics = [
        make_metric(row["case"], "output_tokens_per_s", "tokens/s", [row["output_tokens_per_s"]], higher_is_better=True)
        for row in steps
    ]
    record = make_record(
        workload_name="inference.serving",
        category="inference",
        version=3,
        params={"rates": [128.0, 16.0, 2.0], "output_tokens": 64},
        metrics=metrics,
        details={"serving": {"rate_sweep": {"steps": steps}}},
    )
    record["workload"]["plugin"]["name"] = "perfsuite.workloads.inference"  # show draws it with its own table
    sign(record)
    assert serving_steady.case_marks(record) == {row["case"]: serving_steady.no_steady_state(row) for row in steps[:3]}
    with open_registry(perfsuite_env["PERFSUITE_DB"]) as reg:
        reg.store(record)
    rows = {r["case"]: r for r in map(json.loads, cli("export", "--format", "jsonl", check=True).stdout.splitlines())}
    assert rows["rate 128/s"]["value"] == 8192.0  # marked, never rewritten
    assert rows["rate 128/s"]["steady_state"].startswith("no steady state: arrivals 4.99 s, requests' E2E p50 24 s")
    assert rows["rate 2/s"]["steady_state"].startswith("no steady state: arrivals 8 s")  # version 2: n / r
    assert rows["rate 2/s, 64 requests"]["steady_state"] is None
    shown = cli("show", record["run_id"], check=True).stdout
    assert "rate 128: no steady state: arrivals 4.99 s, requests' E2E p50 24 s" in shown
    assert "rate 2: no steady state: arrivals 8 s" in shown and shown.count("; no steady state") == 3
