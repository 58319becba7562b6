"""inference.serving against engines that are not the one it was first built against, played by
the null server's switches over real HTTP on 127.0.0.1: an engine without ``/health`` (and one
without ``/v1/models`` either), one behind a web framework's ``Server`` header, one that streams
no token counts, one that ends answers early; and the rate a fixed-rate step reads, evenly spaced
arrivals (``burstiness=inf``), and the AIPerf cross-check's verdict on an AIPerf export that lacks
the figures a server without token counts cannot give."""

from __future__ import annotations

import json
from itertools import pairwise
from pathlib import Path

import pytest

from perfsuite.crosscheck.aiperf import aiperf_argv, compare, parse_aiperf
from perfsuite.testing import run_in_process
from perfsuite.workloads.inference.serving import Serving
from perfsuite.workloads.inference.serving.capacity import null_server
from perfsuite.workloads.inference.serving.client import RequestResult, StreamParser
from perfsuite.workloads.inference.serving.server import ServerUnavailable, engine_from_report

pytest.importorskip("httptools")
pytest.importorskip("mlperf_loadgen")


def _sweep(url: str, **over) -> dict:
    """One small rate step against ``url``; the run's serving details."""
    params = dict(
        url=url,
        model="null",
        scenarios="",
        rates="50",
        sweep_requests=8,
        sweep_duration_s=0,
        output_tokens=8,
        warmup_requests=1,
        measure_client=False,
    )
    params.update(over)
    return run_in_process(Serving, params, quick=False).details["serving"]


def test_an_engine_without_health_is_ready_by_v1_models_and_the_record_says_which():
    with null_server(extra=("--no-health",)) as server:
        d = _sweep(server.url)
    assert d["endpoint"]["health_path"] == "/v1/models"
    assert d["endpoint"]["health_paths_tried"] == ["/health", "/v1/models"]
    (step,) = d["rate_sweep"]["steps"]
    assert step["completed"] == 8 and step["token_count_source"] == "usage"
    # the null server names itself in its Server header (not a web framework's name): that is the engine
    assert d["endpoint"]["engine"] == {"name": "perfsuite-null", "version": "1", "source": "server header"}


def test_an_engine_whose_health_says_loading_is_waited_for_not_called_ready_by_v1_models():
    """llama.cpp's /health answers 503 while its model loads and its /v1/models 200 already: the
    suite waits for /health, and asks /v1/models only of an engine without /health."""
    command = "{python} -m perfsuite.workloads.inference.serving.null_server --port {port} --loading-s 1.5"
    d = _sweep("", server_command=command)
    server = d["endpoint"]["server"]
    assert server["health_path"] == "/health" and server["ready_after_s"] >= 1.5, server
    (step,) = d["rate_sweep"]["steps"]
    assert step["completed"] == 8
    # a server the suite did not start: one that says it is loading is not ready, and the line says so
    with null_server(extra=("--loading-s", "60")) as running, pytest.raises(ServerUnavailable) as err:
        _sweep(running.url)
    text = str(err.value)
    assert "(/health: HTTP 503)" in text and "\n" not in text, text  # /v1/models not asked


def test_an_engine_with_no_readiness_endpoint_is_one_line_naming_health_path(cli, tmp_path):
    with null_server(extra=("--no-health", "--no-models")) as server:
        proc = cli("run", "inference.serving", "-p", f"url={server.url}", "-p", "model=null", "--json")
    assert proc.returncode == 1, proc.stderr
    (record,) = json.loads(proc.stdout)
    assert record["status"] == "failed" and record["metrics"] == []
    error = record["error"]
    assert "\n" not in error and "-p health_path=" in error, error
    assert "/health: HTTP 404" in error and "/v1/models: HTTP 404" in error, error


def test_a_web_frameworks_server_header_never_names_the_engine():
    with null_server(extra=("--server-header", "uvicorn", "--owned-by", "")) as server:
        d = _sweep(server.url)
    engine = d["endpoint"]["engine"]
    assert engine["name"] is None and engine["version"] is None, engine
    assert engine["source"].startswith("unknown") and "uvicorn" in engine["server_header_ignored"]
    with null_server(extra=("--server-header", "uvicorn", "--owned-by", "myengine")) as server:
        d = _sweep(server.url)
    assert d["endpoint"]["engine"]["name"] == "myengine"
    assert d["endpoint"]["engine"]["source"] == "/v1/models owned_by"


def test_an_engine_is_named_by_its_version_endpoint_before_its_header():
    report = {"server_header": "hypercorn-h11", "/version": {"status": 200, "body": {"version": "0.9.2"}}}
    assert engine_from_report(report) == {"name": "vllm", "version": "0.9.2", "source": "/version"}
    assert engine_from_report({"server_header": "gunicorn/23.0"})["name"] is None
    generic = {"/v1/models": {"status": 200, "body": {"data": [{"id": "m", "owned_by": "system"}]}}}
    assert engine_from_report(generic)["name"] is None  # an organisation placeholder, not an engine


