"""A Llama model and word-level tokenizer written from a config, for a server the suite starts
(``transformers serve DIR``) where there is no model to download: the quick suite's tiny one on
the CPU, a 100M+ one on a GPU.

Written as transformers reads a ``save_pretrained`` folder (``config.json``,
``generation_config.json``, ``model.safetensors``, ``tokenizer.json``, ``tokenizer_config.json``)
with numpy, safetensors and tokenizers alone: no torch or transformers import, which costs
15-20 s on a busy two-core machine, in the measuring process. Weights are float32, drawn as
transformers initialises a Llama (normal, std ``initializer_range``; norms at one); the server
casts them to the dtype it is told (``transformers serve --dtype bfloat16``).

The tokenizer's vocabulary is the synthetic prompts' words (``serving.prompts.WORDS``), so a
prompt of N words is N tokens; the model has no end-of-sequence token, so every answer runs
to ``max_tokens`` (the fixed output lengths that ``ignore_eos`` gives on engines that have it).

    python -m perfsuite.workloads.inference.serving.model DIR [--layers 12 --hidden 768 ...]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

from perfsuite.workloads.inference.serving.prompts import WORDS

SPECIAL = ("[PAD]", "[UNK]")
INIT_STD = 0.02  # transformers' LlamaConfig.initializer_range
STAMP = "perfsuite-model.json"
BYTES_PER_PARAMETER = 4  # float32, as written
COPIES_WHILE_WRITTEN = 2  # the weights' arrays and safetensors' serialized copy, both held by save_file


@dataclass(frozen=True)
class ModelShape:
    layers: int = 2
    hidden: int = 64
    heads: int = 4
    intermediate: int = 128
    seed: int = 0

    def __post_init__(self) -> None:
        if min(self.layers, self.hidden, self.heads, self.intermediate) < 1:
            raise ValueError("layers, hidden, heads and intermediate must be at least 1")
        if self.hidden % self.heads:
            raise ValueError(f"hidden ({self.hidden}) must be a multiple of heads ({self.heads})")

    @property
    def vocab(self) -> int:
        return len(SPECIAL) + len(WORDS)

    def tensors(self) -> dict[str, tuple[int, ...]]:
        """Every weight of a LlamaForCausalLM of this shape (untied head), name -> shape."""
        h, f, v = self.hidden, self.intermediate, self.vocab
        out: dict[str, tuple[int, ...]] = {
            "model.embed_tokens.weight": (v, h),
            "model.norm.weight": (h,),
            "lm_head.weight": (v, h),
        }
        for i in range(self.layers):
            p = f"model.layers.{i}."
            out.update(
                {
                    p + "input_layernorm.weight": (h,),
                    p + "post_attention_layernorm.weight": (h,),
                    p + "self_attn.q_proj.weight": (h, h),
                    p + "self_attn.k_proj.weight": (h, h),
                    p + "self_attn.v_proj.weight": (h, h),
                    p + "self_attn.o_proj.weight": (h, h),
                    p + "mlp.gate_proj.weight": (f, h),
                    p + "mlp.up_proj.weight": (f, h),
                    p + "mlp.down_proj.weight": (h, f),
                }
            )
        return out

    @property
    def parameters(self) -> int:
        """Every weight of :meth:`tensors`, counted from the config alone (no per-layer table: a
        shape of 100 million layers is refused by its count, not by building its list)."""
        h, f, v = self.hidden, self.intermediate, self.vocab
        per_layer = 2 * h + 4 * h * h + 3 * f * h  # two norms, q/k/v/o, gate/up/down
        return 2 * v * h + h + self.layers * per_layer

    @property
    def build_bytes(self) -> int:
        """The most memory writing this model holds: its float32 weights twice (the arrays and
        safetensors' serialized copy of them)."""
        return self.parameters * BYTES_PER_PARAMETER * COPIES_WHILE_WRITTEN


def refuse_unless_it_fits(shape: ModelShape, available_bytes: int | None = None) -> None:
    """Raise ValueError (one line: the estimate and the memory available) when writing ``shape``
    needs more than this machine's available memory: checked from the config, before anything
    is built or a server started, so that a typo of a few zeros is a refusal, not a machine
    swapping for minutes. ``available_bytes``: psutil's available memory unless given."""
    if available_bytes is None:
        import psutil

        available_bytes = psutil.virtual_memory().available
    need = shape.build_bytes
    if need > available_bytes:
        raise ValueError(
            f"the built model needs about {need:,} bytes ({shape.parameters:,} parameters x "
            f"{BYTES_PER_PARAMETER} bytes, held {COPIES_WHILE_WRITTEN} times while written) and this machine "
            f"has {available_bytes:,} bytes available: choose a smaller model_layers, model_hidden or "
            "model_intermediate"
        )


def vocabulary() -> dict[str, int]:
    return {w: i for i, w in enumerate(SPECIAL + WORDS)}


def config(shape: ModelShape) -> dict:
    pad = vocabulary()["[PAD]"]
    return {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "vocab_size": shape.vocab,
        "hidden_size": shape.hidden,
        "intermediate_size": shape.intermediate,
        "num_hidden_layers": shape.layers,
        "num_attention_heads": shape.heads,
        "num_key_value_heads": shape.heads,
        "hidden_act": "silu",
        "max_position_embeddings": 4096,
        "initializer_range": INIT_STD,
        "rms_norm_eps": 1e-6,
        "tie_word_embeddings": False,
        "attention_bias": False,
        "mlp_bias": False,
        "bos_token_id": None,
        "eos_token_id": None,
        "pad_token_id": pad,
        "dtype": "float32",
    }


def described(shape: ModelShape) -> dict:
    """What a build of ``shape`` is (its stamp's content)."""
    return {
        "shape": asdict(shape),
        "vocab": shape.vocab,
        "parameters": shape.parameters,
        "architecture": "LlamaForCausalLM",
        "weights": "float32",
        "tokenizer": "word-level (tokenizers WordLevel over the synthetic prompts' words)",
    }


def cached(shape: ModelShape) -> tuple[Path, dict]:
    """The folder of ``shape``'s build in the suite's cache (``perfsuite.inputs.cache``), written
    the first time, and what was built: a 100M-parameter model is 0.5 GB, which belongs in a
    cache every run reuses, not in each run's artifacts."""
    from perfsuite.inputs.cache import cache_folder, made_once

    built = described(shape)
    key = hashlib.sha256(json.dumps(built, sort_keys=True).encode()).hexdigest()[:12]
    target = cache_folder("models") / f"llama-{shape.parameters / 1e6:.0f}M-{key}"
    made_once(target, STAMP, lambda folder: build_and_save(folder, shape))
    return target, built


def weights(shape: ModelShape) -> dict:
    """The model's float32 tensors by name, drawn from ``shape.seed`` in ``shape.tensors()``'s
    order: what ``build_and_save`` stores, and what the tests' other engines and reference are
    given, so that every copy holds the same numbers."""
    import numpy as np

    rng = np.random.default_rng(shape.seed)
    return {
        name: (np.ones(dims, np.float32) if len(dims) == 1 else rng.normal(0.0, INIT_STD, dims).astype(np.float32))
        for name, dims in shape.tensors().items()
    }


def build_and_save(directory: Path, shape: ModelShape) -> dict:
    """Write the model and tokenizer into ``directory``; returns what was built. A folder that
    already holds this exact build (its ``perfsuite-model.json``, written last) is reused as it is."""
    from safetensors.numpy import save_file
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers

    directory = Path(directory)
    built = described(shape)
    stamp = directory / STAMP
    if stamp.exists() and json.loads(stamp.read_text()) == built:
        return built
    directory.mkdir(parents=True, exist_ok=True)
    save_file(weights(shape), str(directory / "model.safetensors"), metadata={"format": "pt"})
    (directory / "config.json").write_text(json.dumps(config(shape), indent=1))
    pad = vocabulary()["[PAD]"]
    (directory / "generation_config.json").write_text(
        json.dumps({"bos_token_id": None, "eos_token_id": None, "pad_token_id": pad, "do_sample": False}, indent=1)
    )
    core = Tokenizer(models.WordLevel(vocab=vocabulary(), unk_token="[UNK]"))
    core.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    core.decoder = decoders.WordPiece(prefix="##")  # decodes words joined by spaces
    core.save(str(directory / "tokenizer.json"))
    (directory / "tokenizer_config.json").write_text(
        json.dumps(
            {
                "tokenizer_class": "PreTrainedTokenizerFast",
                "unk_token": "[UNK]",
                "pad_token": "[PAD]",
                "model_max_length": 4096,
                "clean_up_tokenization_spaces": False,
            },
            indent=1,
        )
    )
    (directory / "special_tokens_map.json").write_text(json.dumps({"unk_token": "[UNK]", "pad_token": "[PAD]"}))
    stamp.write_text(json.dumps(built, indent=1))
    return built


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="Write a Llama model and word-level tokenizer from a config.")
    ap.add_argument("directory", type=Path)
    for name, value in asdict(ModelShape()).items():
        ap.add_argument(f"--{name}", type=int, default=value)
    a = vars(ap.parse_args(argv))
    try:
        shape = ModelShape(**{k: v for k, v in a.items() if k != "directory"})
        refuse_unless_it_fits(shape)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(json.dumps(build_and_save(a["directory"], shape)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
