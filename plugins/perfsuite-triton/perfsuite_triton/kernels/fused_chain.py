"""A fused bias + GELU + residual + LayerNorm chain, the epilogue of a transformer MLP:

    y = layer_norm(gelu(x + bias) + residual) * weight + beta        (over the last dim)

Unfused, torch runs five kernels and moves the row through memory about ten times; fused,
each row is read once (x, residual), normalised in registers in float32, and written once.
One program handles one row, so a row must fit in one block (``MAX_HIDDEN``).

    from perfsuite_triton.kernels.fused_chain import fused_chain
    y = fused_chain(x, bias, residual, weight, beta, eps=1e-5)
"""
from __future__ import annotations

from typing import Any

import triton
import triton.language as tl

# A whole row lives in registers (fp32, a few live copies): beyond this it spills.
MAX_HIDDEN = 32768


@triton.jit
def _fused_chain_kernel(x_ptr, bias_ptr, res_ptr, w_ptr, beta_ptr, out_ptr,
                        x_row_stride, res_row_stride, out_row_stride, hidden, eps,
                        BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)  # rows * hidden may pass 2**31 elements
    cols = tl.arange(0, BLOCK)
    mask = cols < hidden
    # x and residual are streamed once; bias, weight and beta are shared by every row.
    x = tl.load(x_ptr + row * x_row_stride + cols, mask=mask, other=0.0,
                eviction_policy="evict_first").to(tl.float32)
    res = tl.load(res_ptr + row * res_row_stride + cols, mask=mask, other=0.0,
                  eviction_policy="evict_first").to(tl.float32)
    bias = tl.load(bias_ptr + cols, mask=mask, other=0.0, eviction_policy="evict_last").to(tl.float32)
    a = x + bias
    # GELU in its exact erf form, torch's default (approximate="none"); 0.7071... = 1/sqrt(2).
    h = 0.5 * a * (1.0 + tl.erf(a * 0.7071067811865476)) + res
    mean = tl.sum(h, axis=0) / hidden
    centered = tl.where(mask, h - mean, 0.0)  # padding lanes must not enter the variance
    var = tl.sum(centered * centered, axis=0) / hidden  # biased, as torch's layer_norm
    rstd = 1.0 / tl.sqrt(var + eps)
    w = tl.load(w_ptr + cols, mask=mask, other=0.0, eviction_policy="evict_last").to(tl.float32)
    beta = tl.load(beta_ptr + cols, mask=mask, other=0.0, eviction_policy="evict_last").to(tl.float32)
    y = centered * rstd * w + beta
    tl.store(out_ptr + row * out_row_stride + cols, y.to(out_ptr.dtype.element_ty), mask=mask)


# True when TRITON_INTERPRET was set at import: the kernel then runs on CPU tensors through
# triton's interpreter (numpy), never compiled.
INTERPRETED = not isinstance(_fused_chain_kernel, triton.JITFunction)


def launch_config(hidden: int, num_warps: int | None = None) -> dict[str, int]:
    """Block and warps for one row: the block covers the row; warps grow with it so each
    thread holds at most ~32 elements of each live fp32 copy."""
    if not 0 < hidden <= MAX_HIDDEN:
        raise ValueError(f"fused_chain: hidden must be in 1..{MAX_HIDDEN} (one row per program), got {hidden}")
    block = triton.next_power_of_2(hidden)
    if num_warps is None:
        num_warps = 4 if block <= 1024 else 8 if block <= 8192 else 16
    return {"BLOCK": block, "num_warps": num_warps}


def fused_chain(x: Any, bias: Any, residual: Any, weight: Any, beta: Any, eps: float = 1e-5, *,
                out: Any = None, num_warps: int | None = None) -> Any:
    """``layer_norm(gelu(x + bias) + residual) * weight + beta`` over the last dimension.

    ``x`` and ``residual``: [rows, hidden], same dtype, unit stride along hidden;
    ``bias``, ``weight``, ``beta``: [hidden]. Returns ``out`` (allocated when None), of
    ``x``'s dtype; all arithmetic is float32.
    """
    if x.dim() != 2 or residual.shape != x.shape:
        raise ValueError(f"fused_chain: x and residual must be [rows, hidden] of one shape, "
                         f"got {tuple(x.shape)} and {tuple(residual.shape)}")
    rows, hidden = x.shape
    for name, t in (("bias", bias), ("weight", weight), ("beta", beta)):
        if tuple(t.shape) != (hidden,) or not t.is_contiguous():
            raise ValueError(f"fused_chain: {name} must be a contiguous [{hidden}] tensor, got {tuple(t.shape)}")
    if residual.dtype != x.dtype:
        raise ValueError(f"fused_chain: residual dtype {residual.dtype} differs from x dtype {x.dtype}")
    if out is None:
        out = x.new_empty(x.shape)
    elif out.shape != x.shape or out.dtype != x.dtype:
        raise ValueError(f"fused_chain: out must be {tuple(x.shape)} {x.dtype}, got {tuple(out.shape)} {out.dtype}")
    for name, t in (("x", x), ("residual", residual), ("out", out)):
        if hidden > 1 and t.stride(1) != 1:
            raise ValueError(f"fused_chain: {name} must have unit stride along hidden (a silent copy would "
                             f"distort the measurement); call .contiguous() first")
    devices = {t.device for t in (x, bias, residual, weight, beta, out)}
    if len(devices) != 1:
        raise ValueError(f"fused_chain: all tensors must be on one device, got {sorted(map(str, devices))}")
    cfg = launch_config(hidden, num_warps)
    if rows:
        _fused_chain_kernel[(rows,)](x, bias, residual, weight, beta, out,
                                     x.stride(0), residual.stride(0), out.stride(0), hidden, float(eps),
                                     BLOCK=cfg["BLOCK"], num_warps=cfg["num_warps"])
    return out


def reference(x: Any, bias: Any, residual: Any, weight: Any, beta: Any, eps: float = 1e-5) -> Any:
    """The same chain in float64 torch ops, for verification (and as the definition)."""
    import torch

    f = [t.to(torch.float64) for t in (x, bias, residual, weight, beta)]
    h = torch.nn.functional.gelu(f[0] + f[1]) + f[2]
    return torch.nn.functional.layer_norm(h, (h.shape[-1],), f[3], f[4], eps)


def torch_eager(x: Any, bias: Any, residual: Any, weight: Any, beta: Any, eps: float = 1e-5) -> Any:
    """The chain as a torch user writes it: the baseline, and what torch.compile fuses."""
    import torch

    h = torch.nn.functional.gelu(x + bias) + residual
    return torch.nn.functional.layer_norm(h, (h.shape[-1],), weight, beta, eps)
