"""What every kernel workload shares: the family's base class, the float32 matmul precision
switch, and one-line reasons for cases that cannot run. The host records each measured
case's work per call (``details["work"]``, which ``perfsuite roofline`` places exactly) and
each skipped case's reason (``ctx.skip_case``), for built-ins and plugins alike. No torch at
import time.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING

from perfsuite import Requirements, Workload

if TYPE_CHECKING:  # pragma: no cover - typing only
    pass


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


def all_unsupported(reasons: Mapping[str, str | None]) -> str | None:
    """The run's unmet reason when every requested case is unsupported, else None."""
    if reasons and all(r is not None for r in reasons.values()):
        return "; ".join(f"{label}: {reason}" for label, reason in reasons.items())
    return None


class KernelWorkload(Workload):
    """A workload of the ``kernels`` category: needs torch (its skipped cases are shown by the host)."""

    category = "kernels"
    requirements = Requirements(packages=("torch",))
