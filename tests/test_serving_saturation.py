"""A rate step whose server falls behind reads the server's own rate, not the offered one: a
real rate sweep through ``perfsuite run`` against the null server answering one completion at
a time (``--max-in-flight 1``) with its events ``GAP_MS`` apart, so its capacity is known (one
answer per answer's time). A step below the capacity kept its schedule and reads the offered
rate exactly; a step five times above it (a server that queues) reads the tokens it delivered
in its steady-state window (re-derived here from the requests file), which can be no more than
the capacity, and says so; the latency-throughput curve draws the same figure. The rule itself
on requests timed by hand: the saturated step that read its offered rate, a client that sent
late, a step without a schedule, one with a single completion."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from perfsuite.workloads.inference.serving.capacity import null_server
from perfsuite.workloads.inference.serving.client import RequestResult
from perfsuite.workloads.inference.serving.metrics import SLO, summarize

pytest.importorskip("httptools")

GAP_MS = 5.0
TOKENS = 8
# An answer is TOKENS content events, the end event and [DONE], GAP_MS apart, the stream's end
# GAP_MS after the last: one at a time, the server answers at most this many requests a second.
CAPACITY_RPS = 1e3 / ((TOKENS + 2) * GAP_MS)
BELOW, ABOVE = 10.0, 100.0  # half the capacity, evenly spaced (no request waits); five times it
REQUESTS = 32  # five times the capacity: the queue's first answer ends well inside the arrivals


@pytest.fixture(scope="module")
def one_at_a_time():
    with null_server(event_gap_ms=GAP_MS, extra=("--max-in-flight", "1")) as server:
        yield server


def _sweep(cli, tmp_path: Path, url: str) -> dict:
    args = ["run", "inference.serving", "--json", "-p", f"url={url}", "-p", "model=null", "-p", "scenarios="]
    args += ["-p", f"rates={BELOW:g},{ABOVE:g}", "-p", f"sweep_requests={REQUESTS}", "-p", "burstiness=inf"]
    args += ["-p", f"output_tokens={TOKENS}", "-p", "warmup_requests=1", "-p", "measure_client=false"]
    proc = cli(*args)
    # a step a loaded machine could not send on time is INVALID (exit 1): its rates are still recorded
    assert proc.returncode in (0, 1), proc.stdout[-3000:] + proc.stderr[-2000:]
    records = sorted((tmp_path / "records").glob("*.json"))
    assert records, proc.stdout[-2000:]
    return json.loads(records[-1].read_text())["details"]["serving"]


def _token_ns(row: dict) -> list[float]:
    """Each token's time from a requests-file row: the first, then the recorded gaps."""
    times = [float(row["first_ns"])]
    for gap_ms in row["itl_ms"]:
        times.append(times[-1] + gap_ms * 1e6)
    return times


def _requests(serving: dict, step: dict) -> list[dict]:
    path = Path(serving["artifact_dir"]) / step["requests_file"]
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_a_step_above_capacity_reads_the_servers_rate_and_one_below_reads_the_offered(cli, tmp_path, one_at_a_time):
    serving = _sweep(cli, tmp_path, one_at_a_time.url)
    below, above = serving["rate_sweep"]["steps"]
    assert (below["load"], above["load"]) == (BELOW, ABOVE)

    # below the capacity: the schedule kept, the offered rate read exactly
    assert below["completed"] == REQUESTS and below["kept_schedule"] is True, below["rate_span"]
    assert below["rate_span"].startswith("schedule: requests / offered rate (the server kept up")
    assert below["rate_span_s"] == pytest.approx(REQUESTS / BELOW, rel=1e-12)
    assert below["completed_rps"] == pytest.approx(BELOW, rel=1e-12)
    assert below["output_tokens_per_s"] == pytest.approx(BELOW * TOKENS, rel=1e-12)

    # above it: the server fell behind, and the rates are what it delivered in the window from the
    # first request's end to the last arrival
    rows = [r for r in _requests(serving, above) if r["reason"] is None]
    assert len(rows) == REQUESTS and all(r["tokens"] == TOKENS for r in rows)
    start = min(r["done_ns"] for r in rows)
    end = max(r["sched_ns"] for r in rows)
    delivered = sum(1 for r in rows for t in _token_ns(r) if start < t <= end)
    window_s = (end - start) * 1e-9
    assert above["kept_schedule"] is False and above["steady_state"] is True
    assert above["rate_span"].startswith("delivered: the server fell behind its schedule"), above["rate_span"]
    assert above["steady_window"]["span_s"] == pytest.approx(window_s, rel=1e-9)
    # the requests file keeps the gaps to 0.1 us: a token on the window's edge may fall either side
    assert above["output_tokens_per_s"] == pytest.approx(delivered / window_s, abs=1.5 / window_s)
    assert above["completed_rps"] == pytest.approx(above["output_tokens_per_s"] / TOKENS, rel=1e-12)
    # one answer at a time, each at least its events' gaps long: no more than the capacity (a
    # timer may fire a fraction of a millisecond early), far below the offered rate
    assert above["completed_rps"] <= CAPACITY_RPS * 1.05 < ABOVE / 2
    # the curve and goodput divide by the same span
    assert above["curve"]["output_tokens_per_s_per_gpu"] == pytest.approx(above["output_tokens_per_s"], rel=1e-12)
    assert above["goodput_rps"] == pytest.approx(above["good"] / above["rate_span_s"], rel=1e-12)


