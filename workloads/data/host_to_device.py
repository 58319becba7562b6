"""``data.host_to_device``: how fast batches reach the GPU. Copies of ``size`` bytes from
pinned (page-locked) or pageable host memory to the device, on one CUDA stream or split in
equal chunks over several, for each size of a sweep.

Work: bytes = the bytes copied (one direction over the link). Each case is judged against
the device's measured ``h2d.pinned`` ceiling (``kernels.ceilings``): pageable copies too, so
their fraction says how much of the link staging through a bounce buffer costs.

With several streams each stream waits for the timing stream before its copy and the timing
stream waits for every one after, so the CUDA events around the call span all the copies.
Verified per case bit-exact: the device buffer is poisoned with NaN, copied into, and
compared with the host source.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from perfsuite import Case, Check, Requirements, Work, param
from perfsuite.checks import equal
from perfsuite.workloads.data._base import DataWorkload

if TYPE_CHECKING:  # pragma: no cover - typing only
    from perfsuite import RunContext

KIB, MIB, GIB = 1024, 1024**2, 1024**3
MEMORY = ("pinned", "pageable")
CEILING = "h2d.pinned"


def size_label(size: int) -> str:
    for unit, scale in (("GiB", GIB), ("MiB", MIB), ("KiB", KIB)):
        if size >= scale and size % scale == 0:
            return f"{size // scale}{unit}"
    return f"{size}B"


@dataclass(frozen=True)
class HostToDeviceParams:
    sizes: tuple[int, ...] = param((64 * KIB, MIB, 16 * MIB, 256 * MIB, GIB), "bytes per copy (K/M/G suffixes)")
    memory: tuple[str, ...] = param(MEMORY, "host memory kinds", choices=MEMORY)
    streams: tuple[int, ...] = param((1, 4), "CUDA streams a copy is split over")

    def __post_init__(self) -> None:
        if not self.sizes or min(self.sizes) < 4 or any(s % 4 for s in self.sizes):
            raise ValueError("sizes must be positive multiples of 4 bytes")
        if not self.streams or min(self.streams) < 1:
            raise ValueError("streams must be at least 1")
        if not self.memory:
            raise ValueError("memory names no host memory kind")


class HostToDevice(DataWorkload):
    name = "data.host_to_device"
    version = 1
    description = "Host-to-device copies: pinned vs pageable, sizes swept, one and several streams, % of h2d ceiling"
    Params = HostToDeviceParams
    quick = {"sizes": (64 * KIB, 4 * MIB), "streams": (1, 2)}
    requirements = Requirements(devices=("cuda",))
    primary_metric = "gbps"

    def setup(self, ctx: "RunContext") -> None:
        import torch

        p = self.params
        n = max(p.sizes) // 4
        self.device_buf = torch.empty(n, device=ctx.torch_device)
        source = torch.randn(n, device=ctx.torch_device)  # random once, on the device: fast
        self.host = {}
        for kind in dict.fromkeys(p.memory):
            self.host[kind] = torch.empty(n, pin_memory=kind == "pinned")
            self.host[kind].copy_(source)
        del source

    def cases(self, ctx: "RunContext") -> list[Case]:
        import torch

        p = self.params
        out = []
        for kind in dict.fromkeys(p.memory):
            for streams in dict.fromkeys(p.streams):
                side = [torch.cuda.Stream() for _ in range(streams)] if streams > 1 else []
                for size in sorted(set(p.sizes)):
                    dst, src = self.device_buf[: size // 4], self.host[kind][: size // 4]
                    label = f"{kind}.{streams}stream.{size_label(size)}"
                    fn = _copy(dst, src, kind == "pinned", side)
                    out.append(
                        Case(
                            label,
                            fn,
                            Work(bytes=float(size)),
                            roofline=CEILING,
                            verify=_verify(label, dst, src, fn),
                            graph_safe=False,
                        )
                    )
        ctx.details["work"] = {c.label: {"bytes": c.work.bytes} for c in out}
        return out

    def teardown(self, ctx: "RunContext") -> None:
        self.device_buf = None
        self.host = {}


def _copy(dst: Any, src: Any, non_blocking: bool, streams: list) -> Callable[[], None]:
    """dst <- src on the current stream, or in equal chunks over ``streams``."""
    if not streams:

        def one() -> None:
            dst.copy_(src, non_blocking=non_blocking)

        return one
    import torch

    chunks = list(zip(dst.chunk(len(streams)), src.chunk(len(streams))))

    def split() -> None:
        current = torch.cuda.current_stream()
        for stream, (d, s) in zip(streams, chunks):
            stream.wait_stream(current)  # start after the timing stream's start event
            with torch.cuda.stream(stream):
                d.copy_(s, non_blocking=non_blocking)
        for stream in streams:
            current.wait_stream(stream)  # the end event follows every chunk

    return split


def _verify(label: str, dst: Any, src: Any, fn: Callable[[], None]) -> Callable[[], Check]:
    def check() -> Check:
        import torch

        torch.cuda.synchronize()
        dst.fill_(float("nan"))
        fn()
        torch.cuda.synchronize()
        # NaN != anything: an element never written counts
        return equal(label, dst.cpu(), src, method="bit equality with the host source after NaN poisoning")

    return check
