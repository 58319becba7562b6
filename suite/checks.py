"""Verification helpers shared by workloads: compare an output with a higher-precision
reference by relative Frobenius error, the measure the tolerances below are set in."""

from __future__ import annotations

from typing import Any

from perfsuite.case import Check


def relative_error(out: Any, ref: Any) -> float:
    """‖out − ref‖ / ‖ref‖ computed in float64; NaN or Inf anywhere gives inf."""
    import torch

    o = out.detach().to(torch.float64)
    r = ref.detach().to(torch.float64).to(o.device)
    if not bool(torch.isfinite(o).all()):
        return float("inf")
    denom = float(torch.linalg.vector_norm(r))
    diff = float(torch.linalg.vector_norm(o - r))
    return diff / denom if denom > 0 else diff


def close(label: str, out: Any, ref: Any, tolerance: float, method: str) -> Check:
    """A Check that passes when the relative error of ``out`` against ``ref`` is within tolerance."""
    err = relative_error(out, ref)
    return Check(label=label, passed=err <= tolerance, method=method, error=err, tolerance=tolerance)


def equal(label: str, out: Any, ref: Any, method: str = "exact equality") -> Check:
    """A Check that passes when two tensors are bit-for-bit equal; error counts wrong elements."""
    import torch

    wrong = int((out != ref).sum()) if out.shape == ref.shape else -1
    detail = "" if wrong >= 0 else f"shape {tuple(out.shape)} != {tuple(ref.shape)}"
    return Check(
        label=label,
        passed=wrong == 0 and torch.equal(out, ref),
        method=method,
        error=float(wrong if wrong >= 0 else out.numel()),
        tolerance=0.0,
        detail=detail,
    )
