"""Accuracy beside speed in ``inference.serving``: questions with reference answers scored on a
real endpoint's answers at every sweep step.

The end-to-end tests train the model the shipped questions are for (``perfsuite run
training.gpt --quick -p save_to=DIR``: a 2-layer, width-64 GPT-2 on the synthetic language,
to 0.99 answer-token accuracy), serve it with ``transformers serve`` started by the suite and
score it on ``gpt-reverse``: its steps score high and rank. The same model untrained (built
from the same config, saved the same way) scores near zero: its step is INVALID with the
reason, the sweep's accuracy check fails and the run is never ranked. A user's JSONL is scored
against the null server (whose answers are known) by either metric, and one with a bad line is
refused in one line before a server starts.

CPU only; training takes about 20-45 s of a busy two-core machine, each served run about a minute."""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import pytest
from conftest import cli_env, run_cli

from perfsuite.engine import params as params_mod
from perfsuite.workloads.inference.serving import Serving
from perfsuite.workloads.inference.serving.accuracy import (
    SHIPPED,
    AccuracyDataError,
    AccuracyRules,
    Question,
    is_correct,
    load,
    normalise,
    score,
)
from perfsuite.workloads.inference.serving.client import RequestResult

pytest.importorskip("httptools")


# -- the pieces ---------------------------------------------------------------------------------
def test_answers_are_compared_after_normalisation_exactly_or_as_contained_words():
    assert normalise("  The  Answer:\tParis! ") == "the answer paris"
    assert normalise("Ｐａｒｉｓ") == "paris"  # NFKC: full-width letters are letters
    assert is_correct(" paris.", ("Paris",), "exact")
    assert not is_correct("Paris, France", ("Paris",), "exact")
    assert is_correct("It is Paris, France.", ("paris",), "contains")
    assert not is_correct("Parisian", ("paris",), "contains")  # whole words, not a substring
    assert is_correct("t3 t1", ("t9", "t3 t1"), "exact")  # any reference counts
    with pytest.raises(ValueError, match="accuracy_metric must be one of exact, contains"):
        is_correct("a", ("a",), "fuzzy")


def test_a_failed_request_counts_as_a_wrong_answer_and_every_answer_is_written(tmp_path):
    questions = [Question(1, "q1", ("a",), None), Question(2, "q2", ("b",), None), Question(3, "q3", ("c",), None)]
    right = RequestResult(0, 0, text="A", finish_reason="length")
    wrong = RequestResult(1, 0, text="x", finish_reason="length")
    failed = RequestResult(2, 0, text="c", reason="stall")  # its text is right, but it failed
    out = tmp_path / "answers.jsonl"
    got = score([failed, right, wrong], questions, AccuracyRules("exact", 0.5, 0, 8), out)
    assert (got["scored"], got["correct"], got["failed"]) == (3, 1, 1)
    assert got["score"] == pytest.approx(1 / 3) and not got["passed"]
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [(r["line"], r["correct"], r["reason"]) for r in rows] == [
        (1, True, None),
        (2, False, None),
        (3, False, "stall"),
    ]


def test_the_shipped_questions_are_the_language_training_gpt_learns_from_a_stream_no_split_holds():
    from perfsuite.workloads.training._language import EVAL_STREAM, TRAIN_STREAM, SequenceTask
    from perfsuite.workloads.training.export import questions

    data = load("gpt-reverse")
    assert data.shipped and len(data.questions) == 512 and data.path.stat().st_size < 100_000
    task = SequenceTask("reverse", 16, 16, 0)  # training.gpt --quick's language
    regenerated = list(questions(task, 512))
    assert [(q.prompt, q.answers[0], q.max_tokens) for q in data.questions] == [
        (r["prompt"], r["answer"], r["max_tokens"]) for r in regenerated
    ]
    first = data.questions[0]
    x = first.prompt.split()[:-1]
    assert first.prompt.endswith(" =") and first.answers[0].split() == x[::-1] and first.max_tokens == len(x) == 8
    held = {" ".join(r["prompt"] for r in questions(task, 512, stream)) for stream in (TRAIN_STREAM, EVAL_STREAM)}
    assert " ".join(q.prompt for q in data.questions) not in held
    assert set(SHIPPED) == {"gpt-reverse"}


