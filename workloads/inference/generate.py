"""``inference.generate``: a decoder (transformers Llama- or GPT-2-style, built from a config,
no download) generating exactly ``new_tokens`` tokens greedily from deterministic prompts of
varied lengths, driven by MLPerf LoadGen with token latencies in each scenario.

The SUT reports each sample's first token to LoadGen as soon as the prefill has produced it
(``FirstTokenComplete``) and the whole answer with its token count at the end, so LoadGen
measures time to first token (TTFT) and time per output token (TPOT) itself; the Server
scenario is bounded by both (``ttft_ms``, ``tpot_ms``). ``cache=dynamic`` decodes eagerly
with transformers' dynamic KV cache; ``cache=static`` uses its static cache, which on CUDA
transformers compiles (torch.compile, reduce-overhead: CUDA-graph decoding). Work: tokens
generated. Check: LoadGen's accuracy mode sends every prompt once; the tokens read back from
its accuracy log must equal a float32 run's (dynamic cache) on ``accuracy_threshold`` of positions.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from perfsuite import param
from perfsuite.headlines import LOADGEN_LLM
from perfsuite.workloads.inference._base import LoadGenWorkload
from perfsuite.workloads.inference._settings import LoadGenParams

if TYPE_CHECKING:  # pragma: no cover - typing only
    from perfsuite import RunContext
    from perfsuite.workloads.inference._driver import Model

ARCHS = ("llama", "gpt2")
CACHES = ("dynamic", "static")


@dataclass(frozen=True)
class GenerateParams(LoadGenParams):
    arch: str = param("llama", "decoder family (transformers config)", choices=ARCHS)
    layers: int = param(12, "decoder layers")
    hidden: int = param(768, "hidden size")
    heads: int = param(12, "attention heads")
    intermediate: int = param(2048, "feed-forward size (llama)")
    vocab: int = param(32000, "vocabulary size")
    min_prompt: int = param(32, "shortest prompt (tokens)")
    max_prompt: int = param(256, "longest prompt (tokens)")
    new_tokens: int = param(64, "tokens generated per prompt (greedy; end-of-sequence suppressed)")
    cache: str = param("dynamic", "KV cache: dynamic (eager) or static (compiled, CUDA graphs on CUDA)", choices=CACHES)
    ttft_ms: float = param(2000.0, "Server bound on time to first token")
    tpot_ms: float = param(200.0, "Server bound on time per output token")
    # Random weights give near-tied logits: bf16 flips some greedy choices and the rest of that
    # sequence follows its own path (134M Llama config, 8 prompts x 32 tokens, bf16 on CPU: 0.84).
    accuracy_threshold: float = param(0.75, "least fraction of generated tokens equal to the float32 reference's")

    def __post_init__(self) -> None:
        super().__post_init__()
        if min(self.layers, self.hidden, self.heads, self.intermediate, self.min_prompt) < 1:
            raise ValueError("layers, hidden, heads, intermediate and min_prompt must be at least 1")
        if self.hidden % self.heads:
            raise ValueError(f"hidden ({self.hidden}) must be a multiple of heads ({self.heads})")
        if self.min_prompt > self.max_prompt:
            raise ValueError("need min_prompt <= max_prompt")
        if self.new_tokens < 2:
            raise ValueError("new_tokens must be at least 2 (a first token and one more, for TPOT)")
        if self.vocab < 2:
            raise ValueError("vocab must be at least 2")
        for name, value in (("ttft_ms", self.ttft_ms), ("tpot_ms", self.tpot_ms)):
            if not value > 0:
                raise ValueError(f"{name} must be greater than 0, not {value:g}")
        if not 0.0 <= self.accuracy_threshold <= 1.0:
            raise ValueError("accuracy_threshold must lie in [0, 1]")


QUICK: Mapping[str, Any] = {
    "layers": 2,
    "hidden": 64,
    "heads": 2,
    "intermediate": 128,
    "vocab": 1000,
    "min_prompt": 4,
    "max_prompt": 24,
    "new_tokens": 8,
    "num_samples": 32,
    "min_duration_ms": 1000,
    "min_query_count": 64,
    "target_latency_percentile": 0.9,
    "samples_per_query": 4,
    "target_qps": 40.0,
    "max_batch": 8,
    "ttft_ms": 2000.0,
    "tpot_ms": 500.0,
    "query_timeout_s": 10.0,
    "accuracy_threshold": 0.85,
}


def build_config(p: GenerateParams) -> Any:
    from transformers import GPT2Config, LlamaConfig

    positions = p.max_prompt + p.new_tokens
    if p.arch == "gpt2":
        return GPT2Config(
            vocab_size=p.vocab,
            n_embd=p.hidden,
            n_layer=p.layers,
            n_head=p.heads,
            n_positions=max(1024, positions),
            resid_pdrop=0.0,
            embd_pdrop=0.0,
            attn_pdrop=0.0,
            bos_token_id=None,
            eos_token_id=None,
            pad_token_id=0,
        )
    return LlamaConfig(
        vocab_size=p.vocab,
        hidden_size=p.hidden,
        num_hidden_layers=p.layers,
        num_attention_heads=p.heads,
        num_key_value_heads=p.heads,
        intermediate_size=p.intermediate,
        max_position_embeddings=max(2048, positions),
        bos_token_id=None,
        eos_token_id=None,
        pad_token_id=0,
    )


class Generate(LoadGenWorkload):
    name = "inference.generate"
    description = "greedy decoder generation under MLPerf LoadGen with TTFT/TPOT; dynamic vs static KV cache"
    # An LLM's LoadGen figures: tokens/s for Server and Offline, the latency percentile for
    # SingleStream, with time to first token and time per output token beside.
    headline = LOADGEN_LLM
    Params = GenerateParams
    quick: ClassVar[Mapping[str, Any]] = QUICK

    def build(self) -> tuple[Any, Callable[[], Any]]:
        from transformers import AutoModelForCausalLM

        config = build_config(self.params)
        return config, lambda: AutoModelForCausalLM.from_config(config)

    def sequence_lengths(self) -> tuple[int, int]:
        return self.params.min_prompt, self.params.max_prompt

    def backends(self, ctx: "RunContext", measured: Any, reference: Any, samples: list) -> tuple[Any, Any]:
        from perfsuite.workloads.inference._models import GeneratorBackend

        p = self.params
        return (
            GeneratorBackend(measured, samples, p.new_tokens, p.cache, p.max_prompt, p.max_batch, ctx.torch_device),
            GeneratorBackend(reference, samples, p.new_tokens, "dynamic", p.max_prompt, p.max_batch, ctx.torch_device),
        )

    def model_details(self, ctx: "RunContext") -> Mapping[str, Any]:
        return {"cache": self.params.cache, "compiled_decoding": self.params.cache == "static" and ctx.device == "cuda"}

    def model(self) -> "Model":
        from perfsuite.workloads.inference._driver import Model
        from perfsuite.workloads.inference._models import (
            decode_tokens,
            score_token_match,
        )

        p = self.params
        return Model(
            backend=self.backend,
            reference=self.reference,
            decode=decode_tokens,
            score=score_token_match,
            score_method="exact token match rate against a float32 reference (dynamic cache)",
            threshold=p.accuracy_threshold,
            tokens={"ttft_ms": p.ttft_ms, "tpot_ms": p.tpot_ms},
            warm_up=self.backend.warm_up,
        )
