"""A bare training loop, outside the suite: the reference that ``training.gpt`` and
``training.resnet`` are checked against (``perfsuite crosscheck training.gpt``), so that what the
suite's instrumentation costs (phase events, the data path, MLLOG and goodput bookkeeping,
evaluations) shows as the ratio of the two throughputs. No suite code is imported.

It builds the same model the workload builds (a transformers GPT-2 or Llama from a config; a
torchvision ResNet at a width, with the small-image stem below 65 px), in the same precision
(bf16 autocast or fp32 without TF32), with the same optimizer (AdamW or SGD with momentum, the
fused implementation on a GPU), gradient clipping, learning-rate schedule (linear warm-up, then
constant, linear or cosine to 0 at ``--max-steps``) and compile setting (the model and the loss
each through ``torch.compile``), and trains it on random batches gathered on the device from a
device-resident split (random token ids with the loss on the second half, drawn from the
workload's ``--symbols`` as its language draws them; random images), as
plainly as a training script would: no events, no host timers, nothing but the steps. A block
of steps is timed with the host clock between two synchronisations.

Under torchrun (``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``, ``MASTER_ADDR``/``MASTER_PORT`` set) it
trains one data-parallel model, each rank taking ``--batch / WORLD_SIZE`` samples of the global
batch, as the workload does: the model and its loss in one module, wrapped in
``DistributedDataParallel`` and then compiled, so that torch.compile's DDP optimizer splits the
graph at the gradient buckets and each bucket's all-reduce overlaps the rest of the backward pass
(compiling the model inside DDP instead gives one backward graph whose gradients all arrive at
its end: ResNet-50 on 4 H200s took 41.9 ms of backward a step that way against 32.8 ms). Its
rates are of the global batch, so that one rank's figure is the whole model's.

    python3 suite/crosscheck/training_reference.py gpt --layers 12 --width 768 --heads 12 --context 1024 \\
        --vocab 50304 --batch 16 --precision bf16 --compile --optimizer adamw --grad-clip 1.0
    python3 suite/crosscheck/training_reference.py resnet --depth 50 --width 64 --image-size 224 --batch 128 \\
        --precision bf16 --compile --optimizer sgd
    torchrun --standalone --nproc-per-node 4 suite/crosscheck/training_reference.py gpt --batch 64 --compile

Alone it prints ``--rounds`` blocks of ``--steps`` steps and their median; with ``--serve`` (how
the suite runs it) it builds, compiles and warms up, prints one JSON line ``{"ready": true, ...}``
and then, for each line ``time N`` on its stdin, times N steps and prints one JSON line
``{"steps": N, "seconds": ..., "samples_per_s": ...}``; ``quit`` or the end of stdin ends it.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
import time
from typing import Any

IGNORE = -100
SMALL_STEM_MAX_SIZE = 64
RESNET_DEPTHS = {
    10: ("basic", (1, 1, 1, 1)),
    18: ("basic", (2, 2, 2, 2)),
    34: ("basic", (3, 4, 6, 3)),
    50: ("bottleneck", (3, 4, 6, 3)),
    101: ("bottleneck", (3, 4, 23, 3)),
}
SPLIT_BATCHES = 4  # the device-resident split holds this many batches
WARMUP_STEPS = 3  # after the compiling step


def main() -> None:
    args = parse_args()
    loop = BareLoop(args)
    try:
        if args.serve:
            serve(loop)
            return
        rates = []
        for r in range(args.rounds):
            seconds = loop.block(args.steps)
            rates.append(args.steps * args.batch / seconds)
            if loop.rank == 0:
                print(f"round {r + 1}: {rates[-1]:,.1f} samples/s ({seconds / args.steps * 1e3:.2f} ms per step)")
        if loop.rank == 0:
            print(
                f"bare loop {args.model} on {loop.world} rank(s): median {statistics.median(rates):,.1f} samples/s "
                f"over {args.rounds} rounds"
            )
    finally:
        loop.close()


def parse_args() -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="model", required=True)
    gpt = sub.add_parser("gpt", help="a transformers causal language model from a config")
    gpt.add_argument("--arch", choices=("gpt2", "llama"), default="gpt2")
    gpt.add_argument("--layers", type=int, default=12)
    gpt.add_argument("--width", type=int, default=768)
    gpt.add_argument("--heads", type=int, default=12)
    gpt.add_argument("--context", type=int, default=1024)
    gpt.add_argument("--vocab", type=int, default=50304)
    # the tokens drawn (1..N; 0: every one but 0), the workload's: under its power cap a GPU's clock
    # follows the data it switches, and on one H200 the workload's step on 64 symbols ran 3% faster
    # than this loop's on the whole vocabulary, its SM clock 2-3% higher
    gpt.add_argument("--symbols", type=int, default=0, help="tokens the batches are drawn from (0: all but 0)")
    resnet = sub.add_parser("resnet", help="a torchvision ResNet")
    resnet.add_argument("--depth", type=int, choices=tuple(RESNET_DEPTHS), default=50)
    resnet.add_argument("--width", type=int, default=64)
    resnet.add_argument("--image-size", type=int, default=224)
    resnet.add_argument("--classes", type=int, default=1000)
    for p in (gpt, resnet):
        p.add_argument("--batch", type=int, default=16, help="samples per optimizer step, over all ranks")
        p.add_argument("--precision", choices=("fp32", "bf16"), default="bf16")
        p.add_argument("--compile", action="store_true")
        p.add_argument("--optimizer", choices=("adamw", "sgd"), default="adamw")
        p.add_argument("--lr", type=float, default=3e-4)
        p.add_argument("--weight-decay", type=float, default=0.0)
        p.add_argument("--grad-clip", type=float, default=0.0, help="0: no clipping")
        p.add_argument("--warmup-steps", type=int, default=0)
        p.add_argument("--schedule", choices=("constant", "linear", "cosine"), default="constant")
        p.add_argument("--max-steps", type=int, default=1000, help="where the schedule reaches 0")
        p.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
        p.add_argument("--seed", type=int, default=0)
        p.add_argument("--steps", type=int, default=50, help="steps per timed block (alone)")
        p.add_argument("--rounds", type=int, default=3, help="timed blocks (alone)")
        p.add_argument("--serve", action="store_true", help="answer 'time N' lines on stdin (the suite's way)")
    return ap.parse_args()


def serve(loop: BareLoop) -> None:
    print(json.dumps({"ready": True, **loop.info}), flush=True)
    for line in sys.stdin:
        words = line.split()
        if not words:
            continue
        if words[0] == "quit":
            return
        if words[0] != "time" or len(words) != 2 or not words[1].isdigit():
            print(f"bare loop: cannot read {line.strip()!r} (expected 'time N' or 'quit')", file=sys.stderr)
            sys.exit(2)
        steps = int(words[1])
        seconds = loop.block(steps)
        print(
            json.dumps({"steps": steps, "seconds": seconds, "samples_per_s": steps * loop.batch / seconds}),
            flush=True,
        )


class BareLoop:
    """The model, its optimizer and data on the device, and a step; built, compiled and warmed
    up at construction."""

    def __init__(self, args: argparse.Namespace) -> None:
        import torch

        self.rank, self.world, local = (
            int(os.environ.get(k, d)) for k, d in (("RANK", 0), ("WORLD_SIZE", 1), ("LOCAL_RANK", 0))
        )
        if args.batch % self.world:
            sys.exit(f"bare loop: --batch {args.batch} does not divide into {self.world} ranks")
        torch.manual_seed(args.seed)
        self.args = args
        self.torch = torch
        self.batch = args.batch  # the global batch: rates are the whole model's
        self.per_rank = args.batch // self.world
        cuda = args.device == "cuda"
        self.device = torch.device("cuda", local % torch.cuda.device_count()) if cuda else torch.device("cpu")
        if cuda:
            torch.cuda.set_device(self.device)
        if self.world > 1:
            import torch.distributed as dist

            dist.init_process_group("nccl" if cuda else "gloo", **({"device_id": self.device} if cuda else {}))
        if args.precision == "fp32" and cuda:  # fp32 means fp32: no TF32 in matmuls or convolutions
            torch.backends.cuda.matmul.allow_tf32 = False
            torch.backends.cudnn.allow_tf32 = False
        build = build_gpt if args.model == "gpt" else build_resnet
        self.model, self.outputs, self.criterion, self.data, self.layout = build(
            args, self.device, self.per_rank, self.rank
        )
        self.model.train()
        params = list(self.model.parameters())
        fused = {"fused": True} if cuda else {}
        if args.optimizer == "adamw":
            self.opt = torch.optim.AdamW(
                params, lr=args.lr, betas=(0.9, 0.95), eps=1e-8, weight_decay=args.weight_decay, **fused
            )
        else:
            self.opt = torch.optim.SGD(params, lr=args.lr, momentum=0.9, weight_decay=args.weight_decay, **fused)
        outputs, criterion, model = self.outputs, self.criterion, self.model

        class WithLoss(torch.nn.Module):
            """The model and its loss as one module: DDP's graph and the compiled one hold both."""

            def __init__(self) -> None:
                super().__init__()
                self.model = model

            def forward(self, x: Any, y: Any) -> Any:
                return criterion(outputs(self.model, x), y)

        whole: Any = WithLoss()
        if self.world > 1:
            from torch.nn.parallel import DistributedDataParallel

            whole = DistributedDataParallel(whole, device_ids=[self.device.index] if cuda else None)
        self.whole = torch.compile(whole) if args.compile else whole
        self.step_index = 0
        t0 = time.perf_counter()
        self.step()  # compiles
        self.sync()
        compile_s = time.perf_counter() - t0
        for _ in range(WARMUP_STEPS):
            self.step()
        self.sync()
        self.info = {
            "model": args.model,
            "parameters": sum(p.numel() for p in params),
            "compile_s": compile_s,
            "torch": torch.__version__,
            "optimizer": f"{args.optimizer} ({'fused' if fused else 'default'})",
            "world_size": self.world,
            "per_rank_batch": self.per_rank,
            "data_parallel": "torch.compile(DistributedDataParallel(model + loss))" if self.world > 1 else None,
        }

    def close(self) -> None:
        if self.world > 1:
            import torch.distributed as dist

            dist.destroy_process_group()

    def sync(self) -> None:
        if self.device.type == "cuda":
            self.torch.cuda.synchronize()

    def lr_factor(self, step: int) -> float:
        a = self.args
        if step < a.warmup_steps:
            return (step + 1) / a.warmup_steps
        done = min(1.0, (step - a.warmup_steps) / max(1, a.max_steps - a.warmup_steps))
        return {"constant": 1.0, "linear": 1.0 - done, "cosine": 0.5 * (1.0 + math.cos(math.pi * done))}[a.schedule]

    def step(self) -> None:
        torch, a = self.torch, self.args
        inputs, labels = self.data
        idx = torch.randint(0, len(inputs), (self.per_rank,), device=self.device)
        x, y = self.layout(inputs[idx]), labels[idx]
        with torch.autocast(self.device.type, dtype=torch.bfloat16, enabled=a.precision == "bf16"):
            loss = self.whole(x, y)
        loss.backward()
        if a.grad_clip > 0:
            torch.nn.utils.clip_grad_norm_(self.model.parameters(), a.grad_clip)
        lr = a.lr * self.lr_factor(self.step_index)
        for group in self.opt.param_groups:
            group["lr"] = lr
        self.opt.step()
        self.opt.zero_grad(set_to_none=True)
        self.step_index += 1

    def block(self, steps: int) -> float:
        """Seconds for ``steps`` steps, between two synchronisations."""
        self.sync()
        t0 = time.perf_counter()
        for _ in range(steps):
            self.step()
        self.sync()
        return time.perf_counter() - t0


