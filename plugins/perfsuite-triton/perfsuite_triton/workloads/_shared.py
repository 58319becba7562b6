"""What the plugin's three workloads share: dtype names, verification tolerances, when a
Triton kernel can run here at all, verification against a float64 reference with the
output poisoned first, and the torch.compile case.

Imports neither torch nor triton at module level: ``perfsuite list`` imports this.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from typing import Any

from perfsuite import Case, Check, Requirements, Work, Workload
from perfsuite.checks import close

DTYPES = ("bf16", "fp16", "fp32")

# Tolerances on the relative Frobenius error against a float64 reference computed from the
# same (already rounded) inputs, so the error measured is the kernel's own:
# - 16-bit outputs: every kernel computes in fp32 and rounds once to the output dtype
#   (torch eager rounds after each op); one rounding costs at most the unit roundoff u
#   per element (bf16 2**-8, fp16 2**-11), or 2u when it truncates, as triton's CPU
#   interpreter does for bf16 (measured: 3.3e-3 there against 1.7e-3 for torch).
#   4u leaves room for a few roundings and stays well below what a wrong result gives
#   (measured in bf16: the fused chain without its bias 6e-2; rows shifted by one ~1.4).
# - fp32: rounding is ~6e-8 per op; the float32 reductions (row sums up to 32768
#   elements, dot products of length K) grow that by at most ~sqrt(n) in practice,
#   1e-5 at n = 32768; measured 6e-8 to 3e-7 on the CPU.
TOLERANCE = {"bf16": 4 * 2**-8, "fp16": 4 * 2**-11, "fp32": 1e-5}

# Triton's interpreter runs each program in Python over numpy arrays. On a 2-core CPU the
# row kernels moved ~0.5 M elements/s (256 x 1024 fp32: 0.5 s per call) and the matmul
# ~2.5 GFLOP/s (512^3 fp32: 0.11 s per call); past these sizes a timed loop takes minutes.
INTERPRETER_MAX_ELEMENTS = 1 << 20
INTERPRETER_MAX_FLOPS = 2 * 1024**3

COMPILE_OPTIONS = {"dynamic": False, "fullgraph": True}  # mode: torch's default


def device_unmet(device: str, interpreted: bool) -> str | None:
    """Whether triton kernels can run on ``device`` given how triton decorated them
    (``interpreted``: TRITON_INTERPRET was set when the kernel module was imported)."""
    if device == "cpu" and not interpreted:
        return (
            "on the CPU, Triton kernels run only through triton's interpreter: set TRITON_INTERPRET=1 in "
            "the environment of 'perfsuite run' (triton reads it when the kernels are imported)"
        )
    if device == "cuda" and interpreted:
        return "TRITON_INTERPRET=1 makes triton interpret kernels on the CPU; unset it to time them on the GPU"
    return None


def interpreter_size_unmet(device: str, size: float, limit: float, what: str, hint: str) -> str | None:
    """Refuse sizes the interpreter would take minutes per timed loop on (see the limits)."""
    if device == "cpu" and size > limit:
        return (
            f"{what} of {size:.3g} is too large for triton's CPU interpreter (limit {limit:.3g}, "
            f"about a second per call): use --quick or {hint}"
        )
    return None


def triton_details(interpreted: bool) -> dict[str, Any]:
    import triton

    return {"version": triton.__version__, "interpreter": interpreted}


def compile_case(ctx: Any, fn: Callable[..., Any], args: tuple, mode: str = "default") -> Callable[[], Any]:
    """torch.compile ``fn`` in ``mode``, compile it now with one call on ``args`` (so that
    compiling is not part of the warm-up), and record the options, the mode and how long
    that took in ``ctx.details``."""
    import torch

    compiled = torch.compile(fn, **COMPILE_OPTIONS, mode=None if mode == "default" else mode)
    t0 = time.perf_counter()
    compiled(*args)
    ctx.synchronize()
    ctx.details["torch_compile"] = {**COMPILE_OPTIONS, "mode": mode, "first_call_s": time.perf_counter() - t0}
    return lambda: compiled(*args)


def verify_output(
    label: str, fn: Callable[[], Any], reference: Callable[[], Any], tolerance: float, out: Any = None
) -> Check:
    """Run ``fn`` once and compare its output with the float64 ``reference()``.

    ``out``: the buffer ``fn`` writes into, when it has one (the triton cases); it is
    filled with NaN first, so a launch that writes nothing, or only part, fails instead of
    passing on the previous call's result. The torch cases return a tensor torch
    allocates for the call.
    """
    if out is not None:
        out.fill_(float("nan"))
    result = fn()
    got = out if out is not None else result
    method = "per element and by relative Frobenius error vs a float64 torch reference"
    return close_to(label, got, reference(), tolerance, method)


def close_to(label: str, got: Any, ref: Any, tolerance: float, method: str) -> Check:
    """``perfsuite.checks.close`` with this plugin's rule: the norm within ``tolerance``, and
    every element within ``tolerance`` of the reference's RMS plus ``tolerance`` of itself
    (a rounding error of the output's own scale passes, one wrong element fails)."""
    rms = float(ref.double().pow(2).mean().sqrt()) if ref.numel() else 0.0
    return close(label, got, ref, tolerance, method, rtol=tolerance, atol=tolerance * rms)


class TritonVsTorch(Workload):
    """Base of this plugin's workloads: one Triton kernel beside torch eager (the named
    baseline) and ``torch.compile``, each verified against ``self.reference()`` in float64.
    Subclasses set ``self.out`` (the Triton output buffer, poisoned before verifying) and
    ``self.compiled`` in setup."""

    category = "kernels"
    requirements = Requirements(packages=("torch", "triton"))
    out: Any = None
    compiled: Any = None
    _reference: Any = None

    def three_cases(
        self, run_triton: Callable[[], Any], run_eager: Callable[[], Any], work: Work, roofline: str
    ) -> list[Case]:
        def verifier(label: str, fn: Callable[[], Any], out: Any = None) -> Callable[[], Check]:
            return functools.partial(self.verify_output, label, fn, out)

        return [
            Case("triton", run_triton, work, roofline=roofline, verify=verifier("triton", run_triton, self.out)),
            Case(
                "torch_eager",
                run_eager,
                work,
                roofline=roofline,
                baseline=True,
                verify=verifier("torch_eager", run_eager),
            ),
            Case(
                "torch_compile", self.compiled, work, roofline=roofline, verify=verifier("torch_compile", self.compiled)
            ),
        ]

    def verify_output(self, label: str, fn: Callable[[], Any], out: Any = None) -> Check:
        """Run ``fn`` once (into ``out``, poisoned first, when given) and compare with float64."""
        return verify_output(label, fn, self.reference, self.tolerance(), out)

    def tolerance(self) -> float:
        """The relative error this run's outputs may have against the float64 reference."""
        return TOLERANCE[self.params.dtype]

    def reference(self) -> Any:
        """The float64 reference of this run's inputs, computed once."""
        if self._reference is None:
            self._reference = self.compute_reference()
        return self._reference

    def compute_reference(self) -> Any:
        raise NotImplementedError(f"{type(self).__name__} must implement compute_reference()")
