"""``data.loader_stall``: the data side of goodput. A training-shaped consumer (a fixed
amount of matmul work per batch) is fed by each input pipeline of
:mod:`perfsuite.inputs.images`; the share of step time spent waiting for data is the time a
real training step would lose to its input pipeline.

One step: take the next batch and wait until it is on the device (data wait), then run
``matmuls_per_step`` multiplications of two ``matmul_size`` square matrices (bf16 on a GPU,
fp32 on the CPU) plus a reduction of the batch, and synchronise (as a loop that reads its
loss every step does). The pipelines keep preparing batches in the background (DataLoader
workers, DALI threads) while the consumer computes; ``torchvision_gpu_decode`` works in the
consumer's own thread and stream, as such a loop would run it.

Cases: ``compute_only`` (the same consumer on one batch held on the device: the step time
with a free input pipeline) and one per path. Metrics: ``stall_share`` (total data wait /
total step time over the timed steps), ``step_ms`` and ``data_wait_ms`` per step, images/s.
Checked per path: every batch full, of the right shape, finite, labels of the data set's
classes; the consumer's result finite.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from perfsuite import Check, Headline, Requirements, param
from perfsuite.inputs import datasets
from perfsuite.inputs import images as pipelines
from perfsuite.workloads.data._base import JPEG_QUICK, DataWorkload, JpegDataParams

if TYPE_CHECKING:  # pragma: no cover - typing only
    from perfsuite import RunContext

PATHS = pipelines.PATHS


@dataclass(frozen=True)
class LoaderStallParams(JpegDataParams):
    out_size: int = param(224, "side of the square crop each image is resized to")
    batch_size: int = param(64, "images per step")
    workers: int = param(8, "DataLoader worker processes; DALI CPU threads")
    paths: tuple[str, ...] = param(PATHS, "input pipelines to feed the consumer, one case each", choices=PATHS)
    steps: int = param(64, "timed steps per path")
    warmup_steps: int = param(8, "untimed steps before the timed ones")
    matmul_size: int = param(8192, "n of the consumer's n x n x n matmuls")
    matmuls_per_step: int = param(8, "matmuls the consumer runs per batch")

    def __post_init__(self) -> None:
        if self.count < self.batch_size:
            raise ValueError(f"count ({self.count}) must fill at least one batch of {self.batch_size}")
        if self.steps < 1 or self.warmup_steps < 0 or self.matmul_size < 1 or self.matmuls_per_step < 1:
            raise ValueError("steps, matmul_size and matmuls_per_step must be positive, warmup_steps not negative")
        if not self.paths:
            raise ValueError("paths names no input pipeline")


class LoaderStall(DataWorkload):
    name = "data.loader_stall"
    controls_honoured = ()  # timed in passes of its own (its params), not by the harness's timing loop
    version = 2  # 2: the loaders hand labels to the GPU without a stream sync per batch
    description = "Share of a training-shaped step spent waiting for data, per input pipeline"
    Params = LoaderStallParams
    quick = {
        **JPEG_QUICK,
        "out_size": 64,
        "batch_size": 8,
        "workers": 2,
        "steps": 6,
        "warmup_steps": 2,
        "matmul_size": 128,
        "matmuls_per_step": 2,
    }
    # PIL decodes the reference; scikit-image's package holds the photographs the data set is made from
    requirements = Requirements(packages=("torch", "PIL", "skimage"))
    # A data pipeline's figure is its rate; the share of the step spent waiting is shown beside it.
    headline = Headline(metric=("items_per_s",), beside=("stall_share",))

    def setup(self, ctx: "RunContext") -> None:
        import torch

        p = self.params
        self.dataset = datasets.jpeg_images(datasets.JpegSpec(count=p.count, width=p.width, height=p.height, seed=0))
        dtype = torch.bfloat16 if ctx.device == "cuda" else torch.float32
        gen = torch.Generator(device="cpu").manual_seed(ctx.controls.seed)
        # scaled so that repeated products stay finite
        self.a = (torch.randn(p.matmul_size, p.matmul_size, generator=gen) / p.matmul_size**0.5).to(
            ctx.torch_device, dtype
        )
        self.b = torch.randn(p.matmul_size, p.matmul_size, generator=gen).to(ctx.torch_device, dtype)
        ctx.details["consumer"] = {
            "matmul_size": p.matmul_size,
            "matmuls_per_step": p.matmuls_per_step,
            "dtype": str(dtype).replace("torch.", ""),
            "flops_per_step": 2.0 * p.matmul_size**3 * p.matmuls_per_step,
        }

    def consume(self, images: Any) -> Any:
        """The fixed work of one step; returns a scalar that depends on the batch."""
        x = self.b
        for _ in range(self.params.matmuls_per_step):
            x = self.a @ x
        return x.float().mean() + images.mean()

    def execute(self, ctx: "RunContext") -> None:
        import torch

        p = self.params
        fixed = torch.zeros((p.batch_size, 3, p.out_size, p.out_size), device=ctx.torch_device)
        self.run_steps(ctx, "compute_only", _repeat(fixed, p.batch_size, self.dataset.labels))
        for path in dict.fromkeys(p.paths):
            why = pipelines.unavailable(path, ctx.device)
            if why:
                ctx.skip_case(path, why)
                continue
            spec = pipelines.LoaderSpec(
                path,
                batch_size=p.batch_size,
                out_size=p.out_size,
                workers=p.workers,
                shuffle=True,
                seed=ctx.controls.seed,
                device=ctx.device,
            )
            with pipelines.build_loader(self.dataset, spec) as loader:
                self.run_steps(ctx, path, _epochs(loader))

    def run_steps(self, ctx: "RunContext", label: str, batches: Iterator[Any]) -> None:
        p = self.params
        waits, steps, bad = [], [], []
        result = None
        for i in range(p.warmup_steps + p.steps):
            t0 = time.perf_counter()
            batch = next(batches)
            ctx.synchronize()
            t1 = time.perf_counter()
            result = self.consume(batch.images)
            ctx.synchronize()
            t2 = time.perf_counter()
            if i >= p.warmup_steps:
                waits.append(t1 - t0)
                steps.append(t2 - t0)
            bad.extend(_batch_problems(batch, p, len(self.dataset.classes)))
        share = sum(waits) / sum(steps)
        ctx.add_metric(label, "stall_share", "fraction", [share], higher_is_better=False, aggregate="max")
        ctx.add_metric(label, "step_ms", "ms", [s * 1e3 for s in steps], higher_is_better=False, aggregate="max")
        ctx.add_metric(label, "data_wait_ms", "ms", [w * 1e3 for w in waits], higher_is_better=False, aggregate="max")
        ctx.add_metric(
            label, "items_per_s", "images/s", [p.batch_size / s for s in steps], higher_is_better=True, aggregate="min"
        )
        ctx.log(f"{label}: {share:.1%} of step time waiting for data, {sum(steps) / len(steps) * 1e3:.2f} ms per step")
        finite = result is not None and bool(result.isfinite())
        if not finite:
            bad.append("the consumer's result is not finite")
        ctx.add_check(
            Check(
                label=label,
                passed=not bad,
                error=float(len(bad)),
                tolerance=0.0,
                method="every batch full, right shape, finite, labels in range; consumer result finite",
                detail="; ".join(dict.fromkeys(bad))[:500],
            )
        )


def _epochs(loader: Any) -> Iterator[Any]:
    """Batches of epoch after epoch."""
    while True:
        yield from loader


def _repeat(images: Any, batch_size: int, labels: tuple) -> Iterator[Any]:
    import torch

    batch = pipelines.Batch(images, torch.tensor(labels[:batch_size], device=images.device))
    while True:
        yield batch


def _batch_problems(batch: Any, p: LoaderStallParams, classes: int) -> list[str]:
    want = (p.batch_size, 3, p.out_size, p.out_size)
    problems = []
    if tuple(batch.images.shape) != want:
        problems.append(f"images of shape {tuple(batch.images.shape)}, not {want}")
    elif not bool(batch.images.isfinite().all()):
        problems.append("non-finite pixels")
    if batch.labels.shape != (p.batch_size,) or int(batch.labels.min()) < 0 or int(batch.labels.max()) >= classes:
        problems.append("labels missing or out of range")
    return problems
