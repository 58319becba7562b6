"""What one timed thing of a workload is: a :class:`Case` (the function to time, the
:class:`Work` one call does, the ceiling it is judged against, its verification) and the
:class:`Check` a verification returns. The run context measures cases; the workload contract
(:mod:`perfsuite.workload`) returns them. Nothing here imports torch.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Work:
    """The work one call of a case's function does; throughput is derived from it."""

    flops: float = 0.0
    bytes: float = 0.0  # bytes that must move: each input read once, each output written once
    items: float = 0.0
    item_unit: str = "items"  # what an item is: samples, tokens, images, launches


@dataclass
class Check:
    """The outcome of one verification, stored in the record's ``verification.checks``: a run
    with a check whose ``passed`` is false is ``invalid``, never ranked and never a ceiling.

    ``label`` names the case checked and ``method`` how (a sentence a reader of the record
    understands); ``error`` and ``tolerance`` are the measured figure and its bound, when the
    check has one (a relative error, a count of wrong elements); ``detail`` says what failed.
    Checks that compare arrays (:func:`perfsuite.checks.close`, :func:`perfsuite.checks.equal`)
    also fill ``elements_checked``, ``elements_failed`` and ``worst_element`` (``index``,
    ``got``, ``expected``), so the record says how much was compared and where it went wrong.
    """

    label: str
    passed: bool
    method: str
    error: float | None = None
    tolerance: float | None = None
    detail: str = ""
    elements_checked: int | None = None
    elements_failed: int | None = None
    worst_element: dict | None = None


@dataclass
class Case:
    """One timed function of a workload, e.g. one dtype of a GEMM or one backend of SDPA.

    ``roofline`` names the device ceiling the case is judged against, as measured by
    ``kernels.ceilings`` (``"matmul.bf16"``, ``"memory"``, ``"h2d.pinned"`` ...).
    ``baseline`` marks the named implementation the others are compared with (at most one
    per workload): every other case measured in the same run gets a ``speedup`` metric, the
    baseline's median time over its own, as tritonbench shows it.
    """

    label: str
    fn: Callable[[], Any]
    work: Work
    roofline: str | None = None
    verify: Callable[[], Check] | None = None
    baseline: bool = False
    graph_safe: bool = True  # may be captured in a CUDA graph when the controls ask for it
    l2_flush: bool | None = None  # None: follow the run's controls
