"""inference.serving against two real engines of different families on this machine's CPU, both
serving the suite's own tiny Llama (written from a config, the same weights and words):

- ``transformers serve`` (Python on PyTorch), reached at its URL as a user's running server is;
- llama.cpp's ``llama-server`` (C++ on ggml: its own tokenizer, scheduler and prefix cache),
  built here from the source PyPI serves (``tests/support/llama_cpp.py``) and started by the
  suite for each run (``server_command``).

Each engine is driven through the four traffic shapes a user runs: a rate sweep, multi-turn
sessions, a trace replay and shared prefixes, each one ``perfsuite run inference.serving`` in a
subprocess with a registry of its own. The records must name the engine as the engine names
itself (never its web framework, never a default owner), say where the token counts came from,
give each step's prefix-cache hit rate, or say that the engine reports none, and the engine's
scraped ``/metrics`` or why there are none; the rate sweep's answers are scored, at each step,
against the greedy answers of a numpy forward pass of the same weights (``support.tiny_llama``),
which both engines must give. Small counts: a run takes 4-12 s once its server is up. The llama.cpp build is kept
in pytest's cache: about 5 CPU-minutes the first time (under 3 minutes' wall on two cores; scripts/test.sh starts it beside the set-up)
and nothing after; its stages' seconds are printed.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import pytest
from conftest import cli_env, run_cli
from support import llama_cpp
from support.tiny_llama import TinyLlama

from perfsuite.workloads.inference.serving.model import ModelShape, build_and_save
from perfsuite.workloads.inference.serving.params import SERVE_MODULES, TRANSFORMERS_SERVE
from perfsuite.workloads.inference.serving.prompts import words_text
from perfsuite.workloads.inference.serving.server import ServerProcess, engine_from_report, free_port

pytest.importorskip("httptools")
pytestmark = [pytest.mark.slow, pytest.mark.timeout(3600)]  # the first run builds llama-server

ENGINES = ("transformers serve", "llama.cpp")
# Every run: no LoadGen scenario, one warm-up request, no client-capacity pass (the null server's
# figures are not what these tests judge), short prompts and answers, SLOs no CPU run misses.
COMMON = {
    "scenarios": "",
    "warmup_requests": 1,
    "measure_client": "false",
    "input_tokens": 8,
    "output_tokens": 4,
    "slo_ttft_ms": 120000,
    "slo_tpot_ms": 60000,
    "request_timeout_s": 120,
    "stall_timeout_s": 60,
}


@pytest.fixture(scope="module")
def home(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("two-engines")


@pytest.fixture(scope="module", params=ENGINES)
def engine(request, home):
    """The endpoint parameters of one engine, up for the module's runs against it."""
    if request.param == "transformers serve":
        for module in SERVE_MODULES:
            pytest.importorskip(module)
        build_and_save(home / "tiny-llama", ModelShape())
        port = free_port()
        argv = [sys.executable, "-m", TRANSFORMERS_SERVE, "serve", str(home / "tiny-llama"), "--port", str(port)]
        argv += ["--device", "cpu", "--host", "127.0.0.1"]
        server = ServerProcess(argv, home / "transformers-serve.log", f"http://127.0.0.1:{port}", "")
        server.start()
        try:
            t0 = time.monotonic()
            server.wait_ready(600)
            print(f"transformers serve ready after {time.monotonic() - t0:.1f} s")
            yield request.param, {"url": server.base_url, "model": str(home / "tiny-llama")}
        finally:
            server.stop()
        return
    cache = Path(request.config.cache.mkdir(f"llama-server-{llama_cpp.SDIST_VERSION}"))
    t0 = time.monotonic()
    try:
        built = llama_cpp.build(cache)
    except llama_cpp.Unavailable as exc:
        pytest.skip(f"llama.cpp's llama-server cannot be built on this machine: {exc}")
    print(f"llama-server: {time.monotonic() - t0:.1f} s here; its build took {built.times_s} ({built.binary})")
    gguf = llama_cpp.write_gguf(built, home / "tiny-llama.gguf")
    yield (
        request.param,
        {
            "server_command": llama_cpp.server_command(built, gguf),
            "server_ready_timeout_s": 120,
            "ignore_eos": "true",  # the model has no end token; ask for it anyway, as a user of llama.cpp would
        },
    )


