"""triton.fused_chain: y = layer_norm(gelu(x + bias) + residual) * weight + beta, row-wise.

A memory-bound chain, so the question is how close each implementation gets to the
device's copy bandwidth: the Triton kernel (one pass), torch eager (five kernels, the
baseline) and torch.compile (inductor's fusion of the same torch code). The bytes that
must move are x and residual read, y written, and bias, weight, beta read once.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

from suite import Case, Check, Requirements, Work, Workload, param

from perfsuite_triton.workloads import _shared


@dataclass(frozen=True)
class FusedChainParams:
    rows: int = param(32768, "rows of x and residual (tokens)")
    hidden: int = param(8192, "row length, the normalised dimension (at most 32768)")
    dtype: str = param("bf16", "dtype of every tensor", choices=_shared.DTYPES)
    eps: float = param(1e-5, "layer-norm epsilon")
    num_warps: int = param(0, "warps per program of the triton kernel; 0: chosen from the row length")

    def __post_init__(self) -> None:
        if self.rows < 1 or not 1 <= self.hidden <= 32768:
            raise ValueError(f"rows must be >= 1 and hidden in 1..32768, got rows={self.rows} hidden={self.hidden}")
        if self.num_warps not in (0, 1, 2, 4, 8, 16, 32):
            raise ValueError(f"num_warps must be 0 (auto) or a power of two up to 32, got {self.num_warps}")


class FusedChain(Workload):
    name = "triton.fused_chain"
    category = "kernels"
    version = 1
    description = "bias + GELU + residual + LayerNorm fused in one Triton kernel vs torch eager and torch.compile"
    Params = FusedChainParams
    quick = {"rows": 64, "hidden": 256}
    requirements = Requirements(packages=("torch", "triton"))
    primary_metric = "gbps"

    def unmet(self, ctx: Any) -> str | None:
        from perfsuite_triton.kernels import fused_chain as kernel

        p = self.params
        return (_shared.device_unmet(ctx.device, kernel.INTERPRETED)
                or _shared.interpreter_size_unmet(ctx.device, p.rows * p.hidden, _shared.INTERPRETER_MAX_ELEMENTS,
                                                  "rows * hidden", "--param rows=64 --param hidden=256"))

    def setup(self, ctx: Any) -> None:
        import torch

        from perfsuite_triton.kernels import fused_chain as kernel

        p = self.params
        dev, dt = ctx.torch_device, _shared.torch_dtype(p.dtype)
        self.x = torch.randn(p.rows, p.hidden, device=dev, dtype=dt)
        self.residual = torch.randn(p.rows, p.hidden, device=dev, dtype=dt)
        # Parameters as a trained layer has them: small bias and shift, scale near one.
        self.bias = (0.1 * torch.randn(p.hidden, device=dev)).to(dt)
        self.weight = (1 + 0.1 * torch.randn(p.hidden, device=dev)).to(dt)
        self.beta = (0.1 * torch.randn(p.hidden, device=dev)).to(dt)
        self.out = torch.empty_like(self.x)
        self.args = (self.x, self.bias, self.residual, self.weight, self.beta, p.eps)
        self.launch = kernel.launch_config(p.hidden, p.num_warps or None)
        ctx.details["triton"] = {**_shared.triton_details(kernel.INTERPRETED), **self.launch,
                                 "programs": p.rows, "rows_per_program": 1}
        self.compiled = _shared.compile_case(ctx, kernel.torch_eager, self.args)

    def cases(self, ctx: Any) -> list[Case]:
        from perfsuite_triton.kernels import fused_chain as kernel

        p = self.params
        esize = self.x.element_size()
        work = Work(bytes=(2 * p.rows * p.hidden + 3 * p.hidden + p.rows * p.hidden) * esize)

        def run_triton() -> Any:
            return kernel.fused_chain(*self.args, out=self.out, num_warps=self.launch["num_warps"])

        def run_eager() -> Any:
            return kernel.torch_eager(*self.args)

        return [
            Case("triton", run_triton, work, roofline="memory", verify=self._verifier("triton", run_triton, self.out)),
            Case("torch_eager", run_eager, work, roofline="memory", baseline=True,
                 verify=self._verifier("torch_eager", run_eager)),
            Case("torch_compile", self.compiled, work, roofline="memory",
                 verify=self._verifier("torch_compile", self.compiled)),
        ]

    def _verifier(self, label: str, fn: Any, out: Any = None) -> Any:
        return functools.partial(self.verify_output, label, fn, out)

    def verify_output(self, label: str, fn: Any, out: Any = None) -> Check:
        """Run ``fn`` once (into ``out``, poisoned first, when given) and compare with float64."""
        return _shared.verify_output(label, fn, self.reference, self.params.dtype, out)

    def reference(self) -> Any:
        """The chain in float64 on the same inputs, computed once per run."""
        if getattr(self, "_reference", None) is None:
            from perfsuite_triton.kernels import fused_chain as kernel

            self._reference = kernel.reference(*self.args)
        return self._reference

    def teardown(self, ctx: Any) -> None:
        for attr in ("x", "residual", "bias", "weight", "beta", "out", "args", "compiled", "_reference"):
            self.__dict__.pop(attr, None)
