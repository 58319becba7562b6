"""The engine's side of every ``inference.serving`` step, against the null server over real HTTP
on 127.0.0.1: its ``/metrics`` (``--metrics``, vLLM's names) scraped while each step runs and
joined to the step's row; a server without ``/metrics`` recorded as not available; and the
cache-state guard, which flags (and never ranks) a cold-cache step that met a warm prefix cache
(``--prefix-cache``), judged by the stream's cached tokens or, without them, by the engine's
scraped counters, and a shared-prefix step whose cache served far less than its design implies."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest
from rich.console import Console

from perfsuite.testing import metric, run_in_process
from perfsuite.workloads.inference.serving import Serving
from perfsuite.workloads.inference.serving.cache_guard import PROBE_PAIRS, Probe, design, judge, probe_from, probe_order
from perfsuite.workloads.inference.serving.capacity import null_server
from perfsuite.workloads.inference.serving.engine_metrics import quantile, reduce
from perfsuite.workloads.inference.serving.params import ServingParams

pytest.importorskip("httptools")
pytest.importorskip("prometheus_client")


def _run(url: str, **over):
    params = dict(url=url, model="null", scenarios="", warmup_requests=1, measure_client=False)
    params.update(over)
    return run_in_process(Serving, params, quick=False)


def _shown(ctx) -> str:
    console = Console(width=260, record=True)  # what `perfsuite show` prints
    console.print(Serving.render_details({"details": ctx.details}))
    return console.export_text()


def test_the_engines_metrics_are_scraped_during_each_step_and_land_beside_the_clients_figures():
    # a batching engine: a prefill step of 20 ms admits requests, 5 ms a token after; 4 in flight
    extra = ("--metrics", "--batching", "--first-event-ms", "20")
    with null_server(extra=extra, event_gap_ms=5.0) as server:
        ctx = _run(server.url, concurrencies="4", sweep_requests=24, output_tokens=4, metrics_interval_s=0.05)
    d = ctx.details["serving"]
    assert d["engine_metrics"]["available"] and d["engine_metrics"]["family"] == "vllm"
    (step,) = d["concurrency_sweep"]["steps"]
    em = step["engine_metrics"]
    assert em["available"] and em["family"] == "vllm" and em["interval_s"] == 0.05
    assert em["failed_scrapes"] == 0 and em["scrapes"] >= 3  # one at each end, more while it ran
    scrapes = (ctx.artifact_dir() / em["scrapes_file"]).read_text().splitlines()
    assert len(scrapes) == em["scrapes"] and em["scrapes_file"] == step["requests_file"].replace(
        ".jsonl", ".metrics.jsonl"
    )
    assert all(json.loads(line)["family"] == "vllm" for line in scrapes)
    # the engine's TTFT histogram over the step counts the step's requests, no probe and no warm-up
    ttft = em["metrics"]["vllm:time_to_first_token_seconds"]
    assert ttft["role"] == "ttft" and ttft["count"] == 24
    s = em["summary"]
    # the server's TTFT is the client's less the loopback: within the engine's bucket (20-40 ms)
    assert 20.0 <= s["ttft_p50_ms"] <= 40.0 <= step["ttft_ms"]["p99"] + 20.0
    assert s["queue_time_p50_ms"] is not None and s["running_max"] >= 1
    assert em["metrics"]["vllm:num_requests_running"]["samples"] == em["scrapes"]
    assert not any(name.startswith("null:") for name in em["metrics"])  # names no engine uses stay out
    # no cached tokens, no prefix-cache counters, no probe evidence: the cache state is unknown, not flagged
    assert step["cache_state"]["state"] == "unknown" and not step["cache_state"]["flagged"] and step["valid"]
    # export carries them as the step's metrics, beside the client's
    assert metric(ctx, "concurrency 4", "engine_ttft_p50_ms")["value"] == pytest.approx(s["ttft_p50_ms"])
    assert metric(ctx, "concurrency 4", "engine_queue_time_p50_ms")["unit"] == "ms"
    shown = _shown(ctx)
    assert "the engine's view of each step (vllm metrics every 0.05 s; ms)" in shown
    assert "TTFT p50 client / engine" in shown


def test_a_server_without_metrics_is_recorded_as_not_available_and_measured_as_before():
    with null_server() as server:
        ctx = _run(server.url, concurrencies="2", sweep_requests=8, output_tokens=2)
        off = _run(server.url, concurrencies="2", sweep_requests=8, output_tokens=2, metrics_path="none")
    d = ctx.details["serving"]
    assert not d["engine_metrics"]["available"] and "/metrics answered HTTP 404" in d["engine_metrics"]["reason"]
    (step,) = d["concurrency_sweep"]["steps"]
    assert step["valid"] and step["completed"] == 8
    assert step["engine_metrics"] == {"available": False, "reason": d["engine_metrics"]["reason"]}
    shown = _shown(ctx)
    assert "engine metrics: not available (GET http" in shown
    # nothing of the engine's to show: the steps' cache state in a line, not a table of dashes
    assert "prefix-cache hit rate: not reported; cache state by step: unknown (concurrency 2)" in shown
    assert "the engine's view of each step" not in shown
    (step,) = off.details["serving"]["concurrency_sweep"]["steps"]
    assert step["engine_metrics"]["reason"] == "not scraped (metrics_path=none)"


def _prompts(ctx, step: dict) -> list[str]:
    """The prompt digests of a step's requests, from its requests file."""
    path = ctx.artifact_dir() / step["requests_file"]
    return [json.loads(line)["prompt_sha256"] for line in path.read_text().splitlines()]


