"""The training cross-check's bare loop feeds its GPT the tokens the workload's language is drawn
from (``--symbols``, passed by ``training.gpt``), so that both sides' GPUs switch the same data:
under a power cap the clock, and so the one-GPU step, follows it."""

from __future__ import annotations

import sys

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from perfsuite.crosscheck import training_reference  # noqa: E402
from perfsuite.engine import params  # noqa: E402
from perfsuite.workloads.training._language import IGNORE  # noqa: E402
from perfsuite.workloads.training.gpt import GPTTraining  # noqa: E402

TINY = {"layers": 1, "width": 16, "heads": 2, "context": 64, "vocab": 512}


def _bare_split(monkeypatch: pytest.MonkeyPatch, given: dict) -> tuple:
    workload = GPTTraining(params.resolve(GPTTraining, {**TINY, **given}, quick=False))
    argv = ["training_reference.py", *workload.reference_args(), "--device", "cpu", "--batch", "64"]
    monkeypatch.setattr(sys, "argv", argv)
    _model, _outputs, _criterion, (inputs, labels), _layout = training_reference.build_gpt(
        training_reference.parse_args(), torch.device("cpu"), per_rank=64, rank=0
    )
    return workload, inputs, labels


def test_the_bare_loop_draws_the_workloads_symbols(monkeypatch):
    workload, inputs, labels = _bare_split(monkeypatch, {"symbols": 8})
    train_x, _y, _ex, _ey = workload.make_data()
    answers = labels[labels != IGNORE]
    assert set(inputs.unique().tolist()) == set(range(1, 9))  # 256 x 64 draws see every one of the 8
    assert set(answers.unique().tolist()) <= set(range(1, 9))
    assert set(train_x.unique().tolist()) <= {0, *range(1, 9)}  # the workload's: the same symbols and SEP


def test_without_symbols_the_bare_loop_draws_the_whole_vocabulary_but_sep(monkeypatch):
    _workload, inputs, _labels = _bare_split(monkeypatch, {"symbols": 0})
    assert int(inputs.min()) >= 1 and int(inputs.max()) <= TINY["vocab"] - 1
    assert len(inputs.unique()) > 8 * 8  # far beyond a handful of symbols
