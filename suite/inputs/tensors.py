"""Batches of an in-memory data set (a training split held as tensors) delivered to the
device: the same deterministic sample order, three ways of getting it there (a training
workload's ``pipeline`` parameter). Image files go through :mod:`perfsuite.inputs.images`.

Order: epoch ``e`` is a permutation of the training split drawn from (run seed, e); the
``k``-th global batch is its ``k``-th slice of ``global_batch`` samples (the incomplete
tail is dropped) and rank ``r`` takes the ``r``-th of ``world`` equal parts. The global
batch, and therefore the training trajectory, does not depend on the world size.

- ``tensor``: the split lives on the device; a batch is one indexed gather there.
- ``dataloader``: torch's DataLoader over the split in host memory (``loader_workers``
  worker processes, pinned memory on a GPU, non-blocking copies).
- ``dali``: an NVIDIA DALI pipeline fed by ``fn.external_source`` with the same batches,
  copied to the GPU by DALI (needs ``nvidia.dali``).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

PIPELINES = ("tensor", "dataloader", "dali")


def epoch_order(n: int, seed: int, epoch: int) -> Any:
    import torch

    return torch.randperm(n, generator=torch.Generator().manual_seed(seed * 100_003 + epoch))


class RankBatches:
    """Index lists of one rank's share of every global batch, epoch after epoch (forever)."""

    def __init__(self, n: int, global_batch: int, rank: int, world: int, seed: int) -> None:
        if global_batch % world:
            raise ValueError(f"global_batch {global_batch} does not divide into {world} ranks")
        if n < global_batch:
            raise ValueError(f"the training split ({n} samples) is smaller than one global batch ({global_batch})")
        self.n, self.global_batch, self.rank, self.world, self.seed = n, global_batch, rank, world, seed
        self.per_rank = global_batch // world
        self.steps_per_epoch = n // global_batch

    def epochs(self) -> Iterator[tuple[Any, list[int]]]:
        """(the epoch's order, this rank's start offset of each of its batches), forever."""
        epoch = 0
        while True:
            starts = [k * self.global_batch + self.rank * self.per_rank for k in range(self.steps_per_epoch)]
            yield epoch_order(self.n, self.seed, epoch), starts
            epoch += 1

    def __iter__(self) -> Iterator[list[int]]:
        for order, starts in self.epochs():
            for lo in starts:
                yield order[lo : lo + self.per_rank].tolist()


def batches(kind: str, inputs: Any, labels: Any, order: RankBatches, device: Any, workers: int) -> Iterator:
    """An endless iterator of (inputs, labels) batches on ``device``."""
    if kind == "tensor":
        return _tensor(inputs, labels, order, device)
    if kind == "dataloader":
        return _dataloader(inputs, labels, order, device, workers)
    if kind == "dali":
        return _dali(inputs, labels, order, device, workers)
    raise ValueError(f"pipeline {kind!r} is not one of {', '.join(PIPELINES)}")


def _tensor(inputs: Any, labels: Any, order: RankBatches, device: Any) -> Iterator:

    x, y = inputs.to(device), labels.to(device)
    cuda = device.type == "cuda"
    for epoch_order_host, starts in order.epochs():
        # one copy of the epoch's order per epoch, from pinned memory without waiting: a copy
        # from pageable memory synchronises the host with the GPU, and with a small split on
        # many ranks (ResNet-50's 4,096 images at 1,024 a step: an epoch every 4 steps) that
        # drained the launch queue of every rank, and stalled them all at the next all-reduce
        src = epoch_order_host.pin_memory() if cuda else epoch_order_host
        epoch_order_dev = src.to(device, non_blocking=cuda)
        for lo in starts:
            i = epoch_order_dev[lo : lo + order.per_rank]
            yield x[i], y[i]


def _dataloader(inputs: Any, labels: Any, order: RankBatches, device: Any, workers: int) -> Iterator:
    from torch.utils.data import DataLoader, TensorDataset

    cuda = device.type == "cuda"
    loader = DataLoader(
        TensorDataset(inputs, labels),
        batch_sampler=order,
        num_workers=workers,
        pin_memory=cuda,
        persistent_workers=workers > 0,
        prefetch_factor=4 if workers else None,
    )
    for x, y in loader:
        yield x.to(device, non_blocking=cuda), y.to(device, non_blocking=cuda)


def _dali(inputs: Any, labels: Any, order: RankBatches, device: Any, workers: int) -> Iterator:
    from nvidia.dali import fn, pipeline_def
    from nvidia.dali.plugin.pytorch import DALIGenericIterator

    cuda = device.type == "cuda"
    x_np, y_np = inputs.numpy(), labels.numpy()
    indices = iter(order)

    def source():
        idx = next(indices)
        return x_np[idx], y_np[idx]

    @pipeline_def(
        batch_size=order.per_rank,
        num_threads=max(1, workers),
        device_id=device.index if cuda else None,
        prefetch_queue_depth=2,
        exec_dynamic=True,
    )
    def pipe():
        x, y = fn.external_source(source=source, num_outputs=2, batch=True)
        return (x.gpu(), y.gpu()) if cuda else (x, y)

    p = pipe()
    p.build()
    for out in DALIGenericIterator(p, ["x", "y"], auto_reset=False):
        yield out[0]["x"].to(device), out[0]["y"].to(device)
