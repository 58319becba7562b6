"""``inference.classifier``: a BERT-style encoder (transformers ``BertForSequenceClassification``
built from a config, no download) classifying deterministic synthetic token sequences of
varied lengths, driven by MLPerf LoadGen in each scenario.

Work: one sample is one sequence classified. Metrics per scenario come from LoadGen's
summary (samples/s, latency percentiles, early-stopping estimates, VALID) plus the SUT's own
per-sample latencies and, on a GPU, energy per sample. Check: LoadGen's accuracy mode
sends every sample once; the classes read back from its accuracy log must agree with a
float32 run of the same weights on at least ``accuracy_threshold`` of the samples.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from perfsuite import param
from perfsuite.workloads.inference._base import LoadGenWorkload
from perfsuite.workloads.inference._settings import LoadGenParams

if TYPE_CHECKING:  # pragma: no cover - typing only
    from perfsuite import RunContext
    from perfsuite.workloads.inference._driver import Model


@dataclass(frozen=True)
class ClassifierParams(LoadGenParams):
    layers: int = param(12, "encoder layers")
    hidden: int = param(768, "hidden size")
    heads: int = param(12, "attention heads")
    intermediate: int = param(3072, "feed-forward size")
    vocab: int = param(30522, "vocabulary size")
    labels: int = param(4, "classes")
    min_len: int = param(32, "shortest sequence (tokens)")
    max_len: int = param(128, "longest sequence (tokens)")
    accuracy_threshold: float = param(0.97, "least fraction of samples classified as the float32 reference does")

    def __post_init__(self) -> None:
        super().__post_init__()
        if min(self.layers, self.hidden, self.heads, self.intermediate, self.labels, self.min_len) < 1:
            raise ValueError("layers, hidden, heads, intermediate, labels and min_len must be at least 1")
        if self.hidden % self.heads:
            raise ValueError(f"hidden ({self.hidden}) must be a multiple of heads ({self.heads})")
        if not self.min_len <= self.max_len <= 512:
            raise ValueError("need min_len <= max_len <= 512 (BERT's positions)")
        if self.vocab < 2:
            raise ValueError("vocab must be at least 2")
        if not 0.0 <= self.accuracy_threshold <= 1.0:
            raise ValueError("accuracy_threshold must lie in [0, 1]")


QUICK: Mapping[str, Any] = {
    "layers": 2,
    "hidden": 64,
    "heads": 2,
    "intermediate": 128,
    "vocab": 1000,
    "min_len": 8,
    "max_len": 32,
    "num_samples": 64,
    "min_duration_ms": 1000,
    "min_query_count": 64,
    "target_latency_percentile": 0.9,
    "samples_per_query": 4,
    "target_qps": 100.0,
    "latency_ms": 1000.0,
    "max_batch": 16,
    "query_timeout_s": 10.0,
}


class Classifier(LoadGenWorkload):
    name = "inference.classifier"
    description = "BERT-style encoder classification under MLPerf LoadGen (SingleStream/MultiStream/Server/Offline)"
    Params = ClassifierParams
    quick: ClassVar[Mapping[str, Any]] = QUICK

    def build(self) -> tuple[Any, Callable[[], Any]]:
        from transformers import BertConfig, BertForSequenceClassification

        p = self.params
        config = BertConfig(
            vocab_size=p.vocab,
            hidden_size=p.hidden,
            num_hidden_layers=p.layers,
            num_attention_heads=p.heads,
            intermediate_size=p.intermediate,
            max_position_embeddings=max(512, p.max_len),
            num_labels=p.labels,
            hidden_dropout_prob=0.0,
            attention_probs_dropout_prob=0.0,
        )
        return config, lambda: BertForSequenceClassification(config)

    def sequence_lengths(self) -> tuple[int, int]:
        return self.params.min_len, self.params.max_len

    def backends(self, ctx: "RunContext", measured: Any, reference: Any, samples: list) -> tuple[Any, Any]:
        from perfsuite.workloads.inference._models import ClassifierBackend

        return (
            ClassifierBackend(measured, samples, ctx.torch_device, ctx.synchronize),
            ClassifierBackend(reference, samples, ctx.torch_device, ctx.synchronize),
        )

    def model(self) -> "Model":
        from perfsuite.workloads.inference._driver import Model
        from perfsuite.workloads.inference._models import decode_class, score_agreement

        return Model(
            backend=self.backend,
            reference=self.reference,
            decode=decode_class,
            score=score_agreement,
            score_method="classification agreement with a float32 reference",
            threshold=self.params.accuracy_threshold,
        )