def test_max_in_flight_below_zero_is_a_one_line_refusal():
    argv = [sys.executable, "-m", "perfsuite.workloads.inference.serving.null_server", "--max-in-flight", "-1"]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.strip() == "error: --max-in-flight must be 0 (no limit) or at least 1"


def _request(i: int, due_s: float, sent_s: float, first_s: float, done_s: float) -> RequestResult:
    ns = 1_000_000_000
    r = RequestResult(i, int(due_s * ns) + ns, int(sent_s * ns) + ns, int(first_s * ns) + ns, int(done_s * ns) + ns)
    r.output_tokens = TOKENS
    return r


def test_the_rule_on_the_saturated_step_that_read_its_offered_rate():
    """640 requests offered at 128/s over 5 s, answered one every 31.25 ms (32/s) after a queue
    that grows through the step: 158 answers delivered in the 4.96 s from the first answer's end
    to the last arrival, 31.8/s, not 128/s."""
    n, rate, capacity = 640, 128.0, 32.0
    rows = [_request(i, i / rate, i / rate, (i + 1) / capacity - 0.01, (i + 1) / capacity) for i in range(n)]
    s = summarize(rows, SLO(), n / rate)
    window_s = (n - 1) / rate - 1 / capacity
    assert s["kept_schedule"] is False and s["steady_window"]["span_s"] == pytest.approx(window_s)
    assert s["completed_rps"] == pytest.approx(158 / window_s) and s["output_tokens_per_s"] == pytest.approx(
        158 * TOKENS / window_s
    )
    assert s["rate_span"].startswith("delivered: the server fell behind its schedule (254.8 tokens/s delivered")
    # the same requests answered at once on arrival kept the schedule: the offered rate exactly
    kept = [_request(i, i / rate, i / rate, i / rate + 0.01, i / rate + 0.02) for i in range(n)]
    s = summarize(kept, SLO(), n / rate)
    assert s["kept_schedule"] is True and s["completed_rps"] == rate and s["rate_span_s"] == n / rate


def test_a_client_that_sent_late_is_named_and_a_step_without_a_schedule_divides_by_its_duration():
    n, rate = 20, 10.0
    late = [_request(i, i / rate, 3 * i / rate, 3 * i / rate + 0.01, 3 * i / rate + 0.02) for i in range(n)]
    s = summarize(late, SLO(), n / rate)
    assert s["kept_schedule"] is False and s["rate_span"].startswith("delivered: the client fell behind")
    # 6 answers in the 1.88 s from the first answer's end to the last arrival: about a third of the rate
    assert s["completed_rps"] == pytest.approx(6 / ((n - 1) / rate - 0.02))
    s = summarize(late, SLO())  # a concurrency step: no schedule to keep
    assert s["kept_schedule"] is None and s["rate_span"].startswith("duration") and s["rate_span_s"] == s["duration_s"]
    one = [late[0], RequestResult(1, late[1].scheduled_ns, late[1].sent_ns, done_ns=late[1].sent_ns, reason="stall")]
    s = summarize(one, SLO(), 2 / rate)
    assert (
        s["kept_schedule"] is None
        and s["rate_span_s"] == s["duration_s"]
        and "1 request(s) completed" in s["rate_span"]
    )
