"""What every kernel workload shares: dtype names, the float32 matmul precision switch,
and the bookkeeping of cases (work per call, cases skipped with their reason).

Every kernel workload stores ``details["work"]`` (per case: flops, bytes, items per call)
so that ``perfsuite roofline`` can place a case exactly (arithmetic intensity =
flops / bytes), and ``details["skipped_cases"]`` (case -> why it did not run), so that a
requested case never disappears silently. No torch at import time.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING

from perfsuite import Case, Requirements, Workload

if TYPE_CHECKING:  # pragma: no cover - typing only
    from perfsuite import RunContext


@contextlib.contextmanager
def fp32_matmul_precision(mode: str) -> Iterator[None]:
    """Run a block with float32 matmuls in ``mode`` ("highest": IEEE fp32, "high": TF32
    tensor cores) and restore the process's previous setting afterwards, so a tf32 case
    never leaks TF32 into an fp32 case or a reference computation."""
    import torch

    previous_mode = torch.get_float32_matmul_precision()
    previous_tf32 = torch.backends.cuda.matmul.allow_tf32
    torch.set_float32_matmul_precision(mode)
    torch.backends.cuda.matmul.allow_tf32 = mode != "highest"
    try:
        yield
    finally:
        torch.set_float32_matmul_precision(previous_mode)
        torch.backends.cuda.matmul.allow_tf32 = previous_tf32


def first_line(exc: BaseException) -> str:
    """An exception as one readable line (torch errors often carry pages of context)."""
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}".rstrip(": ")


def declare(ctx: "RunContext", cases: list[Case], skipped: Mapping[str, str]) -> list[Case]:
    """Record each case's work per call and each skipped case's reason in the run's
    details; return the cases to run."""
    ctx.details["work"] = {
        c.label: {
            "flops": float(c.work.flops),
            "bytes": float(c.work.bytes),
            "items": float(c.work.items),
            "item_unit": c.work.item_unit,
        }
        for c in cases
    }
    ctx.details["skipped_cases"] = dict(skipped)
    for label, reason in skipped.items():
        ctx.log(f"skipping case {label}: {reason}")
    return cases


def all_unsupported(reasons: Mapping[str, str | None]) -> str | None:
    """The run's unmet reason when every requested case is unsupported, else None."""
    if reasons and all(r is not None for r in reasons.values()):
        return "; ".join(f"{label}: {reason}" for label, reason in reasons.items())
    return None


class KernelWorkload(Workload):
    """A workload of the ``kernels`` category: needs torch (its skipped cases are shown by the host)."""

    category = "kernels"
    requirements = Requirements(packages=("torch",))
