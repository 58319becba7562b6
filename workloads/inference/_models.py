"""Transformer models built from configs (never downloaded) and their batched backends:
an encoder classifier and a greedy decoder, each over deterministic synthetic samples.

Samples are token ids drawn from a generator seeded by ``model_seed`` with lengths that
vary between a minimum and a maximum, so that batching (padding, attention masks) is
exercised as with real requests. Weights come from the same seed, so that every run of
the same parameters measures the same model. torch and transformers are imported inside
the functions: ``perfsuite list`` must not import them.
"""

from __future__ import annotations

import copy
import os
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from perfsuite.workloads.inference._driver import Score
from perfsuite.workloads.inference._sut import Output

TORCH_DTYPES = {"fp32": "float32", "bf16": "bfloat16", "fp16": "float16"}


def offline_hub() -> None:
    """No download, ever: the models are built from configs."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


def synthetic_sequences(n: int, min_len: int, max_len: int, vocab: int, seed: int) -> list[np.ndarray]:
    """n sequences of token ids in [1, vocab) with lengths in [min_len, max_len]; 0 is padding."""
    rng = np.random.default_rng(seed)
    lengths = rng.integers(min_len, max_len + 1, size=n)
    return [rng.integers(1, vocab, size=int(k), dtype=np.int64) for k in lengths]


def float32_and_measured(build: Callable[[], Any], dtype: str, device: Any, seed: int) -> tuple[Any, Any]:
    """The model in float32 (the reference) and a copy in ``dtype`` (the measured one), same weights."""
    import torch

    torch.manual_seed(seed)
    ref = build().eval().to(device=device, dtype=torch.float32)
    if dtype == "fp32":
        return ref, ref
    measured = copy.deepcopy(ref).to(dtype=getattr(torch, TORCH_DTYPES[dtype]))
    return ref, measured


def pad_left(seqs: Sequence[np.ndarray], length: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Left-padded ids and attention mask (decoders generate from the right end)."""
    width = length or max(len(s) for s in seqs)
    ids = np.zeros((len(seqs), width), dtype=np.int64)
    mask = np.zeros((len(seqs), width), dtype=np.int64)
    for r, s in enumerate(seqs):
        ids[r, width - len(s) :] = s
        mask[r, width - len(s) :] = 1
    return ids, mask


