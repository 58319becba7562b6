"""triton.softmax: softmax over the rows of a [rows, cols] tensor.

Memory-bound: the least any softmax moves is the input read once and the output written
once (2 * rows * cols elements). Compared: the Triton kernel, torch.softmax (eager, the
baseline) and torch.compile of it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from perfsuite import Case, Work, dtypes, param
from perfsuite_triton.workloads import _shared


@dataclass(frozen=True)
class SoftmaxParams:
    rows: int = param(32768, "rows, each normalised on its own")
    cols: int = param(8192, "row length (at most 32768)")
    dtype: str = param("bf16", "dtype of input and output", choices=_shared.DTYPES)
    num_warps: int = param(0, "warps per program of the triton kernel; 0: chosen from the row length")

    def __post_init__(self) -> None:
        if self.rows < 1 or not 1 <= self.cols <= 32768:
            raise ValueError(f"rows must be >= 1 and cols in 1..32768, got rows={self.rows} cols={self.cols}")
        if self.num_warps not in (0, 1, 2, 4, 8, 16, 32):
            raise ValueError(f"num_warps must be 0 (auto) or a power of two up to 32, got {self.num_warps}")


def _torch_softmax(x: Any) -> Any:
    import torch

    return torch.softmax(x, dim=-1)


class Softmax(_shared.TritonVsTorch):
    name = "triton.softmax"
    version = 1
    description = "fused row softmax in Triton vs torch.softmax eager and torch.compile"
    Params = SoftmaxParams
    quick = {"rows": 64, "cols": 256}
    primary_metric = "gbps"

    def unmet(self, ctx: Any) -> str | None:
        from perfsuite_triton.kernels import softmax as kernel

        p = self.params
        return _shared.device_unmet(ctx.device, kernel.INTERPRETED) or _shared.interpreter_size_unmet(
            ctx.device,
            p.rows * p.cols,
            _shared.INTERPRETER_MAX_ELEMENTS,
            "rows * cols",
            "--param rows=64 --param cols=256",
        )

    def setup(self, ctx: Any) -> None:
        import torch

        from perfsuite_triton.kernels import softmax as kernel

        p = self.params
        # Logits of spread ~3: exponentials over several orders of magnitude, as attention has.
        self.x = (3 * torch.randn(p.rows, p.cols, device=ctx.torch_device)).to(dtypes.torch_dtype(p.dtype))
        self.out = torch.empty_like(self.x)
        self.launch = kernel.launch_config(p.cols, p.num_warps or None)
        ctx.details["triton"] = {
            **_shared.triton_details(kernel.INTERPRETED),
            **self.launch,
            "programs": p.rows,
            "rows_per_program": 1,
        }
        self.compiled = _shared.compile_case(ctx, _torch_softmax, (self.x,))

    def cases(self, ctx: Any) -> list[Case]:
        from perfsuite_triton.kernels import softmax as kernel

        p = self.params
        work = Work(bytes=2 * p.rows * p.cols * self.x.element_size())

        def run_triton() -> Any:
            return kernel.softmax(self.x, out=self.out, num_warps=self.launch["num_warps"])

        def run_eager() -> Any:
            return _torch_softmax(self.x)

        return self.three_cases(run_triton, run_eager, work, "memory")

    def compute_reference(self) -> Any:
        """torch.softmax in float64 on the same input."""
        import torch

        return torch.softmax(self.x.to(torch.float64), dim=-1)

    def teardown(self, ctx: Any) -> None:
        for attr in ("x", "out", "compiled", "_reference"):
            self.__dict__.pop(attr, None)
