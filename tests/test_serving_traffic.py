"""inference.serving's traffic shapes against the null server over real HTTP on 127.0.0.1: a
Mooncake trace replayed at a time scale, a malformed trace refused naming its line, shared-prefix
traffic whose prefix-cache hit rate comes from the server's ``cached_tokens`` (the null server's
``--prefix-cache``), and multi-turn sessions whose history grows with each answer. Small counts:
each test takes seconds."""

from __future__ import annotations

import hashlib
import json
import os
import re
from itertools import pairwise

import pytest
from rich.console import Console

from perfsuite.engine import params as params_mod
from perfsuite.testing import run_in_process
from perfsuite.workloads.inference.serving import Serving
from perfsuite.workloads.inference.serving.capacity import null_server
from perfsuite.workloads.inference.serving.client import Endpoint, Timeouts
from perfsuite.workloads.inference.serving.sessions import Conversation, run_sessions
from perfsuite.workloads.inference.serving.traffic import TraceError, load_trace

pytest.importorskip("httptools")

BLOCK = 16  # the null server's prefix-cache block (words)


@pytest.fixture(scope="module")
def cached():
    with null_server(extra=("--prefix-cache", str(BLOCK))) as server:
        yield server


def _rows(ctx, row: dict) -> list[dict]:
    return [json.loads(line) for line in (ctx.artifact_dir() / row["requests_file"]).read_text().splitlines()]


def _base(url: str, **over) -> dict:
    return dict(url=url, model="null", scenarios="", warmup_requests=1, measure_client=False, **over)


def _mooncake(path, lines: list[dict]) -> None:
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))


def test_a_mooncake_trace_is_replayed_at_its_scaled_times_with_its_lengths(cached, tmp_path):
    times_ms = [0, 150, 300, 320, 700, 900, 1000, 1400, 1450, 2000]
    lines = [
        {"timestamp": t, "input_length": 20 + k, "output_length": 2 + k % 3, "hash_ids": [900 + k]}
        for k, t in enumerate(times_ms)
    ]
    lines[9]["hash_ids"] = [900]  # the last request shares the first one's block: the cache serves it
    lines[9]["input_length"] = lines[0]["input_length"]
    lines[4], lines[5] = lines[5], lines[4]  # out of order in the file: sent in time order
    trace = tmp_path / "conv.jsonl"
    _mooncake(trace, lines)
    ctx = run_in_process(Serving, _base(cached.url, trace=str(trace), trace_time_scale=0.1), quick=False)
    replay = ctx.details["serving"]["trace_replay"]
    assert replay["file"] == "conv.jsonl" and replay["format"] == "mooncake"
    assert replay["sha256"] == hashlib.sha256(trace.read_bytes()).hexdigest()
    assert (replay["requests"], replay["time_scale"]) == (10, 0.1)
    assert replay["scaled_span_s"] == pytest.approx(0.2)
    (step,) = replay["steps"]
    assert step["traffic"]["shape"] == "trace" and step["completed"] == 10 and step["valid"]
    rows = _rows(ctx, step)
    assert [r["i"] for r in rows] == list(range(10))
    sched = [(r["sched_ns"] - rows[0]["sched_ns"]) * 1e-9 for r in rows]
    assert sched == pytest.approx([t * 1e-4 for t in sorted(times_ms)], abs=1e-6)
    sent = [r["sent_ns"] for r in rows]
    assert all(r["sent_ns"] >= r["sched_ns"] for r in rows)  # never early
    # the last request leaves a whole scaled span after the first was due (the first may leave late)
    assert (max(sent) - rows[0]["sched_ns"]) * 1e-9 >= 0.2 - 1e-6
    by_time = sorted(lines, key=lambda x: x["timestamp"])
    assert [r["prompt_tokens"] for r in rows] == [x["input_length"] for x in by_time]
    assert [r["tokens"] for r in rows] == [x["output_length"] for x in by_time]
    # the shared block: 16 of its 20 words again (a whole block; the last word is never cached)
    assert [r["cached_tokens"] for r in rows] == [0] * 9 + [BLOCK]
    assert step["prefix_cache"]["hit_rate"] == pytest.approx(BLOCK / sum(r["prompt_tokens"] for r in rows))


def test_a_malformed_trace_is_refused_in_one_line_naming_the_line(tmp_path, cli):
    trace = tmp_path / "bad.jsonl"
    trace.write_text(
        '{"timestamp_s": 0, "input_tokens": 4, "output_tokens": 2}\n'
        "\n"
        '{"timestamp_s": 1.5, "input_tokens": "four", "output_tokens": 2}\n'
    )
    over = dict(url="http://127.0.0.1:1", scenarios="", trace=str(trace), trace_format="jsonl")
    with pytest.raises(params_mod.ParamError, match=r"bad\.jsonl line 3: 'input_tokens' must be an integer"):
        params_mod.resolve(Serving, over, quick=False)
    trace.write_text('{"timestamp": 0, "input_length": 4, "output_length": 2}\n{"timestamp": 1, ')
    proc = cli("run", "inference.serving", *(f"-p{k}={v}" for k, v in over.items() if k != "trace_format"))
    assert proc.returncode == 2, proc.stderr
    (line,) = proc.stderr.strip().splitlines()
    assert "bad.jsonl line 2: not JSON" in line
    with pytest.raises(params_mod.ParamError, match="one traffic shape at a time"):
        params_mod.resolve(Serving, {**over, "turns": 2}, quick=False)
    with pytest.raises(params_mod.ParamError, match="LoadGen's scenarios send single-turn prompts"):
        params_mod.resolve(Serving, {**over, "scenarios": "Server"}, quick=False)


