"""``kernels.memory``: device memory bandwidth through two STREAM kernels.

- ``copy``:  ``a.copy_(b)``                           -> bytes = 2 * size (read b, write a)
- ``triad``: ``torch.add(b, c, alpha=s, out=a)`` (a = b + s*c) -> bytes = 3 * size

``size`` is the bytes of one buffer. Both are judged against the device's measured
``memory`` ceiling (the fastest of large device copies and triads, bytes read + written:
on an H100 triad's two reads and a write ran faster than a copy). Buffers should be many
times the last-level cache so that the figure is memory's, not the cache's; the GPU
default (1 GiB per buffer) is ~20x an H100/H200 L2.

Verified exactly: copy by bit equality; triad against a float64 computation of b + s*c,
every element within the rounding of the buffer dtype. The destination is poisoned with NaN first, so
an element the kernel never wrote fails.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from perfsuite import Case, Check, Work, copy_case, param
from perfsuite.checks import close
from perfsuite.dtypes import element_size, torch_dtype
from perfsuite.workloads.kernels._base import KernelWorkload

if TYPE_CHECKING:  # pragma: no cover - typing only
    from perfsuite import RunContext

OPS = ("copy", "triad")
TRIAD_SCALAR = 3.0  # STREAM's q; any non-trivial scalar makes the multiply real work
# Relative Frobenius error of a = b + s*c against float64: one rounding of the result to the
# buffer's dtype (unit roundoff u: fp32 2^-24, fp16 2^-11, bf16 2^-8; rms about u/sqrt(3)),
# tolerance ~20x that.
TRIAD_TOLERANCE = {"fp32": 1e-6, "fp16": 5e-3, "bf16": 5e-2}
# Per element, (rtol, atol as a fraction of the reference's RMS), u the unit roundoff: the
# result is rounded once (u |ref|, rtol 2u) and s*c may be rounded before the add (u |s*c|, up
# to about 6 RMS for normal inputs, which a cancelling b does not shrink: atol 8u). A wrong
# element is off by about the RMS.
TRIAD_ELEMENT_TOLERANCE = {dtype: (2 * u, 8 * u) for dtype, u in (("fp32", 2**-24), ("fp16", 2**-11), ("bf16", 2**-8))}
GIB = 1024**3
MIB = 1024**2


def triad(a: Any, b: Any, c: Any) -> None:
    """a = b + s*c, written into the preallocated a."""
    import torch

    torch.add(b, c, alpha=TRIAD_SCALAR, out=a)


def triad_case(
    a: Any, b: Any, c: Any, *, label: str, roofline: str | None, dtype: str, fn: Callable[[], None] | None = None
) -> Case:
    """STREAM's triad ``a = b + s*c`` (default call: :func:`triad`) into the preallocated ``a``
    (3 x size bytes moved: b and c read, a written), verified against float64 after poisoning
    ``a`` with NaN; ``kernels.ceilings`` measures the memory ceiling with this same case."""
    import torch

    call = fn or functools.partial(triad, a, b, c)

    def verify() -> Check:
        a.fill_(float("nan"))
        call()
        ref = b.to(torch.float64) + TRIAD_SCALAR * c.to(torch.float64)
        rtol, atol_rms = TRIAD_ELEMENT_TOLERANCE[dtype]
        rms = math.sqrt(float((ref * ref).mean())) if ref.numel() else 0.0
        return close(
            label,
            a,
            ref,
            TRIAD_TOLERANCE[dtype],
            method=f"per element and by relative Frobenius error vs float64 b + {TRIAD_SCALAR:g}*c after NaN poisoning",
            rtol=rtol,
            atol=atol_rms * rms,
        )

    size = float(b.numel() * b.element_size())
    return Case(label, call, Work(bytes=3 * size), roofline=roofline, verify=verify)


@dataclass(frozen=True)
class MemoryParams:
    size_bytes: int = param(1 * GIB, "bytes of each buffer (K/M/G suffixes: 256M)")
    ops: tuple[str, ...] = param(OPS, "STREAM kernels to run, one case each", choices=OPS)
    dtype: str = param("fp32", "element type of the buffers", choices=("fp32", "bf16", "fp16"))

    def __post_init__(self) -> None:
        if self.size_bytes < element_size(self.dtype):
            raise ValueError(f"size_bytes must hold at least one {self.dtype} element")
        if not self.ops:
            raise ValueError("ops names no kernel")


class Memory(KernelWorkload):
    name = "kernels.memory"
    version = 1
    description = "STREAM copy and triad: device memory bandwidth vs the memory ceiling"
    Params = MemoryParams
    quick = {"size_bytes": 16 * MIB}
    primary_metric = "gbps"

    def footprint_bytes(self, world_size: int) -> int | None:
        """Three buffers, plus triad's float64 reference (b, c and their sum) while it verifies."""
        p = self.params
        numel = p.size_bytes // element_size(p.dtype)
        return 3 * numel * element_size(p.dtype) + (3 * numel * 8 if "triad" in p.ops else 0)

    def setup(self, ctx: "RunContext") -> None:
        import torch

        p = self.params
        numel = p.size_bytes // element_size(p.dtype)
        dt = torch_dtype(p.dtype)
        dev = ctx.torch_device
        # a is the destination of both kernels; b and c are random inputs (never zeros, so a
        # kernel that writes nothing or zeros cannot pass).
        self.a = torch.empty(numel, device=dev, dtype=dt)
        self.b = torch.randn(numel, device=dev, dtype=dt)
        self.c = torch.randn(numel, device=dev, dtype=dt)

    def copy(self) -> None:
        self.a.copy_(self.b)

    def triad(self) -> None:
        triad(self.a, self.b, self.c)

    def cases(self, ctx: "RunContext") -> list[Case]:
        size = float(self.b.numel() * self.b.element_size())
        a, b, c, dtype = self.a, self.b, self.c, self.params.dtype
        built = {
            "copy": copy_case(a, b, label="copy", work_bytes=2 * size, roofline="memory", fn=self.copy),
            "triad": triad_case(a, b, c, label="triad", roofline="memory", dtype=dtype, fn=self.triad),
        }
        return [built[op] for op in dict.fromkeys(self.params.ops)]

    def teardown(self, ctx: "RunContext") -> None:
        self.a = self.b = self.c = None
