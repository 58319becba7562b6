"""Fused row softmax: each row is read once, reduced (max, then sum of exponentials) in
float32 registers and written once, so the kernel moves 2 * rows * cols elements, the
least any softmax can. One program handles one row, so a row must fit in one block.

    from perfsuite_triton.kernels.softmax import softmax
    y = softmax(x)            # over the last dimension of a [rows, cols] tensor
"""

from __future__ import annotations

from typing import Any

import triton
import triton.language as tl

# A whole row lives in registers: beyond this it spills.
MAX_COLS = 32768


@triton.jit
def _softmax_kernel(in_ptr, out_ptr, in_row_stride, out_row_stride, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)  # rows * cols may pass 2**31 elements
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    # Padding lanes load -inf: they do not change the max and contribute exp(-inf) = 0.
    x = tl.load(in_ptr + row * in_row_stride + cols, mask=mask, other=-float("inf"), eviction_policy="evict_first").to(
        tl.float32
    )
    shifted = x - tl.max(x, axis=0)  # exp of the shifted row cannot overflow
    numerator = tl.exp(shifted)
    y = numerator / tl.sum(numerator, axis=0)
    tl.store(out_ptr + row * out_row_stride + cols, y.to(out_ptr.dtype.element_ty), mask=mask)


# True when TRITON_INTERPRET was set at import: the kernel then runs on CPU tensors through
# triton's interpreter (numpy), never compiled.
INTERPRETED = not isinstance(_softmax_kernel, triton.JITFunction)


def launch_config(n_cols: int, num_warps: int | None = None) -> dict[str, int]:
    """Block and warps for one row, as for the fused chain: ~32 elements per thread at most."""
    if not 0 < n_cols <= MAX_COLS:
        raise ValueError(f"softmax: cols must be in 1..{MAX_COLS} (one row per program), got {n_cols}")
    block = triton.next_power_of_2(n_cols)
    if num_warps is None:
        num_warps = 4 if block <= 1024 else 8 if block <= 8192 else 16
    return {"BLOCK": block, "num_warps": num_warps}


def softmax(x: Any, *, out: Any = None, num_warps: int | None = None) -> Any:
    """Softmax over the last dimension of a [rows, cols] tensor with unit column stride;
    returns ``out`` (allocated when None) of ``x``'s dtype."""
    if x.dim() != 2:
        raise ValueError(f"softmax: x must be [rows, cols], got {tuple(x.shape)}")
    rows, n_cols = x.shape
    if out is None:
        out = x.new_empty(x.shape)
    elif out.shape != x.shape or out.dtype != x.dtype or out.device != x.device:
        raise ValueError(
            f"softmax: out must be {tuple(x.shape)} {x.dtype} on {x.device}, "
            f"got {tuple(out.shape)} {out.dtype} on {out.device}"
        )
    for name, t in (("x", x), ("out", out)):
        if n_cols > 1 and t.stride(1) != 1:
            raise ValueError(
                f"softmax: {name} must have unit stride along cols (a silent copy would distort "
                f"the measurement); call .contiguous() first"
            )
    cfg = launch_config(n_cols, num_warps)
    if rows:
        _softmax_kernel[(rows,)](
            x, out, x.stride(0), out.stride(0), n_cols, BLOCK=cfg["BLOCK"], num_warps=cfg["num_warps"]
        )
    return out