def test_a_trace_is_read_within_its_bounds(tmp_path):
    fifo = tmp_path / "fifo.jsonl"
    os.mkfifo(fifo)  # a reader would block on it: refused before a byte is read
    with pytest.raises(TraceError, match="not a regular file"):
        load_trace(fifo, "mooncake")
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n\n")
    with pytest.raises(TraceError, match="holds no requests"):
        load_trace(empty, "jsonl")
    bad = tmp_path / "bad.jsonl"
    for line, why in (
        ('{"timestamp": -1, "input_length": 4, "output_length": 2}', "'timestamp' must lie from 0"),
        ('{"timestamp": 0, "input_length": 0, "output_length": 2}', "'input_length' must lie from 1"),
        (
            '{"timestamp": 0, "input_length": 4, "output_length": 2, "hash_ids": [1, "x"]}',
            "'hash_ids' must be a list of integers",
        ),
        ('{"timestamp": 0, "input_length": 4}', "no 'output_length'"),
        ("[1, 2]", "not a JSON object"),
    ):
        bad.write_text('{"timestamp": 0, "input_length": 4, "output_length": 2}\n' + line + "\n")
        with pytest.raises(TraceError, match=rf"bad\.jsonl line 2: {re.escape(why)}"):
            load_trace(bad, "mooncake")
    big = ['{"timestamp": 0, "input_length": 1000000, "output_length": 1}'] * 251
    bad.write_text("\n".join(big))
    with pytest.raises(TraceError, match="251,000,000 input tokens in all"):
        load_trace(bad, "mooncake")


def test_shared_prefix_traffic_states_its_design_and_the_servers_hit_rate(cached):
    n, m, p, s = 3, 4, 32, 8
    params = _base(cached.url, prefixes=n, suffixes_per_prefix=m, prefix_tokens=p, input_tokens=s, output_tokens=2)
    ctx = run_in_process(Serving, {**params, "concurrencies": "1"}, quick=False)
    serving = ctx.details["serving"]
    assert serving["traffic"]["shape"] == "shared_prefix"
    (step,) = serving["concurrency_sweep"]["steps"]
    design = step["traffic"]
    assert (design["prefixes"], design["suffixes_per_prefix"], design["prefix_tokens"]) == (n, m, p)
    assert design["requests"] == n * m == step["completed"] and design["order"].startswith("round by round")
    rows = _rows(ctx, step)
    # round 0 sees each prefix for the first time; every later round finds its prefix's blocks cached
    assert [r["cached_tokens"] for r in rows] == [0] * n + [p] * (n * (m - 1))
    expected = (m - 1) * p / (m * (p + s))
    assert step["prefix_cache"]["hit_rate"] == pytest.approx(expected)
    assert design["expected_hit_rate_if_every_prefix_stays_cached"] == pytest.approx(expected)
    console = Console(width=250, record=True)  # what `perfsuite show` prints of the step
    console.print(Serving.render_details({"details": ctx.details}))
    shown = console.export_text()
    assert "concurrency 1 (shared_prefix)" in shown and "60%" in shown


def test_a_server_that_reports_no_cached_tokens_is_not_reported_and_the_shape_is_single_turn():
    with null_server() as plain:
        ctx = run_in_process(Serving, _base(plain.url, concurrencies="2", sweep_requests=6), quick=False)
    (step,) = ctx.details["serving"]["concurrency_sweep"]["steps"]
    assert step["traffic"]["shape"] == "single_turn"
    assert step["prefix_cache"]["hit_rate"] is None and step["prefix_cache"]["source"].startswith("not reported")


@pytest.mark.parametrize("api", ["completions", "chat"])
def test_each_turn_sends_the_history_with_the_answers_before_it(cached, api):
    endpoint = Endpoint(cached.url, "null", api=api)
    conv = Conversation(sessions=2, turns=3, think_time_s=0.01, message_tokens=5, output_tokens=3)
    turns = run_sessions(conv, 2, endpoint, Timeouts(), seed=0, tokenizer=None)
    assert len(turns) == 6 and all(t.result.ok for t in turns)
    for s in range(2):
        mine = sorted((t for t in turns if t.session == s), key=lambda t: t.turn)
        for before, after in pairwise(mine):
            assert before.result.text.strip() and before.result.text.strip() in after.prompt
            assert after.prompt.startswith(before.prompt.split("\n")[0])
        other = [t for t in turns if t.session != s]
        assert not any(t.result.text.strip() in mine[-1].prompt for t in other)  # answers are the server's own


def test_multi_turn_records_per_turn_and_per_session_latencies(cached):
    params = _base(
        cached.url, turns=3, sessions=3, think_time_s=0.02, concurrencies="2", input_tokens=8, output_tokens=4
    )
    ctx = run_in_process(Serving, params, quick=False)
    (step,) = ctx.details["serving"]["concurrency_sweep"]["steps"]
    assert step["traffic"]["shape"] == "multi_turn" and step["traffic"]["turns"] == 3
    sessions = step["sessions"]
    assert [t["turn"] for t in sessions["per_turn"]] == [1, 2, 3]
    assert all(t["completed"] == 3 and t["ttft_p50_ms"] is not None for t in sessions["per_turn"])
    # each turn adds its answer (4 words) and a new message (8): the server counts the growth
    assert [t["prompt_tokens_mean"] for t in sessions["per_turn"]] == [8, 20, 32]
    assert sessions["sessions_complete"] == 3
    assert all(len(s["e2e_ms"]) == 3 and s["wall_ms"] >= 2 * 20 for s in sessions["per_session"])
    rows = _rows(ctx, step)
    assert sorted((r["session"], r["turn"]) for r in rows) == [(s, k) for s in range(3) for k in (1, 2, 3)]
