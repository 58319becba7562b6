"""Accuracy beside speed for ``inference.serving``: questions with reference answers, sent to the
endpoint at every sweep step and scored on its answers, so that a step of an engine that
answers wrong is flagged and never ranked, however fast it is.

- **The data** (``accuracy_data``): a JSONL file, one question a line, ``{"prompt": ...,
  "answer": ...}`` or ``{"prompt": ..., "answers": [...]}`` (any of them counts), with an
  optional ``max_tokens`` (else ``accuracy_max_tokens``); other keys are kept out of the way.
  A file is read within bounds (a regular file of at most ``MAX_DATA_BYTES``, at most
  ``MAX_QUESTIONS`` lines) and a line that breaks a rule is refused in one line naming its
  number, before a server starts. Or a shipped set, named: ``gpt-reverse`` (``data/``), 512
  questions of ``training.gpt``'s synthetic language (reverse the first half, vocabulary 16,
  context 16, data seed 0: its quick preset's language), written by ``training.export`` from
  a stream no training or evaluation split draws from. A model that ``perfsuite run
  training.gpt --quick -p save_to=DIR`` trained and saved scores near 1 on it when served;
  an untrained one scores near 0.
- **The metric** (``accuracy_metric``): ``exact``, the answer equals a reference after
  normalisation, or ``contains``, a reference appears in the answer as whole words after
  normalisation. Normalisation: Unicode NFKC, lower case, punctuation removed, runs of white
  space one space, trimmed (SQuAD's, without its removal of English articles).
- **When**: a scored pass of its own after each step's timed requests, at the step's load (the
  same concurrency in flight for a closed-loop or multi-turn step, the same rate and
  burstiness for an open-loop one, one at a time for a trace replay), never mixed into the
  timed traffic: the step's latency and throughput figures stay those of the traffic shape it
  states, and its accuracy is that of the engine under the same load (a batching or preemption
  bug that only shows under load shows here). Greedy decoding (temperature 0), ``accuracy_requests``
  questions a pass (100 by default: the file's first ones, cycled where more are asked; every
  line for 0), so that a pass at a slow rate stays short: 100 questions at 1 request/s add 100 s
  to the step.
- **The verdict**: a request that failed counts as a wrong answer (an engine is not rewarded
  for an error by being skipped). A step whose score is below ``accuracy_min`` is INVALID with
  the reason (so never a sweep's best step or peak), and the sweep's check "answers scored at
  least accuracy_min" fails, so the run is never ranked. Each step's answers are kept beside
  its requests (``sweeps/<step>.accuracy.jsonl``).
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from perfsuite import Check
from perfsuite.workloads.inference.serving.capped_read import read_capped

METRICS = ("exact", "contains")
SHIPPED = {"gpt-reverse": "gpt_reverse.jsonl"}  # name -> file under data/
DATA_FOLDER = Path(__file__).resolve().parent / "data"
MAX_DATA_BYTES = 64 * 1024 * 1024
MAX_QUESTIONS = 100_000
MAX_ANSWER_TOKENS = 100_000
_SPACES = re.compile(r"\s+")


class AccuracyDataError(ValueError):
    """A data set that cannot be scored (one line naming the file and, where one is at fault, the line)."""


@dataclass(frozen=True)
class Question:
    line: int  # its line in the file (1-based)
    prompt: str
    answers: tuple[str, ...]
    max_tokens: int | None  # None: accuracy_max_tokens


@dataclass(frozen=True)
class AccuracyData:
    source: str  # what the user gave: a shipped name or a path
    path: Path
    shipped: bool
    sha256: str
    questions: tuple[Question, ...]

    def describe(self) -> dict:
        return {
            "source": self.source,
            "file": self.path.name,
            "shipped": self.shipped,
            "sha256": self.sha256,
            "questions": len(self.questions),
        }


def resolve(source: str) -> tuple[Path, bool]:
    """The file ``source`` names (a shipped set's name, else a path) and whether it is shipped."""
    if source in SHIPPED:
        return DATA_FOLDER / SHIPPED[source], True
    return Path(source), False


def load(source: str) -> AccuracyData:
    """Read and check a data set; an :class:`AccuracyDataError` names the file and the line at fault."""
    path, shipped = resolve(source)
    known = ", ".join(SHIPPED)
    data = read_capped(
        path, MAX_DATA_BYTES, "accuracy_data", AccuracyDataError, f" (a JSONL file, or a shipped set: {known})"
    )
    questions: list[Question] = []
    for number, raw in enumerate(data.split(b"\n"), start=1):
        if not raw.strip():
            continue
        if len(questions) >= MAX_QUESTIONS:
            raise AccuracyDataError(f"accuracy_data {path.name} line {number}: more than {MAX_QUESTIONS:,} questions")
        questions.append(_question(raw, number, f"accuracy_data {path.name} line {number}"))
    if not questions:
        raise AccuracyDataError(f"accuracy_data {path} holds no questions")
    return AccuracyData(source, path, shipped, hashlib.sha256(data).hexdigest(), tuple(questions))


def _question(raw: bytes, number: int, where: str) -> Question:
    try:
        obj = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise AccuracyDataError(f"{where}: not JSON ({exc})"[:300]) from None
    if not isinstance(obj, dict):
        raise AccuracyDataError(f"{where}: not a JSON object")
    prompt = obj.get("prompt")
    if not isinstance(prompt, str) or not prompt.strip():
        raise AccuracyDataError(f"{where}: 'prompt' must be a non-empty string")
    if ("answer" in obj) == ("answers" in obj):
        raise AccuracyDataError(f"{where}: give one of 'answer' (a string) and 'answers' (a list of strings)")
    answers = [obj["answer"]] if "answer" in obj else obj["answers"]
    if not isinstance(answers, list) or not answers or not all(isinstance(a, str) and a.strip() for a in answers):
        raise AccuracyDataError(f"{where}: 'answer' must be a non-empty string, 'answers' a list of them")
    max_tokens = obj.get("max_tokens")
    if max_tokens is not None and (
        not isinstance(max_tokens, int) or isinstance(max_tokens, bool) or not 1 <= max_tokens <= MAX_ANSWER_TOKENS
    ):
        raise AccuracyDataError(f"{where}: 'max_tokens' must be an integer from 1 to {MAX_ANSWER_TOKENS:,}")
    return Question(number, prompt, tuple(answers), max_tokens)


def normalise(text: str) -> str:
    """NFKC, lower case, punctuation removed, white space collapsed and trimmed."""
    text = unicodedata.normalize("NFKC", text).lower()
    text = "".join(" " if unicodedata.category(c).startswith("P") else c for c in text)
    return _SPACES.sub(" ", text).strip()


def is_correct(output: str, answers: tuple[str, ...], metric: str) -> bool:
    """Whether ``output`` answers right under ``metric`` (``exact`` or ``contains``, as the module says)."""
    got = normalise(output)
    refs = [normalise(a) for a in answers]
    if metric == "exact":
        return got in refs
    if metric == "contains":
        return any(f" {ref} " in f" {got} " for ref in refs)
    raise ValueError(f"accuracy_metric must be one of {', '.join(METRICS)}, not {metric!r}")


@dataclass(frozen=True)
class AccuracyRules:
    metric: str  # exact or contains
    minimum: float  # least score of a step that may rank (0: scored, none flagged)
    requests: int  # questions a pass (0: every one)
    max_tokens: int  # max_tokens of a question that gives none

    def describe(self) -> dict:
        return {
            "metric": self.metric,
            "normalisation": "NFKC, lower case, punctuation removed, white space collapsed and trimmed",
            "minimum": self.minimum,
            "requests_per_step": self.requests or "every question",
            "default_max_tokens": self.max_tokens,
            "when": "a scored pass of its own after each step's timed requests, at the step's load; "
            "not in the step's latency or throughput figures",
            "failed_requests": "counted as wrong answers",
            "decoding": "greedy (temperature 0)",
        }


@dataclass
class ScoredPass:
    """What a step's scored pass needs: the data, the rules and how the run sends requests."""

    data: AccuracyData
    rules: AccuracyRules
    endpoint: Any  # serving.client.Endpoint
    timeouts: Any  # serving.client.Timeouts
    tokenizer: str | None
    burstiness: float  # the gamma shape of a rate step's arrivals
    seed: int

    def questions(self) -> list[Question]:
        qs = self.data.questions
        n = self.rules.requests or len(qs)
        return [qs[k % len(qs)] for k in range(n)]

    def job(self, mode: str, load: float, questions: list[Question]) -> Any:
        """The pass at a step's load (module docstring): request k asks question k."""
        from perfsuite.workloads.inference.serving.load import Job, arrival_offsets_s

        bodies = {
            k: self.endpoint.body(q.prompt, q.max_tokens or self.rules.max_tokens) for k, q in enumerate(questions)
        }
        order = list(range(len(questions)))
        if mode == "rate":
            offsets = arrival_offsets_s(len(order), load, self.burstiness, self.seed)
            return Job(self.endpoint, self.timeouts, bodies, order, offsets, 1, self.tokenizer)
        concurrency = max(1, int(load)) if mode == "concurrency" else 1
        return Job(self.endpoint, self.timeouts, bodies, order, None, concurrency, self.tokenizer)

    def score_step(self, row: dict, send: Callable[[Any], list], outputs_file: Path, relative: str) -> dict:
        """Send the pass at ``row``'s load with ``send`` (a job -> its results), score it, write
        its answers to ``outputs_file`` and judge ``row`` (:func:`judge`); returns the accuracy."""
        questions = self.questions()
        results = send(self.job(row["mode"], row["load"], questions))
        accuracy = score(results, questions, self.rules, outputs_file)
        accuracy["outputs_file"] = relative
        accuracy["load"] = {
            "rate": f"{row['load']:g} requests/s open loop",
            "concurrency": f"{row['load']:g} requests in flight",
        }.get(row["mode"], "one request at a time")
        judge(row, accuracy)
        return accuracy


def score(results: list, questions: list[Question], rules: AccuracyRules, outputs_file: Path) -> dict:
    """The pass's accuracy (a failed request is a wrong answer); every answer written to
    ``outputs_file`` (one JSON object a line, in question order)."""
    by_index = {r.index: r for r in results}
    correct = failed = 0
    lines = []
    for k, q in enumerate(questions):
        r = by_index.get(k)
        ok = r is not None and r.ok
        right = r is not None and r.ok and is_correct(r.text, q.answers, rules.metric)
        correct += right
        failed += not ok
        lines.append(
            orjson.dumps(
                {
                    "line": q.line,
                    "output": r.text if r is not None else None,
                    "answers": list(q.answers),
                    "correct": right,
                    "reason": None if ok else (r.reason if r is not None else "not sent"),
                }
            )
        )
    outputs_file.write_bytes(b"\n".join(lines) + b"\n")
    n = len(questions)
    value = correct / n if n else 0.0
    return {
        "metric": rules.metric,
        "scored": n,
        "correct": correct,
        "failed": failed,
        "score": value,
        "minimum": rules.minimum,
        "passed": value >= rules.minimum,
    }


def judge(row: dict, accuracy: dict) -> None:
    """Put ``accuracy`` in the step's ``row``; below the minimum the step is INVALID with the reason."""
    row["accuracy"] = accuracy
    if accuracy["passed"]:
        return
    row["valid"] = False
    row["within_slo"] = False
    row["invalid_reasons"].append(
        f"accuracy {accuracy['score']:.3f} ({accuracy['metric']}: {accuracy['correct']} of {accuracy['scored']} "
        f"right, {accuracy['failed']} failed) is below accuracy_min {accuracy['minimum']:g}"
    )


def check(case: str, rows: list[dict]) -> Check | None:
    """The sweep's accuracy check: every scored step at least its minimum (None: no step scored)."""
    scored = [r for r in rows if r.get("accuracy")]
    if not scored:
        return None
    low = [r for r in scored if not r["accuracy"]["passed"]]
    first = scored[0]["accuracy"]
    # the score is a figure to reach, not an error to stay under: it is in the detail, not error/tolerance
    steps = "; ".join(
        f"{r['case']}: {r['accuracy']['score']:.3f} ({r['accuracy']['correct']} of {r['accuracy']['scored']})"
        for r in scored
    )
    return Check(
        label=f"{case}: answers scored at least accuracy_min",
        passed=not low,
        method=f"{first['metric']} match against reference answers, a scored pass at each step's load; "
        "a failed request counts as wrong",
        detail=f"{len(low)} of {len(scored)} steps below accuracy_min {first['minimum']:g}: {steps}",
    )
