"""A fused bias + GELU + residual + LayerNorm chain, the epilogue of a transformer MLP:

    y = layer_norm(gelu(x + bias) + residual) * weight + beta        (over the last dim)

Unfused, torch runs five kernels and moves the row through memory about ten times; fused,
each row is read once (x, residual), normalised in registers in float32, and written once.

One program handles a tile of ``ROWS`` whole rows (``ROWS x BLOCK`` elements, BLOCK the row
length rounded up to a power of two), held in registers (``MAX_TILE``). Several rows per
program are for small hidden sizes: at hidden 1024 a one-row program moves only 6 KiB, and
one-row launches peaked at ~66% of a device copy there (H200, bf16) against ~70% at 4096;
the exact-erf GELU (~30 fp32 instructions per element) has to overlap with other programs'
loads. ``tools/probes/fusion_explore.py`` sweeps rows per program x warps.

    from perfsuite_triton.kernels.fused_chain import fused_chain
    y = fused_chain(x, bias, residual, weight, beta, eps=1e-5)

The chain's definition in torch ops, and its float64 reference, are the host's:
``perfsuite.fused_chain.eager`` and ``perfsuite.fused_chain.reference``.
"""

from __future__ import annotations

from typing import Any

import triton
import triton.language as tl

# A tile lives in registers, a few fp32 copies of it: 32 elements per thread took ~125
# registers (ptxas for sm_90, 1024-4096 elements per tile), 128 per thread spilled (16 x 1024
# on 4 warps). The largest tile, 32768 elements, is 64 per thread on 16 warps; it is also
# the longest row.
MAX_TILE = 32768
MAX_HIDDEN = MAX_TILE
# The default tile: whole rows up to this many elements (one-row programs did best at
# hidden 4096, 2**28 elements, H200), at most MAX_DEFAULT_ROWS rows.
TARGET_TILE = 4096
MAX_DEFAULT_ROWS = 16
# Default warps: one per this many tile elements, 32 per thread of each fp32 copy (one row,
# 2**28 elements, H200: 2 warps did best at hidden 2048, 4 at 4096, 8 at 8192).
ELEMENTS_PER_WARP = 1024
MAX_DEFAULT_WARPS = 16


@triton.jit
def _erf_as7126(x):
    """erf by Abramowitz & Stegun 7.1.26: |error| <= 1.5e-7 over the real line, about
    2 fp32 ulps near 1 and far below the bf16/fp16 rounding of the chain's output, at a
    third of libdevice's instructions (one reciprocal, one exp, five FMAs)."""
    ax = tl.abs(x)
    t = 1.0 / (1.0 + 0.3275911 * ax)
    poly = t * (0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429))))
    r = 1.0 - poly * tl.exp(-ax * ax)
    return tl.where(x < 0, -r, r)


@triton.jit
def _fused_chain_kernel(
    x_ptr,
    bias_ptr,
    res_ptr,
    w_ptr,
    beta_ptr,
    out_ptr,
    n_rows,
    x_row_stride,
    res_row_stride,
    out_row_stride,
    hidden,
    eps,
    ROWS: tl.constexpr,
    BLOCK: tl.constexpr,
    FAST_ERF: tl.constexpr,
    EVICT: tl.constexpr,
):
    # int64 rows: rows * stride may pass 2**31 elements.
    rows = tl.program_id(0).to(tl.int64) * ROWS + tl.arange(0, ROWS).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    col_mask = cols < hidden
    # Rows past the end: the last program's tile may be partly empty.
    mask = (rows < n_rows)[:, None] & col_mask[None, :]
    # x and residual are streamed once; bias, weight and beta are shared by every row.
    if EVICT:
        x = tl.load(
            x_ptr + rows[:, None] * x_row_stride + cols[None, :], mask=mask, other=0.0, eviction_policy="evict_first"
        ).to(tl.float32)
        res = tl.load(
            res_ptr + rows[:, None] * res_row_stride + cols[None, :],
            mask=mask,
            other=0.0,
            eviction_policy="evict_first",
        ).to(tl.float32)
    else:
        x = tl.load(x_ptr + rows[:, None] * x_row_stride + cols[None, :], mask=mask, other=0.0).to(tl.float32)
        res = tl.load(res_ptr + rows[:, None] * res_row_stride + cols[None, :], mask=mask, other=0.0).to(tl.float32)
    bias = tl.load(bias_ptr + cols, mask=col_mask, other=0.0, eviction_policy="evict_last").to(tl.float32)
    a = x + bias[None, :]
    # GELU in its erf form, torch's default (approximate="none"); 0.7071... = 1/sqrt(2).
    if FAST_ERF:
        erf = _erf_as7126(a * 0.7071067811865476)
    else:
        erf = tl.erf(a * 0.7071067811865476)
    h = 0.5 * a * (1.0 + erf) + res
    mean = tl.sum(h, axis=1) / hidden  # padding columns hold gelu(0) + 0 = 0
    centered = tl.where(mask, h - mean[:, None], 0.0)  # padding lanes must not enter the variance
    var = tl.sum(centered * centered, axis=1) / hidden  # biased, as torch's layer_norm
    rstd = 1.0 / tl.sqrt(var + eps)
    w = tl.load(w_ptr + cols, mask=col_mask, other=0.0, eviction_policy="evict_last").to(tl.float32)
    beta = tl.load(beta_ptr + cols, mask=col_mask, other=0.0, eviction_policy="evict_last").to(tl.float32)
    y = centered * rstd[:, None] * w[None, :] + beta[None, :]
    tl.store(out_ptr + rows[:, None] * out_row_stride + cols[None, :], y.to(out_ptr.dtype.element_ty), mask=mask)