def _run(home: Path, endpoint: dict, **params) -> dict:
    """One ``perfsuite run inference.serving`` in a subprocess; its record."""
    over = {**COMMON, **endpoint, **params}
    argv = ["run", "inference.serving", "--json"]
    for key, value in over.items():
        argv += ["-p", f"{key}={value}"]
    t0 = time.monotonic()
    proc = run_cli(cli_env(home), *argv, timeout=900)
    print(f"perfsuite run ({', '.join(sorted(params))}): {time.monotonic() - t0:.1f} s")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    (record,) = json.loads(proc.stdout)
    assert record["status"] == "success", record.get("error")
    return record


def _rows(serving: dict, step: dict) -> list[dict]:
    path = Path(serving["artifact_dir"]) / step["requests_file"]
    return [json.loads(line) for line in path.read_text().splitlines()]


def _named_as_it_names_itself(name: str, serving: dict) -> None:
    engine = serving["endpoint"]["engine"]
    if name == "llama.cpp":
        # its /props build_info: "b<build number>-<commit>" (the commit given to the build: no .git to read)
        assert engine["name"] == "llama.cpp" and engine["source"] == "/props build_info", engine
        assert engine["version"].endswith(llama_cpp.LLAMA_CPP_COMMIT), engine
        assert serving["endpoint"]["started_by_suite"] and serving["endpoint"]["server"]["health_path"] == "/health"
    else:
        # transformers serve names nothing of itself: uvicorn's Server header and owned_by "local"
        # are a framework and a default, so the engine is unknown, and the record says why
        assert engine["name"] is None and engine["version"] is None, engine
        assert engine["source"].startswith("unknown") and "uvicorn" in engine["server_header_ignored"], engine


def _engine_view(name: str, serving: dict, step: dict) -> dict | None:
    """The engine's own figures joined to the step: llama.cpp's ``/metrics`` scraped while the
    step ran (``--metrics``), or, for transformers serve (which has no ``/metrics``), the reason
    none were."""
    view = step["engine_metrics"]
    if name == "transformers serve":
        assert serving["engine_metrics"]["available"] is False and "404" in serving["engine_metrics"]["reason"]
        assert view["available"] is False and view["reason"], view
        return None
    assert serving["engine_metrics"]["available"] and serving["engine_metrics"]["family"] == "llamacpp"
    assert view["available"] and view["family"] == "llamacpp" and view["scrapes"] >= 2, view
    assert view["failed_scrapes"] == 0 and view["window_s"] > 0, view
    assert {"llamacpp:requests_processing", "llamacpp:requests_deferred"} <= set(view["metrics"]), view
    assert {"running_max", "waiting_max"} <= set(view["summary"]), view
    return view


def _hit_rate_or_why(name: str, step: dict) -> float | None:
    """The step's prefix-cache hit rate where the engine reports cached tokens (llama.cpp), else
    None with the record saying so (transformers serve gives no ``cached_tokens``)."""
    cache = step["prefix_cache"]
    if name == "transformers serve":
        assert cache["hit_rate"] is None and cache["source"].startswith("not reported"), cache
        return None
    assert 0.0 <= cache["hit_rate"] <= 1.0, cache
    return cache["hit_rate"]


def _questions(path: Path, count: int = 3) -> list[dict]:
    """An accuracy set whose answers no engine wrote: prompts of the run's words with the greedy
    answers the model's numpy forward gives (``support.tiny_llama``), kept where the top two
    logits lie far enough apart that no engine's float rounding can flip a word."""
    model = TinyLlama()
    lines = []
    for seed in range(1000, 1040):
        prompt = words_text(8, seed)
        answer = model.greedy(prompt, 4)
        if answer.margin > 1e-3 and not any(w.startswith("[") for w in answer.words):
            lines.append({"prompt": prompt, "answer": " ".join(answer.words), "max_tokens": 4})
        if len(lines) == count:
            break
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return lines


