"""Every wait of ``inference.serving`` has a bound the user can read, against servers on 127.0.0.1
that misbehave on purpose (``hostile_http``, each its own process that stops itself): a server
trickling every answer one byte per 0.5 s, one trickling a stream's events (never silent long
enough to stall), one sending a gigabyte with no line end. Each run ends within
``request_timeout_s`` plus the probes' stated grace, its requests failed with their reason; a
model too large for this machine's memory is refused in one line before anything is built.

The time bounds carry a minute of slack for starting Python and the run's processes on a busy
two-core machine; without the bounds these runs last until the servers stop themselves (five
minutes) or memory runs out."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

pytest.importorskip("httptools")
pytest.importorskip("mlperf_loadgen")

from perfsuite.workloads.inference.serving.client import MAX_EVENT_BYTES, RequestResult, StreamParser
from perfsuite.workloads.inference.serving.engine_metrics import SCRAPE_TIMEOUT_S
from perfsuite.workloads.inference.serving.server import PROBE_TIMEOUT_S, SELF_REPORT_TIMEOUT_S

HERE = Path(__file__).parent
SERVER_LIFETIME_S = 300.0  # longer than any bounded run below: only the client's bounds end them
STARTUP_SLACK_S = 60.0  # the interpreter, the runner and the measuring process on a busy machine
GRACE_S = PROBE_TIMEOUT_S + SELF_REPORT_TIMEOUT_S + SCRAPE_TIMEOUT_S  # what the serving page states


@contextmanager
def hostile(mode: str) -> Iterator[str]:
    """A ``hostile_http`` server in its own process; its base URL."""
    proc = subprocess.Popen(
        [sys.executable, str(HERE / "support" / "hostile_http.py"), mode, "--lifetime", str(SERVER_LIFETIME_S)],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line.startswith("PORT "), line
        yield f"http://127.0.0.1:{int(line.split()[1])}"
    finally:
        proc.kill()
        proc.wait(timeout=30)


def _run(cli, url: str, *params: str, bound_s: float) -> tuple[subprocess.CompletedProcess, float, dict]:
    """``perfsuite run inference.serving -p url=URL ...`` that must end within ``bound_s`` (plus the
    startup slack); the process, its wall time and its one record."""
    args = ["run", "inference.serving", "-p", f"url={url}", "--json"]
    for p in params:
        args += ["-p", p]
    t0 = time.monotonic()
    proc = cli(*args, timeout=bound_s + STARTUP_SLACK_S)
    wall = time.monotonic() - t0
    (record,) = json.loads(proc.stdout)
    return proc, wall, record


STEP = ("warmup_requests=0", "measure_client=false", "scenarios=", "concurrencies=2", "sweep_requests=2")


def _step_errors(record: dict) -> dict:
    return record["details"]["serving"]["concurrency_sweep"]["steps"][0]["errors"]


def test_the_stream_parser_fails_an_event_longer_than_its_bound_without_holding_it():
    result = RequestResult(0, 0)
    parser = StreamParser(result)
    piece = b"x" * (64 * 1024)
    fed = 0
    stopped = parser.feed(b"data: ", 1)
    while not stopped and fed < 4 * MAX_EVENT_BYTES:
        stopped = parser.feed(piece, 2)
        fed += len(piece)
    assert stopped and result.reason == "oversized"
    assert f"{MAX_EVENT_BYTES // (1 << 20)} MiB" in result.detail
    assert fed <= MAX_EVENT_BYTES + len(piece) and len(parser.buffer) == 0


def test_a_server_trickling_every_answer_ends_the_run_at_the_health_probes_bound(cli):
    with hostile("trickle-all") as url:
        proc, wall, record = _run(cli, url, "request_timeout_s=4", "stall_timeout_s=2", bound_s=4 + GRACE_S)
    assert proc.returncode == 1 and record["status"] == "failed" and record["metrics"] == []
    assert record["error"].startswith(f"ServerUnavailable: cannot reach {url}/health: ")
    assert f"{PROBE_TIMEOUT_S:g} s" in record["error"] and "\n" not in record["error"]
    print(f"trickle-all: the run ended after {wall:.1f} s")


def test_a_stream_trickling_one_byte_each_half_second_fails_its_requests_at_the_deadline(cli):
    with hostile("trickle-stream") as url:
        proc, wall, record = _run(cli, url, "request_timeout_s=3", "stall_timeout_s=2", *STEP, bound_s=3 + GRACE_S)
    assert proc.returncode == 1, proc.stderr
    errors = _step_errors(record)
    assert errors["count"] == 2 and errors["by_reason"] == {"timeout": 2}
    assert "the request took longer than 3 s" in errors["examples"]["timeout"][0]
    report = record["details"]["serving"]["endpoint"]["self_report"]
    assert report["/v1/models"]["status"] == 200  # the self-report's trickling paths were given up on
    assert any("error" in entry for path, entry in report.items() if path.startswith("/") and path != "/v1/models")
    print(f"trickle-stream: the run ended after {wall:.1f} s")


def test_a_warm_up_whose_first_request_times_out_ends_the_run_after_it(cli):
    with hostile("trickle-stream") as url:
        proc, wall, record = _run(
            cli, url, "request_timeout_s=3", "stall_timeout_s=2", "measure_client=false", bound_s=3 + GRACE_S
        )
    assert proc.returncode == 1 and record["status"] == "failed"
    assert record["error"].startswith(f"ServerUnavailable: {url}/v1/completions answered no warm-up request: timeout: ")
    print(f"warm-up: the run ended after {wall:.1f} s")


def test_a_gigabyte_with_no_line_end_fails_each_request_at_the_event_bound(cli):
    with hostile("no-newline") as url:
        proc, wall, record = _run(cli, url, "request_timeout_s=120", "stall_timeout_s=60", *STEP, bound_s=GRACE_S)
    assert proc.returncode == 1, proc.stderr
    errors = _step_errors(record)
    assert errors["count"] == 2 and errors["by_reason"] == {"oversized": 2}
    assert "MiB" in errors["examples"]["oversized"][0]
    print(f"no-newline: the run ended after {wall:.1f} s")


# The client's own peak: VmHWM, the high-water mark of this program's memory. Not ru_maxrss, which
# Linux carries over from the forked copy of the parent through exec, so that a client started by
# a pytest worker of 1.5 GB reads 1.5 GB whatever the client itself holds.
CLIENT = """
import json, re, sys
from perfsuite.workloads.inference.serving.client import Endpoint, Timeouts
from perfsuite.workloads.inference.serving.load import Job, run_here
endpoint = Endpoint(sys.argv[1], "hostile")
results = run_here(Job(endpoint, Timeouts(stall_s=60, request_s=120), {0: endpoint.body("a", 4)}, [0, 0], None, 2))
with open("/proc/self/status") as status:
    peak = int(re.search(r"VmHWM:\\s+(\\d+) kB", status.read()).group(1)) * 1024
