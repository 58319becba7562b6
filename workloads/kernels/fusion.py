"""``kernels.fusion``: a memory-bound elementwise + normalisation chain, eager vs fused.

    y = layer_norm(gelu(x + bias) + residual) * weight + beta      (over the last dim)

x and residual are [rows, hidden]; bias, weight and beta are [hidden]; gelu is the exact
(erf) form; layer_norm has no affine parameters of its own (weight and beta are applied
after it) and eps = 1e-5. Cases, on the same inputs:

- ``eager``: the chain as PyTorch ops (baseline; each op reads and writes memory);
- ``compile``: ``torch.compile`` of the same Python function in ``compile_mode``,
  compiled in setup (seconds in ``details["compile_s"]``, the mode in
  ``details["compile_mode"]``);
- ``triton``: the hand-written kernel of the third-party plugin ``perfsuite_triton``
  (``perfsuite_triton.kernels.fused_chain.fused_chain``), when it is importable and the
  device is CUDA (or ``TRITON_INTERPRET=1`` on the CPU); otherwise skipped with why. Its
  launch (rows per program, block, warps) is in ``details["triton"]``.

The default shape, 262144 x 1024 bf16 (2**28 elements per tensor, 1.5 GiB moved per call),
is the one where both fused implementations can near the copy ceiling: inductor makes a
one-pass (whole row in registers) reduction only up to hidden 1024 (measured on an H200:
71-75% of a device copy at 1024, 32-37% from 2048 up), and max-autotune-no-cudagraphs was
its faster mode there.

Bytes that must move per call: x and residual read, y written, bias/weight/beta read
once: (3*rows*hidden + 3*hidden) * element size. Judged against the ``memory`` ceiling.
Verified against the chain computed in float32 eager.
"""
from __future__ import annotations

import functools
import os
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable

from suite import Case, Work, param
from suite.checks import close
from suite.dtypes import element_size, torch_dtype
from workloads.kernels._common import KernelWorkload, declare, first_line

if TYPE_CHECKING:  # pragma: no cover - typing only
    from suite.context import RunContext

IMPLS = ("eager", "compile", "triton")
# torch.compile's modes ("default" is mode=None); reduce-overhead adds CUDA graphs.
COMPILE_MODES = ("default", "max-autotune-no-cudagraphs", "reduce-overhead")
EPS = 1e-5
# Relative Frobenius error against float32 eager. Eager and fused kernels in bf16 round the
# output (unit roundoff 2^-8, ~2.3e-3 rms) and, eager, every intermediate: measured ~3e-3.
# fp16 (2^-11) is ~8x finer. fp32 differs from the reference by summation order only.
TOLERANCE = {"bf16": 2e-2, "fp16": 5e-3, "fp32": 1e-5}


def make_chain() -> Callable[..., Any]:
    """The chain as a plain Python function of torch ops (what eager runs and torch.compile
    traces); built here so that importing this module does not import torch."""
    import torch.nn.functional as F

    def chain(x: Any, bias: Any, residual: Any, weight: Any, beta: Any, eps: float = EPS) -> Any:
        h = F.gelu(x + bias) + residual
        return F.layer_norm(h, (h.shape[-1],), eps=eps) * weight + beta

    return chain


def load_triton_kernel(device: str) -> tuple[Any, str | None]:
    """The plugin's fused-chain kernel module (``fused_chain``, ``launch_config``), or None
    and the reason it cannot run here."""
    interpreted = os.environ.get("TRITON_INTERPRET") == "1"
    if device != "cuda" and not interpreted:
        return None, "the Triton kernel needs a CUDA device (or TRITON_INTERPRET=1 on the CPU)"
    try:
        from perfsuite_triton.kernels import fused_chain
    except ImportError as exc:
        return None, (f"perfsuite_triton is not importable ({first_line(exc)}); "
                      f"install it with: pip install plugins/perfsuite-triton")
    return fused_chain, None


@dataclass(frozen=True)
class FusionParams:
    rows: int = param(262144, "rows of x and residual (tokens)")
    hidden: int = param(1024, "hidden size: the normalised last dimension")
    dtype: str = param("bf16", "element type", choices=("bf16", "fp16", "fp32"))
    impls: tuple[str, ...] = param(IMPLS, "implementations, one case each", choices=IMPLS)
    compile_mode: str = param("max-autotune-no-cudagraphs", "torch.compile mode of the compile case",
                              choices=COMPILE_MODES)
    rows_per_program: int | None = param(None, "rows per program of the triton kernel, a power of two; "
                                               "none: the kernel's choice for the row length")
    num_warps: int | None = param(None, "warps per program of the triton kernel; none: the kernel's choice")
    erf: str = param("as7126", "erf inside the triton kernel's GELU: libdevice's, or Abramowitz & Stegun 7.1.26 "
                     "(|error| <= 1.5e-7)", choices=("libdevice", "as7126"))

    def __post_init__(self) -> None:
        if self.rows < 1 or self.hidden < 2:
            raise ValueError("rows must be positive and hidden at least 2")
        if not self.impls:
            raise ValueError("impls names no implementation")
        # Whether the tile fits in registers depends on hidden: the kernel's launch_config checks that.
        for name in ("rows_per_program", "num_warps"):
            value = getattr(self, name)
            if value is not None and (value < 1 or value & (value - 1)):
                raise ValueError(f"{name} must be none (the kernel's choice) or a power of two, got {value}")