def test_a_data_file_is_refused_with_the_line_at_fault(tmp_path):
    bad = tmp_path / "qa.jsonl"
    cases = {
        '{"prompt": "2+2", "answer": "4"}\n{"prompt": "3+3"\n': "qa.jsonl line 2: not JSON",
        '{"prompt": "2+2"}\n': "line 1: give one of 'answer'",
        '{"prompt": "2+2", "answer": "4", "answers": ["4"]}\n': "line 1: give one of 'answer'",
        '{"prompt": "", "answer": "4"}\n': "line 1: 'prompt' must be a non-empty string",
        '{"prompt": "2+2", "answers": []}\n': "line 1: 'answer' must be a non-empty string",
        '\n\n{"prompt": "2+2", "answer": "4", "max_tokens": 0}\n': "line 3: 'max_tokens' must be an integer",
        "[1, 2]\n": "line 1: not a JSON object",
        "\n": "holds no questions",
    }
    for text, message in cases.items():
        bad.write_text(text)
        with pytest.raises(AccuracyDataError, match=message):
            load(str(bad))
    with pytest.raises(AccuracyDataError, match="a shipped set: gpt-reverse"):
        load(str(tmp_path / "missing.jsonl"))
    os.mkfifo(tmp_path / "fifo")  # a reader would block: refused before a byte is read
    with pytest.raises(AccuracyDataError, match="not a regular file"):
        load(str(tmp_path / "fifo"))
    bad.write_text('{"prompt": "2+2", "answers": ["4", "four"], "max_tokens": 3, "id": 7}\n')
    (q,) = load(str(bad)).questions
    assert q.answers == ("4", "four") and q.max_tokens == 3


def test_a_user_jsonl_with_a_malformed_line_is_refused_in_one_line_with_exit_2(tmp_path, cli):
    data = tmp_path / "qa.jsonl"
    data.write_text('{"prompt": "2+2=", "answer": "4"}\n{"prompt": "3+3=", "answer": 6}\n')
    over = {"url": "http://127.0.0.1:1", "scenarios": "", "concurrencies": "1", "accuracy_data": str(data)}
    proc = cli("run", "inference.serving", *(f"-p{k}={v}" for k, v in over.items()))
    assert proc.returncode == 2, proc.stderr
    (line,) = proc.stderr.strip().splitlines()
    assert "qa.jsonl line 2: 'answer' must be a non-empty string" in line
    with pytest.raises(params_mod.ParamError, match="accuracy_data is scored at each sweep step"):
        params_mod.resolve(Serving, {**over, "concurrencies": ""}, quick=False)
    with pytest.raises(params_mod.ParamError, match="accuracy_min must lie from 0 to 1"):
        params_mod.resolve(Serving, {**over, "accuracy_data": "gpt-reverse", "accuracy_min": "1.5"}, quick=False)


# -- a trained and an untrained model, served by transformers serve -------------------------------
def _perfsuite(env: dict, records: Path, *args: str) -> tuple[subprocess.CompletedProcess, dict]:
    """One ``perfsuite run`` and the one record it wrote."""
    before = set(records.glob("*.json")) if records.exists() else set()
    proc = run_cli(env, "run", *args, "--device", "cpu", "--seed", "0", timeout=600)
    written = set(records.glob("*.json")) - before
    assert len(written) == 1, proc.stdout + proc.stderr
    return proc, json.loads(written.pop().read_text())


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    """The quick GPT trained to 0.99 answer-token accuracy and saved by ``training.gpt`` itself,
    and the same model untrained (built from the workload's config, saved the same way)."""
    pytest.importorskip("transformers")
    from perfsuite.workloads.training.export import save_served
    from perfsuite.workloads.training.gpt import GPTTraining

    tmp = tmp_path_factory.mktemp("accuracy")
    env = {**cli_env(tmp), "HF_HUB_OFFLINE": "1"}
    trained = tmp / "trained"
    t0 = time.monotonic()
    proc, record = _perfsuite(
        env, tmp / "records", "training.gpt", "--quick", "-p", f"save_to={trained}", "-p", "target_accuracy=0.99"
    )
    wall = time.monotonic() - t0
    assert record["status"] == "success", proc.stdout + proc.stderr
    ttt = next(m["value"] for m in record["metrics"] if m["name"] == "time_to_target_s")
    print(f"training.gpt --quick to 0.99, saved: {wall:.1f} s in all, time to target {ttt:.1f} s")
    assert record["details"]["training"]["saved_to"] == str(trained)
    untrained = tmp / "untrained"
    workload = GPTTraining(params_mod.resolve(GPTTraining, {}, quick=True))
    save_served(workload.build_model(), untrained, workload._task(), {"eval_accuracy": None, "reached_target": False})
    return tmp, env, trained, untrained


