"""The fused bias + GELU + residual + LayerNorm chain, defined once for every workload that
measures it (``kernels.fusion`` in eager and torch.compile, perfsuite-triton's
``triton.fused_chain`` with its Triton kernel), so that they time the same inputs and judge
the outputs against the same reference and tolerance::

    y = layer_norm(gelu(x + bias) + residual) * weight + beta      (over the last dim)

x and residual are [rows, hidden]; bias, weight and beta are [hidden]; gelu is the exact
(erf) form; eps = 1e-5. Part of the public API (``from suite import fused_chain``).
Importing this module does not import torch.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from perfsuite.dtypes import element_size, torch_dtype

EPS = 1e-5
# Relative Frobenius error against the float64 chain computed from the same (already
# rounded) inputs, so the error measured is the implementation's own. 16-bit outputs: every
# fused kernel computes in fp32 and rounds once to the output dtype, torch eager after each
# op; one rounding costs at most the unit roundoff u per element (bf16 2**-8, fp16 2**-11),
# 2u where it truncates (triton's CPU interpreter for bf16: 3.3e-3 measured against 1.7e-3
# for torch). 4u leaves room for a few roundings and stays far below a wrong result (bf16:
# the chain without its bias 6e-2, rows shifted by one ~1.4). fp32: the float32 row
# reductions (up to 32768 elements) grow ~6e-8 per op to at most ~1e-5.
TOLERANCE = {"bf16": 4 * 2**-8, "fp16": 4 * 2**-11, "fp32": 1e-5}
# Per element, (rtol, atol): the output is normalised (unit scale), so an absolute bound is
# one in units of the output's spread. Each rounding of an intermediate (magnitude a few
# units) costs up to u absolute, of the output up to u |ref|: the eager chain reached 0.77 of
# 8u over 2**28 elements on an H100, so 16u leaves room for other devices and a truncating
# interpreter, and stays far below a wrong element (a row shifted, a bias left out: 0.1 to 1).
ELEMENT_TOLERANCE = {"bf16": (2 * 2**-8, 16 * 2**-8), "fp16": (2 * 2**-11, 16 * 2**-11), "fp32": (1e-5, 1e-4)}
DTYPES = tuple(TOLERANCE)
METHOD = "per element and by relative Frobenius error vs the chain in float64 on the same inputs"


def check(label: str, out: Any, ref: Any, dtype: str) -> Any:
    """The chain's verification of ``out`` against :func:`reference`'s ``ref`` (a
    :class:`perfsuite.Check`): every element within ``ELEMENT_TOLERANCE``, the norm within ``TOLERANCE``."""
    from perfsuite.checks import close

    rtol, atol = ELEMENT_TOLERANCE[dtype]
    return close(label, out, ref, TOLERANCE[dtype], METHOD, rtol=rtol, atol=atol)


class Inputs(NamedTuple):
    """The chain's operands, in the order every implementation takes them."""

    x: Any
    bias: Any
    residual: Any
    weight: Any
    beta: Any


def make_inputs(rows: int, hidden: int, dtype: str, device: Any) -> Inputs:
    """Seeded inputs from torch's global generator (seeded by the harness): x and residual
    standard normal; bias and shift small and the scale near one, as a trained layer has them."""
    import torch

    dt = torch_dtype(dtype)
    x = torch.randn(rows, hidden, device=device, dtype=dt)
    residual = torch.randn(rows, hidden, device=device, dtype=dt)
    bias = (0.1 * torch.randn(hidden, device=device)).to(dt)
    weight = (1 + 0.1 * torch.randn(hidden, device=device)).to(dt)
    beta = (0.1 * torch.randn(hidden, device=device)).to(dt)
    return Inputs(x, bias, residual, weight, beta)


def eager(x: Any, bias: Any, residual: Any, weight: Any, beta: Any, eps: float = EPS) -> Any:
    """The chain as a torch user writes it: the baseline, and what torch.compile fuses."""
    import torch.nn.functional as F

    h = F.gelu(x + bias) + residual
    return F.layer_norm(h, (h.shape[-1],), weight, beta, eps)


def reference(x: Any, bias: Any, residual: Any, weight: Any, beta: Any, eps: float = EPS) -> Any:
    """The chain in float64 on the same inputs: what every implementation is judged against."""
    import torch

    x64, bias64, residual64, weight64, beta64 = (t.to(torch.float64) for t in (x, bias, residual, weight, beta))
    return eager(x64, bias64, residual64, weight64, beta64, eps=eps)


def bytes_per_call(rows: int, hidden: int, dtype: str) -> float:
    """Bytes that must move: x and residual read, y written, bias, weight, beta read once."""
    return float((3 * rows * hidden + 3 * hidden) * element_size(dtype))
