"""``kernels.ceilings``: this device's own ceilings, the roof every other figure is judged by.

One case per ceiling resource, labelled with the resource's name; the runner matches
case label == resource in the latest passed run of this workload on the same device
(metric ``tflops`` for ``matmul.*``, ``gbps`` for the rest):

- ``matmul.fp32|tf32|bf16|fp16|fp8``: an n^3 matmul (``kernels.gemm``'s own case) in each
  precision the device has (on the CPU: fp32 and bf16 only);
- ``memory``: a large device-to-device copy, bytes read + written (``kernels.memory``'s copy);
- ``h2d.pinned|h2d.pageable|d2h.pinned|d2h.pageable``: host<->device copies of
  ``transfer_bytes`` from/to pinned or ordinary host memory, bytes = bytes transferred.

A resource the device lacks is skipped with its reason in ``details["skipped_cases"]``.
Every case is verified like its workload (sampled float64 blocks; copies bit-exact).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable

from suite import Case, param
from workloads.kernels._common import KernelWorkload, declare
from workloads.kernels.gemm import MATMUL_DTYPES, MatmulOperands, matmul_case, matmul_unsupported
from workloads.kernels.memory import GIB, MIB, copy_case

if TYPE_CHECKING:  # pragma: no cover - typing only
    from suite import RunContext

TRANSFERS = ("h2d.pinned", "h2d.pageable", "d2h.pinned", "d2h.pageable")
# The CPU's ceilings (see DESIGN.md): fp16 matmul on a CPU is not a hardware peak worth
# a roofline, and tf32 / fp8 are GPU tensor-core modes.
CPU_MATMUL = ("fp32", "bf16")


@dataclass(frozen=True)
class CeilingsParams:
    matmul_size: int = param(8192, "m = n = k of the matmul ceilings")
    matmul_dtypes: tuple[str, ...] = param(MATMUL_DTYPES, "matmul precisions to measure", choices=MATMUL_DTYPES)
    copy_bytes: int = param(2 * GIB, "bytes of each buffer of the device-memory copy")
    transfer_bytes: int = param(1 * GIB, "bytes of each host<->device transfer")

    def __post_init__(self) -> None:
        if self.matmul_size < 1 or self.copy_bytes < 4 or self.transfer_bytes < 4:
            raise ValueError("matmul_size must be positive; copy_bytes and transfer_bytes at least 4")


def matmul_ceiling_unsupported(dtype: str, device: str) -> str | None:
    if device == "cpu" and dtype == "fp16":
        return f"not a CPU ceiling: on the CPU the matrix ceilings are {', '.join(CPU_MATMUL)}"
    return matmul_unsupported(dtype, device)


class Ceilings(KernelWorkload):
    name = "kernels.ceilings"
    version = 1
    description = "This device's ceilings: matmul per precision, memory copy, host<->device links"
    Params = CeilingsParams
    quick = {"matmul_size": 256, "copy_bytes": 16 * MIB, "transfer_bytes": 16 * MIB}

    def setup(self, ctx: "RunContext") -> None:
        import torch

        p = self.params
        dev = ctx.torch_device
        self._cases: list[Case] = []
        self._skipped: dict[str, str] = {}
        for dtype in dict.fromkeys(p.matmul_dtypes):
            label = f"matmul.{dtype}"
            reason = matmul_ceiling_unsupported(dtype, ctx.device)
            if reason:
                self._skipped[label] = reason
                continue
            ops = MatmulOperands.random(dtype, p.matmul_size, p.matmul_size, p.matmul_size, dev)
            self._cases.append(matmul_case(ops, label=label, roofline=None, device=ctx.device,
                                           seed=ctx.controls.seed))

        n = p.copy_bytes // 4
        src, dst = torch.randn(n, device=dev), torch.empty(n, device=dev)
        self._cases.append(copy_case(dst, src, label="memory", work_bytes=2.0 * n * 4, roofline=None))

        if ctx.device != "cuda":
            for label in TRANSFERS:
                self._skipped[label] = "host<->device transfers need a CUDA device"
            return
        n = p.transfer_bytes // 4
        device_buf = {"h2d": torch.empty(n, device=dev), "d2h": torch.randn(n, device=dev)}
        for label in TRANSFERS:
            direction, kind = label.split(".")
            host = torch.empty(n, pin_memory=kind == "pinned")
            if direction == "h2d":
                host.copy_(device_buf["d2h"])  # random contents, made once on the device
                dst, src = device_buf["h2d"], host
            else:
                dst, src = host, device_buf["d2h"]
            # Asynchronous only from/to pinned memory, as an application would copy; the CUDA
            # events around the call time the copy on the stream either way. Pageable copies
            # cannot be captured in a CUDA graph, so no transfer case is (graph_safe=False).
            self._cases.append(copy_case(dst, src, label=label, work_bytes=n * 4.0, roofline=None,
                                         fn=_transfer(dst, src, non_blocking=kind == "pinned"), graph_safe=False))

    def cases(self, ctx: "RunContext") -> list[Case]:
        # A ceiling is the roof itself: no case names a roofline to be judged against.
        return declare(ctx, self._cases, self._skipped)

    def teardown(self, ctx: "RunContext") -> None:
        self._cases = []


def _transfer(dst: Any, src: Any, non_blocking: bool) -> Callable[[], None]:
    def fn() -> None:
        dst.copy_(src, non_blocking=non_blocking)

    return fn
