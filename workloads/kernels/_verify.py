"""Verification of matrix products against a float64 reference on a sampled grid of output
elements, shared by ``kernels.gemm`` and ``kernels.ceilings`` so both judge a matmul the same way.

A full float64 reference of an 8192^3 product costs more than the benchmark itself, so each
check computes a grid of ``grid`` rows x ``grid`` columns of the output exactly (every row of
an output up to :data:`WHOLE` rows, every column likewise: a small output is checked whole). The rows are
stratified: the output's rows are cut into ``grid`` equal bands and one random row is taken
from each (the columns likewise), so that every tile of the kernel's output at least two bands
tall and wide (128x128 in an 8192x8192 output) holds sampled elements: a wrong tile cannot hide
between the samples. Each sampled element must lie within ``atol + rtol * |ref|`` of the
reference (:func:`perfsuite.checks.close`), ``atol`` scaled by the grid's RMS value, because a
norm over the grid averages one wrong tile away (a 128x128 tile of 8192x8192 moves it by ~1.6%).
Independently, the whole output must be finite: callers poison it with NaN before the verifying
call, so any element the kernel never wrote fails the check.
"""

from __future__ import annotations

import math
from typing import Any

from perfsuite import Check
from perfsuite.checks import close

GRID = 128
# Up to this many rows (columns), every one is compared: a quick-sized output is checked whole.
WHOLE = 512


def method_text(grid: int = GRID) -> str:
    return (
        f"up to {grid}x{grid} output elements (one row and one column per band; all of an output "
        f"of at most {WHOLE}x{WHOLE}) vs float64 reference, "
        f"per element and by relative Frobenius error; whole output finite after NaN poisoning"
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


def stratified(size: int, count: int, gen: Any) -> Any:
    """``count`` sorted indices in ``range(size)``, one drawn uniformly from each of ``count``
    equal bands (every index when ``size`` is at most ``count`` or :data:`WHOLE`)."""
    import torch

    if size <= max(count, WHOLE):
        return torch.arange(size)
    edges = torch.linspace(0, size, count + 1, dtype=torch.float64).floor().to(torch.int64)
    width = edges[1:] - edges[:-1]
    return edges[:-1] + (torch.rand(count, generator=gen, dtype=torch.float64) * width).floor().to(torch.int64)


def sampled_grid(out: Any, a: Any, b: Any, seed: int, grid: int = GRID) -> tuple[Any, Any, Any, Any]:
    """(output elements, float64 reference, rows, columns) on the stratified grid.

    ``a`` and ``b`` are the operands exactly as the kernel read them (already rounded to the
    kernel's input dtype), so the comparison measures the kernel's accumulation and output
    rounding, not the quantisation of the inputs.
    """
    m, n = out.shape
    import torch

    gen = torch.Generator(device="cpu").manual_seed(seed)
    rows = stratified(m, grid, gen).to(out.device)
    cols = stratified(n, grid, gen).to(out.device)
    ref = _to_f64(_take(a, 0, rows)) @ _to_f64(_take(b, 1, cols))
    got = _to_f64(_take(_take(out, 0, rows), 1, cols))
    return got, ref, rows, cols


def check_matmul(
    label: str,
    out: Any,
    a: Any,
    b: Any,
    *,
    tolerance: float,
    rtol: float,
    atol_rms: float,
    seed: int,
    grid: int = GRID,
) -> Check:
    """Judge a matmul output already computed into ``out`` (after NaN poisoning): every sampled
    element within ``atol_rms * rms(ref) + rtol * |ref|``, the grid's relative Frobenius error
    within ``tolerance``. ``worst_element`` names the element's index in the whole output."""
    import torch

    method = method_text(grid)
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
            elements_checked=int(out.numel()),
            elements_failed=not_finite,
        )
    got, ref, rows, cols = sampled_grid(out, a, b, seed, grid)
    rms = math.sqrt(float((ref * ref).mean())) if ref.numel() else 0.0
    check = close(label, got, ref, tolerance, method, rtol=rtol, atol=atol_rms * rms)
    if check.worst_element is not None:  # the grid's index -> the output's
        i, j = check.worst_element["index"]
        check.worst_element["index"] = [int(rows[i]), int(cols[j])]
        check.detail = check.detail.replace(f"[{i}, {j}]", str(check.worst_element["index"]))
    return check


def chunked_close(
    label: str, pairs: Any, shape: tuple[int, ...], *, tolerance: float, rtol: float, atol: float, method: str
) -> Check:
    """:func:`perfsuite.checks.close` over (out, ref) chunks that tile an output of ``shape``
    in order (its leading dimension cut into pieces), for outputs whose reference is computed
    piece by piece to bound memory. NaN/Inf that the reference does not have fail."""
    from perfsuite.checks import CHUNK_ELEMENTS, Comparison

    c = Comparison(rtol=rtol, atol=atol)
    offset = 0
    for out, ref in pairs:
        o, r = out.reshape(-1), ref.reshape(-1)
        for start in range(0, o.numel(), CHUNK_ELEMENTS):
            c.add(o[start : start + CHUNK_ELEMENTS], r[start : start + CHUNK_ELEMENTS], offset + start, shape)
        offset += o.numel()
    return c.check(label, tolerance, method)
