"""triton.matmul: C = A @ B, an autotuned tiled Triton kernel vs cuBLAS (torch.matmul, the
baseline) and torch.compile of torch.matmul (which, in inductor's default mode, calls the
same library kernel: the case shows what compiling costs or saves around it).

Compute-bound at the default 8192^3, judged in TFLOP/s (2 * M * N * K per call) against
the device's measured matmul ceiling of the dtype. The config the autotuner picked is
kept in the record's details.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from perfsuite import Case, Work, dtypes, param
from perfsuite_triton.workloads import _shared


@dataclass(frozen=True)
class MatmulParams:
    m: int = param(8192, "rows of A and C")
    n: int = param(8192, "columns of B and C")
    k: int = param(8192, "columns of A, rows of B (the reduction)")
    dtype: str = param("bf16", "dtype of A, B and C (fp32 multiplies in full fp32, not tf32)", choices=_shared.DTYPES)

    def __post_init__(self) -> None:
        if min(self.m, self.n, self.k) < 1:
            raise ValueError(f"m, n, k must be >= 1, got {self.m}, {self.n}, {self.k}")


def _torch_matmul(a: Any, b: Any) -> Any:
    import torch

    return torch.matmul(a, b)


def interpreter_dot_unmet(dtype: str) -> str | None:
    """Triton's interpreter computes tl.dot through numpy; bf16, which numpy lacks, came out
    as garbage on triton 3.9 (relative error ~1e10). Probe a 32^3 product rather than
    trusting a version list, and say what it gave."""
    import torch

    from perfsuite_triton.kernels import matmul as kernel

    gen = torch.Generator().manual_seed(0)
    a = torch.randn(32, 32, generator=gen).to(dtypes.torch_dtype(dtype))
    b = torch.randn(32, 32, generator=gen).to(dtypes.torch_dtype(dtype))
    check = _shared.close_to("probe", kernel.matmul(a, b), a.double() @ b.double(), _shared.TOLERANCE[dtype], "probe")
    if check.passed:
        return None
    return (
        f"triton's CPU interpreter computes tl.dot on {dtype} wrongly here (relative error {check.error:.3g} "
        f"on a 32^3 probe): use --param dtype=fp32 or fp16"
    )


class Matmul(_shared.TritonVsTorch):
    name = "triton.matmul"
    version = 1
    description = "autotuned tiled Triton matmul vs cuBLAS (torch.matmul) and torch.compile"
    Params = MatmulParams
    # fp32: the CPU interpreter has no correct bf16 dot (see interpreter_dot_unmet).
    quick = {"m": 256, "n": 256, "k": 256, "dtype": "fp32"}
    primary_metric = "tflops"

    def unmet(self, ctx: Any) -> str | None:
        from perfsuite_triton.kernels import matmul as kernel

        p = self.params
        reason = _shared.device_unmet(ctx.device, kernel.INTERPRETED) or _shared.interpreter_size_unmet(
            ctx.device,
            2 * p.m * p.n * p.k,
            _shared.INTERPRETER_MAX_FLOPS,
            "2 * m * n * k",
            "--param m=256 --param n=256 --param k=256",
        )
        if reason is None and ctx.device == "cpu":
            reason = interpreter_dot_unmet(p.dtype)
        return reason

    def setup(self, ctx: Any) -> None:
        import torch

        from perfsuite_triton.kernels import matmul as kernel

        p = self.params
        dev, dt = ctx.torch_device, dtypes.torch_dtype(p.dtype)
        self.a = torch.randn(p.m, p.k, device=dev, dtype=dt)
        self.b = torch.randn(p.k, p.n, device=dev, dtype=dt)
        self.out = torch.empty(p.m, p.n, device=dev, dtype=dt)
        # The first call autotunes (on a GPU); do it here so the warm-up does not have to.
        t0 = time.perf_counter()
        kernel.matmul(self.a, self.b, out=self.out)
        ctx.synchronize()
        ctx.details["triton"] = {
            **_shared.triton_details(kernel.INTERPRETED),
            **kernel.chosen_config(),
            "first_call_s": time.perf_counter() - t0,
            "input_precision": kernel.input_precision(dt),
        }
        self.compiled = _shared.compile_case(ctx, _torch_matmul, (self.a, self.b))

    def cases(self, ctx: Any) -> list[Case]:
        from perfsuite_triton.kernels import matmul as kernel

        p = self.params
        work = Work(flops=2.0 * p.m * p.n * p.k)
        roofline = f"matmul.{p.dtype}"

        def run_triton() -> Any:
            return kernel.matmul(self.a, self.b, out=self.out)

        def run_eager() -> Any:
            return _torch_matmul(self.a, self.b)

        return self.three_cases(run_triton, run_eager, work, roofline)

    def compute_reference(self) -> Any:
        """A @ B in float64 on the same inputs."""
        import torch

        return self.a.to(torch.float64) @ self.b.to(torch.float64)

    def teardown(self, ctx: Any) -> None:
        for attr in ("a", "b", "out", "compiled", "_reference"):
            self.__dict__.pop(attr, None)
