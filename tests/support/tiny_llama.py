"""The suite's tiny Llama (``serving.model.ModelShape``, the weights ``build_model`` writes) run
forward in numpy, as transformers' ``LlamaForCausalLM`` computes it: RMSNorm, rotary embeddings
(rotate-half, base 10000), causal attention, a SiLU-gated MLP, an untied head. Greedy answers
from it are what every engine serving those weights must answer: the reference answers of an
accuracy set that no engine wrote.

A random model's top two logits can lie close together, where the float rounding of one engine
and another may pick different words; :func:`greedy` says how far apart they were at each step
(``margin``), so that a test keeps only answers no rounding can flip.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from perfsuite.workloads.inference.serving.model import SPECIAL, ModelShape, vocabulary, weights
from perfsuite.workloads.inference.serving.prompts import WORDS

RMS_EPS = 1e-6  # serving.model's config: rms_norm_eps
ROPE_BASE = 10000.0  # transformers' LlamaConfig default rope_theta (the config sets none)


@dataclass(frozen=True)
class Answer:
    words: tuple[str, ...]
    ids: tuple[int, ...]
    margin: float  # the smallest gap between the top two logits over the answer's steps


class TinyLlama:
    def __init__(self, shape: ModelShape | None = None) -> None:
        self.shape = shape or ModelShape()
        # the float32 numbers serving.model stores, computed on in float64
        self.w = {name: w.astype(np.float64) for name, w in weights(self.shape).items()}
        self.ids = vocabulary()

    def _norm(self, x: np.ndarray, weight: np.ndarray) -> np.ndarray:
        return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + RMS_EPS) * weight

    def _rope(self, x: np.ndarray) -> np.ndarray:  # x: (T, heads, dim)
        t, _, d = x.shape
        inv = 1.0 / ROPE_BASE ** (np.arange(0, d, 2) / d)
        angles = np.outer(np.arange(t), inv)
        cos = np.concatenate([np.cos(angles)] * 2, axis=-1)[:, None, :]
        sin = np.concatenate([np.sin(angles)] * 2, axis=-1)[:, None, :]
        half = d // 2
        rotated = np.concatenate([-x[..., half:], x[..., :half]], axis=-1)
        return x * cos + rotated * sin

    def logits(self, ids: list[int]) -> np.ndarray:
        """The last position's logits for the prompt ``ids``."""
        s, w = self.shape, self.w
        heads, dim = s.heads, s.hidden // s.heads
        x = w["model.embed_tokens.weight"][ids]
        t = len(ids)
        mask = np.triu(np.full((t, t), -np.inf), 1)
        for i in range(s.layers):
            p = f"model.layers.{i}."
            h = self._norm(x, w[p + "input_layernorm.weight"])
            q = self._rope((h @ w[p + "self_attn.q_proj.weight"].T).reshape(t, heads, dim))
            k = self._rope((h @ w[p + "self_attn.k_proj.weight"].T).reshape(t, heads, dim))
            v = (h @ w[p + "self_attn.v_proj.weight"].T).reshape(t, heads, dim)
            scores = np.einsum("qhd,khd->hqk", q, k) / np.sqrt(dim) + mask
            scores = np.exp(scores - scores.max(-1, keepdims=True))
            scores /= scores.sum(-1, keepdims=True)
            attn = np.einsum("hqk,khd->qhd", scores, v).reshape(t, s.hidden)
            x = x + attn @ w[p + "self_attn.o_proj.weight"].T
            h = self._norm(x, w[p + "post_attention_layernorm.weight"])
            gate = h @ w[p + "mlp.gate_proj.weight"].T
            x = (
                x
                + ((gate / (1.0 + np.exp(-gate))) * (h @ w[p + "mlp.up_proj.weight"].T))
                @ w[p + "mlp.down_proj.weight"].T
            )
        x = self._norm(x[-1], w["model.norm.weight"])
        return x @ w["lm_head.weight"].T

    def greedy(self, prompt: str, tokens: int) -> Answer:
        """``tokens`` greedy steps after the words of ``prompt``."""
        ids = [self.ids[word] for word in prompt.split()]
        out: list[int] = []
        margin = np.inf
        for _ in range(tokens):
            logits = self.logits(ids + out)
            top2 = np.argsort(logits)[-2:]
            margin = min(margin, float(logits[top2[1]] - logits[top2[0]]))
            out.append(int(top2[1]))
        words = tuple((SPECIAL + WORDS)[i] for i in out)
        return Answer(words, tuple(out), margin)
