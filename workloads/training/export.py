"""A model ``training.gpt`` trained, saved as ``transformers serve`` serves it, and the questions
of its synthetic language written as text with their reference answers.

The synthetic language (``_language``) is token ids; a server speaks text. Here every id is a
word: SEP is ``=`` and token ``i`` is ``t<i>``, so a question reads ``t3 t7 t1 =`` and its
answer (``reverse``) ``t1 t7 t3``. The saved folder is what ``save_pretrained`` writes (the
config, the trained weights as safetensors, a generation config) plus a ``tokenizers``
word-level tokenizer over those words and ``perfsuite-trained.json`` (the language and the
accuracy reached). One word, ``?``, is added past the trained vocabulary (its embedding row
appended, never trained) so that a word outside the language (a serving sweep's synthetic
prompts) is a token, not a tokenizer error. It is an ordinary word, not a special token: an
answer made of it reads ``?``, where a special token would be decoded to nothing and an
untrained model's answer would arrive empty (a failed request, not a wrong answer).
The model has no end-of-sequence token: an answer runs to ``max_tokens``, which each question
sets to its answer's length.

The questions are drawn from a stream of their own (``ANSWER_STREAM``), never the training or
the evaluation split, so a served model is scored on sequences it has not seen:

    python -m perfsuite.workloads.training.export questions OUT.jsonl [--task reverse --vocab 16 ...]
"""

from __future__ import annotations

import argparse
import copy
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from perfsuite.workloads.training._language import SEP, TASKS, SequenceTask

ANSWER_STREAM = 2  # after TRAIN_STREAM (0) and EVAL_STREAM (1): questions no split holds
UNKNOWN = "?"
STAMP = "perfsuite-trained.json"
# Positions the saved model takes: the language's context is 16 to 256 tokens, a serving sweep's
# synthetic prompts are often longer; positions past the trained context answer noise, never fail.
SERVED_POSITIONS = 4096


def word(token: int) -> str:
    """The text of one token of the synthetic language."""
    return "=" if token == SEP else f"t{token}"


def vocabulary(vocab: int) -> dict[str, int]:
    """Word -> id: the language's ``vocab`` tokens, then the unknown word."""
    words = {word(i): i for i in range(vocab)}
    words[UNKNOWN] = vocab
    return words


def questions(task: SequenceTask, n: int, stream: int = ANSWER_STREAM) -> Iterator[dict]:
    """``n`` questions of ``task`` as JSONL rows: ``prompt`` (the first half and SEP),
    ``answer`` (the second half) and ``max_tokens`` (the answer's length in tokens)."""
    inputs, labels = task.split(n, stream)
    h = task.half
    for x, y in zip(inputs[:, :h].tolist(), labels[:, h:].tolist(), strict=True):
        yield {
            "prompt": " ".join(word(t) for t in [*x, SEP]),
            "answer": " ".join(word(t) for t in y),
            "max_tokens": h,
        }


def write_questions(path: Path, task: SequenceTask, n: int) -> int:
    """Write :func:`questions` to ``path`` (one JSON object a line); returns the bytes written."""
    text = "".join(json.dumps(row) + "\n" for row in questions(task, n))
    Path(path).write_text(text)
    return len(text.encode())


def save_served(model: Any, directory: Path, task: SequenceTask, trained: dict) -> None:
    """Write ``model`` (a transformers causal LM trained on ``task``) and a word-level tokenizer
    of its language into ``directory`` as ``transformers serve DIRECTORY`` loads them; the stamp
    ``perfsuite-trained.json`` (written last) holds the language and ``trained`` (what the
    run reached)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers

    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    words = vocabulary(task.vocab)
    unknown = words[UNKNOWN]
    model = copy.deepcopy(model).cpu()  # the run's model stays as it is, on its device
    model.resize_token_embeddings(len(words), mean_resizing=False)  # the unknown word's row
    _serve_positions(model, SERVED_POSITIONS)
    for cfg in (model.config, model.generation_config):
        cfg.bos_token_id = None
        cfg.eos_token_id = None  # no end-of-sequence: an answer runs to max_tokens
        cfg.pad_token_id = unknown
    model.generation_config.do_sample = False
    model.save_pretrained(str(directory), safe_serialization=True)
    core = Tokenizer(models.WordLevel(vocab=words, unk_token=UNKNOWN))
    core.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    core.decoder = decoders.WordPiece(prefix="##")  # decodes words joined by spaces
    core.save(str(directory / "tokenizer.json"))
    (directory / "tokenizer_config.json").write_text(
        json.dumps(
            {
                "tokenizer_class": "PreTrainedTokenizerFast",
                "model_max_length": SERVED_POSITIONS,
                "clean_up_tokenization_spaces": False,
            },
            indent=1,
        )
    )
    language = {
        "task": task.task,
        "vocab": task.vocab,
        "context": task.context,
        "data_seed": task.data_seed,
        "symbols": task.symbols,
    }
    stamp = {
        "language": language,
        "words": "token 0 (SEP) is '=', token i is 't<i>'; '?' (unknown words) added past the vocabulary",
        **trained,
    }
    (directory / STAMP).write_text(json.dumps(stamp, indent=1))


def _serve_positions(model: Any, positions: int) -> None:
    """Let the served model take prompts up to ``positions`` tokens: GPT-2's learnt position
    table grows with zero rows (a longer prompt is answered, as noise, instead of failing the
    request), Llama's rotary positions need only the config."""
    import torch

    config = model.config
    if config.model_type == "gpt2" and config.n_positions < positions:
        old = model.transformer.wpe
        grown = torch.nn.Embedding(positions, old.embedding_dim)
        with torch.no_grad():
            grown.weight.zero_()
            grown.weight[: old.num_embeddings] = old.weight
        model.transformer.wpe = grown
        config.n_positions = positions
    elif config.model_type == "llama" and config.max_position_embeddings < positions:
        config.max_position_embeddings = positions


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="Write questions of training.gpt's synthetic language with answers.")
    sub = ap.add_subparsers(dest="command", required=True)
    q = sub.add_parser("questions", help="a JSONL of prompts and reference answers")
    q.add_argument("out", type=Path)
    q.add_argument("--task", default="reverse", choices=TASKS)
    q.add_argument("--vocab", type=int, default=16)
    q.add_argument("--context", type=int, default=16)
    q.add_argument("--symbols", type=int, default=0)
    q.add_argument("--data-seed", type=int, default=0)
    q.add_argument("--n", type=int, default=512)
    a = ap.parse_args(argv)
    task = SequenceTask(a.task, a.vocab, a.context, a.data_seed, a.symbols)
    try:
        size = write_questions(a.out, task, a.n)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(f"wrote {a.n} questions ({size:,} bytes) to {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
