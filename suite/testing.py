"""What a workload plugin's own tests need: run a workload in this process, exactly as the
measuring process runs it (seeded, its requirements and ``unmet`` checked, set up, executed,
torn down), and read what it recorded. The built-in workloads' tests use the same calls::

    from perfsuite.testing import run_in_process, metric

    def test_my_kernel_verifies():
        ctx = run_in_process(MyKernel, {"n": 1024}, iterations=10)
        assert all(check.passed for check in ctx.checks)
        assert metric(ctx, "fp32", "time_ms")["value"] > 0

Parameters are given as the command line would give them (strings or values, the quick preset
under them by default); controls by name (``device``, ``seed``, ``iterations``, ``min_time_s``,
``warmup``, ``l2_flush``, ``cuda_graph`` ...), defaulting to a short CPU run. A workload that
writes files of its own (``ctx.artifact_dir()``: LoadGen's logs, a server's log) writes them under
``artifact_dir`` where one is given (a test's ``tmp_path``), else in a fresh temporary folder
that is the caller's to remove (``ctx.artifact_root`` names it).
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from typing import Any

from perfsuite.context import RunContext
from perfsuite.controls import Controls
from perfsuite.engine.inprocess import Unmet, run_workload
from perfsuite.engine.params import ParamError, resolve

__all__ = ["ParamError", "Unmet", "metric", "run_in_process"]

# A short run: enough calls for statistics, little enough time for a unit test.
TEST_CONTROLS = {"device": "cpu", "seed": 0, "warmup": 1, "iterations": 5, "min_time_s": None}


def run_in_process(
    workload_cls: type,
    params: Mapping[str, Any] | None = None,
    *,
    quick: bool = True,
    artifact_dir: str | os.PathLike[str] | None = None,
    **controls: Any,
) -> RunContext:
    """Run ``workload_cls`` here with ``params`` over its defaults (and its quick preset when
    ``quick``) under ``controls`` over :data:`TEST_CONTROLS`; return the run's context (its
    ``metrics``, ``checks``, ``details``). Raises :class:`Unmet` where the workload cannot run
    here and :class:`ParamError` for a parameter it does not have. ``artifact_dir``: the folder the
    run's own files go in (made if missing)."""
    known = {f.name for f in dataclasses.fields(Controls)}
    unknown = sorted(set(controls) - known)
    if unknown:
        raise TypeError(f"unknown controls {unknown} (known: {', '.join(sorted(known))})")
    resolved = resolve(workload_cls, dict(params or {}), quick)
    ctx = RunContext(
        params=resolved,
        controls=Controls(**{**TEST_CONTROLS, **controls}),
        quick=quick,
        artifact_root=None if artifact_dir is None else os.fspath(artifact_dir),
    )
    return run_workload(workload_cls, resolved, ctx.controls, quick=quick, ctx=ctx)


def metric(ctx: RunContext, case: str, name: str) -> dict:
    """The metric ``name`` of ``case`` that the run recorded (KeyError naming what there is)."""
    for m in ctx.metrics:
        if m["case"] == case and m["name"] == name:
            return m
    have = sorted({(m["case"], m["name"]) for m in ctx.metrics})
    raise KeyError(f"no metric {name!r} for case {case!r}; recorded: {have}")
