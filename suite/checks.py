"""Verification helpers for workloads: compare an output with a reference element by element
and as a whole, and return a :class:`~perfsuite.case.Check` that says how many elements were
compared, how many failed and which one was worst.

The element rule is ``torch.testing.assert_close``'s: ``|out - ref| <= atol + rtol * |ref|`` at
every element, with an ``(rtol, atol)`` pair per dtype (:data:`DEFAULT_TOLERANCES`, the looser
of the two operands' dtypes, as torch.testing picks them). A NaN in the output fails unless the
reference is NaN at the same element and the caller allows it (``equal_nan=True``); an
infinity must match the reference exactly (same sign).

Why per element: a norm averages. One wrong 128x128 tile in an 8192x8192 bf16 output moves
the relative Frobenius error by about 1.6%, inside a 2% bf16 norm tolerance, and one wrong
element in 262,144 moves it by far less. The norm stays beside the element rule because a
small bias spread over every element, each inside its own bound, is wrong too.

Both torch tensors (compared on their own device in float64, a chunk at a time so that a
1 GiB output needs tens of MB of temporaries, not gigabytes) and numpy arrays are accepted;
numpy arrays are compared with numpy and torch is never imported for them. numpy itself is
imported inside the functions that compare: ``perfsuite --help`` and ``list`` import this
module and must stay light.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from perfsuite.case import Check

# (rtol, atol) per dtype name: torch.testing.assert_close's defaults. Integer and bool outputs
# compare exactly. float8 has no torch.testing default: its callers pass their own.
DEFAULT_TOLERANCES: dict[str, tuple[float, float]] = {
    "float16": (1e-3, 1e-5),
    "bfloat16": (1.6e-2, 1e-5),
    "float32": (1.3e-6, 1e-5),
    "float64": (1e-7, 1e-7),
}
# Elements compared per step: float64 temporaries of a few times 32 MiB whatever the output's size.
CHUNK_ELEMENTS = 1 << 22


def _is_torch(x: Any) -> bool:
    """True for a torch tensor, decided without importing torch."""
    return type(x).__module__.split(".")[0] == "torch"


def dtype_name(x: Any) -> str:
    """``"bfloat16"``, ``"float32"``, ``"int64"`` ... for a torch tensor or a numpy array."""
    import numpy as np

    if _is_torch(x):
        return str(x.dtype).removeprefix("torch.")
    return np.asarray(x).dtype.name


def default_tolerances(*arrays: Any) -> tuple[float, float]:
    """The ``(rtol, atol)`` torch.testing would use for these operands: the loosest of their
    dtypes', ``(0, 0)`` when none is a floating type. A float type without a default (float8)
    is refused: its caller must say what its rounding allows."""
    rtol = atol = 0.0
    for a in arrays:
        name = dtype_name(a)
        if name in DEFAULT_TOLERANCES:
            r, t = DEFAULT_TOLERANCES[name]
            rtol, atol = max(rtol, r), max(atol, t)
        elif name.startswith(("float", "bfloat", "complex")):
            raise ValueError(f"no default tolerance for {name}: pass rtol and atol")
    return rtol, atol


def _float64(x: Any, device: Any = None) -> Any:
    import numpy as np

    if _is_torch(x):
        import torch

        t = x.detach()
        if t.element_size() == 1 and t.is_floating_point():
            t = t.to(torch.float32)  # float8 -> float32 is the conversion every backend has
        t = t.to(torch.float64)
        return t if device is None else t.to(device)
    return np.asarray(x, dtype=np.float64)


def _flat(x: Any) -> Any:
    import numpy as np

    return x.reshape(-1) if _is_torch(x) else np.asarray(x).reshape(-1)


@dataclass
class Comparison:
    """A running element-by-element comparison, fed chunk by chunk with :meth:`add`.

    ``failed`` counts elements outside ``atol + rtol * |ref|`` (NaN and infinity mismatches
    included); ``worst`` is the element furthest outside its bound (the largest
    ``|out - ref| / (atol + rtol * |ref|)``, a NaN or infinity mismatch first), or the closest
    to it when none failed."""

    rtol: float
    atol: float
    equal_nan: bool = False
    elements: int = 0
    failed: int = 0
    err_sq: float = 0.0
    ref_sq: float = 0.0
    not_finite: int = 0  # elements whose NaN or infinity did not match the reference
    worst_ratio: float = -1.0
    worst: dict | None = field(default=None)

    def add(self, out: Any, ref: Any, offset: int = 0, shape: tuple[int, ...] | None = None) -> None:
        """Compare one chunk. ``offset`` is the chunk's first element in the whole output,
        flattened, and ``shape`` the whole output's shape, so that ``worst`` names its index there."""
        import numpy as np

        xp: Any
        if _is_torch(out) or _is_torch(ref):
            import torch

            xp = torch
            o = _float64(out if _is_torch(out) else torch.from_numpy(np.asarray(out)))
            r = _float64(ref if _is_torch(ref) else torch.from_numpy(np.asarray(ref)), o.device)
        else:
            xp = np
            o, r = _float64(out), _float64(ref)
        o, r = o.reshape(-1), r.reshape(-1)
        with np.errstate(invalid="ignore", divide="ignore"):
            finite = xp.isfinite(o) & xp.isfinite(r)
            matched = (xp.isinf(o) & (o == r)) | (xp.isnan(o) & xp.isnan(r) & self.equal_nan)
            mismatched = ~finite & ~matched
            diff = xp.where(finite, xp.abs(o - r), 0.0)
            bound = self.atol + self.rtol * xp.abs(xp.where(finite, r, 0.0))
            ratio = xp.where(bound > 0, diff / xp.where(bound > 0, bound, 1.0), xp.where(diff > 0, math.inf, 0.0))
            ratio = xp.where(mismatched, math.inf, ratio)
            fails = (finite & (diff > bound)) | mismatched
            self.elements += int(o.shape[0])
            self.failed += int(fails.sum())
            self.not_finite += int(mismatched.sum())
            self.err_sq += float((diff * diff).sum())
            self.ref_sq += float((xp.where(finite, r, 0.0) ** 2).sum())
        if o.shape[0] == 0:
            return
        k = int(xp.argmax(ratio))
        worst_ratio = float(ratio[k])
        if worst_ratio > self.worst_ratio:
            self.worst_ratio = worst_ratio
            index = offset + k
            where = [int(i) for i in np.unravel_index(index, shape)] if shape else [index]
            self.worst = {"index": where, "got": _json_float(o[k]), "expected": _json_float(r[k])}

    @property
    def relative_error(self) -> float:
        """‖out − ref‖ / ‖ref‖ over the finite elements; inf when a NaN or infinity did not match."""
        if self.not_finite:
            return math.inf
        return math.sqrt(self.err_sq / self.ref_sq) if self.ref_sq > 0 else math.sqrt(self.err_sq)

    def element_text(self) -> str:
        """One line: how many elements failed the element rule and the worst of them."""
        rule = f"|out - ref| <= {self.atol:.3g} + {self.rtol:.3g}*|ref|"
        if not self.failed:
            closest = f" (the closest at {self.worst_ratio:.2g} of its bound)" if self.elements else ""
            return f"all {self.elements:,} elements within {rule}{closest}"
        w = self.worst or {}
        return (
            f"{self.failed:,} of {self.elements:,} elements outside {rule}"
            + (f" ({self.not_finite:,} NaN/inf not matching the reference)" if self.not_finite else "")
            + f"; worst at {w.get('index')}: {w.get('got')} vs {w.get('expected')}"
        )

    def check(self, label: str, tolerance: float | None, method: str, detail: str = "") -> Check:
        """The verdict: no element outside its bound and, when ``tolerance`` is given, the
        relative Frobenius error within it."""
        err = self.relative_error
        norm_ok = tolerance is None or err <= tolerance
        text = self.element_text()
        if not norm_ok:
            text = f"relative error {err:.3g} > {tolerance:.3g}; {text}"
        return Check(
            label=label,
            passed=self.failed == 0 and norm_ok,
            method=method,
            error=err,
            tolerance=tolerance,
            detail="; ".join(t for t in (detail, text) if t),
            elements_checked=self.elements,
            elements_failed=self.failed,
            worst_element=self.worst,
        )


