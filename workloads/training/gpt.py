"""``training.gpt``: time to a target answer accuracy for a causal language model.

The model is built by Hugging Face transformers from a configuration (nothing is
downloaded): ``GPT2LMHeadModel`` or ``LlamaForCausalLM`` at the given layers, width,
heads and context, with SDPA attention. The language is the synthetic algorithmic one
of ``_language`` (copy, reverse or sort the first half of each sequence): the loss is
taken on the answer half, and the quality is the share of answer tokens predicted
correctly on the held-out split. Work per sample is counted by FlopCounterMode.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from perfsuite import Requirements, param
from perfsuite.workloads.training._base import TimeToTarget, TrainingParams
from perfsuite.workloads.training._language import (
    EVAL_STREAM,
    IGNORE,
    SEP,
    TASKS,
    TRAIN_STREAM,
    SequenceTask,
    drawn_symbols,
)

ARCHS = ("gpt2", "llama")


@dataclass(frozen=True)
class GPTParams(TrainingParams):
    arch: str = param("gpt2", "model family built from a config", choices=ARCHS)
    layers: int = param(16, "transformer blocks (16 x 768: 113M parameters)")
    width: int = param(768, "hidden size")
    heads: int = param(12, "attention heads")
    context: int = param(256, "tokens per sequence")
    vocab: int = param(64, "vocabulary size (token 0 separates question and answer)")
    task: str = param("reverse", "what the answer half is", choices=TASKS)
    symbols: int = param(0, "distinct tokens the sequences are drawn from (0: the whole vocabulary but SEP)")
    global_batch: int = param(64, "sequences per optimizer step, over all ranks")
    optimizer: str = param("adamw", "optimizer", choices=("sgd", "adamw"))
    lr: float = param(3e-4, "base learning rate (after warm-up)")
    weight_decay: float = param(0.1, "weight decay")
    warmup_steps: int = param(100, "steps of linear learning-rate warm-up")
    schedule: str = param(
        "cosine", "learning-rate decay after warm-up, to 0 at max_steps", choices=("constant", "linear", "cosine")
    )
    grad_clip: float = param(1.0, "clip the gradient norm to this (0: no clipping)")
    eval_every: int = param(100, "steps between evaluations")
    max_steps: int = param(
        3000, "step budget: a run still below the target then stops as aborted (goal=throughput: as success)"
    )
    target_accuracy: float = param(0.9, "answer-token accuracy that ends the run")
    train_samples: int = param(65536, "sequences in the training split")
    eval_samples: int = param(1024, "sequences in the held-out evaluation split")
    save_to: str = param(
        "",
        "folder the trained model is saved in as `transformers serve` serves it, with a word-level tokenizer "
        "of the language (training.export; '': not saved)",
        output=True,
    )

    def __post_init__(self) -> None:
        drawn_symbols(self.vocab, self.symbols)  # a bad count is refused before the run starts
        if self.save_to and os.path.lexists(self.save_to):
            # refused before training, not after it: a folder perfsuite does not own is never written into
            from perfsuite.owned_output import OutputRefused, check_output_folder

            try:
                check_output_folder(Path(self.save_to))
            except OutputRefused as exc:
                raise ValueError(f"save_to: {exc}") from None


class GPTTraining(TimeToTarget):
    name = "training.gpt"
    # 2: the model and the loss each compiled (compile=true), the fused optimizer on the GPU, no
    # key/value cache in training: what a bare loop of the same model does (perfsuite/crosscheck/training_reference.py)
    # 3: ``symbols``, the tokens the language is drawn from, apart from the vocabulary that sizes the model
    # 4: MLPerf's clock rules (untimed_init: compilation and warm-up before run_start), the loss inside
    # DDP's compiled graph
    version = 4
    description = "transformers causal LM (GPT-2 or Llama config) to a target accuracy on a synthetic language"
    Params = GPTParams
    quick = {
        "layers": 2,
        "width": 64,
        "heads": 4,
        "context": 16,
        "vocab": 16,
        "global_batch": 64,
        "lr": 3e-3,
        "weight_decay": 0.0,
        "warmup_steps": 0,
        "schedule": "constant",
        "grad_clip": 1.0,
        "eval_every": 10,
        "max_steps": 400,
        "target_accuracy": 0.9,
        "train_samples": 8192,
        "eval_samples": 256,
    }
    sample_unit = "sequences"
    requirements = Requirements(packages=("torch", "transformers"))

    def unmet(self, ctx):
        p = self.params
        if p.width % p.heads:
            return f"width {p.width} is not a multiple of heads {p.heads}"
        return super().unmet(ctx)

    def _task(self) -> SequenceTask:
        p = self.params
        return SequenceTask(p.task, p.vocab, p.context, p.data_seed, p.symbols)

    def make_data(self):
        task, p = self._task(), self.params
        return (*task.split(p.train_samples, TRAIN_STREAM), *task.split(p.eval_samples, EVAL_STREAM))

    def build_model(self) -> Any:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")  # built from a config: nothing to fetch
        import transformers

        p = self.params
        transformers.logging.set_verbosity_error()
        if p.arch == "gpt2":
            config = transformers.GPT2Config(
                vocab_size=p.vocab,
                n_positions=p.context,
                n_embd=p.width,
                n_layer=p.layers,
                n_head=p.heads,
                resid_pdrop=0.0,
                embd_pdrop=0.0,
                attn_pdrop=0.0,
                bos_token_id=SEP,
                eos_token_id=SEP,
            )
            cls = transformers.GPT2LMHeadModel
        else:
            config = transformers.LlamaConfig(
                vocab_size=p.vocab,
                hidden_size=p.width,
                intermediate_size=4 * p.width,
                num_hidden_layers=p.layers,
                num_attention_heads=p.heads,
                num_key_value_heads=p.heads,
                max_position_embeddings=p.context,
                bos_token_id=SEP,
                eos_token_id=SEP,
                pad_token_id=SEP,
            )
            cls = transformers.LlamaForCausalLM
        config._attn_implementation = "sdpa"
        return cls(config)

    def model_details(self, model: Any) -> dict:
        total = sum(t.numel() for t in model.parameters())
        embedding = sum(t.numel() for t in model.get_input_embeddings().parameters())
        return {"parameters": total, "non_embedding_parameters": total - embedding}

    def random_batch(self, n: int, device: Any):
        import torch

        p = self.params
        return (
            torch.randint(0, p.vocab, (n, p.context), device=device),
            torch.randint(0, p.vocab, (n, p.context), device=device),
        )

    def tokens_per_sample(self) -> int:
        return self.params.context

    def outputs(self, model: Any, x: Any) -> Any:
        return model(input_ids=x, use_cache=False).logits  # training keeps no key/value cache

    def criterion(self, logits: Any, y: Any) -> Any:
        import torch.nn.functional as F

        return F.cross_entropy(logits.float().flatten(0, 1), y.flatten(), ignore_index=IGNORE)

    def reference_args(self) -> list[str]:
        p = self.params
        return [
            "gpt",
            *("--arch", p.arch, "--layers", str(p.layers), "--width", str(p.width), "--heads", str(p.heads)),
            *("--context", str(p.context), "--vocab", str(p.vocab), "--symbols", str(p.symbols)),
        ]

    def trained(self, ctx: Any, model: Any, reached: bool, accuracy: float) -> None:
        """Save the trained model where ``save_to`` asks (``training.export``), as an output folder
        perfsuite owns (``perfsuite.owned_output``): a folder holding files perfsuite did not
        write is refused, and a file the user put into an earlier save survives the next."""
        if not self.params.save_to:
            return
        from perfsuite.owned_output import publish_folder
        from perfsuite.workloads.training.export import save_served

        trained = {"eval_accuracy": accuracy, "reached_target": reached, "arch": self.params.arch}
        task = self._task()
        publish_folder(
            Path(self.params.save_to),
            lambda staging: save_served(model, staging, task, trained),
            command="run training.gpt",
            what="the trained model",
            parents=True,
        )
        ctx.details["training"]["saved_to"] = os.path.abspath(self.params.save_to)
        ctx.log(f"saved the trained model in {self.params.save_to}")

    def eval_sums(self, model: Any, x: Any, y: Any):
        import torch.nn.functional as F

        logits = model(input_ids=x, use_cache=False).logits.float()
        mask = y != IGNORE
        correct = (logits.argmax(-1)[mask] == y[mask]).sum()
        loss = F.cross_entropy(logits.flatten(0, 1), y.flatten(), ignore_index=IGNORE, reduction="sum")
        return correct, mask.sum(), loss