def test_each_rate_step_sends_prompts_of_its_own_and_a_repeated_prompt_set_is_flagged_warm():
    """Two rate steps against an engine that keeps every prompt it saw: each step's prompts are its
    own (none the warm-up's or the other step's), so both meet a cold cache and rank. The same run
    again sends the same prompts (a run repeats exactly): the engine serves them from its cache,
    and the guard flags both steps and ranks neither."""
    sweep = dict(rates="50,100", sweep_requests=8, input_tokens=12, output_tokens=2)
    with null_server(extra=("--metrics", "--prefix-cache", "4")) as server:
        first = _run(server.url, **sweep)
        again = _run(server.url, **sweep)
    d = first.details["serving"]
    steps = d["rate_sweep"]["steps"]
    assert [s["load"] for s in steps] == [50, 100]
    one, two = (_prompts(first, s) for s in steps)
    assert len(set(one)) == len(set(two)) == 8 and not set(one) & set(two)  # distinct within and across steps
    for step in steps:
        cache = step["cache_state"]
        assert cache["design"]["cache"] == "cold" and cache["state"] == "cold" and not cache["flagged"]
        assert cache["hit_rate"] == 0 and "repeated_prompts" not in cache and step["valid"]
        assert cache["probe"]["engine_keeps_prompts"]  # the engine caches: the prompts were new to it
    assert [s["traffic"]["prompt_stream"] for s in steps] == [[0, 1], [0, 2]]
    assert d["rate_sweep"]["peak_rps"] == 100
    # the same prompts again, from a second run: served from the engine's cache, flagged, never ranked
    d = again.details["serving"]
    assert [_prompts(again, s) for s in d["rate_sweep"]["steps"]] == [one, two]
    for step in d["rate_sweep"]["steps"]:
        cache = step["cache_state"]
        assert cache["design"]["cache"] == "cold" and cache["state"] == "warm" and cache["flagged"]
        assert cache["source"] == "usage.prompt_tokens_details.cached_tokens"
        # 8 of each prompt's 12 words cached (whole blocks of 4, never the last word)
        assert cache["hit_rate"] == pytest.approx(8 / 12)
        assert not step["valid"] and not step["within_slo"]
        assert any("a cold-cache design met a warm cache: 67%" in r for r in step["invalid_reasons"])
        assert "an earlier run with the same prompt_seed" in cache["reason"]
    assert metric(again, "rate 50/s", "prefix_cache_hit_rate")["value"] == pytest.approx(8 / 12)
    assert d["rate_sweep"]["peak_rps"] is None  # never ranked
    checks = {c.label: c for c in again.checks}
    assert not checks["rate sweep: a VALID step"].passed
    assert "not ranked" in checks["rate sweep: a VALID step"].detail
    assert "warm (not ranked)" in _shown(again)


