"""A deterministic synthetic language for ``training.gpt``: algorithmic sequences whose
second half is a function of the first.

A sequence is ``x_1 .. x_n SEP y_1 .. y_n`` over a vocabulary of ``vocab`` tokens (token
0 is SEP, the others are symbols), with ``x`` drawn uniformly and ``y`` = ``x`` copied,
reversed or sorted (``task``). The first half is noise the model cannot predict; the
second half is fully determined by it, so a model that has learnt the task predicts every
answer token: the loss is taken on the answer tokens only, and the quality figure is the
share of answer tokens predicted correctly (teacher-forced), against a target such as 0.9.
A copy needs an induction head, a reversal a position-to-position map, a sort counting.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

SEP = 0
TASKS = ("copy", "reverse", "sort")
IGNORE = -100  # the label torch's cross entropy skips
TRAIN_STREAM = 0
EVAL_STREAM = 1


@dataclass(frozen=True)
class SequenceTask:
    task: str
    vocab: int
    context: int  # tokens the model sees: 2n (x, SEP, y minus its last token as input)
    data_seed: int

    @property
    def half(self) -> int:
        return self.context // 2

    def split(self, n: int, stream: int) -> tuple[Any, Any]:
        """(inputs, labels): int64 N x context each; labels are IGNORE outside the answer."""
        import torch

        if self.task not in TASKS:
            raise ValueError(f"task {self.task!r} is not one of {', '.join(TASKS)}")
        if self.vocab < 3:
            raise ValueError("vocab must be at least 3 (SEP and two symbols)")
        g = torch.Generator().manual_seed(self.data_seed * 1000 + stream)
        h = self.half
        x = torch.randint(1, self.vocab, (n, h), generator=g)
        if self.task == "copy":
            y = x
        elif self.task == "reverse":
            y = x.flip(1)
        else:
            y = x.sort(dim=1).values
        seq = torch.cat([x, torch.full((n, 1), SEP), y], dim=1)  # n x (2h + 1)
        inputs, labels = seq[:, :-1].clone(), seq[:, 1:].clone()
        labels[:, :h] = IGNORE  # predicting x_2..x_n and SEP is guessing, not the task
        return inputs.contiguous(), labels.contiguous()
