"""A rate step whose server falls behind reads the server's own rate, not the offered one: a
real rate sweep through ``perfsuite run`` against the null server answering one completion at
a time (``--max-in-flight 1``) with its events ``GAP_MS`` apart, so its capacity is known (one
answer per answer's time). A step below the capacity kept its schedule and reads the offered
rate exactly; a step five times above it reads the completions' own rate (n - 1 completions
over their spread, re-derived here from the requests file), which can be no more than the
capacity, and says so; the latency-throughput curve draws the same figure."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from perfsuite.workloads.inference.serving.capacity import null_server

pytest.importorskip("httptools")

GAP_MS = 5.0
TOKENS = 8
# An answer is TOKENS content events, the end event and [DONE], GAP_MS apart, the stream's end
# GAP_MS after the last: one at a time, the server answers at most this many requests a second.
CAPACITY_RPS = 1e3 / ((TOKENS + 2) * GAP_MS)
BELOW, ABOVE = 10.0, 100.0  # half the capacity, evenly spaced (no request waits); five times it
REQUESTS = 16


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

    # above it: the server fell behind, and the rates are its completions' own
    rows = [r for r in _requests(serving, above) if r["reason"] is None]
    assert len(rows) == REQUESTS and all(r["tokens"] == TOKENS for r in rows)
    ends = [r["done_ns"] for r in rows]
    spread_s = (max(ends) - min(ends)) * 1e-9
    assert above["kept_schedule"] is False
    assert above["rate_span"].startswith("completions: the server fell behind its schedule"), above["rate_span"]
    assert above["completion_spread_s"] == pytest.approx(spread_s, rel=1e-12)
    assert above["completed_rps"] == pytest.approx((REQUESTS - 1) / spread_s, rel=1e-9)
    assert above["output_tokens_per_s"] == pytest.approx((REQUESTS - 1) / spread_s * TOKENS, rel=1e-9)
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