def build_gpt(
    args: argparse.Namespace, device: Any, per_rank: int, rank: int
) -> tuple[Any, Any, Any, tuple[Any, Any], Any]:
    """(model, its logits for a batch, the loss, this rank's device-resident split, the input layout)."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")  # built from a config: nothing to fetch
    import torch
    import torch.nn.functional as F
    import transformers

    transformers.logging.set_verbosity_error()
    if args.arch == "gpt2":
        config = transformers.GPT2Config(
            vocab_size=args.vocab,
            n_positions=args.context,
            n_embd=args.width,
            n_layer=args.layers,
            n_head=args.heads,
            resid_pdrop=0.0,
            embd_pdrop=0.0,
            attn_pdrop=0.0,
            bos_token_id=0,
            eos_token_id=0,
        )
        cls = transformers.GPT2LMHeadModel
    else:
        config = transformers.LlamaConfig(
            vocab_size=args.vocab,
            hidden_size=args.width,
            intermediate_size=4 * args.width,
            num_hidden_layers=args.layers,
            num_attention_heads=args.heads,
            num_key_value_heads=args.heads,
            max_position_embeddings=args.context,
            bos_token_id=0,
            eos_token_id=0,
            pad_token_id=0,
        )
        cls = transformers.LlamaForCausalLM
    config._attn_implementation = "sdpa"
    model = cls(config).to(device)

    def outputs(model: Any, x: Any) -> Any:
        return model(input_ids=x, use_cache=False).logits  # training keeps no key/value cache

    def criterion(logits: Any, y: Any) -> Any:
        return F.cross_entropy(logits.float().flatten(0, 1), y.flatten(), ignore_index=IGNORE)

    n = SPLIT_BATCHES * per_rank
    g = torch.Generator(device=device).manual_seed(args.seed * 1000 + rank)
    drawn = args.symbols or args.vocab - 1
    tokens = torch.randint(1, drawn + 1, (n, args.context + 1), device=device, generator=g)
    inputs, labels = tokens[:, :-1].contiguous(), tokens[:, 1:].clone()
    labels[:, : args.context // 2] = IGNORE  # the loss on the answer half, as the workload's task has it
    return model, outputs, criterion, (inputs, labels), lambda x: x


def build_resnet(
    args: argparse.Namespace, device: Any, per_rank: int, rank: int
) -> tuple[Any, Any, Any, tuple[Any, Any], Any]:
    """(model, its logits for a batch, the loss, this rank's device-resident split, the input layout)."""
    import torch
    import torch.nn.functional as F
    from torch import nn
    from torchvision.models.resnet import BasicBlock, Bottleneck, ResNet

    kind, layers = RESNET_DEPTHS[args.depth]
    block: Any = BasicBlock if kind == "basic" else Bottleneck
    model = ResNet(block, list(layers), num_classes=args.classes)
    w, small = args.width, args.image_size <= SMALL_STEM_MAX_SIZE
    model.inplanes = w
    model.conv1 = nn.Conv2d(3, w, 3, 1, 1, bias=False) if small else nn.Conv2d(3, w, 7, 2, 3, bias=False)
    model.bn1 = nn.BatchNorm2d(w)
    if small:
        model.maxpool = nn.Identity()
    model.layer1 = model._make_layer(block, w, layers[0])
    model.layer2 = model._make_layer(block, 2 * w, layers[1], stride=2)
    model.layer3 = model._make_layer(block, 4 * w, layers[2], stride=2)
    model.layer4 = model._make_layer(block, 8 * w, layers[3], stride=2)
    model.fc = nn.Linear(8 * w * block.expansion, args.classes)
    cuda = device.type == "cuda"
    model = model.to(device)
    if cuda:
        model = model.to(memory_format=torch.channels_last)

    def criterion(logits: Any, y: Any) -> Any:
        return F.cross_entropy(logits.float(), y)

    n = SPLIT_BATCHES * per_rank
    g = torch.Generator(device=device).manual_seed(args.seed * 1000 + rank)
    images = torch.randn(n, 3, args.image_size, args.image_size, device=device, generator=g)
    labels = torch.randint(0, args.classes, (n,), device=device, generator=g)
    layout = (lambda x: x.contiguous(memory_format=torch.channels_last)) if cuda else (lambda x: x)
    return model, lambda model, x: model(x), criterion, (images, labels), layout


if __name__ == "__main__":
    main()