def _serve(tmp: Path, env: dict, model: Path, **over: str) -> tuple[subprocess.CompletedProcess, dict]:
    command = (
        "env OMP_NUM_THREADS=1 {python} -m transformers.cli.transformers serve "
        f"{model} --port {{port}} --device cpu --host 127.0.0.1"
    )
    params = {
        "build_model": "false",
        "server_command": command,
        "scenarios": "",
        "measure_client": "false",
        "input_tokens": "8",
        "input_stddev": "0",
        "accuracy_data": "gpt-reverse",
        "accuracy_min": "0.9",
        "accuracy_requests": "32",
        **over,
    }
    args = [a for k, v in params.items() for a in ("-p", f"{k}={v}")]
    return _perfsuite(env, tmp / "records", "inference.serving", "--quick", *args)


def test_a_served_trained_model_scores_above_the_minimum_and_its_steps_rank(models):
    pytest.importorskip("fastapi")
    tmp, env, trained, _ = models
    stamp = json.loads((trained / "perfsuite-trained.json").read_text())
    assert stamp["language"] == {"task": "reverse", "vocab": 16, "context": 16, "data_seed": 0, "symbols": 0}
    assert stamp["reached_target"] and stamp["eval_accuracy"] >= 0.99
    proc, record = _serve(tmp, env, trained, concurrencies="1,2")
    assert record["status"] == "success", proc.stdout + proc.stderr
    serving = record["details"]["serving"]
    assert serving["accuracy"]["source"] == "gpt-reverse" and serving["accuracy"]["metric"] == "exact"
    steps = serving["concurrency_sweep"]["steps"]
    for step in steps:
        acc = step["accuracy"]
        print(f"trained, {step['case']}: accuracy {acc['score']:.3f} ({acc['correct']} of {acc['scored']})")
        assert acc["scored"] == 32 and acc["failed"] == 0 and acc["score"] >= 0.9 and acc["passed"]
        assert step["valid"] and step["within_slo"] and step["completed"] == 8  # the timed requests alone
        answers = Path(serving["artifact_dir"]) / acc["outputs_file"]
        assert sum(json.loads(line)["correct"] for line in answers.read_text().splitlines()) == acc["correct"]
    assert serving["concurrency_sweep"]["best_concurrency"] in (1, 2)
    checks = {c["label"]: c for c in record["verification"]["checks"]}
    assert checks["concurrency sweep: answers scored at least accuracy_min"]["passed"]
    scores = {m["case"]: m["value"] for m in record["metrics"] if m["name"] == "accuracy"}
    assert set(scores) == {"concurrency 1", "concurrency 2"} and min(scores.values()) >= 0.9
    assert any(m["case"] == "concurrency sweep" and m["name"] == "goodput_at_slo_rps" for m in record["metrics"])


def test_a_served_untrained_model_scores_low_and_its_step_is_flagged_and_never_ranked(models):
    pytest.importorskip("fastapi")
    tmp, env, _, untrained = models
    proc, record = _serve(tmp, env, untrained, concurrencies="", rates="4")
    assert proc.returncode != 0 and record["status"] == "invalid", proc.stdout + proc.stderr
    (step,) = record["details"]["serving"]["rate_sweep"]["steps"]
    acc = step["accuracy"]
    print(f"untrained, {step['case']}: accuracy {acc['score']:.3f} ({acc['correct']} of {acc['scored']})")
    assert acc["scored"] == 32 and acc["failed"] == 0 and acc["score"] < 0.1 and not acc["passed"]
    assert acc["load"] == "4 requests/s open loop"
    assert not step["valid"] and not step["within_slo"]
    assert any("below accuracy_min 0.9" in reason for reason in step["invalid_reasons"])
    assert step["completed"] == 8 and step["errors"]["count"] == 0  # fast and answering: wrong, not failing
    assert record["details"]["serving"]["rate_sweep"]["peak_rps"] is None
    assert not any(m["name"] == "goodput_at_slo_rps" for m in record["metrics"])  # no headline to rank
    checks = {c["label"]: c for c in record["verification"]["checks"]}
    assert not checks["rate sweep: answers scored at least accuracy_min"]["passed"]