def _json_float(x: Any) -> float | str:
    """A value for the record: a float, or ``"nan"``/``"inf"``/``"-inf"`` (JSON has no NaN)."""
    v = float(x)
    return v if math.isfinite(v) else str(v)


def _shape(x: Any) -> tuple[int, ...]:
    return tuple(int(s) for s in x.shape)


def compare(
    out: Any, ref: Any, *, rtol: float | None = None, atol: float | None = None, equal_nan: bool = False
) -> Comparison:
    """Compare ``out`` with ``ref`` element by element (same shape), a chunk at a time.
    ``rtol``/``atol`` left out take :func:`default_tolerances`' values."""
    if _shape(out) != _shape(ref):
        raise ValueError(f"shape {_shape(out)} != reference shape {_shape(ref)}")
    if rtol is None or atol is None:
        d_rtol, d_atol = default_tolerances(out, ref)
        rtol = d_rtol if rtol is None else rtol
        atol = d_atol if atol is None else atol
    c = Comparison(rtol=rtol, atol=atol, equal_nan=equal_nan)
    o, r, shape = _flat(out), _flat(ref), _shape(out)
    n = int(o.shape[0])
    for start in range(0, max(n, 1), CHUNK_ELEMENTS):
        c.add(o[start : start + CHUNK_ELEMENTS], r[start : start + CHUNK_ELEMENTS], start, shape)
    return c