print(json.dumps({"reasons": [r.reason for r in results], "peak_rss_bytes": peak}))
"""


def test_the_client_reading_a_gigabyte_with_no_line_end_stays_small():
    with hostile("no-newline") as url:
        proc = subprocess.run(
            [sys.executable, "-c", CLIENT, url], capture_output=True, text=True, timeout=STARTUP_SLACK_S
        )
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["reasons"] == ["oversized", "oversized"]
    assert out["peak_rss_bytes"] < 256 << 20, out  # the client's own memory, nowhere near the gigabyte
    print(f"no-newline client: peak RSS {out['peak_rss_bytes'] / 2**20:.0f} MiB")


@pytest.mark.parametrize(
    "param", ["model_layers=100000000", "model_hidden=100000000", "model_intermediate=10000000000000"]
)
def test_a_model_too_large_for_this_machines_memory_is_refused_before_it_is_built(cli, param):
    command = "server_command={python} -m http.server {port}"
    proc = cli("run", "inference.serving", "-p", command, "-p", "build_model=true", "-p", param, timeout=60)
    assert proc.returncode == 2, proc.stderr
    (line,) = proc.stderr.strip().splitlines()
    assert line.startswith("Error: inference.serving: the built model needs about ")
    assert "bytes" in line and "available" in line


def test_a_model_that_fits_is_not_refused():
    from perfsuite.engine import params as params_mod
    from perfsuite.workloads.inference.serving import Serving

    p = params_mod.resolve(Serving, {"server_command": "x {port}", "build_model": True}, quick=False)
    assert (p.model_layers, p.model_hidden, p.model_intermediate) == (2, 64, 128)
