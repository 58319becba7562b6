"""Verification of matrix products against a float64 reference on sampled output blocks,
shared by ``kernels.gemm`` and ``kernels.ceilings`` so both judge a matmul the same way.

A full float64 reference of an 8192^3 product costs more than the benchmark itself, so
each check computes a few blocks of the output exactly: ``blocks`` sets of ``block``
random rows x ``block`` random columns. Rows and columns are scattered, not contiguous,
so each block crosses many of the kernel's output tiles: a tile computed wrongly is very
likely to show. Independently, the whole output must be finite: callers poison it with
NaN before the verifying call, so any element the kernel never wrote fails the check.
"""

from __future__ import annotations

import math
from typing import Any

from perfsuite import Check

BLOCKS = 4
BLOCK = 64


def method_text(blocks: int = BLOCKS, block: int = BLOCK) -> str:
    return (
        f"{blocks} sampled {block}x{block} output blocks vs float64 reference "
        f"(relative Frobenius error); whole output finite after NaN poisoning"
    )


def _take(t: Any, dim: int, index: Any) -> Any:
    """index_select that also works for float8 tensors (selected through their bytes)."""
    import torch

    if t.element_size() == 1 and t.is_floating_point():
        return t.view(torch.uint8).index_select(dim, index).view(t.dtype)
    return t.index_select(dim, index)


def _to_f64(t: Any) -> Any:
    import torch

    # float8 -> float32 is the conversion every backend has; float32 -> float64 is exact.
    return t.to(torch.float32).to(torch.float64)


def sampled_matmul_error(out: Any, a: Any, b: Any, seed: int, blocks: int = BLOCKS, block: int = BLOCK) -> float:
    """Relative Frobenius error of ``out`` against float64 ``a @ b`` over sampled blocks.

    ``a`` and ``b`` are the operands exactly as the kernel read them (already rounded to
    the kernel's input dtype), so the error measures the kernel's accumulation and output
    rounding, not the quantisation of the inputs.
    """
    import torch

    m, n = out.shape
    gen = torch.Generator(device="cpu").manual_seed(seed)
    err_sq = 0.0
    ref_sq = 0.0
    for _ in range(blocks):
        rows = torch.randperm(m, generator=gen)[: min(block, m)].sort().values.to(out.device)
        cols = torch.randperm(n, generator=gen)[: min(block, n)].sort().values.to(out.device)
        ref = _to_f64(_take(a, 0, rows)) @ _to_f64(_take(b, 1, cols))
        got = _to_f64(_take(_take(out, 0, rows), 1, cols))
        err_sq += float(((got - ref) ** 2).sum())
        ref_sq += float((ref**2).sum())
    if ref_sq == 0.0:
        return math.sqrt(err_sq)
    return math.sqrt(err_sq / ref_sq)


def check_matmul(
    label: str, out: Any, a: Any, b: Any, *, tolerance: float, seed: int, blocks: int = BLOCKS, block: int = BLOCK
) -> Check:
    """Judge a matmul output already computed into ``out`` (after NaN poisoning)."""
    import torch

    method = method_text(blocks, block)
    not_finite = int((~torch.isfinite(out)).sum())
    if not_finite:
        return Check(
            label=label,
            passed=False,
            method=method,
            error=float("inf"),
            tolerance=tolerance,
            detail=f"{not_finite} of {out.numel()} output elements are NaN/Inf: "
            f"not written by the kernel, or overflowed",
        )
    err = sampled_matmul_error(out, a, b, seed, blocks, block)
    return Check(label=label, passed=err <= tolerance, method=method, error=err, tolerance=tolerance)


def chunked_relative_error(pairs: Any) -> float:
    """Relative Frobenius error over (out, ref) chunks, accumulated in float64, for outputs
    whose reference is computed piece by piece to bound memory. NaN/Inf anywhere: inf."""
    import torch

    err_sq = 0.0
    ref_sq = 0.0
    for out, ref in pairs:
        o = out.detach().to(torch.float64)
        r = ref.detach().to(torch.float64).to(o.device)
        if not bool(torch.isfinite(o).all()):
            return float("inf")
        err_sq += float(((o - r) ** 2).sum())
        ref_sq += float((r**2).sum())
    return math.sqrt(err_sq / ref_sq) if ref_sq > 0 else math.sqrt(err_sq)