def relative_error(out: Any, ref: Any) -> float:
    """‖out − ref‖ / ‖ref‖ computed in float64; NaN or Inf in ``out`` gives inf."""
    return compare(out, ref, rtol=0.0, atol=math.inf).relative_error


def close(
    label: str,
    out: Any,
    ref: Any,
    tolerance: float | None = None,
    method: str = "per element |out - ref| <= atol + rtol*|ref|, and relative Frobenius error, vs the reference",
    *,
    rtol: float | None = None,
    atol: float | None = None,
    equal_nan: bool = False,
) -> Check:
    """A Check that passes when every element of ``out`` lies within ``atol + rtol * |ref|`` of
    ``ref`` and, when ``tolerance`` is given, the relative Frobenius error ‖out − ref‖ / ‖ref‖
    is within it.

    ``rtol`` and ``atol`` default to torch.testing's per-dtype values (:data:`DEFAULT_TOLERANCES`);
    a computation that rounds more than once (a chain of ops in bf16, a reduction) should pass
    its own, derived from its rounding. The Check records ``elements_checked``,
    ``elements_failed`` and ``worst_element`` (index, value, expected value). A shape mismatch fails.
    """
    try:
        comparison = compare(out, ref, rtol=rtol, atol=atol, equal_nan=equal_nan)
    except ValueError as exc:
        if "shape" not in str(exc):
            raise
        return Check(label=label, passed=False, method=method, error=math.inf, tolerance=tolerance, detail=str(exc))
    return comparison.check(label, tolerance, method)


def equal(label: str, out: Any, ref: Any, method: str = "exact equality") -> Check:
    """A Check that passes when two tensors (or numpy arrays) are equal element for element (a
    NaN equals nothing, so a poisoned element never written fails); ``error`` and
    ``elements_failed`` count the wrong elements, ``worst_element`` names the first."""
    import numpy as np

    if _shape(out) != _shape(ref):
        return Check(
            label=label,
            passed=False,
            method=method,
            error=float(math.prod(_shape(out))),
            tolerance=0.0,
            detail=f"shape {_shape(out)} != {_shape(ref)}",
        )
    o, r, shape = _flat(out), _flat(ref), _shape(out)
    n = int(o.shape[0])
    wrong = 0
    first: dict | None = None
    for start in range(0, n, CHUNK_ELEMENTS):
        oc, rc = o[start : start + CHUNK_ELEMENTS], r[start : start + CHUNK_ELEMENTS]
        if _is_torch(rc) and _is_torch(oc) and rc.device != oc.device:
            rc = rc.to(oc.device)
        bad = oc != rc
        count = int(bad.sum())
        if count and first is None:
            k = int(bad.nonzero()[0][0]) if _is_torch(bad) else int(np.flatnonzero(bad)[0])
            index = [int(i) for i in np.unravel_index(start + k, shape)]
            first = {"index": index, "got": _json_float(oc[k]), "expected": _json_float(rc[k])}
        wrong += count
    detail = f"{wrong:,} of {n:,} elements differ; first at {first['index']}" if first else ""
    return Check(
        label=label,
        passed=wrong == 0,
        method=method,
        error=float(wrong),
        tolerance=0.0,
        detail=detail,
        elements_checked=n,
        elements_failed=wrong,
        worst_element=first,
    )
