"""torch.distributed inside the measuring process: join the group the launcher made,
and bring every rank's metrics to rank 0, aggregated as each metric declares."""
from __future__ import annotations

import os
from typing import Any


def rank_from_env() -> tuple[int, int, int]:
    """(rank, world size, local rank) from torchrun's variables; (0, 1, 0) when alone."""
    return (int(os.environ.get("RANK", 0)), int(os.environ.get("WORLD_SIZE", 1)),
            int(os.environ.get("LOCAL_RANK", 0)))


def init(device: str, timeout_s: float) -> str | None:
    """Join the process group (NCCL on GPUs, gloo on CPUs); returns the backend or None."""
    rank, world, local = rank_from_env()
    if world == 1:
        return None
    import datetime

    import torch
    import torch.distributed as dist

    backend = "nccl" if device == "cuda" else "gloo"
    if device == "cuda":
        torch.cuda.set_device(local)
    dist.init_process_group(backend, timeout=datetime.timedelta(seconds=timeout_s))
    return backend


_AGGREGATE = {"min": min, "max": max, "mean": lambda v: sum(v) / len(v)}


def gather_metrics(metrics: list[dict], world: int) -> list[dict] | None:
    """All ranks call this; rank 0 gets the merged metrics (samples of rank 0, per-rank
    values beside, the value aggregated as declared); the other ranks get None."""
    if world == 1:
        return metrics
    import torch.distributed as dist

    gathered: list[Any] = [None] * world
    dist.all_gather_object(gathered, [m["value"] for m in metrics])
    if dist.get_rank() != 0:
        return None
    merged = []
    for i, m in enumerate(metrics):
        values = [float(g[i]) for g in gathered]
        m = dict(m, per_rank=values)
        if m["aggregate"] in _AGGREGATE:
            m["value"] = float(_AGGREGATE[m["aggregate"]](values))
        merged.append(m)
    return merged


def shutdown() -> None:
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()
