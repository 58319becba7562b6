"""triton.fused_chain: y = layer_norm(gelu(x + bias) + residual) * weight + beta, row-wise.

A memory-bound chain, so the question is how close each implementation gets to the
device's copy bandwidth: the Triton kernel (one pass), torch eager (five kernels, the
baseline) and torch.compile (inductor's fusion of the same torch code). The chain, its
inputs, float64 reference and tolerances are the host's (``perfsuite.fused_chain``, which the
built-in ``kernels.fusion`` measures in eager and torch.compile too): this workload adds
the Triton kernel. The bytes that must move are x and residual read, y written, and bias,
weight, beta read once.

The default shape, 262144 x 1024 bf16 (2**28 elements per tensor), is where both fused
implementations can near the ceiling: inductor keeps a whole row in registers (one pass
over memory) only up to hidden 1024 (measured on an H200: 71-75% of a device copy at
1024, 32-37% from 2048 up), and the Triton kernel gives small rows enough work by taking
several rows per program. ``compile_mode`` defaults to max-autotune-no-cudagraphs, the
faster of inductor's modes measured there.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from perfsuite import Case, Work, param
from perfsuite import fused_chain as chain
from perfsuite_triton.workloads import _shared

# torch.compile's modes ("default" is mode=None); reduce-overhead adds CUDA graphs.
COMPILE_MODES = ("default", "max-autotune-no-cudagraphs", "reduce-overhead")


@dataclass(frozen=True)
class FusedChainParams:
    rows: int = param(262144, "rows of x and residual (tokens)")
    hidden: int = param(1024, "row length, the normalised dimension (at most 32768)")
    dtype: str = param("bf16", "dtype of every tensor", choices=chain.DTYPES)
    eps: float = param(chain.EPS, "layer-norm epsilon")
    compile_mode: str = param(
        "max-autotune-no-cudagraphs", "torch.compile mode of the torch_compile case", choices=COMPILE_MODES
    )
    rows_per_program: int | None = param(
        None, "rows per program of the triton kernel, a power of two; none: chosen from the row length"
    )
    num_warps: int | None = param(None, "warps per program of the triton kernel; none: chosen from the tile")
    erf: str = param(
        "as7126",
        "erf inside the triton kernel's GELU: libdevice's, or Abramowitz & Stegun 7.1.26 (|error| <= 1.5e-7)",
        choices=("libdevice", "as7126"),
    )

    def __post_init__(self) -> None:
        if self.rows < 1 or not 1 <= self.hidden <= 32768:
            raise ValueError(f"rows must be >= 1 and hidden in 1..32768, got rows={self.rows} hidden={self.hidden}")
        if self.num_warps is not None and self.num_warps not in (1, 2, 4, 8, 16, 32):
            raise ValueError(f"num_warps must be none (auto) or a power of two up to 32, got {self.num_warps}")
        # Whether the tile (rows_per_program x the row) fits in registers is launch_config's to check.
        rpp = self.rows_per_program
        if rpp is not None and (rpp < 1 or rpp & (rpp - 1)):
            raise ValueError(f"rows_per_program must be none (auto) or a power of two, got {rpp}")


class FusedChain(_shared.TritonVsTorch):
    name = "triton.fused_chain"
    version = 3  # 2: rows per program, compile mode, 262144 x 1024; 3: the kernel without cache hints, erf a parameter
    description = "bias + GELU + residual + LayerNorm fused in one Triton kernel vs torch eager and torch.compile"
    Params = FusedChainParams
    quick = {"rows": 64, "hidden": 256, "compile_mode": "default"}  # no autotuning in a quick run
    primary_metric = "gbps"

    def unmet(self, ctx: Any) -> str | None:
        from perfsuite_triton.kernels import fused_chain as kernel

        p = self.params
        return _shared.device_unmet(ctx.device, kernel.INTERPRETED) or _shared.interpreter_size_unmet(
            ctx.device,
            p.rows * p.hidden,
            _shared.INTERPRETER_MAX_ELEMENTS,
            "rows * hidden",
            "--param rows=64 --param hidden=256",
        )

    def setup(self, ctx: Any) -> None:
        import torch

        from perfsuite_triton.kernels import fused_chain as kernel

        p = self.params
        self.inputs = chain.make_inputs(p.rows, p.hidden, p.dtype, ctx.torch_device)
        self.out = torch.empty_like(self.inputs.x)
        self.args = (*self.inputs, p.eps)
        self.launch = kernel.launch_config(p.hidden, p.num_warps, p.rows_per_program)
        programs = (p.rows + self.launch["ROWS"] - 1) // self.launch["ROWS"]
        ctx.details["triton"] = {**_shared.triton_details(kernel.INTERPRETED), **self.launch, "programs": programs}
        self.compiled = _shared.compile_case(ctx, chain.eager, self.args, p.compile_mode)

    def cases(self, ctx: Any) -> list[Case]:
        from perfsuite_triton.kernels import fused_chain as kernel

        p = self.params
        work = Work(bytes=chain.bytes_per_call(p.rows, p.hidden, p.dtype))

        def run_triton() -> Any:
            return kernel.fused_chain(
                *self.args,
                out=self.out,
                num_warps=self.launch["num_warps"],
                rows_per_program=self.launch["ROWS"],
                fast_erf=self.params.erf == "as7126",
            )

        def run_eager() -> Any:
            return chain.eager(*self.args)

        return self.three_cases(run_triton, run_eager, work, "memory")

    def compute_reference(self) -> Any:
        """The chain in float64 on the same inputs."""
        return chain.reference(*self.args)

    def tolerance(self) -> float:
        return chain.TOLERANCE[self.params.dtype]

    def teardown(self, ctx: Any) -> None:
        for attr in ("inputs", "out", "args", "compiled", "_reference"):
            self.__dict__.pop(attr, None)