def test_a_rate_sweep_names_the_engine_counts_its_tokens_and_scores_its_answers(engine, home):
    """Both engines answer what the model computes: every step scores 3 of 3 against answers
    from the weights' own forward pass, under the step's load; and every step has its point on
    the latency-throughput curve, with its cost at a stated price."""
    name, endpoint = engine
    questions = _questions(home / "questions.jsonl")
    record = _run(
        home,
        endpoint,
        rates="1,2",
        sweep_requests=4,
        accuracy_data=str(home / "questions.jsonl"),
        accuracy_min=1.0,
        accuracy_requests=0,
        price_per_gpu_hour=2.0,
        currency="USD",
    )
    serving = record["details"]["serving"]
    _named_as_it_names_itself(name, serving)
    steps = serving["rate_sweep"]["steps"]
    assert [s["load"] for s in steps] == [1, 2]
    for step in steps:
        assert step["traffic"]["shape"] == "single_turn"
        assert step["completed"] == 4 and step["errors"]["count"] == 0, step["errors"]
        # every answer runs to max_tokens (no end token), counted by the engine's own usage
        assert step["token_count_source"] == "usage" and step["output_tokens"] == 4 * 4
        rows = _rows(serving, step)
        assert [r["tokens"] for r in rows] == [4] * 4
        assert all(r["prompt_tokens"] == 8 for r in rows)  # a word is one token under both tokenizers
        rate = _hit_rate_or_why(name, step)
        assert rate is None or rate < 0.2  # distinct prompts: a shared first word at most
        _engine_view(name, serving, step)
        guard = step["cache_state"]
        assert guard["design"]["cache"] == "cold" and not guard["flagged"], guard
        if name == "llama.cpp":
            # the probe's repeat found its prompt cached: the guard knows this engine keeps prompts,
            # and the step's own hit rate shows it met a cold cache
            assert guard["probe"]["engine_keeps_prompts"] and guard["state"] == "cold", guard
        else:
            assert guard["state"] == "unknown" and not guard["probe"]["engine_keeps_prompts"], guard
        accuracy = step["accuracy"]
        assert (accuracy["scored"], accuracy["correct"], accuracy["failed"]) == (3, 3, 0), accuracy
        assert accuracy["passed"] and step["valid"], step["invalid_reasons"]
        answers = [json.loads(line) for line in (Path(serving["artifact_dir"]) / accuracy["outputs_file"]).open()]
        assert [a["correct"] for a in answers] == [True] * 3, answers
        # its point on the latency-throughput curve: its 16 tokens over the step's rate span on the one
        # (assumed) GPU, what a million such tokens cost at 2 USD an hour, no power on a CPU. The span is
        # the schedule's 4 / rate seconds where the engine delivered the offered rate in a steady state;
        # four requests seldom make one, and then it is the step's duration, first sent to last ended
        curve = step["curve"]
        span = step["rate_span_s"]
        if step["kept_schedule"]:
            assert span == pytest.approx(4 / step["load"]), step["rate_span"]
        elif step["kept_schedule"] is None:
            assert span == pytest.approx(step["duration_s"]) and "no steady state" in step["rate_span"], step
        tokens_per_s = 16 / span
        assert curve["output_tokens_per_s_per_gpu"] == pytest.approx(tokens_per_s), curve
        assert curve["cost_per_million_output_tokens"] == pytest.approx(2.0 / 3600 / tokens_per_s * 1e6)
        assert curve["output_tokens_per_s_per_user"] > 0 and curve["joules_per_output_token"] is None, curve
    assert [q["answer"] for q in questions] and record["status"] == "success"


def test_multi_turn_sessions_send_their_history_and_a_prefix_cache_serves_it(engine, home):
    name, endpoint = engine
    record = _run(home, endpoint, turns=3, sessions=2, concurrencies="2", think_time_s=0.05)
    serving = record["details"]["serving"]
    _named_as_it_names_itself(name, serving)
    (step,) = serving["concurrency_sweep"]["steps"]
    assert step["traffic"]["shape"] == "multi_turn" and step["completed"] == 6
    sessions = step["sessions"]
    assert sessions["sessions_complete"] == 2
    # each turn adds the answer (4 words) and a new message (8): the engine counts the growth
    assert [t["prompt_tokens_mean"] for t in sessions["per_turn"]] == [8, 20, 32]
    _engine_view(name, serving, step)
    assert step["cache_state"]["state"] == "not judged" and not step["cache_state"]["flagged"]
    rate = _hit_rate_or_why(name, step)
    if rate is not None:
        # a session's turns 2 and 3 find their history (12 and 24 of their 20 and 32 tokens) in
        # its slot, less the last token, which llama.cpp evaluates again; a new session's first
        # message shares a word with an earlier prompt at most
        turns = [t["prefix_cache"]["hit_rate"] for t in sessions["per_turn"]]
        assert turns[0] <= 1 / 8 and turns[1:] == [pytest.approx(11 / 20), pytest.approx(23 / 32)], turns