# -- a user's JSONL against the null server (its answer to max_tokens N is " t0 t1 .. tN-1") -------
@pytest.fixture(scope="module")
def null():
    from perfsuite.workloads.inference.serving.capacity import null_server

    with null_server() as server:
        yield server


def test_a_user_jsonl_is_scored_at_each_step_by_the_metric_it_names(null, tmp_path):
    from perfsuite.testing import run_in_process

    data = tmp_path / "qa.jsonl"
    data.write_text(
        '{"prompt": "count to three", "answer": "T0, t1, t2.", "max_tokens": 3}\n'
        '{"prompt": "the first", "answers": ["zero", "t0"], "max_tokens": 5}\n'
        '{"prompt": "the tenth", "answer": "t9", "max_tokens": 2}\n'
    )
    base = dict(url=null.url, model="null", scenarios="", warmup_requests=1, measure_client=False)
    over = dict(rates="40", sweep_requests=10, accuracy_data=str(data), accuracy_requests=6, accuracy_min=0.6)
    ctx = run_in_process(Serving, {**base, **over, "accuracy_metric": "contains"}, quick=False)
    (step,) = ctx.details["serving"]["rate_sweep"]["steps"]
    acc = step["accuracy"]
    assert (acc["metric"], acc["scored"], acc["correct"], acc["failed"]) == ("contains", 6, 4, 0)  # cycled twice
    assert acc["passed"] and step["valid"] and step["completed"] == 10  # the timed requests alone
    answers = [json.loads(line) for line in (ctx.artifact_dir() / acc["outputs_file"]).read_text().splitlines()]
    assert [(a["line"], a["output"].strip(), a["correct"]) for a in answers[:3]] == [
        (1, "t0 t1 t2", True),
        (2, "t0 t1 t2 t3 t4", True),  # contains a reference: right
        (3, "t0 t1", False),
    ]
    ctx = run_in_process(Serving, {**base, **over, "accuracy_metric": "exact"}, quick=False)
    (step,) = ctx.details["serving"]["rate_sweep"]["steps"]
    assert (step["accuracy"]["correct"], step["accuracy"]["passed"]) == (2, False)  # 2 of 6 < 0.6
    assert not step["valid"] and "below accuracy_min 0.6" in step["invalid_reasons"][-1]
    assert ctx.details["serving"]["rate_sweep"]["peak_rps"] is None
    assert any(c.label == "rate sweep: answers scored at least accuracy_min" and not c.passed for c in ctx.checks)


@pytest.mark.parametrize("arch", ["gpt2", "llama"])
def test_a_saved_model_loads_as_transformers_reads_it_and_takes_prompts_past_its_context(arch, tmp_path):
    transformers = pytest.importorskip("transformers")
    import torch

    from perfsuite.workloads.training.export import save_served
    from perfsuite.workloads.training.gpt import GPTTraining

    workload = GPTTraining(params_mod.resolve(GPTTraining, {"arch": arch}, quick=True))
    built = workload.build_model()
    before = {k: v.clone() for k, v in built.state_dict().items()}
    save_served(built, tmp_path, workload._task(), {"eval_accuracy": None})
    assert all(torch.equal(v, built.state_dict()[k]) for k, v in before.items())  # the run's model untouched
    tok = transformers.AutoTokenizer.from_pretrained(str(tmp_path))
    model = transformers.AutoModelForCausalLM.from_pretrained(str(tmp_path))
    assert tok("t3 t15 t1 =")["input_ids"] == [3, 15, 1, 0]
    assert tok("bada t2")["input_ids"] == [16, 2]  # a word outside the language: '?', an ordinary token
    assert tok.decode([3, 15, 1]) == "t3 t15 t1" and tok.decode([3, 15, 16]) == "t3 t15?"  # words, spaced
    ids = torch.tensor([[1 + k % 15 for k in range(100)]])  # 100 tokens: past the trained context of 16
    out = model.generate(ids, max_new_tokens=3, do_sample=False)
    assert out.shape == (1, 103)
    assert model.config.vocab_size == 17 and model.generation_config.eos_token_id is None