def fusion_bytes(p: FusionParams) -> float:
    return float((2 * p.rows * p.hidden + 3 * p.hidden + p.rows * p.hidden) * element_size(p.dtype))


class Fusion(KernelWorkload):
    name = "kernels.fusion"
    version = 3  # 2: rows per program, compile mode, 262144 x 1024; 3: the kernel without cache hints, erf a parameter
    description = "layer_norm(gelu(x+b)+r)*w+beta: eager vs torch.compile vs a Triton kernel, vs memory ceiling"
    Params = FusionParams
    quick = {"rows": 256, "hidden": 512, "compile_mode": "default"}  # no autotuning in a quick run
    primary_metric = "gbps"

    def setup(self, ctx: "RunContext") -> None:
        import torch

        p = self.params
        dev, dt = ctx.torch_device, torch_dtype(p.dtype)
        self.x = torch.randn(p.rows, p.hidden, device=dev, dtype=dt)
        self.residual = torch.randn(p.rows, p.hidden, device=dev, dtype=dt)
        self.bias = torch.randn(p.hidden, device=dev, dtype=dt)
        self.weight = 1.0 + 0.1 * torch.randn(p.hidden, device=dev, dtype=dt)  # near 1, as trained weights
        self.beta = 0.1 * torch.randn(p.hidden, device=dev, dtype=dt)
        self.inputs = (self.x, self.bias, self.residual, self.weight, self.beta)

        chain = make_chain()
        self._impls: dict[str, Callable[..., Any]] = {}
        self._skipped: dict[str, str] = {}
        for impl in dict.fromkeys(p.impls):
            if impl == "eager":
                self._impls[impl] = chain
            elif impl == "compile":
                mode = None if p.compile_mode == "default" else p.compile_mode
                compiled = torch.compile(chain, dynamic=False, mode=mode)
                ctx.details["compile_mode"] = p.compile_mode
                t0 = time.perf_counter()
                try:
                    compiled(*self.inputs, eps=EPS)  # the first call compiles
                    ctx.synchronize()
                except RuntimeError as exc:  # no C++ compiler on the CPU, no Triton on the GPU ...
                    self._skipped[impl] = f"torch.compile failed: {first_line(exc)}"
                    continue
                ctx.details["compile_s"] = time.perf_counter() - t0
                self._impls[impl] = compiled
            elif impl == "triton":
                kernel, reason = load_triton_kernel(ctx.device)
                if kernel is None:
                    self._skipped[impl] = reason
                    continue
                try:
                    launch = kernel.launch_config(p.hidden, p.num_warps, p.rows_per_program)
                except ValueError as exc:  # a row (or tile) too long for registers
                    self._skipped[impl] = str(exc)
                    continue
                programs = (p.rows + launch["ROWS"] - 1) // launch["ROWS"]
                ctx.details["triton"] = {**launch, "programs": programs}
                self._impls[impl] = functools.partial(kernel.fused_chain, num_warps=launch["num_warps"],
                                                      rows_per_program=launch["ROWS"], fast_erf=p.erf == "as7126")

        # The reference: the same chain on float32 copies of the inputs.
        self._reference = chain(*(t.to(torch.float32) for t in self.inputs), eps=EPS)

    def _call(self, impl: str) -> Callable[[], Any]:
        fn, inputs = self._impls[impl], self.inputs
        return lambda: fn(*inputs, eps=EPS)

    def cases(self, ctx: "RunContext") -> list[Case]:
        p = self.params
        work = Work(bytes=fusion_bytes(p))
        tol = TOLERANCE[p.dtype]
        built = []
        for impl in self._impls:
            call = self._call(impl)
            built.append(Case(
                label=impl, fn=call, work=work, roofline="memory", baseline=impl == "eager",
                verify=lambda impl=impl, call=call: close(impl, call(), self._reference, tol,
                                                          method="relative Frobenius error vs the chain in float32")))
        return declare(ctx, built, self._skipped)

    def teardown(self, ctx: "RunContext") -> None:
        self.x = self.residual = self.bias = self.weight = self.beta = None
        self.inputs = ()
        self._impls = {}
        self._reference = None
