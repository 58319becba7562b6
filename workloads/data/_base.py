"""What the data workloads share: the family's base class, timing whole passes over a data
set (an epoch of images, a pass over the shards), and dropping a file's page cache.

A data pipeline is not one short call: it has worker processes, prefetch queues and start-up
costs. So these workloads time whole passes with the host clock, the device synchronised at
the end of each, after untimed warm-up passes, and record one sample per pass. No torch at
import time.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import mmap
import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from perfsuite import Workload, param

if TYPE_CHECKING:  # pragma: no cover - typing only
    from perfsuite import RunContext

MB = 1e6


@dataclass(frozen=True)
class JpegDataParams:
    """The JPEG data set an image workload reads (``perfsuite.inputs.datasets.jpeg_images``):
    declared once, so that every workload over it names, defaults and describes it alike; a
    workload's own parameters follow these three."""

    count: int = param(2048, "JPEG images in the data set")
    width: int = param(500, "width of each JPEG, pixels")
    height: int = param(375, "height of each JPEG, pixels")


# The quick runs' data set: a few small images, enough for a batch or two on the CPU.
JPEG_QUICK: Mapping[str, Any] = {"count": 32, "width": 160, "height": 120}


def first_line(exc: BaseException) -> str:
    """An exception as one readable line (DALI and CUDA errors carry pages of context)."""
    lines = [ln.strip() for ln in str(exc).strip().splitlines() if ln.strip()]
    return f"{type(exc).__name__}: {lines[0] if lines else ''}".rstrip(": ")


CUFILE_WORDS = ("cufile", "gpudirect", "gds", "file descriptor")


def cufile_reason(exc: BaseException) -> str:
    """cuFile's own words from an error whose first line is only a wrapper: DALI raises
    "Critical error in pipeline" with cuFile's message pages below; the first line naming
    cuFile (or GDS, or the file descriptor it refuses), else the first line."""
    for ln in str(exc).splitlines():
        if any(w in ln.lower() for w in CUFILE_WORDS):
            return f"{type(exc).__name__}: {ln.strip()}"
    return first_line(exc)


def time_passes(
    ctx: "RunContext",
    run_pass: Callable[[], Any],
    passes: int,
    warmup: int,
    before_pass: Callable[[], None] | None = None,
) -> list[float]:
    """Seconds of each of ``passes`` timed calls of ``run_pass`` after ``warmup`` untimed ones;
    ``before_pass`` (e.g. dropping the page cache) runs untimed before every call."""
    samples = []
    for i in range(warmup + passes):
        if before_pass is not None:
            before_pass()
        ctx.synchronize()
        t0 = time.perf_counter()
        run_pass()
        ctx.synchronize()
        if i >= warmup:
            samples.append(time.perf_counter() - t0)
    return samples


def record_passes(
    ctx: "RunContext",
    label: str,
    seconds: list[float],
    *,
    items: float = 0.0,
    item_unit: str = "items",
    data_bytes: float = 0.0,
    bytes_metric: str = "gbps",
) -> None:
    """One sample per pass: time per pass, items/s, and bytes/s (``gbps``: GB/s;
    ``encoded_mbps``: MB/s of encoded input)."""
    ctx.add_metric(label, "time_ms", "ms", [s * 1e3 for s in seconds], higher_is_better=False, aggregate="max")
    if items:
        ctx.add_metric(
            label, "items_per_s", f"{item_unit}/s", [items / s for s in seconds], higher_is_better=True, aggregate="min"
        )
    if data_bytes:
        scale, unit = {"gbps": (1e-9, "GB/s"), "encoded_mbps": (1 / MB, "MB/s")}[bytes_metric]
        ctx.add_metric(
            label, bytes_metric, unit, [data_bytes / s * scale for s in seconds], higher_is_better=True, aggregate="min"
        )


class DataWorkload(Workload):
    """A workload of the ``data`` category (its skipped cases are shown by the host)."""

    category = "data"


# -- the page cache -----------------------------------------------------------------------

PAGE_CACHE_METHOD = "posix_fadvise(POSIX_FADV_DONTNEED) on every file before every pass"


def drop_page_cache(paths: list) -> None:
    """Ask the kernel to evict each file's cached pages (no root needed, unlike
    /proc/sys/vm/drop_caches). Clean pages go; :func:`resident_fraction` says whether they did."""
    for path in paths:
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)  # dirty pages cannot be dropped
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


def resident_fraction(path: Any) -> float | None:
    """Share of ``path``'s pages in the page cache (mincore), or None where unsupported."""
    libc_name = ctypes.util.find_library("c")
    if libc_name is None:
        return None
    libc = ctypes.CDLL(libc_name, use_errno=True)
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
    libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
    libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p]
    size = os.path.getsize(path)
    if size == 0:
        return 0.0
    page = mmap.PAGESIZE
    pages = (size + page - 1) // page
    fd = os.open(path, os.O_RDONLY)
    try:
        addr = libc.mmap(None, size, mmap.PROT_READ, mmap.MAP_SHARED, fd, 0)
        if addr in (None, ctypes.c_void_p(-1).value):
            return None
        try:
            vec = (ctypes.c_ubyte * pages)()
            if libc.mincore(addr, size, vec) != 0:
                return None
            return sum(b & 1 for b in vec) / pages
        finally:
            libc.munmap(addr, size)
    finally:
        os.close(fd)
