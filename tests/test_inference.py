"""The inference family: LoadGen's summary parsed from captured files, parameters refused
before anything runs, a SUT that drops a sample or raises failing the run with its reason
(with the real LoadGen and no model), and the CPU quick suite end to end through the CLI."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pytest

from perfsuite.engine import params as params_mod
from perfsuite.workloads.inference._summary import SummaryParseError, parse_summary
from perfsuite.workloads.inference.classifier import Classifier
from perfsuite.workloads.inference.generate import Generate

FIXTURES = Path(__file__).parent / "fixtures" / "loadgen"


def _summary(name: str):
    return parse_summary((FIXTURES / name).read_text())


# -- the summary parser, on LoadGen 6.0.17's own output ----------------------------------
def test_summary_offline_invalid_min_duration_with_reason():
    s = _summary("classifier-Offline-performance.txt")
    assert (s.scenario, s.mode, s.valid) == ("Offline", "PerformanceOnly", False)
    assert s.satisfied == {"Min duration": False, "Min queries": True, "Early stopping": True}
    assert s.invalid_reasons == [
        "Min duration not satisfied",
        "Increase expected QPS so the loadgen pre-generates a larger (coalesced) query.",
    ]
    assert s.rates == {"samples_per_s": 4859.5}
    assert s.latency_ns["latency"]["p99"] == 193847225
    assert s.parameters["min_duration (ms)"] == "1000"


def test_summary_server_tokens_early_stopping_not_met():
    s = _summary("generate-Server-performance.txt")
    assert s.scenario == "Server" and not s.valid
    assert s.satisfied["Performance constraints"] is True and s.satisfied["Early stopping"] is False
    assert s.invalid_reasons == ["Early stopping not satisfied"]
    assert s.early_stopping["TTFT"][:2] == ["Run unsuccessful.", "Processed 64 queries."]
    assert "78 more queries" in s.early_stopping["TTFT"][2]  # a wrapped line joined
    assert s.early_stopping["TPOT"] == ["Run successful."]
    assert s.rates["completed_samples_per_s"] == 42.99 and s.rates["tokens_per_s"] == 349.37
    assert s.latency_ns["ttft"]["p99"] == 655389888 and s.latency_ns["ttft"]["mean"] == 162407799
    assert s.latency_ns["tpot"]["p99"] == 65146347
    assert s.parameters["ttft_latency (ns)"] == "500000000"


def test_an_invalid_singlestream_names_the_query_count_early_stopping_needs():
    """Captured from LoadGen 6.0.17: classifier SingleStream with min_query_count=32 and
    min_duration_ms=100 on the CPU, INVALID because early stopping needs 64 queries at p90."""
    s = _summary("classifier-SingleStream-performance-early-stopping.txt")
    assert not s.valid and s.invalid_reasons == ["Early stopping not satisfied"]
    assert s.next_steps() == [
        "early stopping needs at least 64 queries and this run processed 32: min_query_count=64 or more"
    ]
    assert s.to_dict()["next_steps"] == s.next_steps()


def test_each_invalid_summary_says_what_would_make_it_valid_and_a_valid_one_nothing():
    server = _summary("generate-Server-performance.txt")  # TTFT early stopping: 64 run, 78 more needed
    assert server.next_steps() == [
        "early stopping (TTFT) needs at least 142 queries, every one after the first 64 under the latency "
        "bound: min_query_count=142 or more, or a lower target_qps"
    ]
    offline = _summary("classifier-Offline-performance.txt")
    assert offline.next_steps() == [
        "LoadGen ran out of queries before min_duration_ms=1000: increase expected QPS so the loadgen "
        "pre-generates a larger (coalesced) query."
    ]
    # the same Server run, had its TTFT bound been 400 ms: its p99 (655.4 ms) is over it
    text = (FIXTURES / "generate-Server-performance.txt").read_text()
    text = text.replace("Performance constraints satisfied : Yes", "Performance constraints satisfied : NO")
    text = text.replace("ttft_latency (ns): 500000000", "ttft_latency (ns): 400000000")
    assert parse_summary(text).next_steps()[-1] == (
        "time to first token p99 655.4 ms is over its bound 400 ms: lower target_qps (now 40)"
    )
    assert _summary("generate-SingleStream-performance-retry1.txt").next_steps() == []


def test_summary_singlestream_tokens_valid_with_estimates():
    s = _summary("generate-SingleStream-performance-retry1.txt")
    assert s.valid and s.invalid_reasons == []
    assert s.headline_ns == {"latency p90": 14687772, "ttft p90": 3063717}
    assert s.early_stopping_estimates_ns == {"TTFT p90": 27007120, "TPOT p90": 8905295}
    assert s.latency_ns["latency"]["p99"] == 66367419


def test_summary_multistream_and_offline_tokens():
    ms = _summary("classifier-MultiStream-performance.txt")
    assert ms.valid and ms.headline_ns == {"latency p90": 4072406}
    assert ms.early_stopping_estimates_ns == {"latency p90": 5890212}
    off = _summary("generate-Offline-performance.txt")
    assert off.valid and off.rates == {"samples_per_s": 47.9981, "tokens_per_s": 383.985}


def test_show_table_has_a_row_per_scenario_with_the_reasons_as_plain_text():
    from rich.console import Console

    server = _summary("generate-Server-performance.txt").to_dict()
    offline = _summary("classifier-Offline-performance.txt").to_dict()
    offline["invalid_reasons"].append("[bold]not markup[/bold]")
    record = {
        "details": {
            "inference": {
                "loadgen_version": "6.0.17",
                "artifact_dir": "/x",
                "scenarios": {
                    "Server": {
                        "performance": {"summary": server},
                        "accuracy": {"score": 0.95, "threshold": 0.9},
                        "find_peak": {"peak_valid_qps": 24.0},
                    },
                    "Offline": {"performance": {"summary": offline}},
                },
            }
        }
    }
    console = Console(width=250, record=True)
    console.print(Generate.render_details(record))
    text = console.export_text()
    assert text.index("Server") < text.index("Offline")  # LoadGen's scenario order
    assert "INVALID: Early stopping not satisfied" in text and "[bold]not markup[/bold]" in text
    assert "next step: early stopping (TTFT) needs at least 142 queries" in text
    assert "655.39" in text and "0.950 (>= 0.9)" in text and "24" in text
    assert Classifier.render_details({"details": {}}) is None


def test_summary_that_is_not_one_is_refused():
    with pytest.raises(SummaryParseError, match="Result is"):
        parse_summary("Scenario : Server\nMode : PerformanceOnly\n")


# -- parameters refused before the run ---------------------------------------------------------
@pytest.mark.parametrize(
    "cls,overrides,message",
    [
        (Generate, {"target_qps": "-5"}, "target_qps must be greater than 0"),
        (Classifier, {"latency_ms": "0"}, "latency_ms must be greater than 0"),
        (Generate, {"ttft_ms": "0"}, "ttft_ms must be greater than 0"),
        (Generate, {"scenarios": "Server,Batch"}, "'Batch' is not one of SingleStream, MultiStream, Server, Offline"),
        (Classifier, {"target_latency_percentile": "1.5"}, "strictly between 0 and 1"),
        (Classifier, {"min_duration_ms": "-1"}, "min_duration_ms must not be negative"),
        (Generate, {"samples_per_query": "64", "num_samples": "8"}, "exceeds num_samples"),
    ],
)
def test_bad_loadgen_settings_refused(cls, overrides, message):
    with pytest.raises(params_mod.ParamError, match=message.replace("(", r"\(")) as info:
        params_mod.resolve(cls, overrides, quick=True)
    assert "\n" not in str(info.value)


def test_bad_setting_refused_by_the_cli_in_one_line(cli):
    proc = cli("run", "inference.generate", "--quick", "--device", "cpu", "-p", "target_qps=-1", timeout=60)
    assert proc.returncode == 2
    assert proc.stderr.strip().count("\n") == 0 and "target_qps must be greater than 0" in proc.stderr
    assert proc.stdout == ""


# -- the SUT with the real LoadGen and a model-free backend -------------------------------------
class EchoBackend:
    """Answers each sample with its index as 4 bytes after a short pause; ``hang`` blocks forever."""

    def __init__(self, hang: bool = False) -> None:
        self.hang = hang
        self.release = threading.Event()

    def run_batch(self, indices, first_token):
        from perfsuite.workloads.inference._sut import Output

        if self.hang:
            self.release.wait()
        time.sleep(0.001)
        if first_token is not None:
            first_token([i.to_bytes(4, "little") for i in indices])
        return [Output(i.to_bytes(4, "little"), 2, i) for i in indices]


def _run(tmp_path, scenario: str, backend, inject: str = "none", tokens: bool = False, query_timeout_s: float = 1.0):
    lg = pytest.importorskip("mlperf_loadgen")
    from perfsuite.workloads.inference._harness import run_test
    from perfsuite.workloads.inference._settings import (
        Hints,
        LoadGenParams,
        loadgen_settings,
    )
    from perfsuite.workloads.inference._sut import BatchingSUT

    p = LoadGenParams(
        scenarios=(scenario,),
        num_samples=16,
        min_duration_ms=300,
        min_query_count=16,
        target_qps=200.0,
        max_batch=4,
        query_timeout_s=query_timeout_s,
        inject=inject,
    )
    hints = Hints(single_latency_s=0.001, query_latency_s=0.002, offline_qps=2000.0)
    tok = {"ttft_ms": 1000.0, "tpot_ms": 1000.0} if tokens else None
    ts, settings = loadgen_settings(lg, p, scenario, "performance", 7, hints, tokens=tok)
    sut = BatchingSUT(
        lg,
        backend,
        max_batch=p.max_batch,
        max_wait_s=0.001,
        query_timeout_s=p.query_timeout_s,
        streams_tokens=tokens,
        inject=inject,
    )
    sut.start()
    try:
        return run_test(lg, sut, ts, settings, p.num_samples, tmp_path / "logs", bound_s=20.0, energy=lambda: None)
    finally:
        sut.stop()


@pytest.mark.parametrize("scenario", ["Server", "Offline"])
def test_sut_completes_every_sample_with_its_data(tmp_path, scenario):
    result = _run(tmp_path, scenario, EchoBackend(), tokens=True)
    assert result.summary is not None and result.summary.scenario == scenario
    assert result.stats.samples >= 16 and result.stats.tokens == 2 * result.stats.samples
    assert (tmp_path / "logs" / "mlperf_log_summary.txt").exists()
    assert (tmp_path / "logs" / "mlperf_log_detail.txt").exists()


@pytest.mark.parametrize("scenario,tokens", [("Server", True), ("SingleStream", False), ("Offline", True)])
def test_dropped_sample_fails_the_run_with_the_reason(tmp_path, scenario, tokens):
    from perfsuite.workloads.inference._sut import SUTFailure

    t0 = time.monotonic()
    with pytest.raises(SUTFailure, match=r"sample \d+ .*was not completed within 1 s.*dropped"):
        _run(tmp_path, scenario, EchoBackend(), inject="drop", tokens=tokens)
    assert time.monotonic() - t0 < 20.0  # the run's bound: it ended, it did not hang


def test_model_call_that_raises_fails_the_run_with_the_reason(tmp_path):
    from perfsuite.workloads.inference._sut import SUTFailure

    with pytest.raises(SUTFailure, match=r"model call on a batch of .* raised RuntimeError: injected failure"):
        _run(tmp_path, "Server", EchoBackend(), inject="raise", tokens=True)


def test_hung_model_call_is_caught_by_the_watchdog(tmp_path):
    from perfsuite.workloads.inference._sut import SUTFailure

    backend = EchoBackend(hang=True)
    try:
        with pytest.raises(SUTFailure, match="not completed within 1 s"):
            _run(tmp_path, "SingleStream", backend)
    finally:
        backend.release.set()


# -- end to end through the CLI ------------------------------------------------------------------
def test_sut_failure_inside_a_workload_fails_its_record(cli):
    pytest.importorskip("transformers")
    proc = cli(
        "run",
        "inference.classifier",
        "--quick",
        "--device",
        "cpu",
        "--json",
        "-p",
        "scenarios=Server",
        "-p",
        "mode=performance",
        "-p",
        "inject=raise",
        timeout=300,
    )
    assert proc.returncode == 1, proc.stderr
    (record,) = json.loads(proc.stdout)
    assert record["status"] == "failed"
    assert "injected failure" in record["error"] and "SUTFailure" in record["error"]


def test_cpu_quick_suite_every_scenario_valid_and_accurate(cli, perfsuite_env):
    pytest.importorskip("transformers")
    pytest.importorskip("mlperf_loadgen")
    proc = cli("run", "inference.classifier", "inference.generate", "--quick", "--device", "cpu", "--json", timeout=600)
    records = {r["workload"]["name"]: r for r in json.loads(proc.stdout)}
    assert set(records) == {"inference.classifier", "inference.generate"}, proc.stderr
    for name, r in records.items():
        failed = [c for c in r["verification"]["checks"] if not c["passed"]]
        assert (r["status"], r["verification"]["status"], failed) == ("success", "passed", []), (name, r["error"])
        scen = r["details"]["inference"]["scenarios"]
        assert set(scen) == {"SingleStream", "MultiStream", "Server", "Offline"}
        labels = {c["label"] for c in r["verification"]["checks"]}
        assert labels == {f"{s} {k}" for s in scen for k in ("accuracy", "VALID")}
        art = Path(r["details"]["inference"]["artifact_dir"])
        assert art.name == r["run_id"] and art.parent.parent == Path(perfsuite_env["PERFSUITE_RECORDS"])
        for _s, out in scen.items():
            for f in out["performance"]["files"] + out["accuracy"]["files"]:
                assert (art / f).is_file()
            assert out["accuracy"]["samples_logged"] == r["workload"]["params"]["num_samples"]
            assert out["performance"]["settings"]["qsl_rng_seed"] == r["controls"]["seed"]
        metrics = {(m["case"], m["name"]) for m in r["metrics"]}
        assert ("Offline", "samples_per_s") in metrics and ("SingleStream", "latency_p90_ms") in metrics
    gen = {(m["case"], m["name"]) for m in records["inference.generate"]["metrics"]}
    assert {("Server", "ttft_p99_ms"), ("Server", "tpot_p99_ms"), ("Offline", "tokens_per_s")} <= gen


def test_static_cache_generates_the_dynamic_caches_tokens():
    """The static-cache path (padded rows and prompts) decodes what the dynamic one does, in float32."""
    pytest.importorskip("transformers")
    import torch

    from perfsuite.workloads.inference._models import (
        GeneratorBackend,
        float32_and_measured,
        synthetic_sequences,
    )
    from perfsuite.workloads.inference.generate import build_config

    p = params_mod.resolve(Generate, {"dtype": "fp32", "max_batch": "4"}, quick=True)
    from transformers import AutoModelForCausalLM

    ref, _ = float32_and_measured(
        lambda: AutoModelForCausalLM.from_config(build_config(p)), "fp32", torch.device("cpu"), 0
    )
    samples = synthetic_sequences(6, p.min_prompt, p.max_prompt, p.vocab, 0)
    first: list = []
    outs = {}
    for cache in ("dynamic", "static"):
        backend = GeneratorBackend(ref, samples, p.new_tokens, cache, p.max_prompt, p.max_batch, "cpu")
        outs[cache] = backend.run_batch([0, 1, 2], first.append) + backend.run_batch([5], None)
    assert len(first) == 2 and all(len(tokens) == 3 for tokens in first)  # one first-token call per batch
    for d, s in zip(outs["dynamic"], outs["static"]):
        assert s.n_tokens == p.new_tokens and (d.value == s.value).all()
