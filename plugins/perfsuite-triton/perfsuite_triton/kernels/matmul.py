"""Tiled matmul C = A @ B with float32 accumulation, autotuned over tile shapes on a GPU.

Each program computes one BLOCK_M x BLOCK_N tile of C, walking K in BLOCK_K steps. Tiles
are visited in groups of GROUP_M rows of tiles (a "swizzle") so that programs running at
the same time share tiles of A and B in L2. On a GPU ``@triton.autotune`` times every
config in :data:`CONFIGS` once per (M, N, K, dtype) and keeps the fastest; triton's
autotuner needs an active GPU driver and fails under ``TRITON_INTERPRET=1`` ("0 active
drivers"), so the interpreter runs the first config as is.

    from perfsuite_triton.kernels.matmul import matmul
    c = matmul(a, b)
"""

from __future__ import annotations

import functools
from typing import Any

import triton
import triton.language as tl


def _config(bm: int, bn: int, bk: int, group_m: int, stages: int, warps: int) -> triton.Config:
    return triton.Config(
        {"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "GROUP_M": group_m}, num_stages=stages, num_warps=warps
    )


# Large tiles first: they feed Hopper's tensor cores best at the default 8192^3; the
# smaller ones win on small or skinny problems, and for fp32 where large tiles with
# several stages do not fit in shared memory (the autotuner skips configs that fail to
# compile for lack of resources).
CONFIGS = (
    _config(128, 256, 64, 8, 3, 8),
    _config(256, 128, 64, 8, 3, 8),
    _config(128, 256, 64, 8, 4, 8),
    _config(128, 128, 64, 8, 4, 8),
    _config(128, 128, 32, 8, 4, 4),
    _config(64, 256, 32, 8, 4, 4),
    _config(128, 64, 32, 8, 4, 4),
    _config(64, 128, 32, 8, 4, 4),
    _config(64, 64, 32, 8, 5, 2),
)


@triton.jit
def _matmul_kernel(
    a_ptr,
    b_ptr,
    c_ptr,
    M,
    N,
    K,
    stride_am,
    stride_ak,
    stride_bk,
    stride_bn,
    stride_cm,
    stride_cn,
    INPUT_PRECISION: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    GROUP_M: tl.constexpr,
):
    pid = tl.program_id(0)
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    # Swizzle: consecutive programs walk down GROUP_M tile rows before moving right.
    num_pid_in_group = GROUP_M * num_pid_n
    group_id = pid // num_pid_in_group
    first_pid_m = group_id * GROUP_M
    group_size_m = tl.minimum(num_pid_m - first_pid_m, GROUP_M)
    pid_m = first_pid_m + ((pid % num_pid_in_group) % group_size_m)
    pid_n = (pid % num_pid_in_group) // group_size_m

    # Rows of A and columns of B past the edge wrap around (modulo): they compute values
    # that the masked store below throws away, and keep the inner loads unmasked in M, N.
    offs_am = (pid_m * BLOCK_M + tl.arange(0, BLOCK_M)) % M
    offs_bn = (pid_n * BLOCK_N + tl.arange(0, BLOCK_N)) % N
    offs_k = tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + offs_am[:, None] * stride_am + offs_k[None, :] * stride_ak
    b_ptrs = b_ptr + offs_k[:, None] * stride_bk + offs_bn[None, :] * stride_bn
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(tl.cdiv(K, BLOCK_K)):
        k_left = K - k * BLOCK_K  # the K tail loads zeros, which add nothing
        a = tl.load(a_ptrs, mask=offs_k[None, :] < k_left, other=0.0)
        b = tl.load(b_ptrs, mask=offs_k[:, None] < k_left, other=0.0)
        acc = tl.dot(a, b, acc, input_precision=INPUT_PRECISION)
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk
    offs_cm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_cn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    c_ptrs = c_ptr + offs_cm[:, None] * stride_cm + offs_cn[None, :] * stride_cn
    tl.store(c_ptrs, acc.to(c_ptr.dtype.element_ty), mask=(offs_cm[:, None] < M) & (offs_cn[None, :] < N))


# True when TRITON_INTERPRET was set at import: the kernel then runs on CPU tensors through
# triton's interpreter (numpy), never compiled, and cannot be autotuned.
INTERPRETED = not isinstance(_matmul_kernel, triton.JITFunction)


@functools.lru_cache(maxsize=1)
def _autotuned() -> Any:
    """The autotuned kernel, built on first GPU use (building it is cheap; tuning happens
    on the first call for each problem shape and dtype)."""
    return triton.autotune(configs=list(CONFIGS), key=["M", "N", "K"])(_matmul_kernel)


def input_precision(dtype: Any) -> str:
    """fp32 inputs are multiplied in full fp32 ("ieee"), as torch.matmul does by default,
    not silently in tf32 (triton's default for fp32 dots); 16-bit inputs take the
    default, which their tensor-core path ignores."""
    import torch

    return "ieee" if dtype == torch.float32 else "tf32"


def config_dict(config: Any) -> dict[str, int]:
    """A triton.Config as a JSON-ready dict (tile sizes, swizzle group, warps, stages)."""
    return {**config.kwargs, "num_warps": config.num_warps, "num_stages": config.num_stages}


def chosen_config() -> dict[str, Any]:
    """The config the last call used and why: the autotuner's pick, or the first config
    under the interpreter."""
    if INTERPRETED:
        return {
            "config": config_dict(CONFIGS[0]),
            "source": "first config: triton's autotuner needs an "
            "active GPU driver, which the interpreter (TRITON_INTERPRET=1) does not have",
        }
    best = _autotuned().best_config
    if best is None:
        raise RuntimeError("matmul has not been called yet: no config has been chosen")
    return {"config": config_dict(best), "source": f"autotuned over {len(CONFIGS)} configs"}


def matmul(a: Any, b: Any, *, out: Any = None) -> Any:
    """``a @ b`` for 2-D ``a`` [M, K] and ``b`` [K, N] of one dtype (bf16, fp16 or fp32);
    returns ``out`` (allocated when None), of that dtype, accumulated in float32."""
    import torch

    if a.dim() != 2 or b.dim() != 2 or a.shape[1] != b.shape[0]:
        raise ValueError(f"matmul: shapes {tuple(a.shape)} and {tuple(b.shape)} do not multiply")
    if a.dtype != b.dtype or a.dtype not in (torch.bfloat16, torch.float16, torch.float32):
        raise ValueError(f"matmul: a and b must share a dtype among bf16, fp16, fp32, got {a.dtype}, {b.dtype}")
    if a.device != b.device:
        raise ValueError(f"matmul: a is on {a.device}, b on {b.device}")
    (m, k), n = a.shape, b.shape[1]
    if out is None:
        out = a.new_empty((m, n))
    elif tuple(out.shape) != (m, n) or out.dtype != a.dtype or out.device != a.device:
        raise ValueError(
            f"matmul: out must be ({m}, {n}) {a.dtype} on {a.device}, "
            f"got {tuple(out.shape)} {out.dtype} on {out.device}"
        )
    if m == 0 or n == 0:
        return out
    if k == 0:
        return out.zero_()
    args = (a, b, out, m, n, k, a.stride(0), a.stride(1), b.stride(0), b.stride(1), out.stride(0), out.stride(1))
    precision = input_precision(a.dtype)
    if INTERPRETED:
        first = CONFIGS[0]
        first_grid = (triton.cdiv(m, first.kwargs["BLOCK_M"]) * triton.cdiv(n, first.kwargs["BLOCK_N"]),)
        _matmul_kernel[first_grid](
            *args, INPUT_PRECISION=precision, **first.kwargs, num_warps=first.num_warps, num_stages=first.num_stages
        )
    else:

        def grid(meta: dict) -> tuple[int]:
            return (triton.cdiv(m, meta["BLOCK_M"]) * triton.cdiv(n, meta["BLOCK_N"]),)

        _autotuned()[grid](*args, INPUT_PRECISION=precision)
    return out