def pad_right(seqs: Sequence[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    width = max(len(s) for s in seqs)
    ids = np.zeros((len(seqs), width), dtype=np.int64)
    mask = np.zeros((len(seqs), width), dtype=np.int64)
    for r, s in enumerate(seqs):
        ids[r, : len(s)] = s
        mask[r, : len(s)] = 1
    return ids, mask


class ClassifierBackend:
    """A BERT-style encoder with a classification head: one forward per batch, argmax class."""

    def __init__(self, model: Any, samples: list[np.ndarray], device: Any, sync: Callable[[], None]) -> None:
        self.model, self.samples, self.device, self.sync = model, samples, device, sync

    def run_batch(self, indices: Sequence[int], first_token: Any) -> list[Output]:
        import torch

        ids, mask = pad_right([self.samples[i] for i in indices])
        with torch.inference_mode():
            logits = self.model(
                input_ids=torch.from_numpy(ids).to(self.device), attention_mask=torch.from_numpy(mask).to(self.device)
            ).logits
            classes = logits.argmax(dim=-1).to(torch.int32).cpu().numpy()
        return [Output(data=int(c).to_bytes(4, "little", signed=True), n_tokens=0, value=int(c)) for c in classes]


def decode_class(data: bytes) -> int:
    return int.from_bytes(data, "little", signed=True)


def score_agreement(outputs: dict[int, int], reference: dict[int, int]) -> Score:
    """Classification agreement: the share of samples given the reference's class; each
    sample is one element compared."""
    same = sum(1 for i, c in outputs.items() if reference.get(i) == c)
    n = len(reference)
    return Score(same / n, f"{same} of {n} samples classified as the float32 reference does", n, n - same)


class _FirstToken:
    """A transformers streamer that reports each sample's first generated token once."""

    def __init__(self, send: Callable[[Sequence[bytes]], None], rows: int) -> None:
        self.send, self.rows, self.calls = send, rows, 0

    def put(self, value: Any) -> None:
        self.calls += 1
        if self.calls == 2:  # the first call carries the prompt; the second, the first new tokens
            tokens = value.reshape(-1).to("cpu").numpy().astype(np.int32)
            self.send([int(t).to_bytes(4, "little", signed=True) for t in tokens[: self.rows]])

    def end(self) -> None:
        """Nothing to flush."""


class GeneratorBackend:
    """A decoder generating exactly ``new_tokens`` tokens greedily per prompt (end-of-sequence
    suppressed), left-padded batches, with a dynamic or a static KV cache.

    With the static cache each batch is padded to ``max_batch`` rows and every prompt to the
    longest prompt length, so that decoding sees one fixed shape: on CUDA, transformers
    compiles its decoding step for a static cache (torch.compile, mode reduce-overhead: CUDA
    graphs), and one shape keeps that to one compilation.
    """

    def __init__(
        self,
        model: Any,
        samples: list[np.ndarray],
        new_tokens: int,
        cache: str,
        max_prompt: int,
        max_batch: int,
        device: Any,
    ) -> None:
        self.model, self.samples, self.new_tokens, self.cache = model, samples, new_tokens, cache
        self.max_prompt, self.max_batch, self.device = max_prompt, max_batch, device

    def buckets(self) -> list[int]:
        """The row counts a static-cache batch is padded to: always ``max_batch``. One shape
        means one compilation and one cache: transformers keeps its static cache between
        calls only while the batch size stays the same, and a new cache (new addresses) makes
        the compiled CUDA graphs record again. Decoding a small model is bound by reading the
        weights, so the padding rows cost little on a GPU."""
        return [self.max_batch]

    def warm_up(self) -> None:
        """A batch of every shape the run will use (static cache: compiles them before anything is timed)."""
        for rows in self.buckets():
            self.run_batch([i % len(self.samples) for i in range(rows)], None)

    def run_batch(self, indices: Sequence[int], first_token: Callable[[Sequence[bytes]], None] | None) -> list[Output]:
        import torch

        seqs = [self.samples[i] for i in indices]
        kwargs: dict[str, Any] = {}
        if self.cache == "static":
            rows = max(self.max_batch, len(seqs))
            seqs = seqs + [seqs[0]] * (rows - len(seqs))
            ids, mask = pad_left(seqs, self.max_prompt)
            kwargs["cache_implementation"] = "static"
        else:
            ids, mask = pad_left(seqs)
        streamer = _FirstToken(first_token, len(indices)) if first_token is not None else None
        with torch.inference_mode():
            out = self.model.generate(
                input_ids=torch.from_numpy(ids).to(self.device),
                attention_mask=torch.from_numpy(mask).to(self.device),
                max_new_tokens=self.new_tokens,
                min_new_tokens=self.new_tokens,
                do_sample=False,
                num_beams=1,
                pad_token_id=0,
                streamer=streamer,
                **kwargs,
            )
        new = out[: len(indices), ids.shape[1] :].to(torch.int32).cpu().numpy()
        return [Output(data=row.tobytes(), n_tokens=int(row.size), value=row.copy()) for row in new]


def decode_tokens(data: bytes) -> np.ndarray:
    return np.frombuffer(data, dtype=np.int32).copy()


def score_token_match(outputs: dict[int, np.ndarray], reference: dict[int, np.ndarray]) -> Score:
    """Exact token match rate: generated positions equal to the float32 reference's, over all
    samples; each token is one element compared. A logged sequence of another length than the
    reference's (every sample generates exactly ``new_tokens``) is malformed: all its tokens
    count as differing, and it fails the check whatever the rate."""
    same = total = whole = 0
    malformed = []
    for i, ref in reference.items():
        got = outputs.get(i)
        total += ref.size
        if got is not None and got.shape == ref.shape:
            eq = int((got == ref).sum())
            same += eq
            whole += int(eq == ref.size)
        elif got is not None:
            malformed.append(i)
    detail = (
        f"{same} of {total} generated tokens equal the float32 reference's; "
        f"{whole} of {len(reference)} sequences equal in full"
    )
    return Score(same / total, detail, total, total - same, tuple(malformed))
