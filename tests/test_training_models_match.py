"""The training cross-check's bare loop (``perfsuite/crosscheck/training_reference.py``, run by
its path and importing nothing of the suite) builds its models and losses by its own code: these
tests hold its copies to the workloads'. For each architecture, from the arguments the workload
itself passes to the bare loop, the two models have the same parameters and buffers (names,
shapes, dtypes), compute the same outputs from the same weights and input, and their losses agree
on the same outputs and labels: a step of one is a step of the other, so the ratio of their
throughputs compares the harness and nothing else. (Their initial weights may differ: the
workload re-initialises the layers it rebuilds for convergence; a throughput does not see it.)"""

from __future__ import annotations

import sys

import pytest

torch = pytest.importorskip("torch")

from perfsuite.crosscheck import training_reference  # noqa: E402
from perfsuite.engine import params  # noqa: E402

GPT_CASES = [
    {"arch": "gpt2", "layers": 2, "width": 32, "heads": 2, "context": 16, "vocab": 64},
    {"arch": "llama", "layers": 2, "width": 32, "heads": 2, "context": 16, "vocab": 64},
]
RESNET_CASES = [
    {"depth": 18, "width": 8, "image_size": 16, "classes": 5},  # basic blocks, the small stem
    {"depth": 50, "width": 8, "image_size": 64, "classes": 7},  # bottlenecks, the 7x7 stem
]


def reference_args(monkeypatch: pytest.MonkeyPatch, workload) -> object:
    """The bare loop's arguments as the workload starts it (its own ``reference_args``)."""
    argv = ["training_reference.py", *workload.reference_args(), "--device", "cpu", "--precision", "fp32"]
    monkeypatch.setattr(sys, "argv", argv)
    return training_reference.parse_args()


def same_layout(ours, theirs) -> None:
    a, b = ours.state_dict(), theirs.state_dict()
    assert list(a) == list(b)
    assert [(t.shape, t.dtype) for t in a.values()] == [(t.shape, t.dtype) for t in b.values()]


def same_step(workload, built) -> None:
    """The bare loop's model (``built``: what its ``build_*`` returns) has the workload's layout,
    and from the workload's weights gives the same outputs and loss on the bare loop's batch."""
    theirs, outputs, criterion, (inputs, labels), layout = built
    ours = workload.build_model().eval()
    theirs.eval()
    assert type(theirs) is type(ours)
    same_layout(ours, theirs)
    theirs.load_state_dict(ours.state_dict())
    x, y = layout(inputs[:2]), labels[:2]
    with torch.no_grad():
        got, want = outputs(theirs, x), workload.outputs(ours, x)
        torch.testing.assert_close(got, want)
        torch.testing.assert_close(criterion(got, y), workload.criterion(want, y))


@pytest.mark.parametrize("given", GPT_CASES, ids=lambda g: g["arch"])
def test_the_bare_loops_language_model_is_the_workloads(monkeypatch, given):
    pytest.importorskip("transformers")
    from perfsuite.workloads.training.gpt import GPTTraining

    workload = GPTTraining(params.resolve(GPTTraining, given, quick=False))
    args = reference_args(monkeypatch, workload)
    same_step(workload, training_reference.build_gpt(args, torch.device("cpu"), per_rank=2, rank=0))


@pytest.mark.parametrize("given", RESNET_CASES, ids=lambda g: f"resnet{g['depth']}")
def test_the_bare_loops_resnet_is_the_workloads(monkeypatch, given):
    pytest.importorskip("torchvision")
    from perfsuite.workloads.training.resnet import ResNetTraining

    workload = ResNetTraining(params.resolve(ResNetTraining, given, quick=False))
    args = reference_args(monkeypatch, workload)
    same_step(workload, training_reference.build_resnet(args, torch.device("cpu"), per_rank=2, rank=0))


def test_a_model_that_drifts_from_the_workloads_is_caught(monkeypatch):
    """The comparison fails when the bare loop's copy differs (here: one layer fewer)."""
    pytest.importorskip("transformers")
    from perfsuite.workloads.training.gpt import GPTTraining

    workload = GPTTraining(params.resolve(GPTTraining, GPT_CASES[0], quick=False))
    args = reference_args(monkeypatch, workload)
    args.layers -= 1
    theirs = training_reference.build_gpt(args, torch.device("cpu"), per_rank=2, rank=0)[0]
    with pytest.raises(AssertionError):
        same_layout(workload.build_model(), theirs)