def test_step_prompts_are_a_stream_of_each_steps_own_apart_from_the_runs():
    from perfsuite.workloads.inference.serving.prompts import Lengths, step_prompts, synthetic_prompts

    lengths, out = Lengths(12, 3.0), Lengths(4)
    run = [p.text for p in synthetic_prompts(16, lengths, out, 0)]
    steps = [[p.text for p in step_prompts(16, lengths, out, 0, k)] for k in (1, 2)]
    assert steps[0] == [p.text for p in step_prompts(16, lengths, out, 0, 1)]  # the same everywhere
    assert not set(run) & set(steps[0]) and not set(steps[0]) & set(steps[1])
    assert steps[0] != [p.text for p in step_prompts(16, lengths, out, 1, 1)]  # prompt_seed moves them


def test_without_cached_tokens_in_the_stream_the_engines_scraped_counters_judge_the_cache():
    step_params = dict(concurrencies="1", sweep_requests=8, input_tokens=12, output_tokens=2)
    with null_server(extra=("--metrics", "--prefix-cache", "4", "--no-usage")) as server:
        cold = _run(server.url, **step_params)
        ctx = _run(server.url, **step_params)  # the same prompts again
    (step,) = cold.details["serving"]["concurrency_sweep"]["steps"]
    assert step["cache_state"]["hit_rate"] == 0 and not step["cache_state"]["flagged"] and step["valid"]
    (step,) = ctx.details["serving"]["concurrency_sweep"]["steps"]
    assert step["prefix_cache"]["hit_rate"] is None  # the stream said nothing
    cache = step["cache_state"]
    assert cache["source"].startswith("the engine's prefix-cache counters (vllm")
    counters = step["engine_metrics"]["metrics"]
    assert counters["vllm:prefix_cache_queries_total"]["delta"] == 8 * 12
    assert counters["vllm:prefix_cache_hits_total"]["delta"] == 8 * 8
    assert cache["hit_rate"] == pytest.approx(64 / 96) and cache["flagged"] and not step["valid"]


def test_a_shared_prefix_step_whose_cache_served_far_less_than_its_design_is_flagged():
    # blocks of 1,000 words: no prompt here fills one, so the cache never serves a prefix
    with null_server(extra=("--metrics", "--prefix-cache", "1000")) as server:
        ctx = _run(
            server.url, concurrencies="1", prefixes=2, suffixes_per_prefix=3, prefix_tokens=32, input_tokens=8,
            output_tokens=2,
        )  # fmt: skip
    (step,) = ctx.details["serving"]["concurrency_sweep"]["steps"]
    cache = step["cache_state"]
    assert cache["design"]["cache"] == "shared_prefix" and cache["hit_rate"] == 0 and "probe" not in cache
    assert cache["design"]["expected_hit_rate"] == pytest.approx(2 * 32 / (3 * 40))
    assert cache["flagged"] and "a shared-prefix design met a cold cache: 0%" in cache["reason"]
    assert not step["valid"]


def test_multi_turn_traffic_is_warm_by_design_and_not_judged():
    with null_server(extra=("--prefix-cache", "4")) as server:
        ctx = _run(server.url, turns=2, sessions=2, concurrencies="2", input_tokens=8, output_tokens=2)
    (step,) = ctx.details["serving"]["concurrency_sweep"]["steps"]
    assert step["cache_state"]["state"] == "not judged" and step["cache_state"]["hit_rate"] > 0 and step["valid"]


def _answer(ttft_ms: float) -> SimpleNamespace:
    return SimpleNamespace(ok=True, ttft_s=ttft_ms / 1e3, cached_tokens=None, prompt_tokens=8, reason="", detail="")