def test_a_mooncake_trace_replays_its_lengths_and_shared_blocks(engine, home):
    name, endpoint = engine
    block = 512
    lines = [  # three requests share their first block with an earlier one (hash id 7)
        {"timestamp": 0, "input_length": 40, "output_length": 3, "hash_ids": [7]},
        {"timestamp": 200, "input_length": 30, "output_length": 2, "hash_ids": [8]},
        {"timestamp": 400, "input_length": 40, "output_length": 4, "hash_ids": [7]},
        {"timestamp": 600, "input_length": 24, "output_length": 2, "hash_ids": [9]},
        {"timestamp": 800, "input_length": 40, "output_length": 3, "hash_ids": [7]},
    ]
    trace = home / f"trace-{name.replace(' ', '-')}.jsonl"
    trace.write_text("".join(json.dumps(line) + "\n" for line in lines))
    record = _run(home, endpoint, trace=str(trace), trace_time_scale=0.5)
    serving = record["details"]["serving"]
    _named_as_it_names_itself(name, serving)
    replay = serving["trace_replay"]
    assert (replay["requests"], replay["time_scale"], replay["format"]) == (5, 0.5, "mooncake")
    (step,) = replay["steps"]
    assert step["traffic"]["shape"] == "trace" and step["completed"] == 5, step["errors"]
    rows = sorted(_rows(serving, step), key=lambda r: r["i"])
    assert [r["prompt_tokens"] for r in rows] == [x["input_length"] for x in lines]
    assert [r["tokens"] for r in rows] == [x["output_length"] for x in lines]
    assert step["token_count_source"] == "usage"
    _engine_view(name, serving, step)
    assert step["cache_state"]["state"] == "not judged"  # a trace with hash_ids is warm by design
    rate = _hit_rate_or_why(name, step)
    if rate is not None:
        # the block of id 7 (a 40-word prompt: all of it is the block, block > 40) is sent three
        # times: its second and third sendings find most of it cached
        assert block > 40 and [r["cached_tokens"] for r in rows] == [0, 0, 39, 0, 39], rows
        assert rate == pytest.approx(78 / 174), step["prefix_cache"]


def test_shared_prefix_traffic_states_its_design_and_each_engines_hit_rate(engine, home):
    name, endpoint = engine
    n, m, p, s = 2, 3, 32, 4
    record = _run(home, endpoint, prefixes=n, suffixes_per_prefix=m, prefix_tokens=p, input_tokens=s, concurrencies="1")
    serving = record["details"]["serving"]
    _named_as_it_names_itself(name, serving)
    (step,) = serving["concurrency_sweep"]["steps"]
    design = step["traffic"]
    assert design["shape"] == "shared_prefix" and (design["prefixes"], design["suffixes_per_prefix"]) == (n, m)
    assert step["completed"] == n * m and step["token_count_source"] == "usage"
    rows = _rows(serving, step)
    assert all(r["prompt_tokens"] == p + s for r in rows)
    expected = design["expected_hit_rate_if_every_prefix_stays_cached"]
    assert expected == pytest.approx((m - 1) * p / (m * (p + s)))
    _engine_view(name, serving, step)
    guard = step["cache_state"]
    assert guard["design"]["cache"] == "shared_prefix" and not guard["flagged"], guard
    rate = _hit_rate_or_why(name, step)
    if rate is None:
        assert guard["state"] == "unknown", guard  # no cached tokens, no metrics: nothing to judge by
    else:
        # two prefixes, two slots: every later round finds its whole prefix in its slot (round 0
        # none): the design's rate exactly, a cache that kept every prefix
        assert [r["cached_tokens"] for r in rows] == [0] * n + [p] * (n * (m - 1)), rows
        assert rate == pytest.approx(expected) and guard["state"] == "warm", guard


def test_each_engine_is_named_by_what_it_exposes_or_left_unknown():
    """What the two engines answer, as read from them: llama.cpp's ``Server: llama.cpp`` and its
    ``/props`` build_info; transformers serve's uvicorn header and ``owned_by: local``, which name
    a web framework and a default, not an engine."""
    llama = {
        "server_header": "llama.cpp",
        "/props": {"status": 200, "body": {"build_info": f"b0-{llama_cpp.LLAMA_CPP_COMMIT}"}},
        "/v1/models": {"status": 200, "body": {"data": [{"id": "tiny-llama", "owned_by": "llamacpp"}]}},
    }
    assert engine_from_report(llama) == {
        "name": "llama.cpp",
        "version": f"b0-{llama_cpp.LLAMA_CPP_COMMIT}",
        "source": "/props build_info",
    }
    no_props = engine_from_report({k: v for k, v in llama.items() if k != "/props"})
    assert no_props == {"name": "llama.cpp", "version": None, "source": "server header"}
    transformers = {
        "server_header": "uvicorn",
        "/v1/models": {"status": 200, "body": {"data": [{"id": "/m", "owned_by": "local"}]}},
    }
    unknown = engine_from_report(transformers)
    assert unknown["name"] is None and unknown["source"].startswith("unknown"), unknown
