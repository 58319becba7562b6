"""A deterministic synthetic language for ``training.gpt``: algorithmic sequences whose
second half is a function of the first.

A sequence is ``x_1 .. x_n SEP y_1 .. y_n`` over a vocabulary of ``vocab`` tokens (token
0 is SEP), with ``x`` drawn uniformly from the first ``symbols`` tokens after SEP (every one
of them where ``symbols`` is 0) and ``y`` = ``x`` copied, reversed or sorted (``task``). The
vocabulary sizes the model (its embedding and output layer: GPT-2's 50,304 tokens are a
third of GPT-2 124M's parameters); the symbols set how hard the language is, as a real
corpus uses a few thousand of its tokenizer's ids most of the time.

The first half is noise the model cannot predict; the second half is fully determined by
it, so a model that has learnt the task predicts every answer token: the loss is taken on
the answer tokens only, and the quality figure is the share of answer tokens predicted
correctly (teacher-forced), against a target such as 0.9.
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


def drawn_symbols(vocab: int, symbols: int) -> int:
    """How many tokens after SEP the questions are drawn from: ``symbols``, or every one where
    it is 0. ValueError for a count outside 2 .. vocab - 1."""
    if symbols and not 2 <= symbols <= vocab - 1:
        raise ValueError(f"symbols must be 0 or from 2 to vocab - 1 ({vocab - 1}), not {symbols}")
    return symbols or vocab - 1


@dataclass(frozen=True)
class SequenceTask:
    task: str
    vocab: int
    context: int  # tokens the model sees: 2n (x, SEP, y minus its last token as input)
    data_seed: int
    symbols: int = 0  # distinct tokens x is drawn from (0: every token but SEP)

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
        drawn = drawn_symbols(self.vocab, self.symbols)
        g = torch.Generator().manual_seed(self.data_seed * 1000 + stream)
        h = self.half
        x = torch.randint(1, drawn + 1, (n, h), generator=g)
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