def test_a_stream_without_usage_counts_one_token_a_chunk_and_says_so():
    with null_server(extra=("--no-usage",)) as server:
        d = _sweep(server.url)
    (step,) = d["rate_sweep"]["steps"]
    assert step["completed"] == 8 and step["output_tokens"] == 8 * 8
    assert step["token_count_source"] == "chunks" and "one token per content chunk" in step["token_count_note"]
    assert d["warm_up"]["token_count_source"] == ["chunks"]


def test_the_crosscheck_asks_aiperf_for_server_token_counts_only_where_the_server_streams_them(tmp_path):
    spec = {
        "model": "m",
        "base_url": "http://127.0.0.1:1",
        "api": "completions",
        "prompts_file": "p.jsonl",
        "requests": 8,
        "tokenizer": "tok",
        "seed": 0,
        "timeout_s": 60,
        "concurrency": 2,
    }
    assert "--use-server-token-count" not in aiperf_argv({**spec, "server_token_counts": False}, tmp_path)
    assert "--use-server-token-count" not in aiperf_argv({**spec, "server_token_counts": None}, tmp_path)
    assert "--use-server-token-count" in aiperf_argv({**spec, "server_token_counts": True}, tmp_path)


def test_both_reference_tools_begin_each_turn_with_untimed_requests_one_a_slot_and_at_least_four(tmp_path):
    """The reference starts cold each turn (a new process, new connections) where the suite's
    client pool has served before: AIPerf and the bare reference each send untimed requests first."""
    from perfsuite.crosscheck.aiperf import reference_argv

    spec = {"model": "m", "base_url": "http://127.0.0.1:1", "api": "completions", "prompts_file": "p.jsonl"}
    spec |= {"requests": 8, "tokenizer": "tok", "seed": 0, "timeout_s": 60}
    for load, warm in (
        ({"concurrency": 2}, "4"),
        ({"concurrency": 16}, "16"),
        ({"concurrency": None, "rate": 8.0}, "4"),
    ):
        for argv in (aiperf_argv({**spec, **load}, tmp_path), reference_argv({**spec, **load}, tmp_path / "o.json")):
            assert argv[argv.index("--warmup-request-count") + 1] == warm, (load, argv)


# AIPerf 0.13's profile_export_aiperf.json for a server that streamed no token counts while AIPerf
# was told to use the server's: TTFT is there, inter-token latency and output tokens/s are not.
AIPERF_WITHOUT_TOKENS = {
    "request_count": {"unit": "requests", "avg": 64.0},
    "request_latency": {"unit": "ms", "avg": 40.2, "p50": 39.0, "p90": 44.1, "p99": 51.0},
    "time_to_first_token": {"unit": "ms", "avg": 7.5, "p50": 7.2, "p90": 9.9, "p99": 12.0},
    "request_throughput": {"unit": "requests/sec", "avg": 31.8},
    "error_request_count": {"unit": "requests", "avg": 0.0},
    "benchmark_duration": {"unit": "sec", "avg": 2.01},
}


def test_figures_aiperf_did_not_produce_are_named_not_counted_as_differences(tmp_path):
    out = tmp_path / "aiperf-1"
    out.mkdir()
    (out / "profile_export_aiperf.json").write_text(json.dumps(AIPERF_WITHOUT_TOKENS))
    theirs = parse_aiperf(out)
    assert theirs["output_tokens_per_s"] is None and theirs["itl_p50_ms"] is None and theirs["completed"] == 64
    mine = {"ttft_p50_ms": 7.0, "ttft_p99_ms": 11.0, "itl_p50_ms": 0.9, "output_tokens_per_s": 65.79}
    ratios = {f: (mine[f] / theirs[f] if theirs.get(f) else None) for f in mine}
    v = compare(mine, theirs, ratios, "aiperf")
    assert v["verdicts"]["output_tokens_per_s"] == "not produced by aiperf"
    assert v["verdicts"]["itl_p50_ms"] == "not produced by aiperf"
    assert v["not_produced"] == ["itl_p50_ms", "output_tokens_per_s"]
    assert v["compared"] == ["ttft_p50_ms"] and v["agrees"] is True  # 7.0 / 7.2 within 10%
    slow = compare({**mine, "ttft_p50_ms": 9.0}, theirs, {**ratios, "ttft_p50_ms": 9.0 / 7.2}, "aiperf")
    assert slow["agrees"] is False and slow["verdicts"]["ttft_p50_ms"] == "differs by more than 10%"
    nothing = compare(mine, {}, {}, "aiperf")
    assert nothing["agrees"] is False and nothing["compared"] == []  # nothing compared: never "agrees"


