"""Deterministic synthetic prompts for ``inference.serving``: no data set to download, the
same prompts for the same seed on every machine, input and output lengths drawn from stated
distributions.

A prompt is words drawn from :data:`WORDS`, a fixed vocabulary of made-up syllable words (one
token each under the word-level tokenizer of the suite's own test model; a subword tokenizer
makes a word one to three tokens, so the server's ``usage.prompt_tokens`` is recorded beside the
word count). Lengths follow ``normal`` (mean and standard deviation, as AIPerf's synthetic
prompts) or ``uniform`` (the same mean and standard deviation: half-width sqrt(3) sigma), rounded
and clamped to at least one token; a standard deviation of 0 gives fixed lengths.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

DISTRIBUTIONS = ("normal", "uniform")
_ONSETS = ("b", "d", "f", "g", "k", "l", "m", "n", "p", "r", "s", "t", "v", "z")
_VOWELS = ("a", "e", "i", "o", "u")
# Every onset-vowel-onset-vowel word ("bada" .. "zuzu"): 4,900 four-letter lowercase ASCII words,
# one token each in a word-level vocabulary.
WORDS: tuple[str, ...] = tuple(a + v + b + w for a in _ONSETS for v in _VOWELS for b in _ONSETS for w in _VOWELS)


@dataclass(frozen=True)
class Lengths:
    """One length distribution (tokens)."""

    mean: int
    stddev: float = 0.0
    distribution: str = "normal"

    def __post_init__(self) -> None:
        if self.mean < 1:
            raise ValueError(f"a mean length must be at least 1 token, not {self.mean}")
        if self.stddev < 0:
            raise ValueError(f"a length's standard deviation must not be negative, not {self.stddev:g}")
        if self.distribution not in DISTRIBUTIONS:
            raise ValueError(f"length distribution {self.distribution!r} is not one of {DISTRIBUTIONS}")

    def draw(self, rng, n: int) -> list[int]:
        if self.stddev == 0:
            return [self.mean] * n
        if self.distribution == "normal":
            values = rng.normal(self.mean, self.stddev, n)
        else:
            half = math.sqrt(3.0) * self.stddev
            values = rng.uniform(self.mean - half, self.mean + half, n)
        return [max(1, round(float(v))) for v in values]

    def describe(self) -> dict:
        return {"mean": self.mean, "stddev": self.stddev, "distribution": self.distribution}


@dataclass(frozen=True)
class Prompt:
    index: int
    text: str
    input_words: int
    output_tokens: int  # max_tokens asked for


def synthetic_prompts(n: int, inputs: Lengths, outputs: Lengths, seed: int | tuple[int, ...]) -> list[Prompt]:
    """``n`` prompts; the i-th is the same for the same arguments everywhere (``seed``: an integer,
    or integers that seed a stream of their own, as numpy's ``default_rng`` takes them). A prompt
    starts with its own index word so that no two share a prefix (a server's prefix cache cannot
    turn one prompt's prefill into another's)."""
    import numpy as np

    rng = np.random.default_rng(list(seed) if isinstance(seed, tuple) else seed)
    in_lens = inputs.draw(rng, n)
    out_lens = outputs.draw(rng, n)
    prompts = []
    for i in range(n):
        picks = rng.integers(0, len(WORDS), in_lens[i])
        picks[0] = i % len(WORDS)
        prompts.append(Prompt(i, " ".join(WORDS[k] for k in picks), in_lens[i], out_lens[i]))
    return prompts


def step_prompts(n: int, inputs: Lengths, outputs: Lengths, seed: int, step: int) -> list[Prompt]:
    """The ``n`` prompts of a run's sweep step ``step`` (its number in the run, from 1): a stream of
    their own, seeded by ``seed`` and ``step``, apart from the run's prompts (``seed`` alone: the
    warm-up's, LoadGen's sample library, the cross-check's) and from every other step's. A step
    that re-sent prompts sent earlier in the run would meet them in an engine's prefix cache (vLLM
    keeps them by default) and measure cache hits, not prefills; the same arguments give the same
    prompts everywhere, so a run repeats exactly."""
    return synthetic_prompts(n, inputs, outputs, (seed, step))


def describe(prompts: list[Prompt], inputs: Lengths, outputs: Lengths, seed: int) -> dict:
    """What the record says of the prompts: the distributions asked for and what was drawn."""
    ins = [p.input_words for p in prompts]
    outs = [p.output_tokens for p in prompts]
    return {
        "count": len(prompts),
        "seed": seed,
        "vocabulary_words": len(WORDS),
        "input_words": {
            **inputs.describe(),
            "drawn_min": min(ins),
            "drawn_max": max(ins),
            "drawn_mean": sum(ins) / len(ins),
        },
        "output_tokens": {
            **outputs.describe(),
            "drawn_min": min(outs),
            "drawn_max": max(outs),
            "drawn_mean": sum(outs) / len(outs),
        },
    }


def words_text(n: int, seed: int, first: int | None = None) -> str:
    """``n`` words drawn from :data:`WORDS` by a generator seeded with ``seed`` (the same text for
    the same arguments everywhere); ``first`` fixes the first word's index (a prompt's own word,
    so that two prompts share no prefix)."""
    import numpy as np

    picks = np.random.default_rng(seed).integers(0, len(WORDS), n)
    if first is not None and n:
        picks[0] = first % len(WORDS)
    return " ".join(WORDS[k] for k in picks)
