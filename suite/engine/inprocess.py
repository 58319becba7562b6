"""The one way to run a workload inside the current process: seed, check what it needs,
set up, execute (time and verify its cases, or its driver), tear down.

The measuring process (``perfsuite.engine.worker``), the tests and the GPU cross-check scripts all
call :func:`run_workload`, so a workload behaves the same under each of them.
"""

from __future__ import annotations

from typing import Any

from perfsuite.context import RunContext
from perfsuite.controls import Controls, apply_seeds


class Unmet(Exception):
    """The workload cannot run on this machine (its ``unmet`` said why): a skip, not a failure."""


def run_workload(
    workload_cls: type, params: Any, controls: Controls, *, quick: bool = False, ctx: RunContext | None = None
) -> RunContext:
    """Run ``workload_cls(params)`` under ``controls``; returns the context that holds its
    metrics, checks and details. Raises :class:`Unmet` with the workload's reason.

    Pass ``ctx`` to keep a reference to what was recorded before an exception (the worker
    does, for a multi-rank run it carries the rank and the backend); by default a
    single-process context is made from ``params`` and ``controls``."""
    if ctx is None:
        ctx = RunContext(params=params, controls=controls, quick=quick)
    apply_seeds(controls.seed, controls.deterministic)
    workload = workload_cls(params)
    reason = workload.unmet(ctx)
    if reason:
        raise Unmet(reason)
    try:
        workload.setup(ctx)
        workload.execute(ctx)
    finally:
        workload.teardown(ctx)
    return ctx