def test_a_crosscheck_with_only_scenarios_empty_runs_and_names_the_token_source(cli, tmp_path):
    with null_server(extra=("--no-usage",)) as server:
        proc = cli(
            "crosscheck",
            "inference.serving",
            "--rounds",
            "1",
            "-p",
            f"url={server.url}",
            "-p",
            "model=null",
            "-p",
            "scenarios=",
            "-p",
            "crosscheck_requests=8",
            "-p",
            "measure_client=false",
            "--json",
        )
    assert proc.returncode == 0, proc.stderr[-2000:]
    (record,) = json.loads(proc.stdout)
    c = record["details"]["crosscheck"]
    assert c["status"] == "measured", c
    assert c["rounds"][0]["suite"]["token_count_source"] == "chunks"
    assert c["rounds"][0]["reference"]["token_count_source"] == "chunks"
    assert c["server_token_counts"] is False and c["not_produced"] == []  # the bare reference gives every figure
    assert record["details"]["serving"]["warm_up"]["token_count_source"] == ["chunks"]
    # without rates, concurrencies or scenarios and no cross-check there is nothing to measure: one line
    with null_server() as server:
        proc = cli("run", "inference.serving", "-p", f"url={server.url}", "-p", "scenarios=", "--json")
    assert proc.returncode == 1
    (record,) = json.loads(proc.stdout)
    assert "nothing to measure" in record["error"] and "perfsuite crosscheck" in record["error"]


def test_answers_ended_without_a_finish_reason_fail_as_truncated():
    with null_server(extra=("--cut-every", "2")) as server:
        d = _sweep(server.url, warmup_requests=0)
    (step,) = d["rate_sweep"]["steps"]
    assert step["requests"] == 8 and step["completed"] == 4
    assert step["errors"]["by_reason"] == {"truncated": 4}
    assert all("with [DONE]" in e for e in step["errors"]["examples"]["truncated"])


def _parse(data: bytes, expected: int | None) -> RequestResult:
    p = StreamParser(RequestResult(0, 0))
    p.feed(data, 10)
    return p.finish(20, None, expected)


def test_fewer_tokens_than_asked_fail_as_truncated_where_end_of_sequence_is_ignored():
    stream = (
        b'data: {"choices":[{"text":"a"}]}\n\ndata: {"choices":[{"text":" b"}]}\n\n'
        b'data: {"choices":[{"text":"","finish_reason":"stop"}],"usage":{"completion_tokens":2}}\n\n'
        b"data: [DONE]\n\n"
    )
    assert _parse(stream, None).ok  # end-of-sequence honoured: an early end is the engine's right
    r = _parse(stream, 32)
    assert r.reason == "truncated" and "2 of 32 tokens" in r.detail
    assert _parse(stream, 2).ok
    # [DONE] without a finish reason: cut short, whatever the token count
    cut = b'data: {"choices":[{"text":"a"}]}\n\ndata: [DONE]\n\n'
    assert _parse(cut, None).reason == "truncated"


def test_a_fixed_rate_step_reads_its_rate_and_burstiness_inf_sends_evenly(tmp_path):
    """24 requests at 2 per second, evenly spaced: the step reads 2.0 requests/s (over the
    schedule's span, 24 / 2 s), not 24 / 11.5 s = 2.09 (first send to last end)."""
    with null_server() as server:
        d = _sweep(server.url, rates="2", burstiness="inf", sweep_requests=24, output_tokens=2)
    (step,) = d["rate_sweep"]["steps"]
    assert step["completed"] == 24 and step["completed_rps"] == 2.0
    assert step["rate_span_s"] == 12.0 and step["rate_span"].startswith("schedule")
    assert step["duration_s"] >= 11.5  # first send to last end: what the rate no longer divides by
    assert d["rate_sweep"]["burstiness"] == "inf"
    rows = [json.loads(line) for line in (Path(d["artifact_dir"]) / step["requests_file"]).read_text().splitlines()]
    sched = sorted(r["sched_ns"] for r in rows)
    assert {b - a for a, b in pairwise(sched)} <= {499_999_999, 500_000_000, 500_000_001}


def test_a_rate_steps_capacity_check_is_an_open_loop_at_that_rate():
    """Not the closed loop (which reads 5 to 8 times what an open loop holds): the client's open
    loop against a null server at the step's own rate, whose verdict the step carries."""
    from perfsuite.workloads.inference.serving.capacity import CHECK_MIN_RPS, CHECK_S

    with null_server() as server:
        d = _sweep(server.url, rates="50,200", sweep_requests=20, measure_client=True, output_tokens=4)
    closed = d["client"]["capacity"]["requests_per_s"]
    slow, fast = d["rate_sweep"]["steps"]
    assert (
        slow["client_rate_check"]["held"] is None and f"below {CHECK_MIN_RPS:g}/s" in slow["client_rate_check"]["note"]
    )
    check = fast["client_rate_check"]
    if closed < 200:  # a machine too busy to stream 200/s even closed loop: beyond it, unmeasured
        assert check["held"] is False and "exceeds the client's measured capacity" in check["why"]
    else:
        assert check["offered_rps"] == 200 and check["requests"] == int(200 * CHECK_S) and "send_lag_p99_ms" in check
    # the verdict is the check's: a check that did not hold makes the step invalid with its words
    assert (check["held"] is False) == (check.get("why") in fast["invalid_reasons"])
    assert not any("capacity" in why or "open loop" in why for why in slow["invalid_reasons"])
