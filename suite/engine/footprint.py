"""Refusing a run that cannot fit in memory, before any process starts.

A workload states what one rank allocates (:meth:`perfsuite.Workload.footprint_bytes`); the
runner compares it with the memory free on the device the run measures on: host memory
(psutil's "available") for the CPU, a GPU's free memory (NVML) for CUDA. The message
names both figures, so ``size_bytes=999999999G`` is one line instead of a worker that
dies of an out-of-memory error (or takes the machine down with it).
"""

from __future__ import annotations

from typing import Any


def human_bytes(n: float) -> str:
    """``12.3 GiB``: binary units, as the parameters' K/M/G suffixes are."""
    for unit in ("B", "KiB", "MiB", "GiB", "TiB", "PiB"):
        if abs(n) < 1024 or unit == "PiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    raise AssertionError("unreachable")


def free_gpu_bytes() -> list[int]:
    """Free memory of each GPU NVML sees, largest first; [] without NVML."""
    from perfsuite.measure import nvml

    nv, _ = nvml.init()
    if nv is None:
        return []
    free = [
        int(nv.nvmlDeviceGetMemoryInfo(nv.nvmlDeviceGetHandleByIndex(i)).free) for i in range(nv.nvmlDeviceGetCount())
    ]
    return sorted(free, reverse=True)


def too_large(workload: Any, device: str, world_size: int, local_ranks: int) -> str | None:
    """Why this run cannot fit in memory here, or None (fits, or its footprint is unknown)."""
    need = workload.footprint_bytes(world_size)
    if need is None:
        return None
    if device == "cpu":
        import psutil

        available = int(psutil.virtual_memory().available)
        total = need * local_ranks
        if total > available:
            per = f" ({local_ranks} ranks x {human_bytes(need)})" if local_ranks > 1 else ""
            return f"needs {human_bytes(total)} of host memory{per}, more than the {human_bytes(available)} available"
        return None
    free = free_gpu_bytes()
    if len(free) < local_ranks:
        return None  # NVML cannot tell (or sees fewer GPUs than ranks): the run finds out itself
    # Each rank on its own GPU: the ranks fit if the local_ranks-th emptiest GPU holds one.
    available = free[local_ranks - 1]
    if need > available:
        return (
            f"needs {human_bytes(need)} of GPU memory per rank, more than the "
            f"{human_bytes(available)} free on the GPU{'s' if local_ranks > 1 else ''} it would use"
        )
    return None
