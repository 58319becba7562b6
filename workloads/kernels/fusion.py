"""``kernels.fusion``: a memory-bound elementwise + normalisation chain, eager vs torch.compile.

    y = layer_norm(gelu(x + bias) + residual) * weight + beta      (over the last dim)

The chain, its inputs, its float64 reference and its tolerances are the host's
(``perfsuite.fused_chain``), shared with any plugin that fuses the same chain by hand
(perfsuite-triton's ``triton.fused_chain`` adds its Triton kernel to these two cases).
Cases, on the same inputs:

- ``eager``: the chain as PyTorch ops (the baseline; each op reads and writes memory);
- ``compile``: ``torch.compile`` of the same Python function in ``compile_mode``,
  compiled in setup (seconds in ``details["compile_s"]``, the mode in
  ``details["compile_mode"]``); a compiler that fails here (no C++ compiler on the CPU)
  skips the case with why.

The default shape, 262144 x 1024 bf16 (2**28 elements per tensor, 1.5 GiB moved per call),
is where inductor makes a one-pass (whole row in registers) reduction: up to hidden 1024
(measured on an H200: 71-75% of a device copy at 1024, 32-37% from 2048 up), and
max-autotune-no-cudagraphs was its faster mode there.

Bytes that must move per call: x and residual read, y written, bias/weight/beta read
once. Judged against the ``memory`` ceiling.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from perfsuite import Case, Work, fused_chain, param
from perfsuite.workloads.kernels._base import KernelWorkload, first_line

if TYPE_CHECKING:  # pragma: no cover - typing only
    from perfsuite import RunContext

IMPLS = ("eager", "compile")
# torch.compile's modes ("default" is mode=None); reduce-overhead adds CUDA graphs.
COMPILE_MODES = ("default", "max-autotune-no-cudagraphs", "reduce-overhead")


@dataclass(frozen=True)
class FusionParams:
    rows: int = param(262144, "rows of x and residual (tokens)")
    hidden: int = param(1024, "hidden size: the normalised last dimension")
    dtype: str = param("bf16", "element type", choices=fused_chain.DTYPES)
    impls: tuple[str, ...] = param(IMPLS, "implementations, one case each", choices=IMPLS)
    compile_mode: str = param(
        "max-autotune-no-cudagraphs", "torch.compile mode of the compile case", choices=COMPILE_MODES
    )

    def __post_init__(self) -> None:
        if self.rows < 1 or self.hidden < 2:
            raise ValueError("rows must be positive and hidden at least 2")
        if not self.impls:
            raise ValueError("impls names no implementation")


def fusion_bytes(p: FusionParams) -> float:
    return fused_chain.bytes_per_call(p.rows, p.hidden, p.dtype)


class Fusion(KernelWorkload):
    name = "kernels.fusion"
    # 2: rows per program, compile mode, 262144 x 1024; 3: the kernel without cache hints, erf a
    # parameter; 4: the host's chain (its inputs, float64 reference, tolerances), no triton case.
    version = 4
    description = "layer_norm(gelu(x+b)+r)*w+beta: eager vs torch.compile, vs the memory ceiling"
    Params = FusionParams
    quick = {"rows": 256, "hidden": 512, "compile_mode": "default"}  # no autotuning in a quick run
    primary_metric = "gbps"

    def setup(self, ctx: "RunContext") -> None:
        import torch

        p = self.params
        self.inputs = fused_chain.make_inputs(p.rows, p.hidden, p.dtype, ctx.torch_device)
        self._impls: dict[str, Callable[..., Any]] = {}
        self._skipped: dict[str, str] = {}
        for impl in dict.fromkeys(p.impls):
            if impl == "eager":
                self._impls[impl] = fused_chain.eager
                continue
            mode = None if p.compile_mode == "default" else p.compile_mode
            compiled = torch.compile(fused_chain.eager, dynamic=False, mode=mode)
            ctx.details["compile_mode"] = p.compile_mode
            t0 = time.perf_counter()
            try:
                compiled(*self.inputs)  # the first call compiles
                ctx.synchronize()
            except RuntimeError as exc:  # no C++ compiler on the CPU, no Triton on the GPU ...
                self._skipped[impl] = f"torch.compile failed: {first_line(exc)}"
                continue
            ctx.details["compile_s"] = time.perf_counter() - t0
            self._impls[impl] = compiled
        self._reference = fused_chain.reference(*self.inputs)

    def cases(self, ctx: "RunContext") -> list[Case]:
        p = self.params
        work = Work(bytes=fusion_bytes(p))
        built = []
        for impl, fn in self._impls.items():
            call = lambda fn=fn: fn(*self.inputs)
            built.append(
                Case(
                    label=impl,
                    fn=call,
                    work=work,
                    roofline="memory",
                    baseline=impl == "eager",
                    verify=lambda impl=impl, call=call: fused_chain.check(impl, call(), self._reference, p.dtype),
                )
            )
        for label, reason in self._skipped.items():
            ctx.skip_case(label, reason)
        return built

    def teardown(self, ctx: "RunContext") -> None:
        self.inputs = ()
        self._impls = {}
        self._reference = None
