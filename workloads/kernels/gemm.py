"""``kernels.gemm``: a dense matrix product C = A @ B, one case per input precision.

The measured call is ``torch.matmul(A, B, out=C)`` into a preallocated C (fp8:
``torch._scaled_mm`` on e4m3 operands with unit scales and a bf16 output). Work per call
is 2*m*n*k FLOPs; bytes are A and B read once and C written once. Each case is judged
against the device's measured ``matmul.<dtype>`` ceiling and verified against a float64
reference on a stratified grid of output elements, each within its own bound
(``_verify.check_matmul``).

The operand building and the kernel call live in :class:`MatmulOperands` so that
``kernels.ceilings`` measures the matrix ceilings with exactly this code.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from perfsuite import Case, Check, Work, param
from perfsuite.dtypes import element_size, torch_dtype
from perfsuite.workloads.kernels._base import (
    KernelWorkload,
    all_unsupported,
    fp32_matmul_precision,
)
from perfsuite.workloads.kernels._verify import check_matmul

if TYPE_CHECKING:  # pragma: no cover - typing only
    from perfsuite import RunContext

MATMUL_DTYPES = ("fp32", "tf32", "bf16", "fp16", "fp8")

# Relative Frobenius error allowed against the float64 product of the operands as the
# kernel read them. Unit roundoff u: fp32 2^-24, tf32 and fp16 2^-11 (4.9e-4), bf16 2^-8
# (3.9e-3); rounding to u gives an rms relative error of about u/sqrt(3).
#  fp32: fp32 accumulation over k random-sign terms stays near 1e-6 at k = 8192; the GPU
#        bound is looser because cuBLAS may pick split-K reductions (more partial sums).
#  tf32: inputs rounded to 11 significant bits: ~3e-4 rms, 5e-3 leaves a 10x margin.
#  bf16: the output is rounded to bf16: ~2.3e-3 rms, 2e-2 leaves a ~9x margin.
#  fp16: the output is rounded to fp16: ~3e-4 rms, 5e-3 leaves a >10x margin.
#  fp8:  against the product of the already-quantised e4m3 inputs: bf16 output rounding
#        plus Hopper's fp8 tensor cores accumulate with fewer than fp32's bits; 1e-1 still
#        fails any wrongly computed or unwritten tile (errors of order 1).
TOLERANCE = {"fp32": 1e-5, "tf32": 5e-3, "bf16": 2e-2, "fp16": 5e-3, "fp8": 1e-1}
TOLERANCE_GPU = {**TOLERANCE, "fp32": 1e-4}
# Per element, (rtol, atol as a fraction of the sampled reference's RMS): |out - ref| <=
# atol_rms * rms(ref) + rtol * |ref|. Rounding the output costs at most u * |ref| (rtol = 2u
# for bf16, fp16 and the bf16 output of fp8); what accumulates over k (tf32's rounded inputs,
# cuBLAS's reduced-precision split-K reductions, fp8 tensor cores' short accumulator) does not
# shrink with |ref|, hence the atol, a few times the norm's own rms error. A wrong element of a
# wrong tile is off by about the RMS itself.
ELEMENT_TOLERANCE = {
    "fp32": (1e-5, 1e-4),
    "tf32": (2 * 2**-11, 2e-2),
    "bf16": (2 * 2**-8, 4e-2),
    "fp16": (2 * 2**-11, 1e-2),
    "fp8": (2 * 2**-8, 1e-1),
}
ELEMENT_TOLERANCE_GPU = {**ELEMENT_TOLERANCE, "fp32": (1e-4, 1e-3)}


def tolerance(dtype: str, device: str) -> float:
    return (TOLERANCE_GPU if device == "cuda" else TOLERANCE)[dtype]


def element_tolerance(dtype: str, device: str) -> tuple[float, float]:
    """(rtol, atol as a fraction of the reference's RMS) of one output element."""
    return (ELEMENT_TOLERANCE_GPU if device == "cuda" else ELEMENT_TOLERANCE)[dtype]


def matmul_unsupported(dtype: str, device: str) -> str | None:
    """Why ``dtype`` matmuls cannot run on ``device`` here, or None."""
    if device == "cpu":
        if dtype == "tf32":
            return "tf32 is a GPU tensor-core mode"
        if dtype == "fp8":
            return "fp8 matmul (torch._scaled_mm, e4m3) needs a CUDA GPU of compute capability >= 8.9"
        return None
    import torch

    major, minor = torch.cuda.get_device_capability()
    cap = f"{major}.{minor}"
    if dtype in ("tf32", "bf16") and (major, minor) < (8, 0):
        return f"{dtype} tensor cores need compute capability >= 8.0 (this GPU: {cap})"
    if dtype == "fp8":
        if (major, minor) < (8, 9):
            return f"fp8 matmul (torch._scaled_mm, e4m3) needs compute capability >= 8.9 (this GPU: {cap})"
        if not hasattr(torch, "float8_e4m3fn") or not hasattr(torch, "_scaled_mm"):
            return f"torch {torch.__version__} has no float8_e4m3fn / _scaled_mm"
    return None


@dataclass
class MatmulOperands:
    """A, B and the preallocated output of one matmul case, and the call that fills it."""

    dtype: str
    a: Any  # [m, k]
    b: Any  # [k, n]; for fp8 a column-major view, as torch._scaled_mm requires
    out: Any  # [m, n]; bf16 for fp8 inputs
    scale: Any = None  # fp8 only: the unit scale of A and B (float32 scalar tensor)

    @classmethod
    def random(cls, dtype: str, m: int, n: int, k: int, device: Any) -> "MatmulOperands":
        """Normal random operands from torch's seeded generator (rounded to ``dtype``)."""
        import torch

        if dtype == "fp8":
            e4m3 = torch_dtype("fp8")
            # Standard normal values lie well inside e4m3's range (+-448): unit scales are exact.
            a = torch.randn(m, k, device=device).to(e4m3)
            b = torch.randn(n, k, device=device).to(e4m3).t()
            out = torch.empty(m, n, device=device, dtype=torch.bfloat16)
            return cls(dtype, a, b, out, scale=torch.ones((), device=device, dtype=torch.float32))
        t = torch_dtype(dtype)
        a = torch.randn(m, k, device=device, dtype=t)
        b = torch.randn(k, n, device=device, dtype=t)
        return cls(dtype, a, b, torch.empty(m, n, device=device, dtype=t))

    def run(self) -> None:
        """One matmul into ``out``, in this case's precision."""
        import torch

        if self.dtype == "fp8":
            torch._scaled_mm(
                self.a, self.b, scale_a=self.scale, scale_b=self.scale, out_dtype=self.out.dtype, out=self.out
            )
        elif self.dtype in ("fp32", "tf32"):
            with fp32_matmul_precision("high" if self.dtype == "tf32" else "highest"):
                torch.matmul(self.a, self.b, out=self.out)
        else:
            torch.matmul(self.a, self.b, out=self.out)

    def work(self) -> Work:
        m, k = self.a.shape
        n = self.b.shape[1]
        in_bytes = element_size(self.dtype) * (m * k + k * n)
        return Work(flops=2.0 * m * n * k, bytes=float(in_bytes + self.out.element_size() * m * n))


def matmul_case(
    ops: MatmulOperands,
    *,
    label: str,
    roofline: str | None,
    device: str,
    seed: int,
    fn: Callable[[], None] | None = None,
) -> Case:
    """A timed, verified case of ``ops``: ``fn`` (default ``ops.run``) must fill ``ops.out``."""
    call = fn or ops.run

    def verify() -> Check:
        ops.out.fill_(float("nan"))  # an element the call does not write stays NaN and fails
        call()
        rtol, atol_rms = element_tolerance(ops.dtype, device)
        return check_matmul(
            label,
            ops.out,
            ops.a,
            ops.b,
            tolerance=tolerance(ops.dtype, device),
            rtol=rtol,
            atol_rms=atol_rms,
            seed=seed,
        )

    return Case(label=label, fn=call, work=ops.work(), roofline=roofline, verify=verify)


@dataclass(frozen=True)
class GemmParams:
    m: int = param(8192, "rows of A and of the output")
    n: int = param(8192, "columns of B and of the output")
    k: int = param(8192, "the reduced dimension (columns of A, rows of B)")
    dtypes: tuple[str, ...] = param(("bf16",), "input precisions, one case each", choices=MATMUL_DTYPES)

    def __post_init__(self) -> None:
        if min(self.m, self.n, self.k) < 1:
            raise ValueError("m, n and k must be positive")
        if not self.dtypes:
            raise ValueError("dtypes names no precision")


class Gemm(KernelWorkload):
    name = "kernels.gemm"
    version = 1
    description = "Dense matmul (torch.matmul / _scaled_mm) per precision vs the matrix ceilings"
    Params = GemmParams
    quick = {"m": 256, "n": 256, "k": 256}
    primary_metric = "tflops"

    def unmet(self, ctx: "RunContext") -> str | None:
        return all_unsupported({d: matmul_unsupported(d, ctx.device) for d in self.params.dtypes})

    def footprint_bytes(self, world_size: int) -> int | None:
        """A, B and the output of every precision (all live at once), plus the float32
        temporaries fp8 operands are drawn through."""
        p = self.params
        total = 0
        for dtype in dict.fromkeys(p.dtypes):
            out = 2 if dtype == "fp8" else element_size(dtype)  # fp8 writes bf16
            total += element_size(dtype) * (p.m * p.k + p.k * p.n) + out * p.m * p.n
        if "fp8" in p.dtypes:
            total += 4 * max(p.m * p.k, p.k * p.n)
        return total

    def kernel(self, ops: MatmulOperands) -> Callable[[], None]:
        """The timed call for one precision (a seam for tests that break it on purpose)."""
        return ops.run

    def setup(self, ctx: "RunContext") -> None:
        p = self.params
        self._cases: list[Case] = []
        self._skipped: dict[str, str] = {}
        for dtype in dict.fromkeys(p.dtypes):
            reason = matmul_unsupported(dtype, ctx.device)
            if reason:
                self._skipped[dtype] = reason
                continue
            ops = MatmulOperands.random(dtype, p.m, p.n, p.k, ctx.torch_device)
            self._cases.append(
                matmul_case(
                    ops,
                    label=dtype,
                    roofline=f"matmul.{dtype}",
                    device=ctx.device,
                    seed=ctx.controls.seed,
                    fn=self.kernel(ops),
                )
            )

    def cases(self, ctx: "RunContext") -> list[Case]:
        for label, reason in self._skipped.items():
            ctx.skip_case(label, reason)
        return self._cases

    def teardown(self, ctx: "RunContext") -> None:
        self._cases = []