# True when TRITON_INTERPRET was set at import: the kernel then runs on CPU tensors through
# triton's interpreter (numpy), never compiled.
INTERPRETED = not isinstance(_fused_chain_kernel, triton.JITFunction)


def _is_power_of_two(n: int) -> bool:
    return n >= 1 and n & (n - 1) == 0


def launch_config(hidden: int, num_warps: int | None = None, rows_per_program: int | None = None) -> dict[str, int]:
    """The tile and warps of one program: ``BLOCK`` (the row rounded up to a power of two),
    ``ROWS`` (whole rows per program) and ``num_warps``; the launch has
    ``ceil(rows / ROWS)`` programs. Defaults: ROWS fills the tile to ``TARGET_TILE``
    elements (4 rows at hidden 1024, one from 4096 up); warps grow with the tile, one per
    ``ELEMENTS_PER_WARP``. Either may be given instead (``ROWS`` a power of two, as
    ``tl.arange`` needs; the tile at most ``MAX_TILE``)."""
    if not 0 < hidden <= MAX_HIDDEN:
        raise ValueError(f"fused_chain: hidden must be in 1..{MAX_HIDDEN} (a whole row per program), got {hidden}")
    block = triton.next_power_of_2(hidden)
    if rows_per_program is None:
        rows_per_program = max(1, min(MAX_DEFAULT_ROWS, TARGET_TILE // block))
    elif not _is_power_of_two(rows_per_program) or rows_per_program * block > MAX_TILE:
        raise ValueError(
            f"fused_chain: rows_per_program must be a power of two with rows_per_program * "
            f"{block} (the block) <= {MAX_TILE}, got {rows_per_program}"
        )
    if num_warps is None:
        num_warps = max(1, min(MAX_DEFAULT_WARPS, rows_per_program * block // ELEMENTS_PER_WARP))
    elif not (_is_power_of_two(num_warps) and num_warps <= 32):
        raise ValueError(f"fused_chain: num_warps must be a power of two up to 32, got {num_warps}")
    return {"BLOCK": block, "ROWS": rows_per_program, "num_warps": num_warps}


def fused_chain(
    x: Any,
    bias: Any,
    residual: Any,
    weight: Any,
    beta: Any,
    eps: float = 1e-5,
    *,
    out: Any = None,
    num_warps: int | None = None,
    rows_per_program: int | None = None,
    fast_erf: bool = True,
    evict: bool = False,
) -> Any:
    """``layer_norm(gelu(x + bias) + residual) * weight + beta`` over the last dimension.

    ``x`` and ``residual``: [rows, hidden], same dtype, unit stride along hidden;
    ``bias``, ``weight``, ``beta``: [hidden]. Returns ``out`` (allocated when None), of
    ``x``'s dtype; all arithmetic is float32. ``num_warps`` and ``rows_per_program``:
    the launch, as ``launch_config`` takes them (None: its defaults). ``fast_erf``: erf by
    Abramowitz & Stegun 7.1.26 (|error| <= 1.5e-7) instead of libdevice's; ``evict``: stream
    x and residual with an evict-first cache hint. The defaults are what measured fastest on
    an H200 (tools/probes/fusion_explore.py, 262144 x 1024 bf16, R4 w4): libdevice erf with the hint
    69% of the copy ceiling, A&S erf with the hint 76%, A&S erf without it 82%.
    """
    if x.dim() != 2 or residual.shape != x.shape:
        raise ValueError(
            f"fused_chain: x and residual must be [rows, hidden] of one shape, "
            f"got {tuple(x.shape)} and {tuple(residual.shape)}"
        )
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
            raise ValueError(
                f"fused_chain: {name} must have unit stride along hidden (a silent copy would "
                f"distort the measurement); call .contiguous() first"
            )
    devices = {t.device for t in (x, bias, residual, weight, beta, out)}
    if len(devices) != 1:
        raise ValueError(f"fused_chain: all tensors must be on one device, got {sorted(map(str, devices))}")
    cfg = launch_config(hidden, num_warps, rows_per_program)
    if rows:
        _fused_chain_kernel[(triton.cdiv(rows, cfg["ROWS"]),)](
            x,
            bias,
            residual,
            weight,
            beta,
            out,
            rows,
            x.stride(0),
            residual.stride(0),
            out.stride(0),
            hidden,
            float(eps),
            FAST_ERF=bool(fast_erf),
            EVICT=bool(evict),
            **cfg,
        )
    return out