def test_the_probe_takes_turns_and_one_fresh_prompt_that_met_no_stall_denies_a_hit():
    order = probe_order(PROBE_PAIRS)
    assert order[0] == ("warm", 0) and len(order) == 1 + 2 * PROBE_PAIRS
    pairs = [order[1 + 2 * i : 3 + 2 * i] for i in range(PROBE_PAIRS)]
    assert [p[0][0] for p in pairs] == ["repeat", "fresh"] * (PROBE_PAIRS // 2)  # each kind goes first in turn
    assert all({k for k, _ in p} == {"repeat", "fresh"} and p[0][1] == p[1][1] == i for i, p in enumerate(pairs))
    before = _answer(4.0)
    # the loaded host's pattern: stalled fresh prompts, quick repeats, from an engine that keeps nothing
    stalled = [_answer(t) for t in (16.0, 15.0, 18.0)]
    quick = [_answer(t) for t in (3.0, 4.0, 3.5, 3.2)]
    assert probe_from(before, stalled[:2], quick[:2]).engine_keeps_prompts  # two pairs could not tell
    assert probe_from(before, [*stalled, _answer(3.6)], quick).engine_keeps_prompts is None
    assert probe_from(before, [*stalled, _answer(40.0)], quick).engine_keeps_prompts  # every fresh one slow
    assert probe_from(before, [_answer(30.0)] * 4, [*quick[:3], _answer(25.0)]).engine_keeps_prompts is None


def test_the_probes_evidence_and_the_guards_thresholds():
    cold = design({"shape": "single_turn"})
    # no counts at all: repeats of the probe three times faster than fresh prompts show an engine that keeps prompts
    fast = Probe((30.0, 10.0), (None, None), None)
    assert fast.engine_keeps_prompts and fast.floor == 0
    state = judge(cold, {}, {}, fast, repeated=3, requests=8)
    assert (
        state["flagged"] and "first token 10.0 ms on its repeats against 30.0 ms for fresh prompts" in state["reason"]
    )
    assert not judge(cold, {}, {}, fast, repeated=0, requests=8)["flagged"]
    assert judge(cold, {}, {}, Probe((30.0, 25.0), (None, None), None), 3, 8)["state"] == "unknown"
    # a few milliseconds' first tokens: a repeat three times faster is within a busy host's jitter, no evidence
    jitter = Probe((6.0, 2.0), (None, None), None)
    assert jitter.engine_keeps_prompts is None and judge(cold, {}, {}, jitter, 3, 8)["state"] == "unknown"
    # a chat template's shared opening: a never-seen prompt's share is the floor a cold step may reach
    templated = Probe((5.0, 5.0), (16, 48), 64)
    assert templated.floor == 0.25
    assert not judge(cold, {"hit_rate": 0.3}, {}, templated, 0, 8)["flagged"]
    assert judge(cold, {"hit_rate": 0.4}, {}, templated, 0, 8)["flagged"]


def test_engine_metric_names_are_mapped_per_engine_and_histograms_read_as_prometheus_does():
    sglang = (
        "# TYPE sglang:num_running_reqs gauge\n"
        'sglang:num_running_reqs{model_name="m",dp="0"} 3\nsglang:num_running_reqs{model_name="m",dp="1"} 2\n'
        'sglang:token_usage{dp="0"} 0.5\nsglang:token_usage{dp="1"} 0.25\n'
        'sglang:cached_tokens_total{model_name="m"} 40\nsglang:prompt_tokens_total{model_name="m"} 100\n'
        'sglang:some_new_metric{model_name="m"} 7\n'
    )
    out = reduce(sglang)
    assert out["family"] == "sglang"
    assert out["values"] == {
        "sglang:num_running_reqs": 5.0,  # counts summed over data-parallel ranks
        "sglang:token_usage": 0.375,  # a fraction averaged over them
        "sglang:cached_tokens_total": 40.0,
        "sglang:prompt_tokens_total": 100.0,
    }
    assert reduce("llamacpp:requests_processing 2\nllamacpp:requests_deferred 1\n")["family"] == "llamacpp"
    assert reduce("process_cpu_seconds_total 1.5\n") == {"family": None, "values": {}}
    # 10 observations: 4 at or under 0.1 s, 6 more under 0.2 s: p50 is 1/6 of the way into (0.1, 0.2]
    assert quantile(0.5, {0.1: 4, 0.2: 10, float("inf"): 10}) == pytest.approx(0.1 + 0.1 / 6)
    assert quantile(0.99, {0.1: 4, float("inf"): 10}) == 0.1  # beyond the top bucket: its bound


def test_a_bad_metrics_path_or_interval_is_refused_in_one_line():
    with pytest.raises(ValueError, match="metrics_path must start with '/' or be none, not 'metrics'"):
        ServingParams(url="http://127.0.0.1:1", metrics_path="metrics")
    with pytest.raises(ValueError, match="metrics_interval_s must lie above 0 and at most 3600, not 0"):
        ServingParams(url="http://127.0.0.1:1", metrics_interval_s=0.0)


@pytest.mark.perf
def test_scraping_on_and_off_prints_the_clients_figures_both_ways(tmp_path):
    """The figure for the docs (``bench/serving_metrics_overhead.py`` at larger counts): the same
    open-loop step with the scrape on and off; what is asserted is that both ran whole and only
    one scraped, never how fast."""
    from perfsuite.workloads.inference.serving.scrape_overhead import measure

    out = measure(rate=200.0, seconds=1.0, rounds=2, interval_s=0.2, folder=tmp_path)
    for mode in ("off", "on"):
        print(mode, {k: v for k, v in out[mode].items() if k != "each_round"})
    print("load", out["load_1m"], "on", out["cores"], "cores")
    # whole: none failed; a loaded machine may fall behind the schedule, when the rate reads lower
    assert all(
        r["failed"] == 0 and 0 < r["completed_rps"] <= 200.0 for m in ("off", "on") for r in out[m]["each_round"]
    )
    assert all(r["scrapes"] == 0 for r in out["off"]["each_round"])
    assert all(r["scrapes"] >= 2 for r in out["on"]["each_round"])


def test_the_scraper_starts_when_the_client_holds_more_than_1024_descriptors(tmp_path):
    """An open loop at thousands of requests/s holds that many connections: waiting for the
    scraper's first line must not use select(), which takes no descriptor past 1,024."""
    import os
    import resource

    from perfsuite.workloads.inference.serving.engine_metrics import StepScrape

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < 1200:
        pytest.skip(f"the hard limit of open files is {hard}, under the 1,200 this needs")
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, 1200), hard))
    held = [os.open(os.devnull, os.O_RDONLY) for _ in range(1100)]
    try:
        with null_server(extra=("--metrics",)) as server:
            scrape = StepScrape(f"{server.url}/metrics", 0.05, tmp_path / "scrapes.jsonl")
            with scrape:
                assert scrape.proc is not None and scrape.proc.stdout.fileno() > 1024
            summary = scrape.summary()
    finally:
        for fd in held:
            os.close(fd)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    assert summary["available"] and summary["family"] == "vllm" and summary["scrapes"] >= 2
    assert summary["scraper_cpu_ms_per_scrape"] >= 0


def test_a_scraper_that_cannot_start_is_recorded_with_its_own_words(tmp_path):
    from perfsuite.workloads.inference.serving.engine_metrics import StepScrape

    scrape = StepScrape("http://127.0.0.1:1/metrics", 0.0, tmp_path / "scrapes.jsonl")
    with scrape:
        assert scrape.proc is None  # stopped at once: the step runs unscraped
    summary = scrape.summary()
    assert not summary["available"] and summary["scrapes"] == 0
    assert summary["reason"] == (
        "the scraper did not start: it said nothing; the scraper exited with code 2: "
        "error: --interval-s must be a finite number above 0"
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == []  # its stderr file is gone once read
